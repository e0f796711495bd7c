#!/usr/bin/python3
"""Fused against materialized attention: the attention table of
docs/benchmarks/transformers.md.

usage: bench-attention.py MEMFIT WORKDIR [--lengths 512,1024,...] [--out FILE]

Exports GPT-2 small (124M parameters, tied embeddings, 12 layers of causal
attention written with MatMul, Softmax and a masked fill; the model of
tests/e2e/today_models.py) at each sequence length T with Debian's torch
into WORKDIR (kept between runs), then at batch 8 on the H100 SXM device
model with AdamW, three ways: --fuse-attention=false (the scores stored),
=true (every attention fused) and auto (plan's default: the fastest of
none, a quarter, half, three quarters or all of the attentions fused):

  keep-all, ideal peak and lower bound (memfit inspect / plan)
  the predicted iteration time at fixed budgets (4, 8, 16 and 32 GiB), with
  its overhead over the same graph's ideal schedule; for auto, how many of
  the 12 attentions it fused

Every time is a prediction of memfit's analytic device model; nothing here
ran on a GPU. Memory figures are memfit's accounting of its own plans.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
BATCH = 8
DEVICE = "h100-sxm"
BUDGETS = ["4GiB", "8GiB", "16GiB", "32GiB"]


def export(work, t):
    path = os.path.join(work, f"gpt2-small-t{t}.onnx")
    if os.path.exists(path):
        return path
    code = f"""
import sys, warnings, torch
sys.path.insert(0, {os.path.join(ROOT, 'tests', 'e2e')!r})
import today_models as tm
warnings.filterwarnings("ignore")
torch.manual_seed(0)
m = tm.GPT(50257, {t}, 768, 12, 12, tied=True)
x = torch.zeros(1, {t}, dtype=torch.long)
with torch.no_grad():  # the trace needs no autograd state (T x T per layer)
    torch.onnx.export(m, x, {path!r}, opset_version=17, input_names=["x"],
                      output_names=["y"],
                      dynamic_axes={{"x": {{0: "N"}}, "y": {{0: "N"}}}},
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
"""
    print(f"exporting GPT-2 small at T={t}", file=sys.stderr)
    subprocess.run([PY, "-c", code], check=True)
    return path


def gib(b):
    return "%.2f" % (b / 2**30)


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    return out.returncode, out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("memfit")
    ap.add_argument("work")
    ap.add_argument("--lengths", default="512,1024,2048,4096")
    ap.add_argument("--out")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    lines = ["| T | attention | keep-all GiB | ideal peak GiB | lower bound GiB "
             "| " + " | ".join(f"ms at {b}" for b in BUDGETS) +
             " | planning s |",
             "|---|---|---|---|---|" + "---|" * len(BUDGETS) + "---|"]
    for t in [int(v) for v in args.lengths.split(",")]:
        path = export(args.work, t)
        for mode in ("false", "true", "auto"):
            flag = ["--fuse-attention=" + mode]
            common = [path, "--batch", str(BATCH), "--optimizer", "adamw"]
            ins = None
            if mode != "auto":
                rc, out = run([args.memfit, "inspect", *common, "--json",
                               *flag])
                ins = json.loads(out)
            cells, peak, secs = [], None, 0.0
            for budget in BUDGETS:
                start = time.time()
                rc, out = run([args.memfit, "plan", *common, "--device", DEVICE,
                               "--budget", budget, "--json", "--quiet", *flag])
                secs = max(secs, time.time() - start)
                if rc != 0 or not out.strip():
                    cells.append("-")
                    continue
                p = json.loads(out)
                if not p.get("feasible"):
                    cells.append("-")
                    continue
                peak = p["ideal_peak_bytes"]
                cell = "%.1f (+%.1f%%)" % (p["planned_time_ms"],
                                           100 * p["overhead"])
                m = re.search(r"first (\d+) of|all (\d+)", p.get("attention", ""))
                if mode == "auto":
                    k = "0" if not m else (m.group(1) or m.group(2))
                    cell += f" [{k}]"
                cells.append(cell)
            label = {"false": "materialized", "true": "fused",
                     "auto": "memfit's choice [fused]"}[mode]
            lines.append(
                f"| {t} | {label} | "
                f"{gib(ins['keep_all_bytes']) if ins else ''} | "
                f"{gib(peak) if peak and ins else ''} | "
                f"{gib(ins['lower_bound_bytes']) if ins else ''} | " +
                " | ".join(cells) + f" | {secs:.1f} |")
            print(lines[-1], file=sys.stderr)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
