"""python -m cppinductor.tools.codegen_corpus dump DIR [--only a,b] [--sizes quick|tiny]
python -m cppinductor.tools.codegen_corpus compare BEFORE AFTER

Whether a change to the compiler leaves its generated code as it was. `dump`
compiles each bench workload (default: every one, HuggingFace models
included when transformers is installed) on the CPU with a debug dump under
DIR/<workload>; `compare` reads two such dumps and lists the workloads whose
kernels differ. The files compared are each graph's kernels.cpp and
kernels_autotune_candidates.cpp, in graph order; graph numbers are ignored,
as they depend on what else the process compiled first. Schedule lines and
the schedule's reasons are part of the text, so a refactor of the schedule
or the printers that keeps every kernel byte for byte shows no difference.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Dict, List, Sequence, Tuple

import torch

_FILES = ("kernels.cpp", "kernels_autotune_candidates.cpp")


def dump(root: str, names: Sequence[str], sizes: str = "quick") -> List[str]:
    """Compiles and runs each workload once with a debug dump under
    root/<name>; returns the ones that could not be built (a missing
    optional dependency), with why."""
    from ..bench import workloads

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    skipped = []
    for name in names:
        torch._dynamo.reset()
        try:
            case = workloads.BY_NAME[name].build(workloads.sizes_for("cpu", sizes), "cpu", torch.float32)
        except Exception as e:  # transformers missing, a model that needs a download
            skipped.append(f"{name}: {type(e).__name__}: {e}")
            continue
        options = {"debug_dir": os.path.join(root, name)}
        case.make_step(lambda m: torch.compile(m, backend="cppinductor", options=options))()
    return skipped


def kernels(root: str, name: str) -> List[Tuple[str, str, str]]:
    """(graph kind, file name, text) of each kernel file under root/name, in graph order."""
    out = []
    for graph in sorted(glob.glob(os.path.join(root, name, "graph_*"))):
        kind = graph.rsplit("_", 1)[-1]
        for file in _FILES:
            path = os.path.join(graph, file)
            if os.path.exists(path):
                with open(path) as f:
                    out.append((kind, file, f.read()))
    return out


def compare(before: str, after: str) -> Dict[str, str]:
    """Workload -> how its kernels differ, for each workload whose do."""
    names = sorted(set(os.listdir(before)) | set(os.listdir(after)))
    out = {}
    for name in names:
        a, b = kernels(before, name), kernels(after, name)
        if a == b:
            continue
        if len(a) != len(b):
            out[name] = f"{len(a)} kernel files before, {len(b)} after"
        else:
            files = [f"{kind} {file}" for (kind, file, x), (_, _, y) in zip(a, b) if x != y]
            out[name] = "differs in " + ", ".join(files)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from ..bench import workloads

    parser = argparse.ArgumentParser(prog="python -m cppinductor.tools.codegen_corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("dir")
    d.add_argument("--only", help="workloads, comma-separated (default: all)")
    d.add_argument("--sizes", default="quick", choices=("quick", "tiny"))
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "dump":
        names = args.only.split(",") if args.only else [w.name for w in workloads.WORKLOADS if w.runs_on("cpu")]
        unknown = [n for n in names if n not in workloads.BY_NAME]
        if unknown:
            parser.error(f"unknown workloads {unknown}")
        for why in dump(args.dir, names, args.sizes):
            print("skipped", why)
        return 0
    differ = compare(args.before, args.after)
    for name, how in differ.items():
        print(f"{name}: {how}")
    same = len(set(os.listdir(args.after))) - len(differ)
    print(f"{same} workloads the same, {len(differ)} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
