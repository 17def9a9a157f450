# Two commands do everything on a fresh machine (Debian bookworm, Python 3.11):
#   make demo   installs what is missing, builds, runs the example and the quick benchmark
#   make test   installs what is missing, builds once, runs every C++ and Python test
# Each step is idempotent: what is installed or built already is skipped.

SHELL    := /bin/bash
PYTHON   ?= python3
BUILD    ?= build
JOBS     ?= $(shell nproc)
APT_PKGS := llvm-16-dev libclang-cpp16-dev libclang-16-dev clang-16 libomp-16-dev \
            libsleef-dev libgtest-dev ninja-build cmake g++
# torch is pinned to the CPU wheel this machine kind carries; an installed
# torch 2.11-2.13 is kept as it is.
TORCH    := torch==2.13.0
# transformers: the model suite and its tests build HuggingFace models from
# configs (random weights, HF_HUB_OFFLINE=1: nothing is downloaded at run time).
PIP_PKGS := pytest expecttest matplotlib tqdm pybind11 setuptools wheel numpy transformers

.PHONY: all deps apt-deps pip-deps configure build install test test-cpp test-python test-python-avx2 demo gpu-check clean

all: build

deps: apt-deps pip-deps

apt-deps:
	@missing=""; for p in $(APT_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

pip-deps:
	@$(PYTHON) -c "import torch, sys; v = tuple(int(x) for x in torch.__version__.split('+')[0].split('.')[:2]); sys.exit(0 if (2, 11) <= v <= (2, 13) else 1)" 2>/dev/null \
	  || $(PYTHON) -m pip install -q "$(TORCH)"
	@missing=$$($(PYTHON) -c "import importlib.util as u; print(' '.join(p for p, m in [('pytest','pytest'),('expecttest','expecttest'),('matplotlib','matplotlib'),('tqdm','tqdm'),('pybind11','pybind11'),('setuptools','setuptools'),('wheel','wheel'),('numpy','numpy'),('transformers~=5.0','transformers')] if u.find_spec(m) is None))"); \
	if [ -n "$$missing" ]; then echo "pip: installing $$missing"; $(PYTHON) -m pip install -q $$missing || exit 1; fi

$(BUILD)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD) -DPython_EXECUTABLE=$$(command -v $(PYTHON)) -DCPPINDUCTOR_BUILD_TESTS=ON

configure: $(BUILD)/build.ninja

# One build: the extension and the C++ tests. The editable install reuses it.
build: deps configure
	ninja -C $(BUILD) -j$(JOBS)
	@$(PYTHON) -c "import importlib.metadata as m, sys; d = m.distribution('cppinductor'); sys.exit(0 if 'cppinductor' in str(d.read_text('direct_url.json') or '') and '$(CURDIR)' in str(d.read_text('direct_url.json')) else 1)" 2>/dev/null \
	  || CPPINDUCTOR_BUILD_DIR=$(CURDIR)/$(BUILD) $(PYTHON) -m pip install -q --no-build-isolation --no-deps -e .

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

test-python: build
	$(PYTHON) -m pytest tests/python -q

# The CPU end-to-end tests whose kernels differ by vector width, again with
# cpu_isa=avx2 where the host would take AVX-512 (test-python ran them
# native), so an AVX-512 machine tests the AVX2 paths too. On a host
# without AVX-512 the native pass was that pass.
WIDTH_TESTS := tests/python/test_e2e_pointwise.py tests/python/test_e2e_reductions.py \
               tests/python/test_e2e_pooling.py tests/python/test_e2e_scans.py tests/python/test_e2e_indexing.py \
               tests/python/test_e2e_random.py tests/python/test_fuzz_regressions.py
test-python-avx2: build
	@if $(PYTHON) -c "import sys; from cppinductor import _C; sys.exit('avx512' not in _C.host_cpu_isas())"; then \
	  echo "again with cpu_isa=avx2 (CPPINDUCTOR_CPU_ISA): $(WIDTH_TESTS)"; \
	  CPPINDUCTOR_CPU_ISA=avx2 $(PYTHON) -m pytest $(WIDTH_TESTS) -q -k "not cuda"; \
	else echo "no AVX-512 on this host: the native pass tested the AVX2 paths"; fi

test: test-cpp test-python test-python-avx2

demo: build
	$(PYTHON) examples/quickstart.py
	$(PYTHON) -m cppinductor.bench --quick

# On the GPU machine (no LLVM dev libs, no apt, no network): build with the
# g++ CPU path, then run the GPU C++ tests, the CUDA end-to-end tests and the
# CUDA benchmark. Logs go to $(GPU_OUT). GoogleTest for the C++ GPU tests:
# installed, or its sources in CPPI_GTEST_SOURCE_DIR.
# The extension must be built by the compiler whose libstdc++ the process
# loads: the GPU image's default g++ (/opt/gcc) is newer than the system
# libstdc++ torch runs with, and code instantiated from newer headers crashed
# inside std::ostream. So the system g++ is preferred when present.
GPU_OUT ?= gpu-logs
GPU_BENCH_ARGS ?=
GPU_CXX := $(shell [ -x /usr/bin/g++ ] && echo /usr/bin/g++ || echo g++)
GPU_CC  := $(shell [ -x /usr/bin/gcc ] && echo /usr/bin/gcc || echo gcc)
gpu-check:
	mkdir -p $(GPU_OUT)
	CC=$(GPU_CC) CXX=$(GPU_CXX) CPPINDUCTOR_BUILD_DIR=$(CURDIR)/build-gpu CPPINDUCTOR_CPU_JIT=OFF CPPINDUCTOR_BUILD_TESTS=OFF \
	  $(PYTHON) -m pip install -q --no-build-isolation --no-deps --no-index -e . > $(GPU_OUT)/install.log 2>&1 \
	  || (tail -30 $(GPU_OUT)/install.log; exit 1)
	OUT=$(GPU_OUT) SKIP_INDUCTOR=1 bash gpu_codegen/tools/run_gpu_codegen_checks.sh
	set -o pipefail; $(PYTHON) -m pytest tests/python -q -k "cuda and not bench" -p no:cacheprovider 2>&1 | tee $(GPU_OUT)/pytest_cuda.log | tail -15
	set -o pipefail; $(PYTHON) -m cppinductor.bench --device cuda --no-progress $(GPU_BENCH_ARGS) --json $(GPU_OUT)/bench_cuda.json 2>&1 | tee $(GPU_OUT)/bench_cuda.log

clean:
	rm -rf $(BUILD) python/cppinductor/_C*.so
