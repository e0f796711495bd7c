#!/usr/bin/env python3
"""memfit's plans with weights homed on the host (docs/benchmarks/offload.md,
"Plans with weights homed on the host").

Plans the zoo's GPT-2 medium and Llama-2 7B/70B (weights as graph inputs,
no data) with AdamW under budgets far below their weight sides, with host
memory and NVMe, and prints a row per plan: where the weights live, the
predicted iteration time beside the proven bound and the all-on-GPU ideal,
tokens per second and achieved TFLOPS (6 x parameters x tokens), the copy
traffic, and the planning time (user and wall seconds of `memfit plan`,
`--bound` included). Every time but the planning time is a prediction of
the analytic model.

usage: tools/bench/homed_plans.py [--memfit build/tools/memfit]
       [--only MODEL] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

from offload_papers import params_of, user_seconds

DEVICES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "docs", "benchmarks", "devices")

# label, model, T, batch, device (built-in name or file), budget, host
# budget, extra flags
ROWS = [
    ("", "gpt2-medium", 256, 8, "h100-sxm", "1GiB", "64GiB", []),
    ("", "llama-7b", 1024, 4, "h100-sxm", "24GiB", "250GiB", []),
    ("(a)", "llama-70b", 4096, 1, "h100-sxm-2tib", "80GiB", "1000GiB", []),
    ("(b)", "llama-70b", 4096, 1, "h100-sxm-1tib-8nvme", "80GiB", "600GiB",
     ["--nvme-budget", "3000GiB"]),
    ("(b)", "llama-70b", 4096, 1, "h100-sxm-1tib-1nvme", "80GiB", "600GiB",
     ["--nvme-budget", "3000GiB"]),
    ("(c)", "llama-70b", 4096, 1, "h100-sxm-1tib-8nvme", "80GiB", "256GiB",
     ["--nvme-budget", "3000GiB", "--precision", "bf16"]),
    ("(c)", "llama-70b", 4096, 1, "h100-sxm-1tib-1nvme", "80GiB", "256GiB",
     ["--nvme-budget", "3000GiB", "--precision", "bf16"]),
]


def device_file(memfit, name, tmp):
    """A device file's path: docs/benchmarks/devices/NAME.json, or for
    h100-sxm-2tib the built-in h100-sxm with a whole DGX H100's 2 TiB of
    host memory for its one GPU."""
    path = os.path.join(DEVICES, name + ".json")
    if os.path.exists(path):
        return path
    if name != "h100-sxm-2tib":
        return name  # built in
    d = json.loads(subprocess.run([memfit, "device", "h100-sxm"],
                                  capture_output=True, text=True,
                                  check=True).stdout)
    d["name"] = name
    d["host_memory_gib"] = 2048.0
    d["description"] = ("h100-sxm with a whole DGX H100's 2 TiB of host "
                        "memory for one GPU (tools/bench/homed_plans.py)")
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(d, f)
    return path


def gib(b):
    return f"{b / 2**30:,.2f} GiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--only")
    ap.add_argument("--out")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memfit-homed-plans-")
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("| model | batch x T | device | budget | host budget | homed "
        "(weights, bytes) | GPU resident | predicted ms/iter | proven bound "
        "ms (plan above) | ideal ms (all on GPU) | tokens/s (TFLOPS) | to "
        "device / to host per iter | planning (user s / wall s) |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, model, seq, batch, device, budget, host, extra in ROWS:
        if args.only and args.only != model:
            continue
        onnx = os.path.join(tmp, f"{model}-{seq}.onnx")
        if not os.path.exists(onnx):
            subprocess.run([args.memfit, "zoo", model, "--seq-len", str(seq),
                            "-o", onnx], check=True, capture_output=True)
        params = params_of(args.memfit, onnx)
        out = os.path.join(tmp, "plan")
        cmd = [args.memfit, "plan", onnx, "--batch", str(batch), "--device",
               device_file(args.memfit, device, tmp), "--budget", budget,
               "--host-budget", host, "--optimizer", "adamw", "--bound",
               "--force", "-o", out, *extra]
        before, wall0 = user_seconds(), time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        took, wall = user_seconds() - before, time.monotonic() - wall0
        precision = extra[extra.index("--precision") + 1] \
            if "--precision" in extra else "fp32"
        name = f"{model} ({params / 1e9:.2f}B)" if params else model
        if precision != "fp32":
            name += f", {precision}"
        hostcol = host + (" + NVMe" if "--nvme-budget" in extra else "")
        row = (f"| {name} | {batch} x {seq} | `{device}` {label} | {budget} | "
               f"{hostcol} |")
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or ["?"])[-1]
            say(row + f" no: {why[:160]} | | | | | | | "
                f"{took:.1f} / {wall:.1f} |")
            continue
        s = json.load(open(os.path.join(out, "plan.json")))["summary"]
        ms = s["planned_time_ms"]
        tokens = batch * seq / (ms / 1e3)
        tflops = 6 * (params or 0) * tokens / 1e12
        bound = s.get("bound_seconds")
        above = (f"{bound * 1e3:,.0f} ({(ms / (bound * 1e3) - 1) * 100:.1f}%)"
                 if bound else "-")
        homed = f"{s.get('host_homed_weights', 0)}, " + gib(
            s.get("host_memory_bytes", s.get("host_home_bytes", 0)))
        if s.get("grad_pool_bytes"):
            homed += (f" ({gib(s['pooled_grad_bytes'])} of gradients through "
                      f"a {gib(s['grad_pool_bytes'])} pool)")
        if s.get("nvme_home_bytes"):
            homed += (f" + {gib(s['nvme_home_bytes'])} NVMe "
                      f"({s.get('nvme_state_weights', 0)} weights' moments, "
                      f"{s.get('nvme_master_weights', 0)} masters)")
        say(row + f" {homed} | {gib(s['resident_bytes'])} | {ms:,.0f} | "
            f"{above} | {s['ideal_time_ms']:,.0f} | {tokens:,.0f} "
            f"({tflops:.1f}) | {gib(s['bytes_to_device'])} / "
            f"{gib(s['bytes_to_host'])} | {took:.1f} / {wall:.1f} |")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
