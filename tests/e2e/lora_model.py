#!/usr/bin/python3
"""A LoRA fine-tuning export for tests/cli/freeze.sh: a one-block GPT-style
decoder (tests/e2e/today_models.py's) whose Linear layers each carry a
low-rank adapter, as peft's LoRA writes it: y = base(x) + B(A(x)) * alpha/r,
A initialized as nn.Linear is (Kaiming uniform), B zeros, so the adapted
model starts equal to the base one. The base weights are what a run
freezes; they are exported like any parameter (training-mode export).

usage: lora_model.py OUT.onnx X.npy Y.npy [--batch N]
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from today_models import GPT, dataset  # noqa: E402


class LoRALinear(nn.Module):
    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scale


def add_adapters(module):
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, LoRALinear(child))
        else:
            add_adapters(child)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = GPT(layers=1)
    add_adapters(model.blocks)
    x, y = dataset("tokens", 2 * args.batch, (61, 16))
    np.save(args.x, x)
    np.save(args.y, y)
    torch.onnx.export(model, torch.tensor(x[:args.batch]), args.out,
                      opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
