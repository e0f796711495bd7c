#!/usr/bin/python3
"""Writes PyTorch reference results for memfit's CPU reference kernels.

Usage: kernel_reference.py OUTDIR

Each case draws float32 inputs, computes the forward and backward results
with PyTorch in float64 from those inputs, and stores every tensor as raw
little-endian float32 (OUTDIR/<case>.<tensor>.f32). OUTDIR/index.json lists
the cases with their kind, parameters and tensor shapes; it is written last,
so a half-written directory has no index. KernelReferenceTest.cpp reads it.

Parameters follow runtime/Kernels.h: begin/end pads, ONNX momentum for
batch norm, the ONNX LRN channel window.
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit("kernel_reference.py: %s; PyTorch and NumPy are needed "
             "(Debian: python3-torch python3-numpy; tools/test installs them)"
             % e)

torch.manual_seed(0)
torch.set_grad_enabled(True)
CASES = []
OUT = None


def rand(*shape, lo=-1.0, hi=1.0):
    """float32 values in [lo, hi), returned as float64 for the computation."""
    return (torch.rand(*shape, dtype=torch.float32) * (hi - lo) + lo).double()


def leaf(t):
    return t.clone().requires_grad_(True)


def add_case(name, kind, params, tensors):
    shapes = {}
    for key, t in tensors.items():
        t = torch.as_tensor(t).detach().to(torch.float32).contiguous()
        t.numpy().astype("<f4").tofile(os.path.join(OUT, "%s.%s.f32" % (name, key)))
        shapes[key] = list(t.shape)
    CASES.append({"name": name, "kind": kind, "params": params,
                  "tensors": shapes})


def conv(name, n, cin, hin, win, cout, k, s, pads, d, group, bias):
    kh, kw = k
    pt, pl, pb, pr = pads
    x = leaf(rand(n, cin, hin, win))
    w = leaf(rand(cout, cin // group, kh, kw))
    b = leaf(rand(cout)) if bias else None
    y = F.conv2d(F.pad(x, (pl, pr, pt, pb)), w, b, stride=s, dilation=d,
                 groups=group)
    dy = rand(*y.shape)
    y.backward(dy)
    t = {"x": x, "w": w, "dy": dy, "y": y, "dx": x.grad, "dw": w.grad}
    if bias:
        t.update({"b": b, "db": b.grad})
    add_case(name, "conv", {
        "n": n, "cin": cin, "hin": hin, "win": win, "cout": cout,
        "hout": y.shape[2], "wout": y.shape[3], "kh": kh, "kw": kw,
        "sh": s[0], "sw": s[1], "padTop": pt, "padLeft": pl, "dh": d[0],
        "dw": d[1], "group": group, "bias": bias}, t)


def pool(name, kind, n, c, hin, win, k, s, pad, ceil, include_pad=False):
    x = leaf(rand(n, c, hin, win))
    if kind == "max":
        y = F.max_pool2d(x, k, s, pad, ceil_mode=ceil)
    else:
        y = F.avg_pool2d(x, k, s, pad, ceil_mode=ceil,
                         count_include_pad=include_pad)
    dy = rand(*y.shape)
    y.backward(dy)
    add_case(name, "pool", {
        "max": kind == "max", "n": n, "c": c, "hin": hin, "win": win,
        "hout": y.shape[2], "wout": y.shape[3], "kh": k[0], "kw": k[1],
        "sh": s[0], "sw": s[1], "padTop": pad[0], "padLeft": pad[1],
        "padBottom": pad[0], "padRight": pad[1],
        "countIncludePad": include_pad},
        {"x": x, "dy": dy, "y": y, "dx": x.grad})


def global_avg_pool(name, n, c, h, w):
    x = leaf(rand(n, c, h, w))
    y = F.adaptive_avg_pool2d(x, 1)
    dy = rand(*y.shape)
    y.backward(dy)
    add_case(name, "globalavgpool", {"n": n, "c": c, "spatial": h * w},
             {"x": x, "dy": dy, "y": y, "dx": x.grad})


def batch_norm(name, n, c, h, w, eps, onnx_momentum):
    x = leaf(rand(n, c, h, w, lo=-2, hi=3))
    scale = leaf(rand(c, lo=0.5, hi=1.5))
    bias = leaf(rand(c))
    run_mean, run_var = rand(c), rand(c, lo=0.5, hi=2.0)
    rm, rv = run_mean.clone(), run_var.clone()
    y = F.batch_norm(x, rm, rv, scale, bias, training=True,
                     momentum=1 - onnx_momentum, eps=eps)
    var, mean = torch.var_mean(x.detach(), dim=(0, 2, 3), unbiased=False)
    dy = rand(*y.shape)
    y.backward(dy)
    add_case(name, "batchnorm", {"n": n, "c": c, "spatial": h * w,
                                 "epsilon": eps, "momentum": onnx_momentum},
             {"x": x, "scale": scale, "bias": bias, "runMean": run_mean,
              "runVar": run_var, "dy": dy, "y": y, "runMeanOut": rm,
              "runVarOut": rv, "savedMean": mean,
              "savedInvStd": 1 / torch.sqrt(var + eps), "dx": x.grad,
              "dscale": scale.grad, "dbias": bias.grad})


def lrn_onnx(x, size, alpha, beta, bias):
    """ONNX LRN: channel c sums squares over c - floor((size-1)/2) ..
    c + ceil((size-1)/2)."""
    before = (size - 1) // 2
    after = size - 1 - before
    sq = F.pad(x * x, (0, 0, 0, 0, before, after))
    window = sq.unfold(1, size, 1).sum(-1)
    return x / (bias + alpha / size * window) ** beta


def lrn(name, n, c, h, w, size, alpha, beta, bias):
    x = leaf(rand(n, c, h, w, lo=-2, hi=2))
    y = lrn_onnx(x, size, alpha, beta, bias)
    if size % 2 == 1:
        # For odd sizes ONNX's window is PyTorch's: cross-check the formula.
        torch_y = F.local_response_norm(x.detach(), size, alpha, beta, bias)
        assert torch.allclose(y.detach(), torch_y, rtol=1e-12, atol=1e-12)
    dy = rand(*y.shape)
    y.backward(dy)
    add_case(name, "lrn", {"n": n, "c": c, "spatial": h * w, "size": size,
                           "alpha": alpha, "beta": beta, "bias": bias},
             {"x": x, "dy": dy, "y": y, "dx": x.grad})


def gemm(name, n, k, m, trans_b, alpha, beta, bias):
    x = leaf(rand(n, k))
    w = leaf(rand(m, k) if trans_b else rand(k, m))
    b = leaf(rand(m))
    y = alpha * (x @ (w.t() if trans_b else w))
    if bias:
        y = y + beta * b
    dy = rand(*y.shape)
    y.backward(dy)
    t = {"x": x, "w": w, "dy": dy, "y": y, "dx": x.grad, "dw": w.grad}
    if bias:
        t.update({"b": b, "db": b.grad})
    add_case(name, "gemm", {"n": n, "k": k, "m": m, "transB": trans_b,
                            "alpha": alpha, "beta": beta, "bias": bias}, t)


def softmax(name, n, features, log):
    x = leaf(rand(n, features, lo=-3, hi=3))
    y = F.log_softmax(x, 1) if log else F.softmax(x, 1)
    dy = rand(*y.shape)
    y.backward(dy)
    add_case(name, "softmax", {"n": n, "features": features, "log": log},
             {"x": x, "dy": dy, "y": y, "dx": x.grad})


def activation(name, kind, lo_x=-8, hi_x=8, **params):
    x = leaf(rand(2, 3, 4, 5, lo=lo_x, hi=hi_x))
    if kind == "relu":
        y = F.relu(x)
    elif kind == "leakyrelu":
        y = F.leaky_relu(x, params["alpha"])
    elif kind == "sigmoid":
        y = torch.sigmoid(x)
    elif kind == "tanh":
        y = torch.tanh(x)
    elif kind == "sqrt":
        y = torch.sqrt(x)
    elif kind == "erf":
        y = torch.erf(x)
    elif kind == "hardsigmoid":
        y = F.hardsigmoid(x)
    elif kind == "hardswish":
        y = F.hardswish(x)
    elif kind == "pow":
        y = torch.pow(x, params["alpha"])
    elif kind == "gelu":
        y = F.gelu(x)
    elif kind == "gelutanh":
        y = F.gelu(x, approximate="tanh")
    elif kind == "softplus":
        y = F.softplus(x)
    elif kind == "mish":
        y = F.mish(x)
    elif kind == "celu":
        y = F.celu(x, params["alpha"])
    elif kind == "logsigmoid":
        y = F.logsigmoid(x)
    elif kind == "exp":
        y = torch.exp(x)
    elif kind == "abs":
        y = torch.abs(x)
    elif kind == "log":
        y = torch.log(x)
    else:
        y = F.hardtanh(x, params["lo"], params["hi"])
    dy = rand(*y.shape)
    y.backward(dy)
    add_case(name, "activation", dict(act=kind, count=x.numel(), **params),
             {"x": x, "dy": dy, "y": y, "dx": x.grad})


def cross_entropy(name, n, classes):
    logits = leaf(rand(n, classes, lo=-3, hi=3))
    labels = torch.randint(0, classes, (n,))
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    add_case(name, "crossentropy", {"n": n, "classes": classes},
             {"logits": logits, "labels": labels.double(),
              "loss": loss.reshape(1), "dlogits": logits.grad})


def mse(name, n, features):
    y = leaf(rand(n, features))
    target = rand(n, features)
    loss = F.mse_loss(y, target)
    loss.backward()
    add_case(name, "mse", {"n": n, "features": features},
             {"y": y, "target": target, "loss": loss.reshape(1),
              "dy": y.grad})


def sgd(name, count, lr, momentum, weight_decay, steps=3):
    w0 = rand(count)
    grads = rand(steps, count)
    p = torch.nn.Parameter(w0.clone())
    opt = torch.optim.SGD([p], lr=lr, momentum=momentum,
                          weight_decay=weight_decay)
    after = []
    for i in range(steps):
        p.grad = grads[i].clone()
        opt.step()
        after.append(p.detach().clone())
    t = {"w0": w0, "grads": grads, "w": torch.stack(after)}
    if momentum != 0:
        t["buf"] = opt.state[p]["momentum_buffer"]
    add_case(name, "sgd", {"count": count, "lr": lr, "momentum": momentum,
                           "weightDecay": weight_decay, "steps": steps}, t)


def adam(name, count, lr, weight_decay, decoupled, steps=3):
    """torch.optim.Adam / AdamW over `steps` given gradients (float32, as a
    trainer runs it), with gradients large enough that eps is negligible."""
    w0 = rand(count)
    grads = rand(steps, count)
    p = torch.nn.Parameter(w0.clone())
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = cls([p], lr=lr, betas=(0.9, 0.999), eps=1e-8,
              weight_decay=weight_decay)
    after = []
    for i in range(steps):
        p.grad = grads[i].clone()
        opt.step()
        after.append(p.detach().clone())
    st = opt.state[p]
    add_case(name, "adam", {"count": count, "lr": lr, "decoupled": decoupled,
                            "weightDecay": weight_decay, "steps": steps},
             {"w0": w0, "grads": grads, "w": torch.stack(after),
              "m": st["exp_avg"], "v": st["exp_avg_sq"]})


def main():
    global OUT
    if len(sys.argv) != 2:
        sys.exit("usage: kernel_reference.py OUTDIR")
    OUT = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".f32") or f == "index.json":
            os.remove(os.path.join(OUT, f))

    # name, n, cin, hin, win, cout, kernel, stride, pads (t, l, b, r),
    # dilation, group, bias
    conv("conv_basic", 2, 3, 8, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1,
         True)
    conv("conv_groups_stride", 2, 4, 9, 7, 6, (3, 3), (2, 2), (1, 1, 1, 1),
         (1, 1), 2, True)
    conv("conv_dilation_asymmetric", 2, 3, 10, 9, 2, (3, 2), (1, 2),
         (2, 1, 1, 0), (2, 1), 1, True)
    conv("conv_depthwise_multiplier", 2, 4, 6, 6, 8, (3, 3), (1, 1),
         (1, 1, 1, 1), (1, 1), 4, False)
    conv("conv_pointwise", 3, 5, 4, 6, 3, (1, 1), (1, 1), (0, 0, 0, 0),
         (1, 1), 1, True)

    pool("maxpool_3s2p1_ceil", "max", 2, 3, 7, 8, (3, 3), (2, 2), (1, 1), True)
    pool("maxpool_2s2_ceil", "max", 2, 2, 5, 5, (2, 2), (2, 2), (0, 0), True)
    pool("maxpool_3s1p1", "max", 2, 2, 6, 6, (3, 3), (1, 1), (1, 1), False)
    pool("avgpool_3s2p1_ceil_incl", "avg", 2, 2, 6, 6, (3, 3), (2, 2), (1, 1),
         True, True)
    pool("avgpool_3s2p1_ceil_excl", "avg", 2, 2, 7, 6, (3, 3), (2, 2), (1, 1),
         True, False)
    pool("avgpool_2s2p1_incl", "avg", 2, 2, 5, 6, (2, 2), (2, 2), (1, 1),
         False, True)
    pool("avgpool_3x2_rect", "avg", 2, 2, 7, 5, (3, 2), (2, 1), (1, 0), False,
         False)
    global_avg_pool("globalavgpool", 2, 3, 5, 4)

    batch_norm("batchnorm_4d", 3, 4, 5, 5, 1e-5, 0.9)
    batch_norm("batchnorm_spatial1", 6, 3, 1, 1, 1e-3, 0.7)

    lrn("lrn_size5", 2, 7, 3, 4, 5, 0.5, 0.75, 2.0)
    lrn("lrn_size3", 2, 4, 2, 3, 3, 1e-2, 0.5, 1.0)
    lrn("lrn_size4_onnx_window", 2, 6, 2, 2, 4, 0.8, 0.75, 1.0)

    gemm("linear", 4, 6, 5, True, 1.0, 1.0, True)
    gemm("matmul", 3, 5, 4, False, 1.0, 1.0, False)
    gemm("gemm_alpha_beta", 3, 4, 6, True, 0.5, 2.0, True)

    softmax("softmax", 3, 7, False)
    softmax("logsoftmax", 3, 7, True)

    activation("relu", "relu")
    activation("leakyrelu", "leakyrelu", alpha=0.1)
    activation("sigmoid", "sigmoid")
    activation("tanh", "tanh")
    activation("relu6", "clip", lo=0.0, hi=6.0)
    activation("sqrt", "sqrt", lo_x=0.1)
    activation("erf", "erf")
    activation("hardsigmoid", "hardsigmoid", alpha=1 / 6, beta=0.5)
    activation("hardswish", "hardswish")
    activation("square", "pow", alpha=2.0)
    activation("cube", "pow", alpha=3.0)
    activation("gelu", "gelu")
    activation("gelutanh", "gelutanh")
    # x up to 25: past softplus's threshold 20, where it is x itself.
    activation("softplus", "softplus", lo_x=-25, hi_x=25)
    activation("mish", "mish", lo_x=-25, hi_x=25)
    activation("celu", "celu", alpha=0.7)
    activation("logsigmoid", "logsigmoid", lo_x=-25, hi_x=25)
    activation("exp", "exp", lo_x=-4, hi_x=4)
    activation("abs", "abs")
    activation("log", "log", lo_x=0.05, hi_x=8)

    cross_entropy("crossentropy", 5, 7)
    mse("mse", 4, 3)

    sgd("sgd_momentum_wd", 10, 0.1, 0.9, 1e-2)
    sgd("sgd_plain_wd", 10, 0.05, 0.0, 5e-4)
    sgd("sgd_momentum", 10, 0.2, 0.5, 0.0)
    adam("adam_wd", 10, 0.01, 1e-2, False)
    adam("adamw_wd", 10, 0.01, 5e-2, True)

    tmp = os.path.join(OUT, "index.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"format": 1, "torch": torch.__version__, "cases": CASES},
                  f, indent=1)
    os.replace(tmp, os.path.join(OUT, "index.json"))


if __name__ == "__main__":
    main()
