#!/usr/bin/env python3
"""Whole networks, predicted against one published set of measurements: the
second whole-network check of docs/benchmarks/cost-model.md.

Justin Johnson's cnn-benchmarks (github.com/jcjohnson/cnn-benchmarks, the
README's tables as of its cuDNN 5.0.05 runs) timed a forward and a backward
pass of eight torchvision-style networks at batch 16 in Torch with cuDNN
5.0.05 (CUDA 8.0 RC) on three GPUs of three architectures: a GeForce GTX
1080 (Pascal GP104), a GeForce GTX TITAN X (Maxwell GM200) and a Tesla K40c
(Kepler GK110B). One source, one library, one batch: the spread between the
GPUs is the GPUs'.

memfit's figure is the ideal plan's compute time for one round (forward
and backward, FP32, every task at its fastest algorithm with no workspace
limit, as cudnn.benchmark picks): the round less the wait for the first
input, without the optimizer's update, which the measurements leave out
too. Its devices are datasheet-only (docs/benchmarks/devices) or built in;
nothing here is tuned to these figures.

usage: tools/bench/cnn_benchmarks.py [--memfit build/tools/memfit]
"""
import argparse
import json
import os
import subprocess
import tempfile

DEVICES = "docs/benchmarks/devices"

# GPU, --device (built-in name or device file)
GPUS = [
    ("GTX 1080", f"{DEVICES}/gtx1080.json"),
    ("TITAN X (Maxwell)", f"{DEVICES}/titanx-maxwell-boost.json"),
    ("K40c", f"{DEVICES}/k40-boost.json"),
    ("K40c", "k40m"),
]

# memfit zoo model, published forward + backward ms at batch 16 per GPU
# (GTX 1080, TITAN X (Maxwell), K40c; cuDNN 5.0.05); None: not measured.
MEASURED = [
    ("alexnet", 23.18, 23.71, 61.48),
    ("vgg16", 232.55, 262.42, 920.21),
    ("vgg19", 281.69, 323.40, 1129.65),
    ("resnet18", 47.07, 53.84, 168.30),
    ("resnet34", 79.70, 91.94, 303.80),
    ("resnet50", 153.90, 171.02, 449.90),
    ("resnet101", 235.33, 260.12, 797.89),
    ("resnet152", 328.90, 366.97, 1146.73),
]
BATCH = 16


def compute_ms(memfit, model, device, tmp):
    out = os.path.join(tmp, "plan")
    subprocess.run([memfit, "plan", model, "--batch", str(BATCH), "--device",
                    device, "--policy", "ideal", "-o", out, "--force",
                    "--quiet"], check=True)
    with open(os.path.join(out, "plan.json")) as f:
        s = json.load(f)["summary"]
    return (s["round_seconds"] - s["stall_seconds"]) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memfit-cnnb-")
    head = " | ".join(f"{g} (`{os.path.basename(d)}`)" for g, d in GPUS)
    print(f"| network, batch {BATCH} | {head} |")
    print("|---" * (len(GPUS) + 1) + "|")
    logs = {k: [] for k in range(len(GPUS))}
    for name, *published in MEASURED:
        model = os.path.join(tmp, name + ".onnx")
        subprocess.run([args.memfit, "zoo", name, "-o", model],
                       capture_output=True, check=True)
        cells = []
        for k, (gpu, device) in enumerate(GPUS):
            pub = published[[g for g, _ in GPUS].index(gpu)]
            pred = compute_ms(args.memfit, model, device, tmp)
            logs[k].append(pred / pub)
            cells.append(f"{pub:.1f} / {pred:.1f} ({100 * (pred / pub - 1):+.0f}%)")
        print(f"| {name} | " + " | ".join(cells) + " |")
    med = []
    for k in range(len(GPUS)):
        r = sorted(logs[k])
        mid = (r[(len(r) - 1) // 2] + r[len(r) // 2]) / 2
        med.append(f"{100 * (mid - 1):+.0f}%")
    print("| median | " + " | ".join(med) + " |")
    print("\nEach cell: measured ms / predicted ms (predicted over measured "
          "- 1). Predictions, not measurements.")


if __name__ == "__main__":
    main()
