#!/usr/bin/env python3
"""memfit's default plan against every plan it makes with a choice forced.

For each model, batch and budget (a percentage of the ideal peak), plans
once with memfit's defaults and, at the bytes that percentage gave it, once
per forced choice the command line offers: every sub-batch ceil(B / K) (K = 1..B, the sizes a search over
sub-batch counts can reach) and the halvings of the batch, each order
(--order join-aware, model), each attention form (--fuse-attention true,
false) where the model has attention, each head form (--fuse-head true,
false) where its head can be fused with the loss, the model as written
(--fuse none) where it has fused forms, and --chunks for each
divisor of the batch where the model has BatchNorm; exact, and with --sub-batch-statistics
where asked. A case fails when the default is more than --tolerance slower
than the best feasible forced plan, or infeasible where a forced plan is
feasible; the failure names the flags that won.

usage: tools/bench/forced.py [--memfit build/tools/memfit] --models a,b
       [--batch 16] [--budgets 75,50,25] [--device h100-sxm]
       [--statistics] [--tolerance 0.005] [--max-sub-batches 12] [--out F]
Exit status 1 when a case fails (the property test, tests/cli/forced.sh).
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile


def plan(memfit, onnx, out, batch, device, budget, extra):
    """The plan's time and its budget in bytes; (None, None) when none."""
    cmd = [memfit, "plan", onnx, "--batch", str(batch), "--device", device,
           "--budget", budget, "--bound=false", "-o", out, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, None
    j = json.load(open(os.path.join(out, "plan.json")))
    s = j["summary"]
    if not s.get("feasible"):
        return None, None
    return s["planned_seconds"], j["budget_bytes"]


def sub_batches(batch, limit):
    sizes = {(batch + k - 1) // k for k in range(1, batch + 1)}
    s = batch
    while s >= 1:
        sizes.add(s)
        s //= 2
    sizes = sorted(sizes, reverse=True)
    if len(sizes) > limit:  # spread over the range, both ends kept
        step = (len(sizes) - 1) / (limit - 1)
        sizes = sorted({sizes[round(i * step)] for i in range(limit)},
                       reverse=True)
    return sizes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--models", required=True,
                    help="zoo names or ONNX files, comma-separated")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--budgets", default="75,50,25")
    ap.add_argument("--device", default="h100-sxm")
    ap.add_argument("--statistics", action="store_true",
                    help="also with --sub-batch-statistics")
    ap.add_argument("--tolerance", type=float, default=0.005)
    ap.add_argument("--max-sub-batches", type=int, default=12)
    ap.add_argument("--plan-flags", default="",
                    help="flags every plan takes (e.g. '--library-reserve 0' "
                    "for tiny models)")
    ap.add_argument("--out")
    args = ap.parse_args()
    common = args.plan_flags.split()
    tmp = tempfile.mkdtemp(prefix="memfit-forced-")
    # Its plans (20 MB a run) go with it, on every way out.
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    lines, failures, worst = [], [], (0.0, "")

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("| model | batch | budget | mode | default ms | best forced ms | "
        "flags of the best | default over best |")
    say("|---|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        onnx = model
        if not model.endswith(".onnx"):
            onnx = os.path.join(tmp, model + ".onnx")
            subprocess.run([args.memfit, "zoo", model, "-o", onnx],
                           check=True, capture_output=True)
        name = os.path.basename(model)
        probe = subprocess.run([args.memfit, "inspect", onnx, "--batch",
                                str(args.batch), "--json"],
                               capture_output=True, text=True, check=True)
        counts = json.loads(probe.stdout).get("task_counts", {})
        has_bn = any("BatchNorm" in k for k in counts) or \
            "BatchNormalization" in probe.stdout
        text = subprocess.run([args.memfit, "inspect", onnx, "--batch",
                               str(args.batch)],
                              capture_output=True, text=True, check=True)
        # The forms the default chooses between (--fuse-attention and
        # --fuse-head auto), each forced.
        forms = []
        if " Attention " in text.stdout:
            forms += [["--fuse-attention", "true"],
                      ["--fuse-attention", "false"]]
        if json.loads(probe.stdout).get("head", {}).get("fusable"):
            forms += [["--fuse-head", "true"], ["--fuse-head", "false"]]
        if json.loads(probe.stdout).get("fused_forms"):
            forms += [["--fuse", "none"]]
        modes = [[]] + ([["--sub-batch-statistics"]]
                         if args.statistics and has_bn else [])
        for budget in args.budgets.split(","):
            for mode in modes:
                b = budget + "%"
                key = f"{name}-{budget}-{'s' if mode else 'e'}"
                run = lambda extra, tag, budget: plan(
                    args.memfit, onnx, os.path.join(tmp, f"{key}-{tag}"),
                    args.batch, args.device, budget, mode + common + extra)
                # A percentage is of the ideal peak in the plan's own order
                # and forms, which a forced flag changes: the forced plans
                # get the default's budget in bytes, so that every plan
                # has the same memory.
                default, budget_bytes = run([], "default", b)
                same = str(budget_bytes) if budget_bytes else b
                forced = []
                for sb in sub_batches(args.batch, args.max_sub_batches):
                    forced.append((["--sub-batch", str(sb)], f"sb{sb}"))
                forced.append((["--order", "model"], "order-model"))
                for f in forms:
                    forced.append((f, "-".join(x.strip("-") for x in f)))
                if has_bn:
                    for c in range(2, args.batch + 1):
                        if args.batch % c == 0:
                            forced.append((["--chunks", str(c)], f"ch{c}"))
                best, best_flags = None, None
                for extra, tag in forced:
                    t, _ = run(extra, tag, same)
                    if t is not None and (best is None or t < best):
                        best, best_flags = t, extra
                label = "statistics" if mode else "exact"
                if best is None:
                    ratio = "-"
                elif default is None:
                    ratio = "default infeasible"
                    failures.append((name, b, label, best_flags))
                else:
                    r = default / best - 1
                    ratio = f"{r * 100:+.2f}%"
                    if r > worst[0]:
                        worst = (r, f"{name} {b} {label}")
                    if r > args.tolerance:
                        failures.append((name, b, label, best_flags))
                fmt = lambda t: "-" if t is None else f"{t * 1e3:.3f}"
                say(f"| {name} | {args.batch} | {b} | {label} | "
                    f"{fmt(default)} | {fmt(best)} | "
                    f"`{' '.join(best_flags or [])}` | {ratio} |")
    say()
    say(f"Worst: the default {worst[0] * 100:.2f}% over the best forced plan"
        f"{' (' + worst[1] + ')' if worst[1] else ''}.")
    for name, b, label, flags in failures:
        say(f"FAIL: {name} at {b} ({label}): the default loses to "
            f"{' '.join(flags)}")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
