#!/usr/bin/env python3
"""Exact plans against sub-batched ones (docs/benchmarks/exact.md).

The settings the exact-semantics goals name, on memfit's analytic device
models (predictions; no GPU): per row, memfit's default plan (exact: a model
with BatchNorm runs whole batches, or the batch in chunks inside one round
with its statistics gathered over the batch), chen-sqrt (exact), and memfit with
--sub-batch-statistics (each sub-batch normalized by its own statistics;
not what the model computes when the model has BatchNorm). Cells: predicted
overhead over the ideal plan, then the sub-batches in brackets and the
plan's gap to the proven bound of its order and sub-batch or chunks
(passes/solve/TimeBound.h);
`-` where the plan is infeasible, with the reason in a footnote.

usage: tools/bench/exact.py [--memfit build/tools/memfit] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

# model, batch, budget, device, goal (as the issue states it, exact)
CASES = [
    ("resnet50", 256, "50%", "h100-sxm", "<= 3%"),
    ("resnet50", 256, "25%", "h100-sxm", "<= 15%"),
    ("vgg16", 256, "75%", "h100-sxm", "<= 3%"),
    ("vgg16", 256, "50%", "h100-sxm", ""),
    ("vgg16", 64, "50%", "h100-sxm", "within 3% of the bound"),
    ("densenet121", 128, "25%", "h100-sxm", "<= 20%"),
    ("googlenet", 256, "25%", "h100-sxm", ""),
    ("resnet18", 64, "40%", "h100-sxm", "within 3% of the bound"),
    ("resnet50", 184, "4.99GB", "v100", "< 11.95% (MONeT)"),
    ("resnet50", 184, "10.01GB", "v100", "< 3.22% (MONeT)"),
    ("googlenet", 320, "4.99GB", "v100", "< 15.77% (MONeT)"),
]


def plan(memfit, path, batch, budget, device, *extra):
    t0 = time.perf_counter()
    p = subprocess.run([memfit, "plan", path, "--batch", str(batch),
                        "--budget", budget, "--device", device, "--json",
                        *extra], capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if p.returncode:
        return None, p.stderr.strip().split("\n")[-1], secs
    return json.loads(p.stdout), None, secs


def cell(j, err, notes):
    if j is None:
        notes.append(err.replace("memfit: error: ", ""))
        return f"- [{len(notes)}]"
    k = j["sub_batches"]
    tag = "" if j["exact"] else ", not exact"
    shape = f"{k} x {j['sub_batch']}"
    if j.get("chunks", 1) > 1:
        shape = f"{j['chunks']} chunks of {j['sub_batch']}"
    gap = ""
    if j.get("bound_seconds"):
        gap = f"; bound +{100 * (j['planned_seconds'] / j['bound_seconds'] - 1):.1f}%"
    return f"{100 * j['overhead']:.1f}% ({shape}{tag}{gap})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--out")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memfit-exact-")
    lines, notes = [], []
    say = lambda s="": (print(s, flush=True), lines.append(s))
    say("| model | batch | budget | device | goal | memfit (exact) "
        "| chen-sqrt (exact) | memfit, --sub-batch-statistics "
        "| planning s (exact / sub-batched) |")
    say("|---|---|---|---|---|---|---|---|---|")
    for name, batch, budget, device, goal in CASES:
        path = os.path.join(tmp, name + ".onnx")
        if not os.path.exists(path):
            subprocess.run([args.memfit, "zoo", name, "-o", path],
                           check=True, capture_output=True)
        exact, e1, s1 = plan(args.memfit, path, batch, budget, device)
        chen, e2, _ = plan(args.memfit, path, batch, budget, device,
                           "--policy", "chen-sqrt")
        free, e3, s3 = plan(args.memfit, path, batch, budget, device,
                            "--sub-batch-statistics")
        say(f"| {name} | {batch} | {budget} | {device} | {goal} | "
            f"{cell(exact, e1, notes)} | {cell(chen, e2, notes)} | "
            f"{cell(free, e3, notes)} | {s1:.1f} / {s3:.1f} |")
    if notes:
        say()
        for i, n in enumerate(notes, 1):
            say(f"[{i}] {n}")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
