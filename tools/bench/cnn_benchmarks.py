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

With --kepler-experiment, instead: the K40c column refitted from these
networks (every convolution and GEMM compute efficiency scaled by one
factor, with and without the Winograd algorithms), then the fitted K40c
parameters on the K80 die's ResNet-50 (docs/benchmarks/cost-model.md says
why none of it is built in).

usage: tools/bench/cnn_benchmarks.py [--memfit build/tools/memfit]
                                     [--kepler-experiment]
"""
import argparse
import json
import math
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


def scaled_device(memfit, base, factor, winograd, path):
    """`base` with every convolution and GEMM compute efficiency times
    `factor`, the Winograd ones priced out of reach unless `winograd`."""
    d = json.loads(subprocess.run([memfit, "device", base], check=True,
                                  capture_output=True, text=True).stdout)
    for key, eff in d["efficiency"].items():
        if key.startswith("conv") or key == "gemm":
            eff["compute"] = max(1e-3, min(1.0, eff["compute"] * factor))
            if not winograd and "winograd" in key:
                eff["compute"] = 1e-3
    d["name"] = os.path.basename(path)[:-5]
    with open(path, "w") as f:
        json.dump(d, f)
    return path


def kepler_experiment(memfit, tmp):
    k40 = [g for g, _ in GPUS].index("K40c")
    models = {}
    for name, *published in MEASURED:
        models[name] = os.path.join(tmp, name + ".onnx")
        subprocess.run([memfit, "zoo", name, "-o", models[name]],
                       capture_output=True, check=True)
    print("| Winograd | factor | median ln(pred/meas) | median abs | worst abs |")
    print("|---|---|---|---|---|")
    for winograd in (True, False):
        for factor in (1.0, 0.6, 0.5, 0.45, 0.4, 0.35):
            dev = scaled_device(memfit, f"{DEVICES}/k40-boost.json", factor,
                                winograd, os.path.join(tmp, "k40-fit.json"))
            errs = sorted(math.log(compute_ms(memfit, models[n], dev, tmp) /
                                   pub[k40]) for n, *pub in MEASURED)
            absd = sorted(abs(e) for e in errs)
            mid = (len(errs) - 1) // 2, len(errs) // 2
            print(f"| {'yes' if winograd else 'no'} | {factor} "
                  f"| {(errs[mid[0]] + errs[mid[1]]) / 2:+.3f} "
                  f"| {(absd[mid[0]] + absd[mid[1]]) / 2:.3f} "
                  f"| {absd[-1]:.3f} |")
    dev = scaled_device(memfit, f"{DEVICES}/k80-die.json", 0.4, False,
                        os.path.join(tmp, "k80-fit.json"))
    out = os.path.join(tmp, "plan")
    r50 = os.path.join(tmp, "resnet50.onnx")
    subprocess.run([memfit, "plan", r50, "--batch", "64", "--device", dev,
                    "--policy", "ideal", "-o", out, "--force", "--quiet"],
                   check=True)
    with open(os.path.join(out, "plan.json")) as f:
        secs = json.load(f)["summary"]["planned_seconds"]
    print(f"\nK80 die, ResNet-50 at batch 64, no Winograd, factor 0.4: "
          f"{64 / secs:.1f} img/s predicted (published: 52, TensorFlow 2017)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--kepler-experiment", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memfit-cnnb-")
    if args.kepler_experiment:
        kepler_experiment(args.memfit, tmp)
        return
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
