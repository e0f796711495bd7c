#!/usr/bin/env python3
"""The trainer's batch reader against the rate a GPU would consume batches
(docs/benchmarks/training.md, "Reader").

Writes --images uint8 images of 3 x 224 x 224 into a .npy in a temporary
directory, then times memfit_reader_bench on it (the trainer's fillBatch:
mapped file, random crop with 4 pixels of padding, horizontal flip,
ImageNet normalization into the float batch layout) with each --threads
count, and beside it the images/s memfit's cost model predicts for
ResNet-50 in bf16 on --device at batch 256 (a prediction, not a
measurement). Prints the table as markdown.

usage: tools/bench/reader.py [--bench build/tools/memfit_reader_bench]
           [--memfit build/tools/memfit] [--images 1024] [--threads 1,2]
           [--batch 256] [--batches 8] [--device h100-sxm]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np


def predicted_rate(memfit, device, batch):
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "r50.onnx")
        subprocess.run([memfit, "zoo", "resnet50", "-o", model], check=True,
                       stdout=subprocess.DEVNULL)
        out = subprocess.run(
            [memfit, "plan", model, "--batch", str(batch), "--budget", "100%",
             "--precision", "bf16", "--device", device, "--refine=false",
             "--bound=false", "--json"],
            check=True, capture_output=True, text=True).stdout
    seconds = json.loads(out)["planned_seconds"]
    return batch / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/tools/memfit_reader_bench")
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--device", default="h100-sxm")
    args = ap.parse_args()
    target = predicted_rate(args.memfit, args.device, args.batch)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "images.npy")
        rng = np.random.default_rng(1)
        np.save(path, rng.integers(0, 256, (args.images, 3, 224, 224),
                                   dtype=np.uint8))
        for t in [int(v) for v in args.threads.split(",")]:
            out = subprocess.run(
                [args.bench, path, str(t), str(args.batch),
                 str(args.batches)], check=True, capture_output=True,
                text=True).stdout
            rows.append(json.loads(out))
    print(f"Predicted consumption: ResNet-50 bf16 at batch {args.batch} on "
          f"`{args.device}`: {target:,.0f} images/s (memfit's cost model)\n")
    print("| reader threads | images/s (all batches) | images/s (median "
          "batch) | of the predicted rate |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['threads']} | {r['images_per_s']:,.0f} | "
              f"{r['median_batch_images_per_s']:,.0f} | "
              f"{r['images_per_s'] / target:.2f}x |")


if __name__ == "__main__":
    main()
