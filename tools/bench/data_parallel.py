#!/usr/bin/python3
"""Data-parallel scaling and per-rank memory: docs/benchmarks/data-parallel.md.

usage: data_parallel.py MEMFIT WORKDIR [--out FILE]

Weak scaling, as data-parallel training is run: a fixed batch per GPU
(ResNet-50: 64 images, GPT-2 small: 8 sequences of 1024), 1 to 8 H100 SXM
ranks over NVLink, and over InfiniBand (one NDR NIC per GPU), replicated and
with ZeRO-2 sharding (--shard 2); AdamW; the ideal budget (nothing offloaded
or recomputed, so the table isolates the collectives). Every time is a
prediction of memfit's analytic device model and ring-collective model;
nothing here ran on a GPU.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
PY = "/usr/bin/python3"


def export_gpt2(work):
    path = os.path.join(work, "gpt2-small.onnx")
    if not os.path.exists(path):
        subprocess.run([PY, os.path.join(ROOT, "tests", "e2e", "today_models.py"),
                        "gpt2-small", path, path + ".x.npy", path + ".y.npy",
                        "--batch", "1", "--no-data"], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def plan(memfit, model, batch, ranks, shard, link):
    cmd = [memfit, "plan", model, "--batch", str(batch * ranks), "--budget",
           "100%", "--optimizer", "adamw", "--device", "h100-sxm", "--json"]
    if ranks > 1:
        cmd += ["--ranks", str(ranks), "--shard", str(shard), "--link", link]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfit")
    ap.add_argument("work")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    r50 = os.path.join(a.work, "resnet50.onnx")
    if not os.path.exists(r50):
        subprocess.run([a.memfit, "zoo", "resnet50", "-o", r50], check=True,
                       stdout=subprocess.DEVNULL)
    models = [("ResNet-50", r50, 64, "images"),
              ("GPT-2 small", export_gpt2(a.work), 8, "sequences")]
    lines = [__doc__.split("\n\n", 1)[1].strip(), ""]
    lines += ["| model | per-GPU batch | link | shard | ranks | iteration ms "
              "| collectives ms (exposed) | throughput | speedup | "
              "weight side per rank | planned per rank |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, path, b, unit in models:
        base = None
        for link in ("nvlink", "infiniband"):
            for shard in (0, 2):
                for ranks in (1, 2, 4, 8):
                    if ranks == 1 and (link != "nvlink" or shard):
                        continue
                    j = plan(a.memfit, path, b, ranks, shard, link)
                    t = j["planned_seconds"]
                    dp = j.get("data_parallel", {})
                    ws = dp.get("weight_side_bytes", j["resident_bytes"])
                    thr = b * ranks / t
                    if base is None:
                        base = thr
                    coll = ("%.2f (%.2f)" % (dp["collective_seconds"] * 1e3,
                                             dp["exposed_collective_seconds"] * 1e3)
                            if dp else "-")
                    lines.append(
                        "| %s | %d | %s | %s | %d | %.1f | %s | %.0f %s/s | "
                        "%.2fx | %.0f MiB | %.2f GiB |" % (
                            name, b, link if ranks > 1 else "-",
                            shard if ranks > 1 else "-", ranks, t * 1e3, coll,
                            thr, unit, thr / base, ws / 2**20,
                            j["planned_bytes"] / 2**30))
                    print(lines[-1], file=sys.stderr)
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
