#!/usr/bin/env bash
# End to end on the CPU emulation backend: compile tiny models under the
# ideal budget and under tight budgets that force offload and sub-batching,
# build the generated trainers with -DMEMFIT_BACKEND=cpu, train a few
# iterations, and compare losses and trained weights with PyTorch (an
# independent reference) and between the plans.
set -u
MEMFIT=$1
WORK=$2
BUILD=$(cd "$(dirname "$MEMFIT")/.." && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

# data: 16 samples of 3x8x8 images and of 16 features, labels in [0, 10)
$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(7)
np.save("img.npy", r.standard_normal((16, 3, 8, 8)).astype(np.float32))
np.save("vec.npy", r.standard_normal((16, 16)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, 16).astype(np.int64))
PY

build() { # dir
  cmake -S "$1" -B "$1/build" -DMEMFIT_BACKEND=cpu >"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log"; fail "configure $1"; }
  cmake --build "$1/build" -j 2 >"$1/build.log" 2>&1 ||
    { tail -30 "$1/build.log"; fail "build $1"; }
}
train() { # dir data extra-args...
  local dir=$1 data=$2
  shift 2
  "$dir/build/trainer" --data "$data" --labels lab.npy --iterations 4 \
    --lr 0.05 --momentum 0.9 --weight-decay 0.001 --log-every 1 \
    --save "$dir/trained.onnx" "$@" >"$dir/train.log" 2>&1 ||
    { cat "$dir/train.log"; fail "train $dir"; }
}
offloads() { # dir -> bytes moved to the host per iteration
  $PY -c "import json,sys; print(json.load(open('$1/plan.json'))['summary']['bytes_to_host'])"
}
subbatch() {
  $PY -c "import json,sys; print(json.load(open('$1/plan.json'))['sub_batch'])"
}

check() { # model data tight-budget [compile args]
  local model=$1 data=$2 budget=$3
  shift 3
  "$MEMFIT" zoo "$model" -o "$model.onnx" >/dev/null || fail "zoo $model"
  "$MEMFIT" compile "$model.onnx" --batch 8 --budget 100% --device k40m \
    -o "ideal-$model" --quiet || fail "compile ideal $model"
  "$MEMFIT" compile "$model.onnx" --batch 8 --budget "$budget" --device k40m \
    -o "tight-$model" --quiet "$@" || fail "compile tight $model"
  [ "$(offloads "tight-$model")" -gt 0 ] || fail "$model: the tight plan offloads nothing"
  for d in "ideal-$model" "tight-$model"; do
    build "$d"
    train "$d" "$data"
    $PY "$SRC/tests/e2e/torch_reference.py" "$model.onnx" "$data" lab.npy \
      --batch 8 --iterations 4 --lr 0.05 --momentum 0.9 --weight-decay 0.001 \
      --losses "$d/train.log" --trained "$d/trained.onnx" >"$d/ref.log" 2>&1 ||
      { cat "$d/ref.log"; fail "$d disagrees with torch"; }
    echo "$d: $(cat "$d/ref.log") (sub-batch $(subbatch "$d"), $(offloads "$d") bytes offloaded)"
  done
}

check tiny-cnn img.npy 45%
check tiny-residual img.npy 45%
check tiny-inception img.npy 45%
# BatchNorm statistics are per sub-batch, so keep the whole batch together
# to compare with torch; the budget is met by offload alone.
check tiny-bn img.npy 80% --sub-batch 8
check mlp vec.npy 85%
echo "e2e_cpu: all trainers agree with torch"
