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
recomputes() {
  $PY -c "import json; print(sum(1 for t in json.load(open('$1/plan.json'))['tasks'] if t['recompute']))"
}
subbatch() {
  $PY -c "import json,sys; print(json.load(open('$1/plan.json'))['sub_batch'])"
}

check() { # model data tight-budget offload-budget [compile args]
  local model=$1 data=$2 budget=$3 obudget=$4
  shift 4
  "$MEMFIT" zoo "$model" -o "$model.onnx" >/dev/null || fail "zoo $model"
  "$MEMFIT" compile "$model.onnx" --batch 8 --budget 100% --device k40m \
    -o "ideal-$model" --quiet || fail "compile ideal $model"
  # memfit's own choice (sub-batching, offload, recompute, algorithms)...
  "$MEMFIT" compile "$model.onnx" --batch 8 --budget "$budget" --device k40m \
    -o "tight-$model" --quiet "$@" || fail "compile tight $model"
  # ...and Algorithm 1 forced to keep the whole batch: the tightest budget
  # it meets, where it must offload.
  local ok=
  for pct in $obudget; do
    rm -rf "offload-$model"
    "$MEMFIT" compile "$model.onnx" --batch 8 --budget "$pct%" --device k40m \
      --policy modnn --sub-batch 8 -o "offload-$model" --quiet 2>/dev/null &&
      { ok=1; break; }
  done
  [ -n "$ok" ] || fail "compile offload $model"
  [ "$(offloads "offload-$model")" -gt 0 ] || fail "$model: the modnn plan offloads nothing"
  for d in "ideal-$model" "tight-$model" "offload-$model"; do
    build "$d"
    train "$d" "$data"
    $PY "$SRC/tests/e2e/torch_reference.py" "$model.onnx" "$data" lab.npy \
      --batch 8 --iterations 4 --lr 0.05 --momentum 0.9 --weight-decay 0.001 \
      --losses "$d/train.log" --trained "$d/trained.onnx" >"$d/ref.log" 2>&1 ||
      { cat "$d/ref.log"; fail "$d disagrees with torch"; }
    echo "$d: $(cat "$d/ref.log") (sub-batch $(subbatch "$d"), $(offloads "$d") bytes offloaded, $(recomputes "$d") recomputes)"
  done
}

check tiny-cnn img.npy 45% '60 65 70 75 80 85 90'
check tiny-residual img.npy 45% '60 65 70 75 80 85 90'
check tiny-inception img.npy 45% '60 65 70 75 80 85 90'
# BatchNorm statistics are per sub-batch, so keep the whole batch together
# to compare with torch; the budget is met by offload alone.
check tiny-bn img.npy 85% '60 65 70 75 80 85 90' --sub-batch 8
check mlp vec.npy 85% '88 90 92 94 96 98'

# Exact in chunks: at 45% tiny-bn's whole batch does not fit, so memfit
# splits the batch into chunks inside one round and gathers BatchNorm's
# statistics over the whole batch (passes/search/Chunk.h); the trainer must agree
# with torch at the whole batch, offloading on the way.
d=chunks-tiny-bn
"$MEMFIT" compile tiny-bn.onnx --batch 8 --budget 45% --device k40m -o "$d" \
  --quiet || fail "compile $d"
read -r chunks exact <<<"$($PY -c "import json; j=json.load(open('$d/plan.json')); print(j.get('chunks', 1), j['exact'])")"
[ "$chunks" -gt 1 ] || fail "$d: tiny-bn at 45% is not split into chunks"
[ "$exact" = True ] || fail "$d: a chunked plan must be exact"
[ "$(offloads "$d")" -gt 0 ] || fail "$d: the chunked plan offloads nothing"
grep -q "x.setChunk(1)" "$d"/src/round_*.cpp || fail "$d: no chunk switch"
build "$d"
train "$d" img.npy
$PY "$SRC/tests/e2e/torch_reference.py" tiny-bn.onnx img.npy lab.npy \
  --batch 8 --iterations 4 --lr 0.05 --momentum 0.9 --weight-decay 0.001 \
  --losses "$d/train.log" --trained "$d/trained.onnx" >"$d/ref.log" 2>&1 ||
  { cat "$d/ref.log"; fail "$d disagrees with torch"; }
echo "$d: $(cat "$d/ref.log") ($chunks chunks of $(subbatch "$d"), $(offloads "$d") bytes offloaded)"

# Recompute is bit-identical: with the whole batch in one sub-batch, plans
# that drop and recompute (BatchNorm, Dropout masks included) or offload
# must give exactly the ideal plan's losses and weights.
identical() { # model data policy budget
  local model=$1 data=$2 policy=$3 budget=$4 d="$3-$1"
  [ -d "ideal-$model" ] || {
    "$MEMFIT" zoo "$model" -o "$model.onnx" >/dev/null || fail "zoo $model"
    "$MEMFIT" compile "$model.onnx" --batch 8 --budget 100% --device k40m \
      -o "ideal-$model" --quiet || fail "compile ideal $model"
    build "ideal-$model"
    train "ideal-$model" "$data"
  }
  "$MEMFIT" compile "$model.onnx" --batch 8 --budget "$budget" --device k40m \
    --policy "$policy" --sub-batch 8 -o "$d" --quiet || fail "compile $d"
  local rc
  rc=$($PY -c "import json; print(sum(1 for t in json.load(open('$d/plan.json'))['tasks'] if t['recompute']))")
  build "$d"
  train "$d" "$data"
  diff <(grep '^iteration' "ideal-$model/train.log" | cut -d' ' -f1-5) \
       <(grep '^iteration' "$d/train.log" | cut -d' ' -f1-5) >/dev/null ||
    fail "$d: losses differ from the ideal plan's"
  cmp -s "ideal-$model/trained.onnx" "$d/trained.onnx" ||
    fail "$d: trained weights differ from the ideal plan's"
  echo "$d: bit-identical to the ideal plan ($rc recomputes)"
  [ "$policy" != chen-sqrt ] || [ "$rc" -gt 0 ] || fail "$d recomputes nothing"
}
# The emulation must catch a plan missing one event wait: drop the first
# wait of the compute stream for a copy from the offloading plan.
rm -rf nowait && cp -r offload-tiny-cnn nowait && rm -rf nowait/build
f=$(grep -l "x.wait(Compute" nowait/src/round_*.cpp | head -1)
[ -n "$f" ] || fail "the offloading plan has no compute-stream wait"
line=$(grep -n "x.wait(Compute" "$f" | head -1 | cut -d: -f1)
sed -i "${line}d" "$f"
build nowait
if "nowait/build/trainer" --data img.npy --labels lab.npy --iterations 4 \
     --lr 0.05 --momentum 0.9 --weight-decay 0.001 --log-every 1 \
     --save nowait/trained.onnx >nowait/train.log 2>&1 &&
   $PY "$SRC/tests/e2e/torch_reference.py" tiny-cnn.onnx img.npy lab.npy \
     --batch 8 --iterations 4 --lr 0.05 --momentum 0.9 --weight-decay 0.001 \
     --losses nowait/train.log --trained nowait/trained.onnx >nowait/ref.log 2>&1; then
  fail "a plan without one of its waits still trains correctly: the emulation is not adversarial"
fi
echo "nowait: removing one wait is caught ($(tail -1 nowait/train.log | cut -c1-80))"

identical tiny-bn img.npy chen-sqrt 100%
# The fused form (--fuse auto: the ReLU inside the BatchNorm, its mask
# recomputed from the BatchNorm's input) trains bit-identically to the
# model as written: the same masked gradient, summed in the same order.
fused=$($PY -c "import json; j=json.load(open('ideal-tiny-bn/plan.json')); print(j['fused_forms']['batchnorm_relu'], sum(t['op'] == 'BatchNormalization+Relu' and t['section'] == 'round' for t in j['tasks']))")
[ "$fused" = "1 3" ] || fail "ideal-tiny-bn: fused BatchNorm+ReLU (count, tasks) is '$fused', want '1 3'"
d=unfused-tiny-bn
"$MEMFIT" compile tiny-bn.onnx --batch 8 --budget 100% --device k40m --fuse none \
  -o "$d" --quiet || fail "compile $d"
[ "$($PY -c "import json; print('fused_forms' in json.load(open('$d/plan.json')))")" = False ] ||
  fail "$d: --fuse none still reports fused forms"
grep -q "relu = true" "$d"/src/*.cpp && fail "$d: --fuse none generated a fused BatchNorm"
grep -q "relu = true" ideal-tiny-bn/src/*.cpp || fail "ideal-tiny-bn: no fused BatchNorm generated"
build "$d"
train "$d" img.npy
diff <(grep '^iteration' ideal-tiny-bn/train.log | cut -d' ' -f1-5) \
     <(grep '^iteration' "$d/train.log" | cut -d' ' -f1-5) >/dev/null ||
  fail "$d: losses differ from the fused plan's"
cmp -s ideal-tiny-bn/trained.onnx "$d/trained.onnx" ||
  fail "$d: trained weights differ from the fused plan's"
echo "$d: bit-identical to the fused BatchNorm+ReLU"
identical tiny-bn img.npy superneurons 85%
identical tiny-dropout vec.npy chen-sqrt 95%
identical tiny-residual img.npy chen-sqrt 70%
echo "e2e_cpu: all trainers agree with torch and recompute is bit-identical"
