#!/usr/bin/env python3
"""A character-level GPT on the Python standard library's own sources, no
download (docs/benchmarks/training.md, "Real text").

The stdlib's .py files (sorted, the first --chars characters) become a
character stream: the 60 most frequent characters are tokens 0-59, every
other character token 60 (gpt2-tiny's vocabulary of 61). 90% is the
training stream (nanoGPT's raw uint16 train.bin), 10% the validation
stream. memfit compiles gpt2-tiny (AdamW, clipping at 1.0) and trains it on
the CPU emulation from random windows (cosine schedule with warm-up, no
decay on biases and norms); PyTorch trains the same model from the same
windows the same way in float64 (tests/e2e/zoo_llm_reference.py). Prints
the loss curves side by side and their largest relative gap, and the
validation curves over every window of the validation stream every
--val-every steps: the trainer's own (its evaluation program, --val-tokens)
against PyTorch evaluating its model after the same steps; writes the plot
as an SVG.

usage: tools/bench/char_gpt.py [--memfit build/tools/memfit] [--steps 300]
           [--batch 16] [--chars 2000000] [--val-every 100]
           [--svg docs/benchmarks/data/char_gpt.svg]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def corpus(chars):
    lib = sysconfig.get_paths()["stdlib"]
    text = []
    total = 0
    for dirpath, dirnames, files in sorted(os.walk(lib)):
        dirnames.sort()
        for f in sorted(files):
            if not f.endswith(".py") or total >= chars:
                continue
            try:
                s = open(os.path.join(dirpath, f), encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            text.append(s)
            total += len(s)
    return "".join(text)[:chars], lib


def svg(path, steps, mine, theirs, val=(), theirs_val=()):
    W, H, pad = 720, 320, 48
    top = max(max(mine), max(theirs)) * 1.05
    low = min(min(mine), min(theirs), *[v for _, v in val]) * 0.95
    def pts(ys, at=None):
        return " ".join(
            f"{pad + (s - 1) / max(1, steps[-1] - 1) * (W - 2 * pad):.1f},"
            f"{H - pad - (y - low) / (top - low) * (H - 2 * pad):.1f}"
            for s, y in zip(at or steps, ys))
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<line x1="{pad}" y1="{H - pad}" x2="{W - pad}" y2="{H - pad}" stroke="#999"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{H - pad}" stroke="#999"/>',
             f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">optimizer step (1 to {steps[-1]})</text>',
             f'<text x="8" y="{pad - 10}">loss ({low:.2f} to {top:.2f})</text>',
             f'<polyline fill="none" stroke="#4e79a7" stroke-width="2" points="{pts(mine)}"/>',
             f'<polyline fill="none" stroke="#e15759" stroke-width="1.5" stroke-dasharray="5,4" points="{pts(theirs)}"/>',
             f'<text x="{W - pad - 220}" y="{pad}" fill="#4e79a7">memfit (CPU emulation, fp32)</text>',
             f'<text x="{W - pad - 220}" y="{pad + 16}" fill="#e15759">PyTorch (float64)</text>']
    if val:
        lines += [
            f'<polyline fill="none" stroke="#59a14f" stroke-width="2" points="{pts([v for _, v in val], [s for s, _ in val])}"/>',
            f'<polyline fill="none" stroke="#b07aa1" stroke-width="1.5" stroke-dasharray="5,4" points="{pts([v for _, v in theirs_val], [s for s, _ in theirs_val])}"/>',
            f'<text x="{W - pad - 220}" y="{pad + 32}" fill="#59a14f">memfit validation (its evaluation program)</text>',
            f'<text x="{W - pad - 220}" y="{pad + 48}" fill="#b07aa1">PyTorch validation</text>']
    lines.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--chars", type=int, default=2_000_000)
    ap.add_argument("--val-every", type=int, default=100)
    ap.add_argument("--svg", default="docs/benchmarks/data/char_gpt.svg")
    args = ap.parse_args()
    text, lib = corpus(args.chars)
    freq = collections.Counter(text).most_common(60)
    ids = {c: i for i, (c, _) in enumerate(freq)}
    tok = np.array([ids.get(c, 60) for c in text], dtype=np.uint16)
    split = len(tok) * 9 // 10
    flags = ["--lr", "0.003", "--lr-schedule", "cosine", "--warmup-steps",
             "20", "--min-lr", "0.0003", "--weight-decay", "0.1",
             "--no-decay", "auto", "--eps", "1e-6", "--clip-grad-norm", "1",
             "--seq-len", "16"]
    with tempfile.TemporaryDirectory() as d:
        tok[:split].tofile(os.path.join(d, "train.bin"))
        tok[split:].tofile(os.path.join(d, "val.bin"))
        model = os.path.join(d, "g.onnx")
        subprocess.run([args.memfit, "zoo", "gpt2-tiny", "-o", model],
                       check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(d, "t")
        subprocess.run([args.memfit, "compile", model, "--batch",
                        str(args.batch), "--budget", "100%", "--optimizer",
                        "adamw", "--clip-grad-norm", "1", "--refine=false",
                        "-o", out, "--quiet"], check=True)
        subprocess.run(["cmake", "-S", out, "-B", out + "/build",
                        "-DMEMFIT_BACKEND=cpu"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", out + "/build", "-j", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        log = os.path.join(d, "run.log")
        with open(log, "w") as f:
            subprocess.run([out + "/build/trainer", "--tokens",
                            os.path.join(d, "train.bin"), "--iterations",
                            str(args.steps), "--log-every", "1", "--log",
                            os.path.join(d, "run.jsonl"), "--save",
                            os.path.join(d, "trained.onnx"), "--val-tokens",
                            os.path.join(d, "val.bin"), "--val-every",
                            str(args.val_every)] + flags,
                           check=True, stdout=f)
        curves = os.path.join(d, "curves.json")
        subprocess.run([sys.executable, os.path.join(
            ROOT, "tests/e2e/zoo_llm_reference.py"), "gpt2", model,
            "--heads", "4", "--batch", str(args.batch), "--iterations",
            str(args.steps), "--optimizer", "adamw", "--tokens",
            os.path.join(d, "train.bin"), "--losses", log, "--trained",
            os.path.join(d, "trained.onnx"), "--curves-out", curves,
            "--val-tokens", os.path.join(d, "val.bin"), "--val-every",
            str(args.val_every)] + flags, check=True)
        ref = json.load(open(curves))
        lines = [json.loads(l) for l in open(os.path.join(d, "run.jsonl"))]
        mine = [l["loss"] for l in lines if "loss" in l]
        val = [(l["step"], l["val_loss"]) for l in lines if "val_loss" in l]
    theirs = ref["torch_losses"]
    steps = list(range(1, len(mine) + 1))
    gap = max(abs(a - b) / b for a, b in zip(mine, theirs))
    os.makedirs(os.path.dirname(args.svg), exist_ok=True)
    svg(args.svg, steps, mine, theirs, val, ref["torch_val_curve"])
    print(f"Corpus: the first {len(text):,} characters of {lib}'s .py files "
          f"(Python {sys.version.split()[0]}), {len(tok) - split:,} of them "
          f"held out; gpt2-tiny (2 layers, width 32, T 16), batch "
          f"{args.batch}, {args.steps} steps.\n")
    print("| step | memfit loss | PyTorch loss | relative gap |")
    print("|---|---|---|---|")
    for s in sorted(set([1, 10, 50, 100, 200, args.steps]) & set(steps)):
        a, b = mine[s - 1], theirs[s - 1]
        print(f"| {s} | {a:.4f} | {b:.4f} | {abs(a - b) / b:.2e} |")
    print(f"\nLargest relative gap over all {len(steps)} steps: {gap:.2e}.")
    print("\nValidation over every window of the held-out stream: memfit's "
          "trainer (its evaluation program, --val-every) against PyTorch "
          "evaluating its own model after the same steps.\n")
    print("| step | memfit validation loss | PyTorch validation loss | "
          "relative gap |")
    print("|---|---|---|---|")
    theirs_val = dict((s, v) for s, v in ref["torch_val_curve"])
    vgap = 0.0
    for s, v in val:
        t = theirs_val[s]
        vgap = max(vgap, abs(v - t) / t)
        print(f"| {s} | {v:.4f} | {t:.4f} | {abs(v - t) / t:.2e} |")
    print(f"\nLargest relative gap of the validation curves: {vgap:.2e}. "
          f"PyTorch's validation of the weights memfit saved: "
          f"{ref['memfit_val_loss']:.6f}, the trainer's last: {val[-1][1]:.6f}.")


if __name__ == "__main__":
    main()
