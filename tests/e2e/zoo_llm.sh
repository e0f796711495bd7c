#!/usr/bin/env bash
# Trains a decoder of the zoo on the CPU emulation and compares it with the
# same architecture written by hand in PyTorch (tests/e2e/zoo_llm_reference.py),
# loaded with the same weights. Sourced by tests/cli/zoo_gpt2.sh and
# zoo_llama.sh after MEMFIT, WORK, SRC and PY are set:
#   zoo_llm_check MODEL ARCH HEADS KV_HEADS
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }

zoo_llm_check() {
  local model=$1 arch=$2 heads=$3 kv=$4
  if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
    echo "$model: SKIPPED: $PY cannot import torch and onnx"
    exit 0
  fi
  rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
  "$MEMFIT" zoo "$model" -o "$model.onnx" >/dev/null || fail "zoo $model"
  # Two batches of four sequences of 16 tokens of a 61-token vocabulary,
  # a label per token.
  "$PY" - <<'PYEOF' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(3)
np.save("x.npy", r.integers(0, 61, (8, 16)).astype(np.int64))
np.save("y.npy", r.integers(0, 61, (8, 16)).astype(np.int64))
PYEOF
  # The tightest of these budgets that plans: whatever it takes (offload,
  # recompute, sub-batches) must not change what is computed.
  local budget ok=
  for budget in 55% 65% 80% 100%; do
    rm -rf plan
    "$MEMFIT" compile "$model.onnx" --batch 4 --budget "$budget" \
      --device a100-40g -o plan --quiet 2>/dev/null && { ok=1; break; }
  done
  [ -n "$ok" ] || fail "$model: no budget compiles"
  cmake -S plan -B plan/build -DMEMFIT_BACKEND=cpu >plan/cmake.log 2>&1 ||
    { cat plan/cmake.log; fail "configure $model"; }
  cmake --build plan/build -j 2 >plan/build.log 2>&1 ||
    { tail -30 plan/build.log; fail "build $model"; }
  plan/build/trainer --data x.npy --labels y.npy --iterations 3 --lr 0.05 \
    --momentum 0.9 --weight-decay 0.001 --log-every 1 \
    --save plan/trained.onnx >plan/train.log 2>&1 ||
    { cat plan/train.log; fail "train $model"; }
  "$PY" "$SRC/tests/e2e/zoo_llm_reference.py" "$arch" "$model.onnx" x.npy \
    y.npy --heads "$heads" --kv-heads "$kv" --batch 4 --iterations 3 \
    --lr 0.05 --momentum 0.9 --weight-decay 0.001 --losses plan/train.log \
    --trained plan/trained.onnx --tol 1e-5 >plan/ref.log 2>&1 ||
    { cat plan/ref.log; fail "$model disagrees with torch"; }
  echo "$model at budget $budget: $(cat plan/ref.log)"
}
