#!/usr/bin/env bash
# The trainer a user runs (CPU emulation backend): checkpoints resume to the
# same weights as an uninterrupted run, --save writes a model the ONNX
# checker accepts, epochs and shuffling, and bad inputs fail with a clear
# message and exit 1.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work

$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(3)
np.save("x.npy", r.standard_normal((40, 16)).astype(np.float32))
np.save("y.npy", r.integers(0, 10, 40).astype(np.int64))
np.save("y32.npy", r.integers(0, 10, 40).astype(np.int32))
np.save("bad_labels.npy", np.full(40, 12, dtype=np.int64))
np.save("minus_one.npy", np.full(40, -1, dtype=np.int64))
ignored = r.integers(0, 10, 40)
ignored[::3] = -100  # torch's ignore_index
np.save("y_ignored.npy", ignored.astype(np.int64))
np.save("short.npy", r.standard_normal((40, 15)).astype(np.float32))
np.save("f64.npy", r.standard_normal((40, 16)))
PY
# Dropout: its masks depend on the iteration, so resuming must restore it.
"$MEMFIT" zoo tiny-dropout -o m.onnx >/dev/null || fail zoo
"$MEMFIT" compile m.onnx --batch 8 --budget 90% --device k40m -o t --quiet ||
  fail compile
cmake -S t -B t/build -DMEMFIT_BACKEND=cpu >cmake.log 2>&1 || { cat cmake.log; fail configure; }
cmake --build t/build -j 2 >build.log 2>&1 || { tail -20 build.log; fail build; }
T=t/build/trainer
run() { "$T" --data x.npy --labels y.npy --lr 0.05 --shuffle --seed 9 "$@"; }

run --iterations 7 --save full.onnx --log-every 1 >full.log 2>&1 || { cat full.log; fail "uninterrupted run"; }
run --iterations 3 --checkpoint ck >part1.log 2>&1 || { cat part1.log; fail "first half"; }
[ -f ck/checkpoint.bin ] || fail "no checkpoint written"
ls ck | grep -q tmp && fail "temporary checkpoint left behind"
run --iterations 7 --checkpoint ck --resume --save resumed.onnx --log-every 1 \
  >part2.log 2>&1 || { cat part2.log; fail "resumed run"; }
grep -q "resumed from ck at iteration 3" part2.log || fail "resume not reported"
cmp -s full.onnx resumed.onnx || fail "resumed weights differ from the uninterrupted run"
diff <(grep '^iteration [4-7] ' full.log | cut -d' ' -f1-4) \
     <(grep '^iteration [4-7] ' part2.log | cut -d' ' -f1-4) >/dev/null ||
  fail "resumed losses differ"
$PY -c "import onnx; m = onnx.load('full.onnx'); onnx.checker.check_model(m); print('saved model: ok, %d initializers' % len(m.graph.initializer))" ||
  fail "saved model rejected by the ONNX checker"

# 40 samples are 5 batches of 8: two epochs are 10 iterations.
run --epochs 2 >epochs.log 2>&1 || fail "--epochs"
grep -q "^done: 10 iterations" epochs.log || { cat epochs.log; fail "2 epochs should be 10 iterations"; }
"$T" --data x.npy --labels y32.npy --iterations 2 >i32.log 2>&1 || fail "int32 labels"

expect_error() { # what status args...
  local what=$1 want=$2
  shift 2
  "$T" "$@" >err.log 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || { cat err.log; fail "$what: exit $rc, expected $want"; }
  grep -q "trainer: error:" err.log || fail "$what: no error message"
  echo "$what: $(head -1 err.log)"
}
expect_error "labels out of range" 1 --data x.npy --labels bad_labels.npy
# -100, the ignored index, loads; -1 does not, and the message names both.
"$T" --data x.npy --labels y_ignored.npy --iterations 2 >ign.log 2>&1 ||
  { cat ign.log; fail "labels with the ignored index"; }
expect_error "a negative label" 1 --data x.npy --labels minus_one.npy
grep -q "is not the ignored index -100" err.log || fail "the error does not name the ignored index"
expect_error "wrong sample size" 1 --data short.npy --labels y.npy
expect_error "float64 inputs" 1 --data f64.npy --labels y.npy
expect_error "missing file" 1 --data nope.npy --labels y.npy
expect_error "no data source" 1 --iterations 2
# A usage error (an unknown option) exits 2, as on every memfit command.
expect_error "unknown flag" 2 --synthetic --frobnicate
expect_error "resume without checkpoint dir" 1 --synthetic --resume
# Numbers that are not numbers, or out of range, name the flag.
for bad in "--iterations -5" "--iterations 2.5" "--lr nan" "--lr inf" \
           "--lr -0.1" "--lr 1e40" "--momentum nan" "--weight-decay -1" \
           "--seed -1" "--log-every -1" "--epochs x" "--checkpoint-every -2" \
           "--iterations 0" "--epochs 0" "--momentum 1" "--momentum 1.5"; do
  # shellcheck disable=SC2086
  expect_error "$bad" 1 --synthetic $bad
  grep -q -- "${bad%% *}" err.log || fail "$bad: the message does not name the flag"
done

# A torchvision export (ResNet-18 with external weight data, written by the
# export_torchvision fixture): compiled under a tight budget, trained one
# step from its own initializers, saved as a model the checker accepts.
BUILD=$(cd "$(dirname "$MEMFIT")/.." && pwd)
TV="$BUILD/testmodels/resnet18.onnx"
if [ -f "$TV" ]; then
  "$MEMFIT" compile "$TV" --batch 1 --budget 304MiB --device k40m -o r18 --quiet ||
    fail "compile resnet18"
  [ -f r18/resnet18.onnx.data ] || fail "external data not copied into OUTDIR"
  cmake -S r18 -B r18/build -DMEMFIT_BACKEND=cpu >cmake18.log 2>&1 || { cat cmake18.log; fail "configure resnet18"; }
  cmake --build r18/build -j 2 >build18.log 2>&1 || { tail -20 build18.log; fail "build resnet18"; }
  r18/build/trainer --synthetic --iterations 1 --save r18.onnx >r18.log 2>&1 ||
    { cat r18.log; fail "train resnet18"; }
  $PY -c "import onnx; onnx.checker.check_model(onnx.load('r18.onnx'))" ||
    fail "saved resnet18 rejected by the ONNX checker"
  echo "resnet18 (torchvision export): $(tail -1 r18.log)"
else
  echo "no torchvision export at $TV (python3-torch missing?): skipped that part"
fi
echo "trainer: checkpoints, --save, epochs and errors behave"
