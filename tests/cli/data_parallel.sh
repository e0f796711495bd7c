#!/usr/bin/env bash
# Data-parallel training on the CPU emulation under mpirun: 2 and 4 ranks,
# replicated and sharded (--shard 1, 2), SGD and AdamW, under budgets that
# force offload, recomputation or sub-batches, each against single-process
# PyTorch at the same global batch (models without BatchNorm train exactly
# the same), and every rank ends with the same weights; fp16 on 2 ranks
# updates as one rank does (bf16 with --shard 2 too), and a forced overflow skips the same steps on
# every rank as on one; resume on the same ranks is exact; the planner's
# per-rank weight-side bytes shrink as sharding says; replicas that diverge
# stop every rank with status 1.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if ! command -v mpirun >/dev/null || ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "data_parallel: SKIPPED: needs mpirun (openmpi-bin) and torch"
  exit 0
fi
fresh_work
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

# make_trainer NAME MODEL BATCH BUDGET [compile args]: NAME/build/trainer
make_trainer() {
  local name=$1 model=$2 batch=$3 budget=$4
  shift 4
  "$MEMFIT" compile "$model.onnx" --batch "$batch" --budget "$budget" \
    --device k40m -o "$name" --quiet "$@" || fail "compile $name"
  cmake -S "$name" -B "$name/build" -DMEMFIT_BACKEND=cpu >"$name/cmake.log" 2>&1 ||
    { cat "$name/cmake.log"; fail "configure $name"; }
  cmake --build "$name/build" -j 2 >"$name/build.log" 2>&1 ||
    { tail -30 "$name/build.log"; fail "build $name"; }
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
  make_trainer "$name" "$model" 8 "$budget" --ranks "$ranks" --shard "$shard" \
    --optimizer "$opt" "$@"
  grep -q '"ranks": '"$ranks" "$name/plan.json" || fail "$name: plan.json lacks the ranks"
  "${MPIRUN[@]}" -np "$ranks" "$name/build/trainer" --data "$data" --labels lab.npy \
    --iterations 3 --lr 0.05 "${optargs[@]}" --weight-decay 0.001 --log-every 1 \
    --save "$name/trained.onnx" >"$name/train.log" 2>&1 ||
    { cat "$name/train.log"; fail "train $name"; }
  grep -q "^ranks: all $ranks hold the same weights bit for bit" "$name/train.log" ||
    fail "$name: no word that the ranks hold the same weights"
  $PY "$SRC/tests/e2e/torch_reference.py" "$model.onnx" "$data" lab.npy \
    --batch 8 --iterations 3 --lr 0.05 "${refopt[@]}" --weight-decay 0.001 \
    --rtol 1e-4 --losses "$name/train.log" --trained "$name/trained.onnx" \
    >"$name/ref.log" 2>&1 || { cat "$name/ref.log"; fail "$name disagrees with torch"; }
  echo "$name: $(cat "$name/ref.log") (plan changes $(changes "$name"))"
}

# The default tier: every shard level, both optimizers and tight plans;
# the full tier adds sub-batches on two ranks and the plainer cases.
case_ mlp-r2 mlp vec.npy 2 0 sgd 100%
case_ cnn-r4-s2-tight tiny-cnn img.npy 4 2 sgd 85%
case_ cnn-r2-s1-adamw-tight tiny-cnn img.npy 2 1 adamw 55%
tight=(cnn-r4-s2-tight cnn-r2-s1-adamw-tight)
if full; then
  case_ mlp-r4-s1-adamw mlp vec.npy 4 1 adamw 100%
  case_ mlp-r2-s2-sub mlp vec.npy 2 2 adamw 100% --sub-batch 2
  [ "$(changes mlp-r2-s2-sub)" -gt 0 ] || fail "mlp-r2-s2-sub: no sub-batches"
  case_ cnn-r2-tight tiny-cnn img.npy 2 0 sgd 60%
  tight+=(cnn-r2-tight)
fi
for d in "${tight[@]}"; do
  [ "$(changes "$d")" -gt 0 ] || fail "$d: the tight plan changes nothing"
done

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

# Replicas that diverge are caught, and every rank stops alike: rank 1
# starts from other weights (one mpirun, two commands), so with replicated
# gradients the ranks can never agree. Rank 0 names it, all ranks exit with
# status 1 (no abort, no hang: the timeout would give 124), nothing is saved.
$PY - <<'PY' || fail "cannot write other weights"
import onnx
from onnx import numpy_helper
m = onnx.load("mlp.onnx")
t = m.graph.initializer[0]
a = numpy_helper.to_array(t).copy()
a.flat[0] += 0.5
t.CopyFrom(numpy_helper.from_array(a, t.name))
onnx.save(m, "mlp-other.onnx")
PY
div=(--data vec.npy --labels lab.npy --iterations 2 --lr 0.05 --save div.onnx)
timeout 120 "${MPIRUN[@]}" -np 1 mlp-r2/build/trainer "${div[@]}" : \
  -np 1 mlp-r2/build/trainer --model mlp-other.onnx "${div[@]}" >div.log 2>&1
rc=$?
[ "$rc" -eq 1 ] || { cat div.log; fail "diverged replicas: exit status $rc, expected 1"; }
grep -q "trainer: error: 1 of 2 ranks hold other weights .* the replicas diverged" div.log ||
  { cat div.log; fail "diverged replicas: no word of it"; }
[ ! -e div.onnx ] || fail "diverged replicas: weights were saved"
echo "diverged replicas: caught, every rank exits 1"

# fp16 on 2 ranks (GradScaler under DDP). Two steps of a 2-rank trainer,
# replicated with SGD and with --shard 2 and AdamW, update the weights as a
# one-rank fp16 trainer at the same global batch does, and as float64 torch
# does within tests/cli/precision_train.sh's fp16 tolerance. Measured worst:
# 2 ranks against one 4e-7 (the order of float sums), against torch 4e-4
# with SGD and 0.012 with AdamW, as one rank.
F16_TOL=0.05
SAME_TOL=0.001
f16() { # name batch optimizer [compile args]
  make_trainer "$1" tiny-cnn "$2" 100% --precision fp16 --optimizer "$3" "${@:4}"
}
f16 f16-r1 8 sgd
f16 f16-r2 8 sgd --ranks 2
f16 f16-r1-adamw 8 adamw
f16 f16-r2-s2-adamw 8 adamw --ranks 2 --shard 2
f16 f16-r1-adamw-b4 4 adamw
train16() { # dir ranks data labels out.onnx log [trainer args]
  local d=$1 r=$2 x=$3 y=$4 out=$5 log=$6 launch=()
  shift 6
  [ "$r" -gt 1 ] && launch=(timeout 120 "${MPIRUN[@]}" -np "$r")
  "${launch[@]}" "$d/build/trainer" --data "$x" --labels "$y" --lr 0.05 \
    --log-every 1 --save "$out" "$@" >"$log" 2>&1 || { cat "$log"; fail "train $d"; }
}
update_diff() { # a.onnx b.onnx: the largest difference of a weight's update
  # from its initial value in tiny-cnn.onnx, relative to b's update
  $PY - tiny-cnn.onnx "$@" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
w0, a, b = ({t.name: numpy_helper.to_array(t).astype(np.float64)
             for t in onnx.load(f).graph.initializer} for f in sys.argv[1:4])
print("%.2e" % max(np.linalg.norm(a[k] - b[k]) / np.linalg.norm(b[k] - w0[k])
                   for k in w0 if np.linalg.norm(b[k] - w0[k]) > 0))
PY
}
for opt in sgd adamw; do
  one=f16-r1 two=f16-r2 args=(--momentum 0.9 --weight-decay 0.001)
  # Adam's first steps are lr * sign(g): a gradient within fp16's rounding
  # of zero would flip a whole step (0.12 of conv1's update at eps 1e-8);
  # eps 1e-4 keeps the steps of such gradients as small as they are.
  [ $opt = adamw ] && one=f16-r1-adamw two=f16-r2-s2-adamw args=(--weight-decay 0.01 --eps 1e-4)
  for d in $one $two; do
    r=1
    [ $d = $two ] && r=2
    train16 $d $r img.npy lab.npy $d/trained.onnx $d/train.log --iterations 2 "${args[@]}"
    $PY "$SRC/tests/e2e/torch_reference.py" tiny-cnn.onnx img.npy lab.npy \
      --batch 8 --iterations 2 --lr 0.05 --optimizer $opt "${args[@]}" \
      --rtol 0.02 --update-tol $F16_TOL --losses $d/train.log \
      --trained $d/trained.onnx >$d/ref.log 2>&1 ||
      { cat $d/ref.log; fail "$d disagrees with torch"; }
    echo "$d vs float64 torch: $(cat $d/ref.log)"
  done
  grep -q "^ranks: all 2 hold the same weights bit for bit" $two/train.log ||
    fail "$two: no word that the ranks hold the same weights"
  diff=$(update_diff $two/trained.onnx $one/trained.onnx)
  $PY -c "import sys; sys.exit(0 if $diff <= $SAME_TOL else 1)" ||
    fail "$two's update differs from $one's by $diff"
  echo "$two vs $one: updates differ by at most $diff"
done

# bf16 on 2 ranks: --shard 2 with AdamW updates as one bf16 rank at the
# same global batch does, within B16_TOL: each rank stages its convolution
# weight gradients over its own 4 samples in bf16 before they are summed
# (autocast's gradient of a bf16 weight copy, per rank as under DDP), so the
# sums round otherwise than one rank's over 8 samples (measured 1.3e-3).
B16_TOL=0.005
make_trainer b16-r1 tiny-cnn 8 100% --precision bf16 --optimizer adamw
make_trainer b16-r2 tiny-cnn 8 100% --precision bf16 --optimizer adamw --ranks 2 --shard 2
for d in b16-r1 b16-r2; do
  r=1
  [ $d = b16-r2 ] && r=2
  train16 $d $r img.npy lab.npy $d/trained.onnx $d/train.log --iterations 2 \
    --weight-decay 0.01 --eps 1e-4
done
grep -q "^ranks: all 2 hold the same weights bit for bit" b16-r2/train.log ||
  fail "b16-r2: no word that the ranks hold the same weights"
diff=$(update_diff b16-r2/trained.onnx b16-r1/trained.onnx)
$PY -c "import sys; sys.exit(0 if $diff <= $B16_TOL else 1)" ||
  fail "b16-r2's update differs from b16-r1's by $diff"
echo "b16-r2 vs b16-r1: updates differ by at most $diff"

# A forced overflow on 2 ranks: 2^40 overflows fp16 gradients, so the first
# steps are skipped and the scale halves until they fit. With --shard 2
# each rank checks only its slice of the gradients, so the decision is
# all-reduced. To make it matter, conv2 reads conv1's last channel through
# weights 100 times larger (and that channel is kept active): as the scale
# backs off, the last step to overflow does so in that channel's gradient
# alone, which is conv1's, in rank 1's slice; a rank 0 deciding alone would
# update while rank 1 skips (a deadlock at the next collective, hence the
# timeout). Each rank sees the same 4 samples every step, so the run must be
# bit for bit the one-rank run at batch 4 forced alike: the same steps
# skipped, the same losses and weights, and the ranks replicas of each other
# (the trainer compares them).
$PY - <<'PY' || fail "one-batch data"
import numpy as np, onnx
from onnx import numpy_helper
x, y = np.load("img.npy")[:4], np.load("lab.npy")[:4]
np.save("one-x.npy", x), np.save("one-y.npy", y)
np.save("two-x.npy", np.concatenate([x, x]))
np.save("two-y.npy", np.concatenate([y, y]))
m = onnx.load("tiny-cnn.onnx")
for t in m.graph.initializer:
    a = numpy_helper.to_array(t).copy()
    if t.name == "conv2.weight":
        a[:, -1] *= 100
    elif t.name == "conv1.bias":
        a[-1] = 1.0
    t.CopyFrom(numpy_helper.from_array(a, t.name))
onnx.save(m, "lopsided.onnx")
PY
N=30
over=(--iterations $N --loss-scale 1099511627776 --weight-decay 0.01 --eps 1e-4
  --model lopsided.onnx)
train16 f16-r1-adamw-b4 1 one-x.npy one-y.npy over1.onnx over1.log "${over[@]}"
train16 f16-r2-s2-adamw 2 two-x.npy two-y.npy over2.onnx over2.log "${over[@]}"
skips=$(grep -c 'skipped: gradients not finite' over2.log)
[ "$skips" -ge 1 ] && [ "$skips" -lt $N ] || fail "2 ranks, forced overflow: $skips steps skipped of $N"
[ "$(grep skipped over1.log)" = "$(grep skipped over2.log)" ] ||
  fail "2 ranks skipped other steps than one: $(grep -c skipped over1.log) against $skips"
[ "$(grep loss over1.log | cut -d' ' -f1-5)" = "$(grep loss over2.log | cut -d' ' -f1-5)" ] ||
  fail "2 ranks forced to overflow print other losses than one rank"
grep -q "^ranks: all 2 hold the same weights bit for bit after $((N - skips)) updates" over2.log ||
  fail "the ranks' weights after a forced overflow: $(grep '^ranks' over2.log)"
$PY - over1.onnx over2.onnx <<'PY' ||
import sys, onnx
from onnx import numpy_helper
a, b = ({t.name: numpy_helper.to_array(t).tobytes()
         for t in onnx.load(f).graph.initializer} for f in sys.argv[1:3])
sys.exit(0 if a == b else 1)
PY
  fail "2 ranks forced to overflow end with other weights than one rank"
echo "forced overflow on 2 ranks (--shard 2, adamw): $skips of $N steps skipped, as on one rank; losses and weights bit for bit equal"

# Clipping over ranks: the norm is the global batch's (each rank's
# gradient slices' squares summed over the ranks with --shard 2), so two
# ranks clip as one rank does and stay replicas.
make_trainer clip-r1 mlp 8 100% --optimizer adamw --clip-grad-norm 0.1
make_trainer clip-r2 mlp 8 100% --optimizer adamw --clip-grad-norm 0.1 \
  --ranks 2 --shard 2
# With validation over 11 samples: each rank evaluates its slice of every
# batch (the last padded), the sums added over the ranks.
$PY -c "import numpy as np; np.save('vval.npy', np.load('vec.npy')[:11]); np.save('lval.npy', np.load('lab.npy')[:11])" ||
  fail "cannot write the validation set"
VAL=(--val-data vval.npy --val-labels lval.npy --val-every 2)
clip-r1/build/trainer --data vec.npy --labels lab.npy --iterations 3 \
  --log-every 1 "${VAL[@]}" --save clip-r1/trained.onnx \
  >clip-r1/train.log 2>&1 || { cat clip-r1/train.log; fail "train clip-r1"; }
"${MPIRUN[@]}" -np 2 clip-r2/build/trainer --data vec.npy --labels lab.npy \
  --iterations 3 --log-every 1 "${VAL[@]}" --save clip-r2/trained.onnx \
  >clip-r2/train.log 2>&1 || { cat clip-r2/train.log; fail "train clip-r2"; }
$PY - clip-r1/train.log clip-r2/train.log <<'PY' ||
import re, sys
def vals(f):
    return [(float(l), float(a), int(n)) for l, a, n in re.findall(
        r"^validation after step \d+\s+val loss (\S+)\s+accuracy (\S+)%\s+\((\d+) samples",
        open(f).read(), re.M)]
a, b = vals(sys.argv[1]), vals(sys.argv[2])
print(f"validation on 1 rank {a}, on 2 ranks {b}")
sys.exit(0 if len(a) == 2 and len(b) == 2 and all(
    x[2] == y[2] == 11 and abs(x[0] - y[0]) <= 1e-5 * max(1, abs(x[0])) and
    abs(x[1] - y[1]) <= 100 / 11 + 1e-9 for x, y in zip(a, b)) else 1)
PY
  fail "2 ranks validate otherwise than one"

grep -q "^ranks: all 2 hold the same weights bit for bit" clip-r2/train.log ||
  fail "clipping ranks diverged"
$PY - clip-r1/trained.onnx clip-r2/trained.onnx mlp.onnx <<'PY' ||
import sys, numpy as np, onnx
from onnx import numpy_helper
a, b, init = ({t.name: numpy_helper.to_array(t)
               for t in onnx.load(f).graph.initializer} for f in sys.argv[1:4])
moved = max(float(np.max(np.abs(a[n] - init[n]))) for n in a)
worst = max(float(np.max(np.abs(a[n] - b[n]))) / max(1e-3, float(np.max(np.abs(a[n]))))
            for n in a)
print(f"clipped on 2 ranks vs 1: worst relative weight difference {worst:.2e}, moved {moved:.2e}")
sys.exit(0 if worst <= 1e-5 and moved > 1e-4 else 1)
PY
  fail "2 clipping ranks train otherwise than one"
grep -q "grad norm" clip-r2/train.log || fail "clip-r2 prints no gradient norm"

# A data-parallel trainer started without mpirun says how to start it.
out=$("cnn-r2-s1-adamw-tight/build/trainer" --synthetic 2>&1) && fail "one process ran a 2-rank trainer"
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
