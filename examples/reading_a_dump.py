"""Reading a debug dump.

Set CPPINDUCTOR_DEBUG_DIR (or options={"debug_dir": ...}) and every compiled
graph gets a folder:

    graph_000_forward/
      fx_graph.txt              the ATen graph AOTAutograd gave us (readable FX)
      fx_graph.json             the same graph as the plain data our C++ core imported
      loop_ir_pre_fusion.txt    one loop nest per lowered op (when lowering ran)
      loop_ir_post_fusion.txt   the kernels after fusion, with their schedules
      loop_ir_scheduled.txt     each CPU kernel's loop nest, after each schedule pass
      loop_ir_scheduled_cuda.txt  each grid-stride or row CUDA kernel's loop nest
      kernels.cpp / .cu / .ptx  the generated code, with FX-node and source-line comments
      wrapper_plan.txt          the call sequence: kernels, extern calls, ATen fallbacks
      explain.txt               what lowered, what fell back and why, fusion refusals, timings

    python examples/reading_a_dump.py
"""

import os
import tempfile

import torch


def layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.relu(x @ w + b), dim=-1)


def main() -> None:
    root = tempfile.mkdtemp(prefix="cppinductor_dump_")
    x, w, b = torch.randn(64, 32), torch.randn(32, 16), torch.randn(16)
    compiled = torch.compile(layer, backend="cppinductor", options={"debug_dir": root})
    torch.testing.assert_close(compiled(x, w, b), layer(x, w, b))
    for folder in sorted(os.listdir(root)):
        print(f"{folder}/")
        for name in sorted(os.listdir(os.path.join(root, folder))):
            print(f"  {name}")
        for name in ("wrapper_plan.txt", "explain.txt"):
            path = os.path.join(root, folder, name)
            print(f"\n--- {name} ---")
            print(open(path).read())


if __name__ == "__main__":
    main()
