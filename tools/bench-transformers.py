#!/usr/bin/python3
"""Transformer memory benchmark: docs/benchmarks/transformers.md.

usage: bench-transformers.py MEMFIT WORKDIR [--out FILE] [--quick]

Exports GPT-2 small (124M parameters, T=1024, tied embeddings), BERT-base
(T=512, built from torch.nn.TransformerEncoder) and torchvision's ViT-B/16
with Debian's torch into WORKDIR (kept between runs), then for each model,
batch and device model (H100 SXM, A100 80GB), trained with AdamW:

  keep-all     every forward intermediate kept (memfit inspect)
  ideal peak   the peak of memfit's schedule without offload or recompute
  lower bound  weights, gradients, AdamW state and the largest task
  memfit compare at 75/50/25/10% of the ideal peak: each policy's overhead
  PyTorch practice, estimated from the same task costs and sizes:
    per-layer checkpointing (torch.utils.checkpoint around every block)
    selective recomputation of the attention core (Korthikanti et al.)

Every time is a prediction of memfit's analytic device model; nothing here
ran on a GPU. Planning time is measured on this machine.
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

CONFIGS = [  # model, batch
    ("gpt2-small", 8),
    ("gpt2-small", 16),
    ("bert-base", 32),
    ("vit_b_16", 64),
]
DEVICES = ["h100-sxm", "a100-80g"]
BUDGETS = ["75%", "50%", "25%", "10%"]
POLICIES = ["vdnn-all", "modnn", "chen-sqrt", "superneurons", "memfit"]
LAYER = re.compile(r"(?:blocks\.|layers\.|encoder_layer_)(\d+)")


def export(model, work):
    path = os.path.join(work, model + ".onnx")
    if os.path.exists(path):
        return path
    if model == "vit_b_16":
        cmd = [PY, os.path.join(HERE, "export-torchvision.py"), model, path,
               "--opset", "17"]
    else:
        cmd = [PY, os.path.join(ROOT, "tests", "e2e", "today_models.py"),
               model, path, path + ".x.npy", path + ".y.npy", "--batch", "1",
               "--no-data"]
    print("exporting", model, file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def gib(b):
    return "%.2f GiB" % (b / 2**30)


def estimates(plan, ops, weight_side):
    """PyTorch's two common recomputation strategies, estimated from the
    ideal plan's task times and block sizes (P: the ideal peak, W: weights,
    gradients and optimizer state, L layers):

    checkpoint every layer: only each layer's input stays through the
      forward, and one layer's saved activations at a time are live again
      in the backward: W + sum of layer outputs + (P - W) / L; every layer's
      forward runs twice.
    selective (Korthikanti et al., 2022): the attention probabilities (the
      softmax output, T x T per head, the largest saved tensor) are
      recomputed from Q and K: P - sum of softmax outputs; the attention
      core's forward (QK^T, scale, mask, softmax) runs twice.
    """
    shapes = {o["name"]: o["shape"] for o in ops}
    fwd, out_bytes, soft_bytes, attn_fwd = {}, {}, {}, {}
    for t in plan["tasks"]:
        if t["kind"] != "FP" or t["recompute"]:
            continue
        m = LAYER.search(t["node"])
        if not m:
            continue
        b = int(m.group(1))
        fwd[b] = fwd.get(b, 0.0) + t["end"] - t["start"]
        shape = shapes.get(t["node"], [])
        if len(shape) >= 3 and shape[-1] == shape[-2] and t["op"] in (
                "MatMul", "Div", "Mul", "Where", "Softmax", "Add"):
            attn_fwd[b] = attn_fwd.get(b, 0.0) + t["end"] - t["start"]
    for blk in plan["blocks"]:
        if blk["kind"] != "Y" or blk.get("view_of"):
            continue
        m = LAYER.search(blk["node"])
        if not m:
            continue
        b = int(m.group(1))
        out_bytes[b] = blk["bytes"]  # blocks follow op order: the last wins
        shape = shapes.get(blk["node"], [])
        op = next((o["type"] for o in ops if o["name"] == blk["node"]), "")
        if op == "Softmax" and len(shape) >= 3 and shape[-1] == shape[-2]:
            soft_bytes[b] = soft_bytes.get(b, 0) + blk["bytes"]
    s = plan["summary"]
    peak, ideal = s["ideal_peak_bytes"], s["ideal_seconds"]
    layers = len(out_bytes)
    if not layers:
        return None
    ckpt_peak = weight_side + sum(out_bytes.values()) + (
        peak - weight_side) / layers
    return {"layers": layers,
            "ckpt": (ckpt_peak, sum(fwd.values()) / ideal),
            "selective": (peak - sum(soft_bytes.values()),
                          sum(attn_fwd.values()) / ideal)}


def bench(memfit, work, model, batch, device):
    path = export(model, work)
    # Attention as the model writes it: the PyTorch estimates below price
    # its stored scores. The fused form is tools/bench-attention.py's table.
    common = ["--batch", str(batch), "--optimizer", "adamw",
              "--fuse-attention=false"]
    insp = run_json([memfit, "inspect", path, "--json"] + common)
    out = os.path.join(work, "%s-b%d-%s-ideal" % (model, batch, device))
    subprocess.run([memfit, "plan", path, "--budget", "100%", "--policy",
                    "ideal", "--device", device, "-o", out, "--force",
                    "--quiet"] + common, check=True)
    plan = json.load(open(os.path.join(out, "plan.json")))
    t0 = time.perf_counter()
    cmp = run_json([memfit, "compare", path, "--json", "--device", device,
                    "--budgets", ",".join(BUDGETS), "--policies",
                    ",".join(POLICIES)] + common)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([memfit, "plan", path, "--budget", "50%", "--device",
                    device, "--quiet"] + common, check=False,
                   capture_output=True)
    one_plan = time.perf_counter() - t0
    return {"inspect": insp, "plan": plan, "compare": cmp,
            "compare_seconds": seconds, "plan_seconds": one_plan,
            "estimates": estimates(plan, insp.get("ops", []),
                                   insp["weight_side_bytes"])}


def table(model, batch, device, r):
    insp, cmp, est = r["inspect"], r["compare"], r["estimates"]
    s = r["plan"]["summary"]
    lines = ["### %s, batch %d, %s" % (model, batch, device), ""]
    lines.append("| keep-all | ideal peak | lower bound | weights, grads, "
                 "AdamW state | planning (one plan / compare) |")
    lines.append("|---|---|---|---|---|")
    lines.append("| %s | %s | %s | %s | %.1f s / %.1f s |" % (
        gib(insp["keep_all_bytes"]), gib(s["ideal_peak_bytes"]),
        gib(cmp["lower_bound_bytes"]), gib(insp["weight_side_bytes"]),
        r["plan_seconds"], r["compare_seconds"]))
    lines.append("")
    if est:
        lines.append("PyTorch practice, estimated from the same task costs "
                     "and sizes (%d layers; formulas in "
                     "tools/bench-transformers.py):" % est["layers"])
        lines.append("")
        lines.append("| strategy | peak (est.) | % of ideal peak | overhead "
                     "(est.) |")
        lines.append("|---|---|---|---|")
        for name, key in (("checkpoint every layer", "ckpt"),
                          ("selective: attention core", "selective")):
            peak, over = est[key]
            lines.append("| %s | %s | %.0f%% | %+.1f%% |" % (
                name, gib(peak), 100.0 * peak / s["ideal_peak_bytes"],
                100 * over))
        lines.append("")
    lines.append("memfit's policies (predicted overhead over the ideal "
                 "schedule; - where the policy cannot meet the budget):")
    lines.append("")
    lines.append("| policy | " + " | ".join(
        "%s (%s)" % (b["label"], gib(b["bytes"])) for b in cmp["budgets"]) +
        " |")
    lines.append("|---|" + "---|" * len(cmp["budgets"]))
    for p in cmp["policies"]:
        row = []
        for b in cmp["budgets"]:
            cell = next(c for c in cmp["cells"]
                        if c["policy"] == p and c["budget"] == b["label"])
            row.append("%+.1f%%" % (100 * cell["overhead"])
                       if cell["feasible"] else "-")
        lines.append("| %s | %s |" % (p, " | ".join(row)))
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfit")
    ap.add_argument("work")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true",
                    help="one device, the first configuration")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    configs = CONFIGS[:1] if args.quick else CONFIGS
    devices = DEVICES[:1] if args.quick else DEVICES
    parts = []
    for model, batch in configs:
        for device in devices:
            print("benchmarking", model, batch, device, file=sys.stderr)
            r = bench(args.memfit, args.work, model, batch, device)
            parts.append(table(model, batch, device, r))
    text = "\n".join(parts)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
