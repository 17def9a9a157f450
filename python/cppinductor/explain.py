"""python -m cppinductor.explain script.py [args]

Runs a script as __main__; every function it passes to torch.compile is
compiled with cppinductor under the explainer, and the report covers them all
(see cppinductor/report.py). The function itself is cppinductor.explain().
"""

from __future__ import annotations

import sys

from .report import explain_script


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m cppinductor.explain script.py [args]")
        return 0 if argv else 2
    report = explain_script(argv[0], argv[1:])
    print()
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
