"""Builds cppinductor._C with CMake + ninja into ./build (the same build
directory `make` uses, so installing after `make` rebuilds nothing)."""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = Path(os.environ.get("CPPINDUCTOR_BUILD_DIR", ROOT / "build"))
        configure = [
            "cmake", "-G", "Ninja", "-S", str(ROOT), "-B", str(build_dir),
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        for flag in ("CPPINDUCTOR_CPU_JIT", "CPPINDUCTOR_BUILD_TESTS"):
            if flag in os.environ:
                configure.append(f"-D{flag}={os.environ[flag]}")
        if not (build_dir / "build.ninja").exists():
            subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "_C"])
        # CMake writes the module into python/cppinductor; copy it where
        # setuptools wants it for non-editable installs.
        built = next((ROOT / "python" / "cppinductor").glob("_C*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        if target.resolve() != built.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(built), str(target))


setup(ext_modules=[Extension("cppinductor._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
