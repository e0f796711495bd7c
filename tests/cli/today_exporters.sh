#!/usr/bin/env bash
# The files PyTorch 2's exporters write, end to end on the CPU emulation
# (tests/models/torch2, written by tests/e2e/export_torch2.py): each
# compiled under a tight budget, trained two steps and compared with
# PyTorch. Beside tests/cli/today.sh, whose hand-written models train under
# both budgets, as its own test so that ctest runs the two side by side.
set -u
source "$(dirname "$0")/lib/preamble.bash"
needs_torch today_exporters
fresh_work

source "$SRC/tests/e2e/verify.sh"

# PyTorch 2's exporters (tests/e2e/export_torch2.py wrote these with torch
# 2.15): TorchScript at opset 17 and dynamo (torch.export) at opset 18, IR
# version 10, past what the ONNX library checks; transformers 5's GPT-2 and
# Llama exported by torch.export at a fixed batch (*-dynamo-fixed: their
# per-sample masks, written for that batch, reshapes spelled with it) and,
# without a cache, at a dynamic one (*-dynamo-nocache: their masks count
# up to the batch, and memfit reads them at the planned one); MobileBERT
# (its output table a Concat of weights, its tokens padded); Funnel-style
# relative attention with an in-place product on a slice of its scores
# (relative-slice, torch.export's ScatterND at contiguous rows). They are here
# for the importer: the tight plan alone, unrefined (refinement is most of a
# small model's compile time, and tests/cli/today.sh trains refined plans).
TRAIN_ARGS=(--momentum 0.9 --weight-decay 0.001)
REF_ARGS=(--momentum 0.9 --weight-decay 0.001)
ITERATIONS=2
LR=0.05
PLANS=(tight)
# The default tier takes five files the importer treats apart: a
# batch-dynamic and a fixed-batch dynamo decoder, SwinV2's windows, the
# in-place slice and a TorchScript CNN (tests/cli/attention.sh trains
# GPT-2's sdpa through dynamo). The full tier takes every file.
core=(hf-gpt2-sdpa-dynamo-nocache hf-llama-sdpa-dynamo-fixed
  hf-swinv2-eager-dynamo-fixed relative-slice-dynamo mobilenetv3-torchscript)
taken=0
for f in "$SRC"/tests/models/torch2/*.onnx; do
  m=$(basename "$f" .onnx)
  full || [[ " ${core[*]} " = *" $m "* ]] || continue
  taken=$((taken + 1))
  cp "$f" "${f%.onnx}-x.npy" "${f%.onnx}-y.npy" . || fail "copy $m"
  COMPILE_ARGS=(--refine=false)
  [[ $m = unet-* ]] && COMPILE_ARGS+=(--sub-batch 4)
  verify "$m" 50% 55% 60% 65% 70% 75%
done
full || [ "$taken" = ${#core[@]} ] || fail "the default tier names a file that is not there"

echo "today_exporters: every exporter's file agrees with torch under a tight budget"
