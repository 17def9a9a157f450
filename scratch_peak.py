import torch, torch.nn as nn
import cppinductor
peaks = []
from cppinductor import cudagraphs, debug

def make():
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True).cuda()

def train(model, mode):
    step_model = torch.compile(model, backend="cppinductor", mode=mode) if mode else model
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator(device="cuda").manual_seed(1)
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    losses = []
    peak_all = 0
    for step in range(6):
        x = torch.randn(8, 64, 256, device="cuda", generator=gen)
        torch.cuda.reset_peak_memory_stats()
        loss = step_model(x).square().mean()
        fwd = torch.cuda.max_memory_allocated() - base
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        peaks.append((mode, step, round(fwd / 2**20, 1), round((torch.cuda.max_memory_allocated() - base) / 2**20, 1)))
    torch.cuda.synchronize()
    return max(p[3] for p in peaks if p[0] == mode) * 2**20, losses

pool = cudagraphs._pool(torch.device("cuda", 0))
pool.stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(pool.stream):
    make()(torch.randn(2, 4, 256, device="cuda")).sum().backward()
torch.cuda.synchronize()
train(make(), None)
with debug.recording() as records:
    e, le = train(make(), None)
    d, ld = train(make(), "default")
    r, lr = train(make(), "reduce-overhead")
print(f"peak eager {e/2**20:.1f} MiB, default {d/2**20:.1f} MiB, reduce-overhead {r/2**20:.1f} MiB, ratio {r/d:.2f}")
print("losses eager", le[-1], "ro", lr[-1])
for rec in records:
    print(rec.kind, rec.cudagraphs)
for p in peaks: print(p)
