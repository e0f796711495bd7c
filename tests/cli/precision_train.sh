#!/usr/bin/env bash
# Mixed-precision trainers on the CPU emulation, end to end against
# PyTorch: a small CNN with BatchNorm and a small GPT-style decoder,
# compiled --precision bf16, fp16 and tf32 under a tight budget
# (16-bit blocks offloaded, recomputed, sub-batched; the ideal one too in
# the full tier), trained two steps. bf16 makes the weight update
# torch.autocast("cpu", bfloat16) makes and every precision the update
# float64 PyTorch makes, within a few percent; tf32 and fp16 differ from fp32 (the rounding happens). fp16's
# loss scale: a forced overflow skips the step and halves the scale, and a
# run that starts at the scale it backs off to trains bit for bit the same;
# a run resumed from a checkpoint (the scale and its growth in it) ends as
# an uninterrupted one.
set -u
source "$(dirname "$0")/lib/preamble.bash"
needs_torch precision_train
fresh_work
source "$SRC/tests/e2e/verify.sh"

# Relative tolerances on the weight update, measured worst in brackets:
# bf16 against torch.autocast's bf16 (0.030); against float64 by precision,
# where torch's own autocast bf16 is 0.083 off on the CNN's first
# convolution (BatchNorm's backward cancels).
SAME=0.05
declare -A FULL=([bf16]=0.12 [fp16]=0.05 [tf32]=0.05)
LR=0.05

compile() { # model precision budget dir [compile args]
  local m=$1 p=$2 b=$3 d=$4
  shift 4
  "$MEMFIT" compile "$m.onnx" --batch 4 --budget "$b" --device a100-40g \
    --precision "$p" -o "$d" --quiet "$@" || fail "compile $d"
  build "$d"
}
train() { # dir model extra-args...
  local d=$1 m=$2
  shift 2
  "$d/build/trainer" --data "$m-x.npy" --labels "$m-y.npy" --iterations 2 \
    --lr $LR --momentum 0.9 --log-every 1 --save "$d/trained.onnx" "$@" \
    >"$d/train.log" 2>&1 || { cat "$d/train.log"; fail "train $d"; }
}
reference() { # dir model tol ref-args...: the update against torch
  local d=$1 m=$2 tol=$3
  shift 3
  "$PY" "$SRC/tests/e2e/torch_reference.py" "$m.onnx" "$m-x.npy" \
    "$m-y.npy" --batch 4 --iterations 2 --lr $LR --momentum 0.9 \
    --rtol 0.02 --update-tol "$tol" --losses "$d/train.log" \
    --trained "$d/trained.onnx" "$@" >"$d/ref$*.log" 2>&1 ||
    { cat "$d/ref$*.log"; fail "$d disagrees with torch ($*)"; }
  echo "$d vs torch ${*:-float64}: $(cat "$d/ref$*.log")"
}
same_weights() { # a.onnx b.onnx [params] -> exit 0 when the initializers
  # are equal (params: all but BatchNorm's running statistics, which every
  # forward pass updates, skipped step or not, as in torch)
  "$PY" - "$@" <<'PY'
import sys, onnx
from onnx import numpy_helper
a, b = ({t.name: numpy_helper.to_array(t) for t in onnx.load(f).graph.initializer}
        for f in sys.argv[1:3])
keys = [k for k in a if len(sys.argv) < 4 or "running_" not in k]
sys.exit(0 if a.keys() == b.keys() and all((a[k] == b[k]).all() for k in keys) else 1)
PY
}

declare -A TIGHT=([cnn-bn]=50% [gpt]=80%)
# SuperNeurons recomputes cheap layers even at the ideal budget.
declare -A RECOMPUTE=([cnn-bn]=100% [gpt]=80%)
for m in cnn-bn gpt; do
  "$PY" "$SRC/tests/e2e/today_models.py" $m $m.onnx $m-x.npy $m-y.npy \
    --batch 4 || fail "export $m"
  compile $m fp32 100% fp32-$m
  train fp32-$m $m
  budgets=("${TIGHT[$m]}")
  full && budgets=(100% "${TIGHT[$m]}")
  for p in bf16 fp16 tf32; do
    for budget in "${budgets[@]}"; do
      d=$p-$m-$budget
      compile $m $p $budget $d
      train $d $m
      echo "$d: $(summary $d)"
      reference $d $m ${FULL[$p]}
      [ $p = bf16 ] && reference $d $m $SAME --autocast bf16
      same_weights $d/trained.onnx fp32-$m/trained.onnx &&
        fail "$d trains exactly as fp32: nothing was rounded"
    done
  done
  # SuperNeurons' plan recomputes 16-bit blocks (BatchNorm from its saved
  # statistics, attention, activations).
  d=bf16-$m-recompute
  compile $m bf16 ${RECOMPUTE[$m]} $d --policy superneurons
  train $d $m
  echo "$d: $(summary $d)"
  [ "$($PY -c "import json; print(sum(t['recompute'] for t in json.load(open('$d/plan.json'))['tasks']))")" -gt 0 ] ||
    fail "$d recomputes nothing"
  reference $d $m $SAME --autocast bf16
  # The tight plans must move 16-bit blocks (else they prove nothing more).
  [ "$(summary bf16-$m-${TIGHT[$m]})" != "sub-batch 4, 0 bytes offloaded, 0 recomputes" ] ||
    fail "bf16-$m-${TIGHT[$m]}: the tight plan changes nothing"
done

# fp16 loss scaling on one batch repeated (4 samples): 2^40 overflows fp16
# gradients, so the first steps are skipped and the scale halves until the
# gradients fit; the run then trains the parameters exactly as one started
# at that scale (no step skipped).
"$PY" - <<'PY' || fail "one-batch data"
import numpy as np
for k in ("x", "y"):
    np.save(f"one-{k}.npy", np.load(f"cnn-bn-{k}.npy")[:4])
PY
d=fp16-cnn-bn-${TIGHT[cnn-bn]}
"$d/build/trainer" --data one-x.npy --labels one-y.npy --iterations 30 \
  --lr $LR --log-every 1 --loss-scale 1099511627776 --save over.onnx \
  >over.log 2>&1 || { cat over.log; fail "forced overflow run"; }
skips=$(grep -c 'skipped: gradients not finite' over.log)
[ "$skips" -ge 1 ] && [ "$skips" -lt 30 ] ||
  fail "forced overflow: $skips steps skipped of 30"
scale=$("$PY" -c "print(2 ** (40 - $skips))")
"$d/build/trainer" --data one-x.npy --labels one-y.npy \
  --iterations $((30 - skips)) --lr $LR --log-every 1 --loss-scale "$scale" \
  --save clean.onnx >clean.log 2>&1 || { cat clean.log; fail "clean run"; }
grep -q skipped clean.log && fail "a step skipped at scale $scale"
same_weights over.onnx clean.onnx params ||
  fail "skipping $skips steps did not leave the weights as $((30 - skips)) clean steps"
echo "forced overflow: $skips steps skipped, scale backed off to $scale"

# Resume: a scale that grows every step overflows now and then; three
# steps, a checkpoint, three more end as six in one run.
run6() { # out.onnx iterations extra...
  local out=$1 it=$2
  shift 2
  "$d/build/trainer" --data one-x.npy --labels one-y.npy --iterations "$it" \
    --lr $LR --log-every 1 --loss-scale "$scale" \
    --loss-scale-growth-interval 1 --save "$out" "$@"
}
run6 six.onnx 6 >six.log 2>&1 || { cat six.log; fail "six steps"; }
grep -q skipped six.log || fail "no step skipped while the scale grows"
run6 three.onnx 3 --checkpoint ck >a.log 2>&1 || { cat a.log; fail "3 steps"; }
run6 resumed.onnx 6 --checkpoint ck --resume >b.log 2>&1 ||
  { cat b.log; fail "resume"; }
same_weights six.onnx resumed.onnx || fail "resumed fp16 run differs"
[ "$(grep -c skipped six.log)" = "$(cat a.log b.log | grep -c skipped)" ] ||
  fail "the resumed run skipped other steps"
echo "fp16 resume exact ($(grep -c skipped six.log) of 6 steps skipped)"

# The scale is fp16's: other precisions refuse it.
"fp32-cnn-bn/build/trainer" --synthetic --loss-scale 2 >err.txt 2>&1 &&
  fail "fp32 trainer took --loss-scale"
grep -q "fp16" err.txt || fail "no message: $(cat err.txt)"
echo ok
