#!/usr/bin/env python3
"""The host optimizer's rate (docs/benchmarks/offload.md, "Host optimizer").

Times runtime/host's Adam (AdamW) and SGD with momentum on this machine
(memfit_host_optimizer_bench: one tensor of --params fp32 parameters, 1 and
2 threads, the median and the fastest of --repeats steps), and lists beside
them the rates the built-in devices' hosts imply (`memfit device --json`:
host memory bandwidth over the 28 and 20 bytes an update moves; derived
from datasheets, not measured). Writes the section into --out, replacing
the previous one.

usage: tools/bench/host_optimizer.py [--bench build/tools/memfit_host_optimizer_bench]
           [--memfit build/tools/memfit] [--params 67108864] [--repeats 7]
           [--threads 1,2] [--date YYYY-MM-DD] [--out docs/benchmarks/offload.md]
"""
import argparse
import datetime
import json
import os
import re
import subprocess

ADAM_BYTES, SGD_BYTES = 28, 20  # compiler/cost/DeviceSpec.h

# What the table shows, below it.
NOTE = """Both loops vectorize (GCC 12, `-O3 -fno-math-errno -ffp-contract=off`,
`-fopt-info-vec-optimized`: "loop vectorized using 16 byte vectors" for
`adamRange` and `sgdRange`, runtime/host/HostOptimizer.cpp). SGD is
memory-bound; AdamW here is not: `kernels::adamAt`, the one element
function of all backends, takes the square root and the division in
double, 2 lanes wide on the baseline x86-64 the runtime is built for, so a
core updates about 80 Mparam/s. The derived figures above assume a
memory-bound update; at that per-core rate a DGX H100 GPU's 14 cores would
reach roughly 1.1 Gparam/s, below the 2.7 derived (an estimate from this
machine's core, not a measurement there). A device file's
`host_adam_mparams_per_s` states a measured rate where one exists.
"""


def measure(bench, params, threads, repeats):
    out = subprocess.run([bench, str(params), str(threads), str(repeats)],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def section(rows, devices, params, repeats, date, load):
    names = {"adamw": "AdamW", "sgd-momentum": "SGD, momentum"}
    out = ["## Host optimizer", "",
           f"Measured {date} on this machine (2 shared cores, loaded: load "
           f"average {load} during the run, so the median is what other "
           "work left over and the fastest step is the closer estimate of the "
           "cores' own rate): `tools/bench/host_optimizer.py`, one tensor "
           f"of {params / 2**20:.0f}M fp32 parameters, median and fastest "
           f"of {repeats} steps after a warm-up. GB/s counts the bytes an "
           f"update moves ({ADAM_BYTES} B a parameter for Adam, {SGD_BYTES} "
           "for SGD with momentum).", "",
           "| optimizer | threads | Mparam/s median | Mparam/s fastest "
           "| GB/s median | GB/s fastest |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {names[r['optimizer']]} | {r['threads']} "
                   f"| {r['median_params_per_s'] / 1e6:.0f} "
                   f"| {r['best_params_per_s'] / 1e6:.0f} "
                   f"| {r['median_gbps']:.2f} | {r['best_gbps']:.2f} |")
    out += ["", "Beside them, the rates the built-in devices' hosts imply "
            "(derived from datasheets, not measured: the host memory "
            "bandwidth per GPU over the bytes an update moves, "
            "docs/cost-model.md, \"Hosts\"):", "",
            "| device | host cores | host GB/s | AdamW Mparam/s (derived) "
            "| SGD Mparam/s (derived) |", "|---|---|---|---|---|"]
    for d in devices:
        gbps = d.get("host_memory_gbps")
        if not gbps:
            continue
        out.append(f"| `{d['name']}` | {d.get('host_cores', '-')} | {gbps:.1f} "
                   f"| {gbps * 1e3 / ADAM_BYTES:.0f} "
                   f"| {gbps * 1e3 / SGD_BYTES:.0f} |")
    return "\n".join(out) + "\n\n" + NOTE


def write(path, text):
    old = open(path).read() if os.path.exists(path) else \
        "# Offload: weight-side tensors off the GPU\n\n"
    pat = re.compile(r"^## Host optimizer\n.*?(?=^## |\Z)", re.M | re.S)
    new = pat.sub(lambda m: text + "\n", old) if pat.search(old) else \
        old.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(new)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/tools/memfit_host_optimizer_bench")
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--params", type=int, default=64 << 20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for t in a.threads.split(","):
        rows += measure(a.bench, a.params, int(t), a.repeats)
    load = f"{os.getloadavg()[0]:.1f}"
    devices = json.loads(subprocess.run([a.memfit, "device", "--json"],
                                        capture_output=True, text=True,
                                        check=True).stdout)
    text = section(rows, devices, a.params, a.repeats, a.date, load)
    print(text, end="")
    if a.out:
        write(a.out, text)


if __name__ == "__main__":
    main()
