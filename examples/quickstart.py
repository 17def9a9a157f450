"""The main example: compile a small model with cppinductor, check it against
eager, train it for a few steps, and show what the compiler did."""

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def main() -> None:
    torch.manual_seed(0)
    model = Block()
    compiled = torch.compile(model, backend="cppinductor")  # no import of cppinductor needed

    x = torch.randn(32, 64)
    torch.testing.assert_close(compiled(x), model(x), rtol=1.3e-5, atol=1.5e-5)
    print("forward matches eager")

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = compiled(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.5f}")

    import cppinductor.debug as debug

    torch._dynamo.reset()
    with debug.recording() as records:
        torch.compile(lambda a: torch.softmax(a * 2, dim=-1), backend="cppinductor")(x)
    for r in records:
        print(f"{r.kind} graph: {len(r.compiled.kernel_names)} kernels, remarks:")
        for remark in r.remarks:
            print(f"  {remark['kind']:9} {remark['op']:28} {remark['reason']}")


if __name__ == "__main__":
    main()
