#!/usr/bin/env bash
# Data-parallel training on the CPU emulation under mpirun: 2 and 4 ranks,
# replicated and sharded (--shard 1, 2), SGD and AdamW, under budgets that
# force offload, recomputation or sub-batches, each against single-process
# PyTorch at the same global batch (models without BatchNorm train exactly
# the same); resume on the same ranks is exact; the planner's per-rank
# weight-side bytes shrink as sharding says.
set -u
MEMFIT=$1
WORK=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
if ! command -v mpirun >/dev/null || ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "data_parallel: SKIPPED: needs mpirun (openmpi-bin) and torch"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }
# CI runs as root; the machine has fewer cores than ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --bind-to none)

$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(11)
np.save("img.npy", r.standard_normal((16, 3, 8, 8)).astype(np.float32))
np.save("vec.npy", r.standard_normal((16, 16)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, 16).astype(np.int64))
PY
"$MEMFIT" zoo mlp -o mlp.onnx >/dev/null || fail "zoo mlp"
"$MEMFIT" zoo tiny-cnn -o tiny-cnn.onnx >/dev/null || fail "zoo tiny-cnn"

changes() { # dir -> what the plan does beyond keeping everything
  $PY -c "
import json; j = json.load(open('$1/plan.json'))
print(j['summary']['bytes_to_host'] + sum(1 for t in j['tasks'] if t['recompute']) + (j['sub_batch'] < j['batch']))"
}

# case NAME MODEL DATA RANKS SHARD OPTIMIZER BUDGET [compile args]
case_() {
  local name=$1 model=$2 data=$3 ranks=$4 shard=$5 opt=$6 budget=$7
  shift 7
  local optargs=(--momentum 0.9) refopt=(--optimizer sgd --momentum 0.9)
  if [ "$opt" = adamw ]; then
    optargs=()
    refopt=(--optimizer adamw)
  fi
  "$MEMFIT" compile "$model.onnx" --batch 8 --ranks "$ranks" --shard "$shard" \
    --optimizer "$opt" --budget "$budget" --device k40m -o "$name" --quiet "$@" ||
    fail "compile $name"
  grep -q '"ranks": '"$ranks" "$name/plan.json" || fail "$name: plan.json lacks the ranks"
  cmake -S "$name" -B "$name/build" -DMEMFIT_BACKEND=cpu >"$name/cmake.log" 2>&1 ||
    { cat "$name/cmake.log"; fail "configure $name"; }
  cmake --build "$name/build" -j 2 >"$name/build.log" 2>&1 ||
    { tail -30 "$name/build.log"; fail "build $name"; }
  "${MPIRUN[@]}" -np "$ranks" "$name/build/trainer" --data "$data" --labels lab.npy \
    --iterations 3 --lr 0.05 "${optargs[@]}" --weight-decay 0.001 --log-every 1 \
    --save "$name/trained.onnx" >"$name/train.log" 2>&1 ||
    { cat "$name/train.log"; fail "train $name"; }
  $PY "$SRC/tests/e2e/torch_reference.py" "$model.onnx" "$data" lab.npy \
    --batch 8 --iterations 3 --lr 0.05 "${refopt[@]}" --weight-decay 0.001 \
    --rtol 1e-4 --losses "$name/train.log" --trained "$name/trained.onnx" \
    >"$name/ref.log" 2>&1 || { cat "$name/ref.log"; fail "$name disagrees with torch"; }
  echo "$name: $(cat "$name/ref.log") (plan changes $(changes "$name"))"
}

case_ mlp-r2 mlp vec.npy 2 0 sgd 100%
case_ mlp-r4-s1-adamw mlp vec.npy 4 1 adamw 100%
case_ mlp-r2-s2-sub mlp vec.npy 2 2 adamw 100% --sub-batch 2
case_ cnn-r2-tight tiny-cnn img.npy 2 0 sgd 60%
case_ cnn-r4-s2-tight tiny-cnn img.npy 4 2 sgd 85%
case_ cnn-r2-s1-adamw-tight tiny-cnn img.npy 2 1 adamw 55%
for d in cnn-r2-tight cnn-r4-s2-tight cnn-r2-s1-adamw-tight; do
  [ "$(changes "$d")" -gt 0 ] || fail "$d: the tight plan changes nothing"
done
[ "$(changes mlp-r2-s2-sub)" -gt 0 ] || fail "mlp-r2-s2-sub: no sub-batches"

# Resume on the same ranks, sharded: 2 iterations, then 2 more from the
# checkpoint, lose nothing against 4 straight.
T=cnn-r2-s1-adamw-tight/build/trainer
run() { "${MPIRUN[@]}" -np 2 "$T" --data img.npy --labels lab.npy --lr 0.05 \
  --log-every 1 "$@"; }
run --iterations 4 --save straight.onnx >straight.log 2>&1 || { cat straight.log; fail "straight run"; }
run --iterations 2 --checkpoint ck >first.log 2>&1 || { cat first.log; fail "first half"; }
run --iterations 4 --checkpoint ck --resume --save resumed.onnx >second.log 2>&1 ||
  { cat second.log; fail "resumed half"; }
[ "$(grep '^iteration 4' straight.log | cut -d' ' -f1-5)" = \
  "$(grep '^iteration 4' second.log | cut -d' ' -f1-5)" ] ||
  fail "resume is not exact: $(grep '^iteration 4' straight.log second.log)"
cmp -s straight.onnx resumed.onnx || fail "resumed weights differ"
echo "resume: exact"

# A data-parallel trainer started without mpirun says how to start it.
out=$("cnn-r2-tight/build/trainer" --synthetic 2>&1) && fail "one process ran a 2-rank trainer"
echo "$out" | grep -q "mpirun -np 2" || fail "no hint to use mpirun: $out"

# Sharding shrinks the weight side: ResNet-50 with AdamW over 4 ranks with
# --shard 2 holds at most half of one rank's replicated bytes.
"$MEMFIT" zoo resnet50 -o r50.onnx >/dev/null || fail "zoo resnet50"
ws() { "$MEMFIT" plan r50.onnx --batch 256 --optimizer adamw --budget 100% --json "$@" |
  $PY -c "import json,sys; print(json.load(sys.stdin)['data_parallel']['weight_side_bytes'])"; }
one=$(ws --ranks 4 --shard 0) four=$(ws --ranks 4 --shard 2)
$PY -c "import sys; sys.exit(0 if $four * 2 <= $one else 1)" ||
  fail "resnet50 adamw: shard 2 over 4 ranks keeps $four of $one bytes"
echo "resnet50 adamw weight side per rank: $one replicated, $four with --shard 2 over 4 ranks"

# Flags: the batch must split, sharding needs ranks.
"$MEMFIT" plan mlp.onnx --batch 6 --ranks 4 --budget 100% 2>err.txt && fail "6 over 4 ranks accepted"
grep -q "does not split evenly" err.txt || fail "wrong error: $(cat err.txt)"
"$MEMFIT" plan mlp.onnx --batch 8 --shard 1 --budget 100% 2>err.txt && fail "--shard without --ranks accepted"
grep -q "need --ranks" err.txt || fail "wrong error: $(cat err.txt)"
"$MEMFIT" plan mlp.onnx --batch 8 --ranks 2 --shard 3 --budget 100% 2>err.txt && fail "--shard 3 accepted"
grep -q "invalid --shard 3" err.txt || fail "wrong error: $(cat err.txt)"
echo "data_parallel: ok"
