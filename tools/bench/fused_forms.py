#!/usr/bin/env python3
"""Fused forms against the model as written: predicted time and memory.

For each model, batch and budget (a percentage of the model as written's
ideal peak), plans with --fuse auto (the default: the fused forms, or the
model as written where that planned faster) and with --fuse none, and
prints both predicted iteration times, the ideal peaks and lower bounds,
and the default's choice. Predictions of memfit's cost model, not
measurements.

usage: tools/bench/fused_forms.py [--memfit build/tools/memfit]
       --models a.onnx,b.onnx [--batch 32] [--budgets 100,50,25]
       [--device h100-sxm] [--out F]
"""
import argparse
import json
import os
import subprocess
import sys


def plan(memfit, onnx, batch, device, budget, extra):
    p = subprocess.run([memfit, "plan", onnx, "--batch", str(batch),
                        "--budget", budget, "--device", device, "--json",
                        "--quiet"] + extra, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--models", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--budgets", default="100,50,25")
    ap.add_argument("--device", default="h100-sxm")
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say("| model | budget | pairs fused | default ms | --fuse none ms | "
        "default over none | ideal peak (default, none) | lower bound "
        "(default, none) | chosen |")
    say("|---|---|---|---|---|---|---|---|---|")
    mib = lambda b: f"{b / 2**20:.1f}"
    for onnx in args.models.split(","):
        name = os.path.basename(onnx).removesuffix(".onnx")
        for budget in args.budgets.split(","):
            b = budget + "%"
            d = plan(args.memfit, onnx, args.batch, args.device, b, [])
            n = plan(args.memfit, onnx, args.batch, args.device, b,
                     ["--fuse", "none"])
            if not d or not n:
                say(f"| {name} | {b} | - | {'-' if not d else ''} | "
                    f"{'-' if not n else ''} | | | | does not fit |")
                continue
            note = d.get("fuse", "")
            pairs = note.split(" ")[0] if note and note[0].isdigit() else \
                (note.split("the ")[1].split(" ")[0] if "the " in note else "0")
            chosen = "as written" if note.startswith("as written") else \
                ("fused" if note else "nothing to fuse")
            dt, nt = d["planned_seconds"] * 1e3, n["planned_seconds"] * 1e3
            say(f"| {name} | {b} | {pairs} | {dt:.2f} | {nt:.2f} | "
                f"{(dt / nt - 1) * 100:+.1f}% | {mib(d['ideal_peak_bytes'])}, "
                f"{mib(n['ideal_peak_bytes'])} MiB | "
                f"{mib(d['lower_bound_bytes'])}, "
                f"{mib(n['lower_bound_bytes'])} MiB | {chosen} |")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
