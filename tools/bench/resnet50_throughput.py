#!/usr/bin/env python3
"""ResNet-50 training throughput, predicted against published: the
whole-network check of docs/benchmarks/cost-model.md.

The ideal plan's predicted iteration time of memfit's ResNet-50 (`memfit zoo
resnet50`: torchvision's, that is v1.5), FP32, as images per second, beside
published single-GPU FP32 training throughput. The calibration is fitted on
kernels only; these figures check it and tune nothing.

usage: tools/bench/resnet50_throughput.py [--memfit build/tools/memfit]
"""
import argparse
import json
import os
import subprocess
import tempfile

DEVICES = "docs/benchmarks/devices"

# GPU, --device, batch, published img/s, source
ROWS = [
    ("V100 16GB (DGX-1)", "v100", 112, 367,
     "NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5, pytorch-21.03 "
     "container, 1 GPU"),
    ("V100 16GB (DGX-1)", "v100", 256, None, "(same source, larger batch)"),
    ("P100 (DGX-1)", "p100", 64, 219,
     "tensorflow.org performance benchmarks (2017), ResNet-50 v1, synthetic "
     "data, TF 1.1, cuDNN 6, 1 GPU"),
    ("K80, one GK210 die", f"{DEVICES}/k80-die.json", 64, 52,
     "same TensorFlow benchmarks, Google Compute Engine, synthetic data"),
    ("K40m", "k40m", 64, None,
     "(K80-class measurements: 40 to 52 img/s, Torch with cuDNN 5.1; "
     "TensorFlow 2017)"),
]


def ideal_ms(memfit, model, batch, device):
    out = subprocess.run([memfit, "plan", model, "--batch", str(batch),
                          "--device", device, "--policy", "ideal", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["ideal_time_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default="build/tools/memfit")
    args = ap.parse_args()
    model = os.path.join(tempfile.mkdtemp(prefix="memfit-r50-"), "r50.onnx")
    subprocess.run([args.memfit, "zoo", "resnet50", "-o", model],
                   capture_output=True, check=True)
    print("| GPU | published (FP32) | source | batch | memfit predicts "
          "| off by |\n|---|---|---|---|---|---|")
    for gpu, device, batch, published, source in ROWS:
        ips = batch / (ideal_ms(args.memfit, model, batch, device) / 1000)
        pub = f"{published} img/s" if published else "-"
        off = f"{100 * (ips / published - 1):+.1f}%" if published else "-"
        print(f"| {gpu} | {pub} | {source} | {batch} | {ips:.1f} img/s "
              f"(`--device {os.path.basename(device)}`) | {off} |")


if __name__ == "__main__":
    main()
