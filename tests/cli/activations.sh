#!/usr/bin/env bash
# The activations added as the worked example of docs/architecture.md
# (Softplus, Mish, CELU, LogSigmoid) end to end on the CPU emulation: a
# small CNN exported by PyTorch, its Mish and LogSigmoid recognized from
# the nodes torch.onnx writes for them, trained under the ideal budget and
# under a tight one and compared with PyTorch (rtol 1e-5).
set -u
source "$(dirname "$0")/lib/preamble.bash"
needs_torch activations
fresh_work

source "$SRC/tests/e2e/verify.sh"

"$PY" "$SRC/tests/e2e/today_models.py" activations activations.onnx \
  activations-x.npy activations-y.npy --batch 4 --opset 17 ||
  fail "export activations"
ops=$("$MEMFIT" inspect activations.onnx --batch 4) || fail "inspect"
for op in Softplus Mish Celu LogSigmoid; do
  [ "$(grep -c " $op " <<<"$ops")" = 1 ] ||
    { echo "$ops"; fail "no single $op operator in the imported graph"; }
done
! grep -q ' Log \| Tanh \| Sigmoid \| Mul ' <<<"$ops" ||
  { echo "$ops"; fail "Mish or LogSigmoid left in pieces"; }
PLANS=(ideal tight)
verify activations 50% 55% 60% 65% 70% 75% 80%
echo "activations: Softplus, Mish, CELU and LogSigmoid agree with torch"
