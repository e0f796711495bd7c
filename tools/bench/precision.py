#!/usr/bin/env python3
"""bf16 beside fp32: memory figures and policies side by side (docs/benchmarks/).

For each model: keep-all bytes, ideal peak, lower bound and the predicted
ideal iteration in fp32 and bf16, then every policy's predicted iteration
time, traffic and sub-batch at the same budgets in bytes for both
precisions (fractions of the fp32 ideal peak), on the analytic h100-sxm
model. The CNNs are ResNet-50 and VGG-16; the transformers are those of
docs/benchmarks/transformers.md (tools/bench-transformers.py: its models,
batches, budgets and policies, AdamW), planned with memfit's default
--fuse-attention auto. All times are predictions of the cost model (no
GPU).

usage: tools/bench/precision.py [--memfit build/tools/memfit] [--quick]
       [--work DIR] [--out docs/benchmarks/precision.md]
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
POLICIES = ["vdnn-all", "vdnn-conv", "modnn", "chen-sqrt", "superneurons",
            "memfit"]
PRECISIONS = ["fp32", "bf16"]
# Read off the tables this script writes: check them when the tables move.
TRANSFORMER_NOTES = [
    "Activations halve exactly (keep-all 0.500), but the bf16 ideal peaks "
    "are 0.54 to 0.62 of fp32's: weights, gradients and both AdamW moments "
    "stay fp32 (1.3 to 2.0 GiB), and the bf16 working copies of the Linear "
    "weights add 10 to 13% to that weight side.",
    "Fused attention gains least from bf16: its kernel computes in fp32, "
    "while the materialized form's BatchMatMuls run on tensor cores. In "
    "fp32 the fused form is faster for every model (GPT-2 small at batch 8: "
    "155.1 against 177.7 ms); in bf16 only GPT-2's T = 1024 keeps it ahead "
    "(45.1 against 46.1 ms), and BERT-base (T = 512: 61.7 against 56.4 ms) "
    "and ViT-B/16 (T = 197: 36.7 against 36.5 ms) are faster as written. So "
    "`--fuse-attention auto` fuses all 12 attentions in almost every fp32 "
    "cell but keeps BERT's and ViT's as written in bf16 where the budget "
    "leaves room, fusing some or all when it needs their memory (ViT-B/16 "
    "at 25%: 6 of 12) and all under vdnn-all, which offloads every "
    "activation and so prefers the fused form's smaller traffic.",
    "The predicted bf16 iterations are 0.21 to 0.29 of fp32's, with the "
    "same optimistic assumption as the CNNs' (tensor-core kernels at the "
    "efficiency of the calibrated fp32 ones).",
    "Tight budgets gain the most: GPT-2 small at batch 16 in 6.52 GiB (25% "
    "of fp32's ideal peak) is planned at 321 ms in fp32 and 87 ms in bf16, "
    "where vdnn-all, chen-sqrt and superneurons, infeasible in fp32, fit. "
    "At 10% the working copies work against bf16: BERT-base's bf16 lower "
    "bound (2.23 GiB) is above the budget (2.17 GiB), which fp32 meets at "
    "518 ms.",
    "One device model (h100-sxm); docs/benchmarks/transformers.md's "
    "a100-80g tables have no bf16 counterpart here.",
]


def bench_transformers():
    """tools/bench-transformers.py: its configurations and exports."""
    path = os.path.join(os.path.dirname(HERE), "bench-transformers.py")
    spec = importlib.util.spec_from_file_location("bench_transformers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(memfit, *args):
    p = subprocess.run([memfit, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def plan(memfit, model, batch, budget, device, policy, precision, *extra):
    rc, out, err = run(memfit, "plan", model, "--batch", str(batch), "--budget",
                       budget, "--device", device, "--policy", policy,
                       "--precision", precision, "--json", "--bound=false",
                       *extra)
    if rc != 0:
        return None
    return json.loads(out)


def fused(j):
    """How many attentions --fuse-attention auto fused, of how many."""
    note = j.get("attention", "")
    m = re.match(r"attention fused \(all (\d+)\)", note)
    if m:
        return int(m.group(1)), int(m.group(1))
    m = re.match(r"attention fused in the first (\d+) of (\d+)", note)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"attention as the model writes it \((\d+) subgraph", note)
    if m:
        return 0, int(m.group(1))
    return None


def gib(b):
    return f"{b / 2**30:.2f}"


def cell(j):
    if j is None:
        return "infeasible"
    moved = (j["bytes_to_host"] + j["bytes_to_device"]) / 2**30
    text = f"{j['planned_time_ms']:.0f} ms / {moved:.1f} GiB / b={j['sub_batch']}"
    f = fused(j)
    return text + (f" / {f[0]} of {f[1]} fused" if f else "")


def ratio_rows(say, rows):
    say("| | fp32 | bf16 | bf16 / fp32 |")
    say("|---|---|---|---|")
    for label, f, fmt in rows:
        a, b = f("fp32"), f("bf16")
        say(f"| {label} | {fmt(a)} | {fmt(b)} | {b / a:.3f} |")


def transformers(args, device, say):
    """The transformer benchmarks' models, batches and budgets (fractions
    of fp32's ideal peak with attention as the model writes it, as
    docs/benchmarks/transformers.md plans them), bf16 beside fp32."""
    bt = bench_transformers()
    configs, budgets = bt.CONFIGS, bt.BUDGETS
    if args.quick:
        configs, budgets = configs[:1], budgets[1:2]
    work = args.work or tempfile.mkdtemp(prefix="memfit-bench-")
    os.makedirs(work, exist_ok=True)
    common = ["--optimizer", "adamw"]
    ms = lambda v: f"{v:.1f}"
    exporting = 0.0
    for model, batch in configs:
        t0 = time.time()
        path = bt.export(model, work)
        exporting += time.time() - t0
        info, ideal = {}, {}
        for p in PRECISIONS:
            rc, out, err = run(args.memfit, "inspect", path, "--batch",
                               str(batch), "--json", "--summary",
                               "--precision", p, "--fuse-attention=false",
                               *common)
            if rc:
                sys.exit(err)
            info[p] = json.loads(out)
            for form in ("false", "true"):
                ideal[p, form] = plan(args.memfit, path, batch, "100%", device,
                                      "ideal", p, "--fuse-attention=" + form,
                                      *common)
        say()
        say(f"### {model}, batch {batch}, {device}, AdamW")
        say()
        ratio_rows(say, [
            ("keep-all, as written (GiB)",
             lambda p: info[p]["keep_all_bytes"], gib),
            ("weight side (GiB)", lambda p: info[p]["weight_side_bytes"], gib),
            ("lower bound Mmin, as written (GiB)",
             lambda p: info[p]["lower_bound_bytes"], gib),
            ("ideal peak, as written (GiB)",
             lambda p: ideal[p, "false"]["peak_bytes"], gib),
            ("ideal peak, fused (GiB)",
             lambda p: ideal[p, "true"]["peak_bytes"], gib),
            ("ideal iteration, as written (predicted ms)",
             lambda p: ideal[p, "false"]["planned_time_ms"], ms),
            ("ideal iteration, fused (predicted ms)",
             lambda p: ideal[p, "true"]["planned_time_ms"], ms)])
        base = ideal["fp32", "false"]["peak_bytes"]
        for label in budgets:
            f = float(label.rstrip("%")) / 100
            budget = str(int(f * base))
            say()
            say(f"Budget {label} of fp32's ideal peak as written "
                f"({gib(int(f * base))} GiB). Cells: predicted iteration / "
                "GiB moved over PCIe per iteration / sub-batch / attentions "
                "fused by --fuse-attention auto.")
            say()
            say("| policy | fp32 | bf16 |")
            say("|---|---|---|")
            for pol in bt.POLICIES:
                row = [cell(plan(args.memfit, path, batch, budget, device, pol,
                                 p, *common)) for p in PRECISIONS]
                say(f"| {pol} | " + " | ".join(row) + " |")
    return exporting


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true",
                    help="one model of each kind, one budget")
    ap.add_argument("--work", help="keeps the exported transformers "
                    "between runs (default: a temporary directory)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memfit-bench-")
    models = [("resnet50", 256), ("vgg16", 256)]
    fractions = [1.0, 0.5, 0.25]
    device = "h100-sxm"
    if args.quick:
        models, fractions = models[:1], fractions[1:2]
    lines = []
    say = lambda s="": (print(s), lines.append(s))
    say("# Precision: bf16 beside fp32")
    say()
    say("Generated by `tools/bench/precision.py` on the analytic "
        f"`{device}` model (no GPU): every time is a **prediction** of the "
        "cost model, whose tensor-core kernels take the efficiencies "
        "calibrated on FP32 kernels (docs/cost-model.md, \"Precision\"). "
        "Memory figures are exact (sums of planned block bytes).")
    t0 = time.time()
    for name, batch in models:
        path = os.path.join(tmp, name + ".onnx")
        rc, _, err = run(args.memfit, "zoo", name, "-o", path, "--no-weights")
        if rc:
            sys.exit(err)
        info, ideal = {}, {}
        for p in PRECISIONS:
            rc, out, err = run(args.memfit, "inspect", path, "--batch",
                               str(batch), "--json", "--summary",
                               "--precision", p)
            if rc:
                sys.exit(err)
            info[p] = json.loads(out)
            ideal[p] = plan(args.memfit, path, batch, "100%", device, "ideal", p)
        say()
        say(f"## {name}, batch {batch}, {device}")
        say()
        ratio_rows(say, [
            ("keep-all (GiB)", lambda p: info[p]["keep_all_bytes"], gib),
            ("weight side (GiB)", lambda p: info[p]["weight_side_bytes"], gib),
            ("lower bound Mmin (GiB)", lambda p: info[p]["lower_bound_bytes"],
             gib),
            ("ideal peak (GiB)", lambda p: ideal[p]["peak_bytes"], gib),
            ("ideal iteration (predicted ms)",
             lambda p: ideal[p]["planned_time_ms"], lambda v: f"{v:.1f}")])
        base = ideal["fp32"]["peak_bytes"]
        budgets = [(f"{int(100 * f)}% of fp32's ideal peak ({gib(int(f * base))} GiB)",
                    str(int(f * base))) for f in fractions]
        for label, budget in budgets:
            say()
            say(f"Budget {label}. Cells: predicted iteration / GiB moved "
                "over PCIe per iteration / sub-batch.")
            say()
            say("| policy | fp32 | bf16 |")
            say("|---|---|---|")
            for pol in POLICIES:
                row = [cell(plan(args.memfit, path, batch, budget, device, pol,
                                 p)) for p in PRECISIONS]
                say(f"| {pol} | " + " | ".join(row) + " |")
    say()
    say("Notes on the CNNs:")
    say("- Activations halve exactly (keep-all 0.500). The weight side grows "
        "by the bf16 working copies of the convolution and fc weights (2 "
        "bytes a parameter beside fp32 master weights, gradients and "
        "momentum), so Mmin, set at sub-batch 1, grows too.")
    say("- An ideal peak below half of fp32's (VGG-16) is the algorithm "
        "choice: tensor cores make the zero-workspace implicit-GEMM "
        "convolutions fastest, where fp32 plans pick FFT and Winograd "
        "algorithms with large workspaces.")
    say("- The times assume tensor-core kernels reach the fraction of their "
        "peak that the calibrated fp32 kernels of their class reach; no "
        "tensor-core measurement checks it yet, so read the bf16 columns as "
        "an optimistic model (PyTorch's bf16 ResNet-50 on an H100 SXM "
        "trains at about 3000 images/s, 85 ms per batch of 256, against the "
        "68 ms predicted here).")
    cnn_seconds = time.time() - t0
    say()
    say("## Transformers")
    say()
    say("The models, batches, budgets and policies of "
        "docs/benchmarks/transformers.md (`tools/bench-transformers.py`), "
        "trained with AdamW, on the same analytic device model: every time "
        "is again a **prediction**. Budgets are fractions of fp32's ideal "
        "peak with attention as the model writes it (the peak that "
        "benchmark takes its fractions of), the same bytes for both "
        "precisions. Each plan is memfit's default, `--fuse-attention "
        "auto`: of the model as written and with 3, 6, 9 or all of its "
        "attentions fused, the fastest that fits. Fused attention runs "
        "memfit's own kernel, which reads bf16 but multiplies in fp32, so "
        "the model prices it at the FP32 rate in both columns; the "
        "materialized form's two BatchMatMuls run on tensor cores in bf16 "
        "(docs/cost-model.md, \"Precision\").")
    t1 = time.time()
    exporting = transformers(args, device, say)
    say()
    say("Notes on the transformers:")
    for note in TRANSFORMER_NOTES:
        say("- " + note)
    say()
    exported = (f"exporting them with torch {exporting:.0f} s"
                if exporting >= 1 else
                "their exports kept from an earlier run (--work)")
    say(f"(run time {time.time() - t0:.0f} s on the 2-core development "
        f"machine: the CNNs {cnn_seconds:.0f} s, the transformers "
        f"{time.time() - t1 - exporting:.0f} s, {exported})")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
