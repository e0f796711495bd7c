#!/usr/bin/env bash
# The trainer's --lr-schedule on the CPU emulation: gpt2-tiny trained 8
# steps with each schedule (cosine and linear with a warm-up and a floor,
# step, onecycle; AdamW and SGD) against the same model in PyTorch
# (float64) stepped by torch's own scheduler where one is the same schedule
# (OneCycleLR, StepLR) and by the formula of runtime/LrSchedule.h written
# again in Python where none is: losses and weights within 1e-5, and every
# step's printed rate the float of torch's. A run resumed from a
# checkpoint half-way is bit for bit the uninterrupted one; a schedule the
# run cannot follow is refused before any step.
set -u
source "$(dirname "$0")/lib/preamble.bash"
# shellcheck source=lib/trainer.bash
source "$SRC/tests/cli/lib/trainer.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "lr_schedule: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
"$MEMFIT" zoo gpt2-tiny -o g.onnx >/dev/null || fail "zoo gpt2-tiny"
"$PY" - <<'PYEOF' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(7)
np.save("tok.npy", r.integers(0, 61, (8, 16)).astype(np.int64))
np.save("next.npy", r.integers(0, 61, (8, 16)).astype(np.int64))
PYEOF
for opt in adamw sgd; do
  build_trainer $opt g.onnx --batch 4 --budget 100% --optimizer $opt \
    --refine=false
done

# Adam's eps at 1e-3: gpt2's attention key bias has a zero true gradient,
# whose rounding noise eps 1e-8 would scale to whole steps.
check() { # name optimizer schedule-flags...
  local name=$1 opt=$2
  shift 2
  local extra=(--lr 0.01)
  [ "$opt" = adamw ] && extra+=(--weight-decay 0.01 --eps 1e-3)
  [ "$opt" = sgd ] && extra+=(--momentum 0.9)
  ./$opt/build/trainer --data tok.npy --labels next.npy --iterations 8 \
    --log-every 1 "${extra[@]}" "$@" --save $name.onnx >$name.log 2>&1 ||
    { cat $name.log; fail "train $name"; }
  "$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx tok.npy next.npy \
    --heads 4 --batch 4 --iterations 8 --optimizer $opt "${extra[@]}" "$@" \
    --losses $name.log --trained $name.onnx --tol 1e-5 >$name.ref 2>&1 ||
    { cat $name.ref; fail "$name disagrees with torch"; }
  echo "$name vs torch: $(cat $name.ref)"
}
check cosine adamw --lr-schedule cosine --warmup-steps 2 --min-lr 0.001
check linear sgd --lr-schedule linear --warmup-steps 3 --min-lr 0.002
check step sgd --lr-schedule step --lr-step-size 3 --lr-gamma 0.5
check onecycle adamw --lr-schedule onecycle
check onecycle_warm sgd --lr-schedule onecycle --warmup-steps 3 --min-lr 0.0001

# Killed after step 5 of 8 (its last checkpoint at step 4), then resumed
# with the same flags: the rates follow the step, so the weights are the
# uninterrupted run's.
RUN=(--data tok.npy --labels next.npy --lr 0.01 --weight-decay 0.01
  --eps 1e-3 --lr-schedule cosine --warmup-steps 2 --min-lr 0.001
  --iterations 8)
./adamw/build/trainer "${RUN[@]}" --save whole.onnx >whole.log ||
  fail "train whole"
MEMFIT_KILL_AFTER_ITERATION=5 bash -c './adamw/build/trainer "$@"; exit $?' \
  trainer "${RUN[@]}" --checkpoint ck --checkpoint-every 4 >killed.log 2>&1
rc=$?
[ $rc -eq 137 ] || fail "the killed trainer exited $rc, not by SIGKILL"
./adamw/build/trainer "${RUN[@]}" --checkpoint ck --resume \
  --save resumed.onnx >resumed.log || fail "resume"
grep -q "resumed from ck at iteration 4" resumed.log ||
  { cat resumed.log; fail "not resumed at iteration 4"; }
cmp -s whole.onnx resumed.onnx || fail "a resumed schedule trains otherwise"

# Refused before any step, naming the flag.
expect_error() { # pattern trainer-args...
  local pattern=$1
  shift
  out=$(./adamw/build/trainer --data tok.npy --labels next.npy "$@" 2>&1) &&
    fail "trained with $*"
  echo "$out" | grep -q -- "$pattern" || fail "unclear error for $*: $out"
  echo "$out" | grep -q "^iteration" && fail "stepped before refusing $*"
  return 0
}
expect_error "invalid value 'cosin' for --lr-schedule" --lr-schedule cosin
expect_error "--warmup-steps 8 leaves none of the run's 8 steps" \
  --iterations 8 --lr-schedule cosine --warmup-steps 8
expect_error "needs --lr-step-size" --iterations 8 --lr-schedule step
expect_error "--min-lr is above --lr" --iterations 8 --lr 0.01 \
  --lr-schedule linear --min-lr 0.1
expect_error "--min-lr is for --lr-schedule" --min-lr 0.001
echo "lr_schedule: every schedule steps as torch's does and resumes exactly"
