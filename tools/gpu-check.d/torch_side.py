"""PyTorch's side of tools/gpu-check, one JSON line per run on stdout.

speed NAME BATCH PREC ITERS
    PyTorch eager training on the GPU as memfit's trainers train: SGD with
    momentum 0.9, NCHW, cudnn.benchmark on, the batch already on the GPU;
    PREC fp32 (TF32 off), tf32, bf16 (autocast) or fp16 (autocast and
    GradScaler). Samples per second and peak memory.
ref NAME FILLED.onnx X.npy Y.npy BATCH STEPS LR PREC DEVICE OUT.npz
    STEPS SGD steps from the filled ONNX file's weights on X, Y (batch k is
    samples k*BATCH..): the losses, and the trained parameters in OUT.npz
    by their ONNX names. DEVICE cpu gives PyTorch's own CPU-to-GPU
    difference beside memfit's.
"""
import json
import sys
import time

import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
import models  # noqa: E402


def set_precision(prec, benchmark):
    tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = benchmark
    # A deterministic reference: the same algorithms on every run.
    torch.backends.cudnn.deterministic = not benchmark


def autocast(prec, device):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(prec)
    return torch.autocast(device, dtype=dtype or torch.float32,
                          enabled=dtype is not None)


def scaler(prec, device):
    # memfit's fp16 trainers scale as GradScaler's defaults do.
    return torch.cuda.amp.GradScaler(enabled=prec == "fp16" and
                                     device == "cuda")


def speed(name, batch, prec, iters):
    set_precision(prec, benchmark=True)
    dev = torch.device("cuda")
    m = models.build(name).to(dev).train()
    x, y = models.example(name, batch)
    x, y = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    sc = scaler(prec, "cuda")

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(prec, "cuda"):
            loss = models.loss_fn(name, m(x), y)
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    return {"samples_s": batch * iters / dt, "ms_iter": 1000 * dt / iters,
            "max_alloc_mib": torch.cuda.max_memory_allocated() / 2**20,
            "max_reserved_mib": torch.cuda.max_memory_reserved() / 2**20}


def ref(name, onnx_path, xp, yp, batch, steps, lr, prec, device, out):
    set_precision(prec, benchmark=False)
    dev = torch.device(device)
    m = models.build(name)
    loaded = models.load_from_onnx(m, onnx_path)
    m = m.to(dev).train()
    x, y = torch.from_numpy(np.load(xp)), torch.from_numpy(np.load(yp))
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    sc = scaler(prec, device)
    losses = []
    for k in range(steps):
        xb = x[k * batch:(k + 1) * batch].to(dev)
        yb = y[k * batch:(k + 1) * batch].to(dev)
        opt.zero_grad()
        with autocast(prec, device):
            loss = models.loss_fn(name, m(xb), yb)
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        losses.append(float(loss.item()))
    np.savez(out, **{k: v.detach().float().cpu().numpy()
                     for k, v in m.named_parameters()})
    return {"losses": losses, "loaded": loaded}


def main():
    a = sys.argv[1:]
    if a and a[0] == "speed" and len(a) == 5:
        r = speed(a[1], int(a[2]), a[3], int(a[4]))
    elif a and a[0] == "ref" and len(a) == 11:
        r = ref(a[1], a[2], a[3], a[4], int(a[5]), int(a[6]), float(a[7]),
                a[8], a[9], a[10])
    else:
        sys.exit(__doc__)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
