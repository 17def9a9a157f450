"""Graph breaks and how to remove them.

A graph break splits your function into several compiled graphs with Python
in between: each break costs a round trip through the interpreter and stops
fusion across it. cppinductor.explain() shows every break, where it happened
and what to do about it.

    python examples/graph_breaks.py
"""

import torch

import cppinductor


def with_breaks(x: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.gelu(x)
    print("debugging output")          # break 1: print() cannot be traced
    if y.mean() > 0:                   # break 2: Python `if` on a tensor's value
        y = y * 2
    scale = y.abs().max().item()       # break 3: .item() leaves the graph
    return y / scale


def without_breaks(x: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.gelu(x)
    y = torch.where(y.mean() > 0, y * 2, y)   # both branches, selected on the tensor
    scale = y.abs().max()                     # stays a 0-d tensor
    return y / scale


def main() -> None:
    x = torch.randn(256, 256)
    before = cppinductor.explain(with_breaks)(x)
    print("=== with breaks ===")
    print(before)
    after = cppinductor.explain(without_breaks)(x)
    print("\n=== without breaks ===")
    print(after)
    torch.testing.assert_close(
        torch.compile(without_breaks, backend="cppinductor")(x), with_breaks(x)
    )
    print(f"\ngraphs: {before.graph_count} -> {after.graph_count}; results equal")


if __name__ == "__main__":
    main()
