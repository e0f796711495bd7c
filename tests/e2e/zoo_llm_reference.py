#!/usr/bin/python3
"""Independent reference for the zoo's decoders (tests/cli/zoo_gpt2.sh,
zoo_llama.sh): GPT-2 and Llama written by hand in PyTorch, the way Hugging
Face's GPT2LMHeadModel and LlamaForCausalLM compute, loaded with the weights
of the zoo's ONNX file by name, trained in float64 with SGD (or AdamW),
and compared
with a memfit trainer's losses and trained weights.

usage: zoo_llm_reference.py gpt2|llama MODEL.onnx [X.npy Y.npy] --heads H
         [--kv-heads K] --batch B --iterations N --lr F --momentum F
         --weight-decay F --losses TRAINER_LOG --trained TRAINED.onnx
         [--tol T] [--optimizer sgd|adamw] [--beta1 F] [--beta2 F] [--eps F]
         [--clip-grad-norm F] [--no-decay REGEX|auto] [--accumulate N]
         [--tokens FILE --seq-len T [--token-order random|sequential]
          [--token-dtype uint16|uint32] [--seed S]]
With --tokens the batches are the trainer's windows of the token file,
drawn as runtime/TokenStream.h says, written again here.
Exit 0 when the losses and every weight agree within T (relative to the
weight's largest magnitude) and training moved the weights; 1 otherwise.

Nothing here reads the ONNX graph's nodes: only the initializers' names and
shapes, which must be exactly the module's parameters.
"""
import argparse
import math
import re
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

FLOAT = torch.float64


def causal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def attend(q, k, v):
    """softmax(q k^T / sqrt(d) masked causally) v, heads merged."""
    B, H, T, d = q.shape
    att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
    att = att.masked_fill(~causal(T), float("-inf"))
    y = F.softmax(att, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, H * d)


def gpt2_names(layers):
    names = ["transformer.wte.weight", "transformer.wpe.weight",
             "transformer.ln_f.weight", "transformer.ln_f.bias"]
    for i in range(layers):
        p = f"transformer.h.{i}."
        for m in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc",
                  "mlp.c_proj"):
            names += [p + m + ".weight", p + m + ".bias"]
    return names


def gpt2(W, idx, heads):
    """Hugging Face's GPT2LMHeadModel without dropout: Conv1D weights are
    [in, out], gelu_new, the head tied to the token embedding."""
    B, T = idx.shape
    d = W["transformer.wte.weight"].shape[1]
    x = W["transformer.wte.weight"][idx] + W["transformer.wpe.weight"][:T]
    layers = sum(1 for n in W if n.endswith(".ln_1.weight"))

    def ln(name, x):
        return F.layer_norm(x, (d,), W[name + ".weight"], W[name + ".bias"],
                            1e-5)

    def conv1d(name, x):
        return x @ W[name + ".weight"] + W[name + ".bias"]

    for i in range(layers):
        p = f"transformer.h.{i}."
        q, k, v = conv1d(p + "attn.c_attn", ln(p + "ln_1", x)).split(d, dim=2)
        q, k, v = (t.view(B, T, heads, d // heads).transpose(1, 2)
                   for t in (q, k, v))
        x = x + conv1d(p + "attn.c_proj", attend(q, k, v))
        h = F.gelu(conv1d(p + "mlp.c_fc", ln(p + "ln_2", x)),
                   approximate="tanh")
        x = x + conv1d(p + "mlp.c_proj", h)
    return ln("transformer.ln_f", x) @ W["transformer.wte.weight"].t()


def llama_names(layers):
    names = ["model.embed_tokens.weight", "model.norm.weight",
             "lm_head.weight"]
    for i in range(layers):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight",
                  p + "post_attention_layernorm.weight"]
        names += [p + f"self_attn.{m}_proj.weight" for m in "qkvo"]
        names += [p + f"mlp.{m}_proj.weight" for m in ("gate", "up", "down")]
    return names


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def llama(W, idx, heads, kv_heads, theta=10000.0, eps=1e-5):
    """Hugging Face's LlamaForCausalLM: RMSNorm, rotary embeddings (tables
    in float32 as its rotary module computes them), grouped-query attention
    by repeat_kv, SwiGLU, untied head."""
    B, T = idx.shape
    d = W["model.embed_tokens.weight"].shape[1]
    hd = d // heads
    layers = sum(1 for n in W if n.endswith(".input_layernorm.weight"))

    def rms(name, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return W[name] * (x * torch.rsqrt(var + eps))

    def lin(name, x):
        return x @ W[name].t()

    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(FLOAT), emb.sin().to(FLOAT)
    x = W["model.embed_tokens.weight"][idx]
    for i in range(layers):
        p = f"model.layers.{i}."
        h = rms(p + "input_layernorm.weight", x)
        q = lin(p + "self_attn.q_proj.weight", h).view(B, T, heads, hd)
        k = lin(p + "self_attn.k_proj.weight", h).view(B, T, kv_heads, hd)
        v = lin(p + "self_attn.v_proj.weight", h).view(B, T, kv_heads, hd)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        x = x + lin(p + "self_attn.o_proj.weight", attend(q, k, v))
        h = rms(p + "post_attention_layernorm.weight", x)
        g = F.silu(lin(p + "mlp.gate_proj.weight", h))
        x = x + lin(p + "mlp.down_proj.weight",
                    g * lin(p + "mlp.up_proj.weight", h))
    return lin("lm_head.weight", rms("model.norm.weight", x))


M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def token_batches(args):
    """The trainer's --tokens batches: windows of T ids (labels the next T)
    in SampleOrder's order (no shuffle), each starting where
    runtime/TokenStream.cpp's windowStart says."""
    if args.tokens.endswith(".npy"):
        tok = np.load(args.tokens).astype(np.int64)
    else:
        tok = np.fromfile(args.tokens, dtype=np.dtype(args.token_dtype))
        tok = tok.astype(np.int64)
    n, T, B = len(tok), args.seq_len, args.batch
    count = (n - 1) // T
    cursor, epoch = 0, 0
    for _ in range(args.iterations):
        if cursor + B > count:
            cursor, epoch = 0, epoch + 1
        xs, ys = [], []
        for s in range(cursor, cursor + B):
            if args.token_order == "random":
                h = splitmix64(splitmix64(splitmix64(args.seed) ^ epoch) ^ s)
                start = h % (n - T)
            else:
                start = s * T
            xs.append(tok[start:start + T])
            ys.append(tok[start + 1:start + T + 1])
        cursor += B
        yield torch.tensor(np.stack(xs)), torch.tensor(np.stack(ys))


def file_batches(args):
    X = torch.tensor(np.load(args.x)).long()
    Y = torch.tensor(np.load(args.y)).long()
    for it in range(args.iterations):
        s = (it * args.batch) % (X.shape[0] - X.shape[0] % args.batch)
        yield X[s:s + args.batch], Y[s:s + args.batch]


def param_groups(W, args):
    """torch.optim's groups for the trainer's --no-decay: by name (searched
    as grep -E does), or auto: every parameter of rank below 2."""
    if not args.no_decay:
        return [{"params": list(W.values())}]
    if args.no_decay == "auto":
        off = {n for n, p in W.items() if p.dim() < 2}
    else:
        off = {n for n in W if re.search(args.no_decay, n)}
    return [{"params": [p for n, p in W.items() if n not in off]},
            {"params": [p for n, p in W.items() if n in off],
             "weight_decay": 0.0}]


def val_loss(args, W):
    """Mean cross-entropy of weights W over every sequential window of
    --val-tokens (float64, no gradient)."""
    tok = np.fromfile(args.val_tokens, dtype=np.dtype(args.token_dtype))
    T = args.seq_len
    n = (len(tok) - 1) // T
    xs = torch.tensor(np.stack([tok[i * T:(i + 1) * T] for i in range(n)])
                      .astype(np.int64))
    ys = torch.tensor(np.stack([tok[i * T + 1:(i + 1) * T + 1]
                                for i in range(n)]).astype(np.int64))
    with torch.no_grad():
        logits = gpt2(W, xs, args.heads) if args.arch == "gpt2" else \
            llama(W, xs, args.heads, args.kv_heads or args.heads)
        return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                     ys.reshape(-1)))


def write_curves(args, W, losses, norms, val_curve):
    import json
    out = {"torch_losses": losses, "torch_grad_norms": norms,
           "torch_val_curve": val_curve}
    if args.val_tokens:
        out["torch_val_loss"] = val_loss(args, W)
        trained = {t.name: torch.tensor(numpy_helper.to_array(t).copy())
                   .to(FLOAT) for t in onnx.load(args.trained).graph.initializer}
        out["memfit_val_loss"] = val_loss(args, {n: trained[n] for n in W})
    with open(args.curves_out, "w") as f:
        json.dump(out, f)
    return 0


def schedule(opt, args):
    """torch's scheduler for the trainer's --lr-schedule: its own class
    where one is the same schedule, else LambdaLR with the formula of
    runtime/LrSchedule.h written out again here."""
    S, W, LR = args.iterations, args.warmup_steps, args.lr
    MIN = args.min_lr if args.min_lr is not None else 0.0
    sch = torch.optim.lr_scheduler
    if args.lr_schedule == "onecycle":
        kw = {}
        if args.min_lr is not None:
            kw["final_div_factor"] = LR / 25.0 / args.min_lr
        return sch.OneCycleLR(opt, max_lr=LR, total_steps=S,
                              pct_start=W / S if W else 0.3,
                              anneal_strategy="cos", div_factor=25.0,
                              three_phase=False, cycle_momentum=False, **kw)
    if args.lr_schedule == "step" and W == 0:
        return sch.StepLR(opt, step_size=args.lr_step_size,
                          gamma=args.lr_gamma)

    def rate(s):
        if s < W:
            return LR * (s + 1) / W
        into, span = min(s, S) - W, max(1, S - W)
        if args.lr_schedule == "step":
            return LR * args.lr_gamma ** ((s - W) // args.lr_step_size)
        if args.lr_schedule == "cosine":
            return MIN + (LR - MIN) * (1 + math.cos(math.pi * into / span)) / 2
        if args.lr_schedule == "linear":
            return LR - (LR - MIN) * into / span
        return LR

    # LambdaLR multiplies its factor by the base rate: set the rate itself.
    class Exact(sch.LambdaLR):
        def get_lr(self):
            return [rate(self.last_epoch) for _ in self.optimizer.param_groups]

    return Exact(opt, lambda s: 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", choices=["gpt2", "llama"])
    ap.add_argument("model")
    ap.add_argument("x", nargs="?")
    ap.add_argument("y", nargs="?")
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--iterations", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--losses", required=True)
    ap.add_argument("--trained", required=True)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--lr-schedule", default="constant",
                    choices=["constant", "step", "cosine", "linear",
                             "onecycle"])
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=None)
    ap.add_argument("--lr-step-size", type=int, default=0)
    ap.add_argument("--lr-gamma", type=float, default=0.1)
    ap.add_argument("--clip-grad-norm", type=float, default=0.0)
    ap.add_argument("--no-decay", default="")
    ap.add_argument("--tokens")
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--token-order", default="random",
                    choices=["random", "sequential"])
    ap.add_argument("--token-dtype", default="uint16")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--accumulate", type=int, default=1)
    # A benchmark's mode (tools/bench/char_gpt.py): write torch's losses and
    # the validation loss of both trained models, and check nothing.
    ap.add_argument("--curves-out")
    ap.add_argument("--val-tokens")
    ap.add_argument("--val-every", type=int, default=0)
    args = ap.parse_args()
    if bool(args.tokens) == bool(args.x and args.y):
        ap.error("give X.npy and Y.npy, or --tokens")

    init = {t.name: numpy_helper.to_array(t)
            for t in onnx.load(args.model).graph.initializer}
    layers = sum(1 for n in init
                 if n.endswith(".ln_1.weight" if args.arch == "gpt2"
                               else ".input_layernorm.weight"))
    want = (gpt2_names if args.arch == "gpt2" else llama_names)(layers)
    if sorted(want) != sorted(init):
        print(f"the model's weights are not {args.arch}'s parameters: "
              f"missing {sorted(set(want) - set(init))}, "
              f"extra {sorted(set(init) - set(want))}")
        return 1
    W = {n: torch.tensor(init[n].copy()).to(FLOAT).requires_grad_(True)
         for n in want}
    groups = param_groups(W, args)
    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(groups, lr=args.lr,
                                betas=(args.beta1, args.beta2), eps=args.eps,
                                weight_decay=args.weight_decay)
    else:
        opt = torch.optim.SGD(groups, lr=args.lr,
                              momentum=args.momentum,
                              weight_decay=args.weight_decay)
    sched = schedule(opt, args)
    losses, rates, norms, val_curve = [], [], [], []
    batches = token_batches(args) if args.tokens else file_batches(args)
    for xb, yb in batches:
        opt.zero_grad()
        # A PyTorch accumulation loop: N micro-batches of the step's batch,
        # each loss divided by N before its backward pass.
        N, step_loss = args.accumulate, 0.0
        for xm, ym in zip(xb.chunk(N), yb.chunk(N)):
            if args.arch == "gpt2":
                logits = gpt2(W, xm, args.heads)
            else:
                logits = llama(W, xm, args.heads, args.kv_heads or args.heads)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   ym.reshape(-1)) / N
            loss.backward()
            step_loss += float(loss)
        loss = torch.tensor(step_loss)
        if args.clip_grad_norm > 0:
            norms.append(float(torch.nn.utils.clip_grad_norm_(
                list(W.values()), args.clip_grad_norm)))
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(float(loss))
        step = len(losses)
        if args.curves_out and args.val_tokens and args.val_every and (
                step % args.val_every == 0 or step == args.iterations):
            val_curve.append([step, val_loss(args, W)])

    if args.curves_out:
        return write_curves(args, W, losses, norms, val_curve)
    got = [float(m.group(1)) for m in
           re.finditer(r"^iteration \d+\s+loss (\S+)",
                       open(args.losses).read(), re.M)]
    if len(got) != len(losses):
        print(f"trainer printed {len(got)} losses, expected {len(losses)}")
        return 1
    for k, (a, b) in enumerate(zip(got, losses)):
        if abs(a - b) > args.tol * max(1.0, abs(b)):
            print(f"loss {k + 1}: trainer {a!r}, torch {b!r}")
            return 1
    if args.clip_grad_norm > 0:
        printed = [float(m.group(1)) for m in
                   re.finditer(r"^iteration \d+\s.*\bgrad norm (\S+)",
                               open(args.losses).read(), re.M)]
        if len(printed) != len(norms) or any(
                abs(a - b) > args.tol * max(1.0, abs(b))
                for a, b in zip(printed, norms)):
            print(f"gradient norms: trainer {printed}, torch {norms}")
            return 1
        if not any(v > args.clip_grad_norm for v in norms):
            print(f"no step clipped: norms {norms} all within "
                  f"{args.clip_grad_norm}")
            return 1
    if args.lr_schedule != "constant" or args.warmup_steps:
        # The trainer prints each step's rate as the float it used.
        printed = [float(np.float32(m.group(1))) for m in
                   re.finditer(r"^iteration \d+\s.*\blr (\S+)$",
                               open(args.losses).read(), re.M)]
        want = [float(np.float32(r)) for r in rates]
        if printed != want:
            print(f"learning rates: trainer {printed}, torch {want}")
            return 1
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(args.trained).graph.initializer}
    worst, worst_name, moved = 0.0, "", 0.0
    for name, p in W.items():
        ref = p.detach().numpy()
        if name not in trained:
            print(f"trained model lacks {name}")
            return 1
        err = np.max(np.abs(trained[name] - ref)) / max(1e-3,
                                                       np.max(np.abs(ref)))
        moved = max(moved, float(np.max(np.abs(ref - init[name]))))
        if err > worst:
            worst, worst_name = err, name
    if worst > args.tol:
        print(f"weight {worst_name}: relative difference {worst:.3g} "
              f"(tolerance {args.tol})")
        return 1
    if moved < 1e-4:
        print(f"training moved no weight (at most {moved:.2e})")
        return 1
    print(f"agree with torch: {len(losses)} losses "
          f"({', '.join('%.6f' % v for v in losses)}), worst weight "
          f"difference {worst:.2e} ({worst_name}), weights moved up to "
          f"{moved:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
