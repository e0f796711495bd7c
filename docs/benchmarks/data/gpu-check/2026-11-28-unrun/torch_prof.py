"""One PyTorch eager training iteration under torch.profiler: the CUDA kernels
by total time (which cuDNN kernels PyTorch's cudnn.benchmark picked)."""
import sys, os, time, json
sys.path.insert(0, sys.argv[1])
import torch, torch_side, models
name, B, prec, out = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
torch_side.set_precision(prec, benchmark=True)
dev = torch.device("cuda")
m = models.build(name).to(dev).train()
x, y = models.example(name, B)
x, y = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
def step():
    opt.zero_grad(set_to_none=False)
    with torch_side.autocast(prec, "cuda"):
        loss = models.loss_fn(name, m(x), y)
    loss.backward()
    opt.step()
for _ in range(5):
    step()
torch.cuda.synchronize()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
def table(ka, **kw):
    for key in ("device_time_total", "cuda_time_total"):
        try:
            return ka.table(sort_by=key, **kw)
        except Exception as e:
            err = e
    return "table failed: %r" % err
with open(out, "w") as f:
    f.write(table(p.key_averages(), row_limit=60, max_name_column_width=110))
    f.write("\n\nby input shape:\n")
    f.write(table(p.key_averages(group_by_input_shape=True), row_limit=40,
                  max_name_column_width=60, max_shapes_column_width=80))
print("profile written", out)
