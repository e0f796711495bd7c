#!/usr/bin/env bash
# The NVMe tier end to end on the CPU emulation: gpt2-tiny (437.6 KiB of
# weight side under a 40 KiB GPU budget, AdamW) with a host budget (320 KiB)
# that holds its weights and gradients but not all of their optimizer
# state, the rest in a file of the --nvme directory. Checked: the plan puts moments on
# NVMe; 3 steps against PyTorch (fp32, float64 reference, within 1e-5);
# bit for bit the plan with everything on the host; a SIGKILL in the middle
# of an NVMe write, then --resume, bit for bit the uninterrupted run; in
# bf16 the fp32 masters on NVMe too, bit for bit the host-only plan; the
# trainer's --nvme override; and clear errors for a directory that is
# missing, not writable or without the space, leaving the checkpoint as it
# was. A CNN with BatchNorm is nvme_cnn.sh's.
set -u
source "$(dirname "$0")/lib/preamble.bash"
# shellcheck source=lib/nvme.bash
source "$SRC/tests/cli/lib/nvme.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "nvme: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
mkdir nvme other
"$MEMFIT" zoo gpt2-tiny -o g.onnx >/dev/null || fail "zoo gpt2-tiny"
"$PY" - <<'PYEOF' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(5)
np.save("tok.npy", r.integers(0, 61, (4, 16)).astype(np.int64))
np.save("next.npy", r.integers(0, 61, (4, 16)).astype(np.int64))
PYEOF
write_nvme_device

# --refine=false: the refinement phase takes 40 s a plan under the
# sanitizers and changes nothing checked here.
ARGS="--batch 4 --budget 40KiB --library-reserve 0 --sub-batch 1 --optimizer adamw --refine=false"
# Errors: no directory, a file, an unwritable one, a budget past its space,
# a device without the drive's rates, a budget without a directory.
expect_error() { # what pattern memfit-args...
  local what=$1 pattern=$2
  shift 2
  out=$("$MEMFIT" plan g.onnx $ARGS "$@" -o bad 2>&1) && fail "$what plans"
  echo "$out" | grep -q -- "$pattern" || fail "$what: unclear error: $out"
  [ -e bad ] && fail "$what: a refused plan wrote its directory"
  return 0
}
expect_error "a missing --nvme" "--nvme $WORK/none: not a directory" \
  --device dev.json --host-budget 1GiB --nvme "$WORK/none"
touch afile
expect_error "a file as --nvme" "not a directory" --device dev.json \
  --host-budget 1GiB --nvme afile
if [ "$(id -u)" -ne 0 ]; then
  mkdir ro && chmod 500 ro
  expect_error "an unwritable --nvme" "the directory is not writable" \
    --device dev.json --host-budget 1GiB --nvme ro
fi
expect_error "a budget past the free space" "is more than the .* free in" \
  --device dev.json --host-budget 1GiB --nvme nvme --nvme-budget 100000TiB
expect_error "a drive without rates" "states no NVMe read and write rates" \
  --device h100-sxm --host-budget 1GiB --nvme nvme

# inspect: with NVMe for the moments, the same host budget homes more
# weights and lowers Mmin.
for n in 0 1; do
  extra=$([ $n = 1 ] && echo "--nvme nvme --nvme-budget 1MiB")
  "$MEMFIT" inspect g.onnx --batch 4 --optimizer adamw --host-budget 200KiB \
    $extra --json >inspect$n.json || fail "inspect $extra"
done
"$PY" - <<'PYEOF' || fail "inspect --nvme homes no more than without it"
import json
a, b = (json.load(open(f"inspect{n}.json"))["host_budget"] for n in (0, 1))
print(f"inspect: {a['homed_weights']} weights homed, Mmin {a['lower_bound_bytes']}; "
      f"with NVMe {b['homed_weights']}, {b['nvme_bytes']} bytes there, "
      f"Mmin {b['lower_bound_bytes']}")
assert b["homed_weights"] > a["homed_weights"] and b["nvme_bytes"] > 0
assert b["homed_bytes"] <= 200 * 1024 and b["nvme_bytes"] <= 1 << 20
assert b["lower_bound_bytes"] < a["lower_bound_bytes"]
PYEOF

compile() { # dir extra-memfit-args...
  local d=$1
  shift
  compile_model "$d" g.onnx $ARGS "$@"
}
# Adam's eps at 1e-3: gpt2's attention key bias has a zero true gradient,
# whose rounding noise eps 1e-8 would scale to whole steps.
TRAIN="--data tok.npy --labels next.npy --iterations 3 --lr 0.01 --weight-decay 0.01 --eps 1e-3 --log-every 1"

# The host holds the weights and gradients (218.8 KiB) but not every
# moment: the plan puts the rest on NVMe.
compile tiered --host-budget 320KiB --nvme nvme
"$PY" - tiered/plan.json <<'PYEOF' || fail "the plan keeps no state on NVMe"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(f"plan: {s['host_home_bytes']} bytes on the host, "
      f"{s['nvme_home_bytes']} on NVMe ({s['nvme_homed_weights']} weights' "
      "moments)")
assert s["nvme_home_bytes"] > 0 and s["host_home_bytes"] <= 320 * 1024
PYEOF
grep -q "stateOnNvme = true" tiered/src/main.cpp || fail "no weight's state on NVMe"
grep -q "^nvme " <("$MEMFIT" plan g.onnx $ARGS --device dev.json \
  --host-budget 320KiB --nvme nvme) || fail "the summary shows no NVMe line"
grep -q '"cat":"nvme"\|"cat": "nvme"' tiered/trace.json ||
  fail "the trace shows no NVMe track"

run_trainer tiered train $TRAIN --save tiered/trained.onnx
grep -q "^NVMe: .* MiB of optimizer state" tiered/train.log ||
  fail "the trainer does not report its NVMe state"
[ -z "$(ls -A nvme)" ] || fail "the trainer left files in the NVMe directory"
"$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx tok.npy next.npy \
  --heads 4 --kv-heads 4 --batch 4 --iterations 3 --optimizer adamw \
  --lr 0.01 --weight-decay 0.01 --eps 1e-3 --losses tiered/train.log \
  --trained tiered/trained.onnx --tol 1e-5 >tiered/ref.log 2>&1 ||
  { cat tiered/ref.log; fail "the NVMe plan disagrees with torch"; }
echo "nvme vs torch: $(cat tiered/ref.log)"

# Everything on the host: the same bytes.
compile hostonly --host-budget 1GiB
grep -q "stateOnNvme" hostonly/src/main.cpp && fail "hostonly keeps state on NVMe"
run_trainer hostonly train $TRAIN --save hostonly/trained.onnx
cmp -s tiered/trained.onnx hostonly/trained.onnx ||
  fail "state on NVMe trains other weights than state on the host"

# The trainer's --nvme: another directory, the same bytes; a missing one
# is a clear error before any step.
./tiered/build/trainer $TRAIN --nvme other --save other.onnx >other.log 2>&1 ||
  { cat other.log; fail "train with --nvme other"; }
cmp -s tiered/trained.onnx other.onnx || fail "--nvme other trains differently"
out=$(./tiered/build/trainer $TRAIN --nvme "$WORK/none" 2>&1) &&
  fail "a missing --nvme trains"
echo "$out" | grep -q "cannot create the NVMe state file in $WORK/none" ||
  fail "unclear error for a missing trainer --nvme: $out"
# --nvme-budget alone plans for a drive elsewhere: the trainer is told
# where at its start, and refuses to start without it.
compile remote --host-budget 320KiB --nvme-budget 1GiB
out=$(./remote/build/trainer $TRAIN 2>&1) && fail "remote trains without --nvme"
echo "$out" | grep -q "no directory was named: give --nvme DIR" ||
  fail "unclear error for a trainer without its NVMe directory: $out"
./remote/build/trainer $TRAIN --nvme other --save remote.onnx >remote.log 2>&1 ||
  { cat remote.log; fail "train remote --nvme other"; }
cmp -s tiered/trained.onnx remote.onnx || fail "remote trains differently"
out=$(./hostonly/build/trainer $TRAIN --nvme other 2>&1) &&
  fail "--nvme on a plan without NVMe state trains"
echo "$out" | grep -q "keeps no optimizer state on NVMe" ||
  fail "unclear error for --nvme without NVMe state: $out"

# bf16: the fp32 master of each weight the GPU reads as its working copy
# goes to NVMe with the moments (220 KiB of host cannot hold master, copy
# and gradient). Bit for bit the bf16 plan with everything on the host,
# resumed exactly from a checkpoint, whose masters come from the file; and
# `memfit report` reads the plan back.
compile t16 --precision bf16 --host-budget 220KiB --nvme nvme
compile h16 --precision bf16 --host-budget 1GiB
"$PY" - t16/plan.json <<'PYEOF' || fail "the bf16 plan keeps no master on NVMe"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(f"bf16 plan: {s['host_home_bytes']} bytes on the host, "
      f"{s['nvme_home_bytes']} on NVMe, {s['nvme_master_weights']} masters")
assert s["nvme_master_weights"] > 0 and s["host_home_bytes"] <= 220 * 1024
PYEOF
grep -q "masterOnNvme = true" t16/src/main.cpp || fail "no master on NVMe in t16"
"$MEMFIT" report t16/plan.json --layers 0 >t16/report.txt 2>&1 ||
  { cat t16/report.txt; fail "memfit report cannot read the bf16 NVMe plan"; }
grep -q "the fp32 master of" t16/report.txt || fail "the report names no master on NVMe"
run_trainer t16 train $TRAIN --save t16.onnx
grep -q "^NVMe: .* of optimizer state and fp32 masters" t16/train.log ||
  fail "the trainer does not report its masters on NVMe"
run_trainer h16 train $TRAIN --save h16.onnx
cmp -s t16.onnx h16.onnx ||
  fail "bf16 masters on NVMe train other weights than on the host"
run_trainer t16 first $TRAIN --iterations 2 --checkpoint ck16 \
  --checkpoint-every 1
run_trainer t16 resumed $TRAIN --checkpoint ck16 --resume --save r16.onnx
cmp -s r16.onnx h16.onnx || fail "bf16 masters on NVMe: the resumed run differs"
echo "nvme bf16: masters on NVMe train and resume bit for bit as on the host"

# SIGKILL half-way through the first NVMe write of iteration 2 (each
# weight's update writes its two moments once: one chunk each), then a
# resume from iteration 1's checkpoint: the uninterrupted run's bytes.
weights=$("$PY" -c 'import json; print(json.load(open("tiered/plan.json"))["summary"]["nvme_homed_weights"])')
# Under a shell of its own, whose "Killed" goes nowhere.
MEMFIT_NVME_KILL_AT_WRITE=$((2 * weights + 1)) bash -c \
  './tiered/build/trainer "$@" >killed.log 2>&1; exit $?' trainer $TRAIN \
  --checkpoint ck --checkpoint-every 1 2>/dev/null
rc=$?
[ $rc -eq 137 ] || { cat killed.log; fail "the killed trainer exited $rc, not by SIGKILL"; }
[ -f ck/checkpoint.bin ] || fail "no checkpoint before the kill"
[ -z "$(ls -A nvme)" ] || fail "the killed trainer left its NVMe file behind"
./tiered/build/trainer $TRAIN --checkpoint ck --resume \
  --save resumed.onnx >resumed.log 2>&1 || { cat resumed.log; fail "resume"; }
grep -q "resumed from ck at iteration 1" resumed.log ||
  { cat resumed.log; fail "not resumed at iteration 1"; }
cmp -s tiered/trained.onnx resumed.onnx ||
  fail "resumed after a SIGKILL in an NVMe write: weights differ"

# A directory without the space (a file size limit stands in for a full
# disk): a clear error at the start, the checkpoint untouched.
cp ck/checkpoint.bin ck.before
out=$(ulimit -f 8; ./tiered/build/trainer $TRAIN --checkpoint ck \
  --checkpoint-every 1 2>&1) && fail "training ran without the NVMe space"
echo "$out" | grep -q "lacks the space for .* of optimizer state the plan keeps on NVMe" ||
  fail "unclear error for a full NVMe directory: $out"
cmp -s ck/checkpoint.bin ck.before || fail "the failed start changed the checkpoint"
echo "nvme: optimizer state on NVMe trains as torch does and resumes exactly"
