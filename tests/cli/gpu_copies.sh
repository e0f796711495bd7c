#!/usr/bin/env bash
# ZeRO-Offload's layout on the CPU emulation: weights homed in host memory
# whose 16-bit working copies stay on the GPU (read in place by every
# round, rounded at home by the host's update and uploaded once a step).
# gpt2-tiny in bf16, AdamW, four sub-batches of one, on the H100 with a
# link slow enough (50 MB/s) that copying the working copies in for every
# sub-batch costs more than a smaller arena, so the planner keeps them.
# Checked: the plan, the generated trainer and the summary say so; 3 steps
# bit for bit as the plan that keeps every weight on the GPU; a checkpoint
# after 2 steps and a resume bit for bit as 3 steps; with the base matrices
# frozen (LoRA-style) their copies stay on the GPU and are never uploaded,
# bit for bit the frozen plan on the GPU. Then MegaTrain's layout: a host
# budget short of the copies, so that each is rounded from its master on
# the way in; bit for bit, validated and resumed as the plan on the GPU.
# Last, LoHan's layout: masters and moments on NVMe and a host budget short
# of even their copies, so that each copy in reads its master from the
# drive; bit for bit, validated and resumed likewise.
set -u
source "$(dirname "$0")/lib/preamble.bash"
# shellcheck source=lib/trainer.bash
source "$SRC/tests/cli/lib/trainer.bash"
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "gpu_copies: SKIPPED: $PY cannot import numpy"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
copies_fixture

# --refine=false: refinement takes most of a sanitized compile and changes
# nothing checked here.
ARGS="--batch 4 --sub-batch 1 --device slow.json --library-reserve 0 --precision bf16 --optimizer adamw --refine=false"
TRAIN="--data tok.npy --labels next.npy --iterations 3 --lr 0.01 --weight-decay 0.01 --eps 1e-3 --log-every 1"


build_trainer kept g.onnx $ARGS --budget 120KiB --host-budget 1GiB
build_trainer gpu g.onnx $ARGS --budget 2MiB
n=$(kept_copies kept)
[ "$n" -gt 0 ] || fail "the slow link's plan keeps no working copy on the GPU"
[ "$(grep -c '\.copyOnGpu = true' kept/src/main.cpp)" -eq "$n" ] ||
  fail "the trainer does not keep the plan's $n copies on the device"
summary_says kept "^copies .*keep their 16-bit working copy on the GPU" \
  "the summary does not say which copies stay on the GPU"
[ "$(kept_copies gpu)" -eq 0 ] || fail "a plan without homes keeps copies"

run_trainer kept train $TRAIN --save kept.onnx
run_trainer gpu train $TRAIN --save gpu.onnx
cmp -s kept.onnx gpu.onnx ||
  fail "copies kept on the GPU train other weights than the plan on the GPU"
echo "gpu_copies: $n working copies on the GPU train bit for bit as on the GPU"

run_trainer kept first $TRAIN --iterations 2 --checkpoint ck \
  --checkpoint-every 1
run_trainer kept resumed $TRAIN --checkpoint ck --resume --save resumed.onnx
cmp -s resumed.onnx gpu.onnx || fail "the resumed run differs"
echo "gpu_copies: resumed bit for bit"

# LoRA-style: the attention and MLP input matrices frozen. Their copies are
# written once at start-up and never uploaded again.
FROZEN=".*\.(c_attn|c_fc)\.weight"
build_trainer fk g.onnx $ARGS --budget 120KiB --host-budget 1GiB --freeze "$FROZEN"
build_trainer fg g.onnx $ARGS --budget 2MiB --freeze "$FROZEN"
[ "$(kept_copies fk)" -gt 0 ] || fail "the frozen plan keeps no copy on the GPU"
run_trainer fk train $TRAIN --save fk.onnx
run_trainer fg train $TRAIN --save fg.onnx
cmp -s fk.onnx fg.onnx || fail "frozen: kept copies train otherwise"
cmp -s fk.onnx gpu.onnx && fail "freezing changed nothing"
echo "gpu_copies: frozen weights' copies on the GPU train bit for bit"

# MegaTrain's layout: a host budget (420 KiB) that holds every weight's
# master, gradient and moments but not their 16-bit copies beside them
# (the plan with copies at home takes 466 KiB). Each copy in sends the
# master, rounded on arrival: bit for bit the plan on the GPU, its
# validation losses too, resumed too.
ROUNDED="--batch 4 --sub-batch 1 --device h100-sxm --library-reserve 0 --precision bf16 --optimizer adamw --refine=false"
build_trainer rounded g.onnx $ROUNDED --budget 120KiB --host-budget 420KiB
n=$("$PY" - rounded/plan.json <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
assert s["host_home_bytes"] <= 420 << 10, s
assert 0 < s["copy_staging_bytes"] <= 32 << 20, s
print(s.get("rounded_copy_weights", 0))
PYEOF
) || fail "rounded: the plan's homes break the host budget"
[ "$n" -gt 0 ] || fail "a host budget short of the copies rounds none from its master"
[ "$(grep -c '\.copyFromMaster = true' rounded/src/main.cpp)" -eq "$n" ] ||
  fail "the trainer does not round the plan's $n copies from their masters"
grep -q '\.copyStagingBytes = ' rounded/src/main.cpp ||
  fail "the trainer has no staging for the rounded copies"
summary_says rounded "^copies .*keep no 16-bit working copy at home" \
  "the summary does not say which copies are rounded from masters"
run_trainer rounded train $TRAIN --save rounded.onnx
cmp -s rounded.onnx gpu.onnx ||
  fail "copies rounded from their masters train other weights than on the GPU"
# The evaluation program copies the same masters in.
VAL="--val-data tok.npy --val-labels next.npy --val-every 1"
run_trainer rounded val $TRAIN $VAL
run_trainer gpu val $TRAIN $VAL
grep -q "val loss" rounded/val.log || fail "rounded: no validation ran"
[ "$(grep -o 'val loss [^ ]*' rounded/val.log)" = \
  "$(grep -o 'val loss [^ ]*' gpu/val.log)" ] ||
  fail "the rounded plan's evaluation differs from the plan on the GPU"
run_trainer rounded first $TRAIN --iterations 2 --checkpoint rck \
  --checkpoint-every 1
run_trainer rounded resumed $TRAIN --checkpoint rck --resume \
  --save rounded-resumed.onnx
cmp -s rounded-resumed.onnx gpu.onnx || fail "the rounded plan's resume differs"
echo "gpu_copies: $n copies rounded from their masters train bit for bit, resumed too"

# LoHan's layout: with a drive, the moments and masters go to NVMe, and a
# host budget (160 KiB) short of the gradients and the copies of those
# masters (171 KiB) leaves no copy at home: each copy in reads its master
# from the drive. Bit for bit as the plan on the GPU, validated, resumed.
mkdir -p drive
build_trainer lohan g.onnx ${ROUNDED/h100-sxm/nvme.json} --budget 120KiB \
  --host-budget 160KiB --nvme drive
n=$("$PY" - lohan/plan.json <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
assert s["host_home_bytes"] <= 160 << 10, s
assert s["nvme_home_bytes"] > 0, s
print(s.get("rounded_copy_nvme_weights", 0))
PYEOF
) || fail "lohan: the plan's homes break the host budget or keep nothing on NVMe"
[ "$n" -gt 0 ] || fail "lohan: no copy is read from a master on NVMe"
[ "$(grep -c '\.masterOnNvme = true, \.copyFromMaster = true' lohan/src/main.cpp)" -eq "$n" ] ||
  fail "lohan: the trainer does not read the plan's $n masters from NVMe"
summary_says lohan "^copies .*masters are on NVMe, read from the drive" \
  "the summary does not say which masters are read from the drive"
run_trainer lohan train $TRAIN $VAL --save lohan.onnx
cmp -s lohan.onnx gpu.onnx ||
  fail "copies read from masters on NVMe train other weights than on the GPU"
[ "$(grep -o 'val loss [^ ]*' lohan/train.log)" = \
  "$(grep -o 'val loss [^ ]*' gpu/val.log)" ] ||
  fail "the lohan plan's evaluation differs from the plan on the GPU"
[ -z "$(ls -A drive)" ] || fail "the trainer left files in the NVMe directory"
run_trainer lohan first $TRAIN --iterations 2 --checkpoint lck \
  --checkpoint-every 1
run_trainer lohan resumed $TRAIN --checkpoint lck --resume \
  --save lohan-resumed.onnx
cmp -s lohan-resumed.onnx gpu.onnx || fail "the lohan plan's resume differs"
echo "gpu_copies: $n copies read from masters on NVMe train bit for bit, resumed too"
