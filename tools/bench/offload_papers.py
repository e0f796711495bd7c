#!/usr/bin/env python3
"""memfit's plans at the offload papers' settings (docs/benchmarks/offload.md).

For each setting (ZeRO-Offload: one V100 32 GB with a DGX-2's host; Fuyou
and LoHan: one RTX 4090 with 768 GB or 256 GB of host memory and NVMe;
MegaTrain: one H200 with 1.5 TB of host memory), plans the zoo's GPT-3 and
Llama-2 decoders with their weights as graph inputs and prints, per row:
whether it plans, the predicted iteration time, tokens per second and
achieved TFLOPS (6 x parameters x tokens), the distance to the proven bound,
where the weight side lives, and the planning time. Everything here is a
prediction of the analytic model on device files whose hosts are partly
assumed (each file's description says which figures are).

usage: tools/bench/offload_papers.py [--memfit build/tools/memfit]
       [--only SETTING] [--out FILE]
"""
import argparse
import json
import os
import resource
import subprocess
import tempfile

DEVICES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "docs", "benchmarks", "devices")

# setting, device file, precision, model, T, batch, extra flags; a model
# "NAME:L" is the zoo's NAME with L decoder layers (`memfit zoo --layers`).
ROWS = [
    ("ZeRO-Offload", "v100-dgx2-host", "fp16", "gpt3-13b", 1024, 8, []),
    ("ZeRO-Offload", "v100-dgx2-host", "fp16", "gpt3-13b", 1024, 32, []),
    ("ZeRO-Offload", "v100-dgx2-host", "fp16", "llama-70b", 1024, 1, []),
    ("Fuyou", "rtx4090-768g-2nvme", "bf16", "gpt3-13b", 1024, 8, []),
    ("Fuyou", "rtx4090-768g-2nvme", "bf16", "gpt3-13b", 1024, 32, []),
    ("Fuyou", "rtx4090-768g-2nvme", "bf16", "llama-70b", 1024, 1,
     ["--nvme-budget", "7000GiB"]),
    ("Fuyou", "rtx4090-768g-2nvme", "bf16", "gpt3-175b", 1024, 1,
     ["--nvme-budget", "7000GiB"]),
    ("LoHan", "rtx4090-256g-2nvme", "bf16", "gpt3-13b", 1024, 8,
     ["--nvme-budget", "7000GiB"]),
    ("LoHan", "rtx4090-256g-2nvme", "bf16", "llama-70b", 1024, 1,
     ["--nvme-budget", "7000GiB"]),
    ("LoHan", "rtx4090-256g-2nvme", "bf16", "gpt3-175b", 1024, 1,
     ["--nvme-budget", "7000GiB"]),
    ("MegaTrain", "h200-1.5tb-host", "bf16", "llama-7b", 1024, 64, []),
    ("MegaTrain", "h200-1.5tb-host", "bf16", "llama-70b", 1024, 8, []),
    ("MegaTrain", "h200-1.5tb-host", "bf16", "gpt3-175b:66", 1024, 8, []),
    ("MegaTrain", "h200-1.5tb-host", "bf16", "gpt3-175b", 1024, 8, []),
]


def user_seconds():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime


def params_of(memfit, onnx):
    out = subprocess.run([memfit, "inspect", onnx, "--batch", "1", "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout).get("parameters")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--only")
    ap.add_argument("--out")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memfit-offload-papers-")
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("| setting | device file | precision | model | batch x T | plans | "
        "predicted ms/iter | tokens/s | TFLOPS | proven bound (plan above) | "
        "host / NVMe homes | GPU resident | planning user s |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for setting, device, precision, model, seq, batch, extra in ROWS:
        if args.only and args.only != setting:
            continue
        name, _, layers = model.partition(":")
        onnx = os.path.join(tmp, f"{name}-{layers or 'own'}-{seq}.onnx")
        if not os.path.exists(onnx):
            subprocess.run([args.memfit, "zoo", name, "--seq-len", str(seq),
                            *(["--layers", layers] if layers else []),
                            "-o", onnx], check=True, capture_output=True)
        if layers:
            model = f"{name} --layers {layers}"
        params = params_of(args.memfit, onnx)
        out = os.path.join(tmp, f"{setting}-{name}-{layers}-{batch}")
        dev = os.path.join(DEVICES, device + ".json")
        # The whole GPU: its memory as the device file states it.
        budget = f"{json.load(open(dev))['memory_gib']:g}GiB"
        cmd = [args.memfit, "plan", onnx, "--batch", str(batch), "--device",
               dev, "--budget", budget, "--host-budget", "host",
               "--optimizer", "adamw", "--precision", precision, "--bound",
               "-o", out, *extra]
        before = user_seconds()
        p = subprocess.run(cmd, capture_output=True, text=True)
        took = user_seconds() - before
        row = f"| {setting} | `{device}` ({budget}) | {precision} | `{model}` " \
              f"| {batch} x {seq} |"
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or ["?"])[-1]
            why = why.replace(tmp + os.sep, "")
            say(row + f" no: {why[:240]} | | | | | | | {took:.1f} |")
            continue
        s = json.load(open(os.path.join(out, "plan.json")))["summary"]
        ms = s["planned_time_ms"]
        tokens = batch * seq / (ms / 1e3)
        tflops = 6 * (params or 0) * tokens / 1e12
        bound = s.get("bound_seconds")
        above = (f"{bound * 1e3:,.0f} ms ({(ms / (bound * 1e3) - 1) * 100:.1f}%)"
                 if bound else "-")
        # Pinned host memory: the homes, with a gradient pool in place of
        # the gradients that stream through it.
        host = s.get("host_memory_bytes", s.get("host_home_bytes", 0))
        homes = f"{host / 2**30:,.1f} GiB"
        if s.get("grad_pool_bytes"):
            homes += (f" (gradients through a {s['grad_pool_bytes'] / 2**30:,.1f}"
                      " GiB pool)")
        if s.get("rounded_copy_nvme_weights"):
            homes += (" (16-bit copies rounded from the masters, those of "
                      f"{s['rounded_copy_nvme_weights']} weights read from "
                      "NVMe)")
        elif s.get("rounded_copy_weights"):
            homes += " (16-bit copies rounded from the masters)"
        if s.get("nvme_home_bytes"):
            homes += f" / {s['nvme_home_bytes'] / 2**30:,.1f} GiB"
        say(row + f" yes | {ms:,.0f} | {tokens:,.0f} | {tflops:.1f} | "
            f"{above} | {homes} | {s['resident_bytes'] / 2**30:.1f} GiB | "
            f"{took:.1f} |")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
