#!/usr/bin/env bash
# Weights homed in host memory, realized by the generated trainer on the
# CPU emulation: gpt2-tiny compiled for the H100 SXM (it states a host)
# under a budget below its weight side with --host-budget 1GiB, so that
# weights, gradients and optimizer state live on the host, are copied
# through the arena and updated by the host optimizer's threads, each
# update started inside the last round once its gradient is home. With
# two sub-batches (the gradient comes back in for the second), it trains
# as PyTorch does (AdamW and SGD, float64, within 1e-5), bit for bit as
# the plan that keeps every weight on the GPU (fp32 and bf16), and resumes
# from a checkpoint bit for bit.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "homes: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
"$MEMFIT" zoo gpt2-tiny -o g.onnx >/dev/null || fail "zoo gpt2-tiny"
"$PY" - <<'PYEOF' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(3)
np.save("x.npy", r.integers(0, 61, (8, 16)).astype(np.int64))
np.save("y.npy", r.integers(0, 61, (8, 16)).astype(np.int64))
PYEOF

build() { # dir
  cmake -S "$1" -B "$1/build" -DMEMFIT_BACKEND=cpu >"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log"; fail "configure $1"; }
  cmake --build "$1/build" -j 2 >"$1/build.log" 2>&1 ||
    { tail -30 "$1/build.log"; fail "build $1"; }
}
# compile dir optimizer precision [args]: the tightest budget that plans
# with weights homed on the host.
compile_homed() {
  local d=$1 opt=$2 prec=$3 budget
  shift 3
  for budget in 30% 40% 50% 60% 70%; do
    rm -rf "$d"
    "$MEMFIT" compile g.onnx --batch 4 --sub-batch 2 --optimizer "$opt" \
      --precision "$prec" --device h100-sxm --budget "$budget" \
      --host-budget 1GiB -o "$d" --quiet "$@" 2>/dev/null || continue
    grep -q "Home::Host" "$d/src/main.cpp" && break
  done
  grep -q "Home::Host" "$d/src/main.cpp" 2>/dev/null ||
    fail "$d: no budget homes weights on the host"
  # Host updates start in the last round once their gradients are home
  # (x.hostReady), beside the rest of the backward pass.
  cat "$d"/src/round_*.cpp | grep -q "x.hostReady(CopyOut, " ||
    fail "$d: no host update starts inside the round"
  grep -q "x.copyInHome(HomeTensor::Grad" "$d/src/round_0.cpp" ||
    fail "$d: the gradient is not copied back in for the second sub-batch"
  echo "$d: budget $budget homes $(grep -c 'Home::Host' "$d/src/main.cpp") weights on the host"
  build "$d"
}
compile_gpu() { # dir optimizer precision: every weight on the GPU
  rm -rf "$1"
  "$MEMFIT" compile g.onnx --batch 4 --sub-batch 2 --optimizer "$2" \
    --precision "$3" --device h100-sxm --budget 100% -o "$1" --quiet ||
    fail "compile $1"
  grep -q "Home::Host" "$1/src/main.cpp" && fail "$1 homes weights"
  build "$1"
}
train() { # dir trainer-args...
  local d=$1
  shift
  "$d/build/trainer" --data x.npy --labels y.npy --log-every 1 "$@" \
    >"$d/train.log" 2>&1 || { cat "$d/train.log"; fail "train $d"; }
}
reference() { # dir optimizer ref-args...
  local d=$1 opt=$2
  shift 2
  "$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx x.npy y.npy \
    --heads 4 --kv-heads 4 --batch 4 --iterations 3 --optimizer "$opt" \
    --losses "$d/train.log" --trained "$d/trained.onnx" --tol 1e-5 "$@" \
    >"$d/ref.log" 2>&1 || { cat "$d/ref.log"; fail "$d disagrees with torch"; }
  echo "$d vs torch: $(cat "$d/ref.log")"
}
losses() { grep -o 'loss [^ ]*' "$1/train.log"; }

# Adam's eps at 1e-3: the attention's key bias has a gradient of zero in
# exact arithmetic, rounding noise in fp32 and float64 alike, which eps
# 1e-8 would scale up to whole steps of different sign.
ADAMW="--iterations 3 --lr 0.01 --weight-decay 0.01 --eps 1e-3"
SGD="--iterations 3 --lr 0.05 --momentum 0.9 --weight-decay 0.001"

# AdamW, fp32: against torch, and bit for bit against the GPU-homed plan.
compile_homed adamw adamw fp32
train adamw $ADAMW --save adamw/trained.onnx
grep -q "host memory: .* for the weights homed there" adamw/train.log ||
  fail "the trainer does not report the host bytes"
reference adamw adamw --lr 0.01 --weight-decay 0.01 --eps 1e-3
compile_gpu adamw_gpu adamw fp32
train adamw_gpu $ADAMW --save adamw_gpu/trained.onnx
cmp -s adamw/trained.onnx adamw_gpu/trained.onnx ||
  fail "homed AdamW weights differ from the plan that keeps them on the GPU"
[ "$(losses adamw)" = "$(losses adamw_gpu)" ] || fail "homed AdamW losses differ"
# Under the sanitizers (tools/test --sanitize) the homed trainer's copies
# and host updates have run once, which is what they are there to check;
# each further plan costs half a minute of search there.
if [ -n "${MEMFIT_SANITIZED:-}" ]; then
  echo "homes (sanitized): a homed AdamW plan trains as torch and as the GPU-homed plan does"
  exit 0
fi

# Resume: two iterations, a checkpoint, the third resumed.
train adamw --iterations 2 --lr 0.01 --weight-decay 0.01 --eps 1e-3 \
  --checkpoint adamw/ck
train adamw --iterations 3 --lr 0.01 --weight-decay 0.01 --eps 1e-3 \
  --checkpoint adamw/ck \
  --resume --save adamw/resumed.onnx
grep -q "resumed from adamw/ck at iteration 2" adamw/train.log ||
  fail "resume not reported"
cmp -s adamw/trained.onnx adamw/resumed.onnx ||
  fail "the resumed homed run differs from the uninterrupted one"

# SGD with momentum, fp32.
compile_homed sgd sgd fp32
train sgd $SGD --save sgd/trained.onnx
reference sgd sgd --lr 0.05 --momentum 0.9 --weight-decay 0.001

# bf16: homed working copies refreshed on the host; the same numbers as
# the GPU-homed bf16 plan, bit for bit.
compile_homed bf16 adamw bf16
train bf16 $ADAMW --save bf16/trained.onnx
grep -q "HomeTensor::WorkingCopy" bf16/src/round_*.cpp ||
  fail "bf16: no working copy comes from home"
compile_gpu bf16_gpu adamw bf16
train bf16_gpu $ADAMW --save bf16_gpu/trained.onnx
cmp -s bf16/trained.onnx bf16_gpu/trained.onnx ||
  fail "homed bf16 weights differ from the plan that keeps them on the GPU"
echo "homes: homed plans train as torch and as GPU-homed plans do, and resume exactly"
