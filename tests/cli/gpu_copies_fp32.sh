#!/usr/bin/env bash
# ZeRO-Offload's layout in fp32 and tf32 on the CPU emulation: weights
# homed in host memory keep their value on the GPU too, as an f32 working
# copy that every round reads in place; the host's update writes the
# master at home and the trainer uploads it once a step. gpt2-tiny (weight
# side 437 KiB) under 150 KiB, AdamW, four sub-batches of one, on a link
# slow enough (50 MB/s) that copying the weights in for every sub-batch
# costs more than a smaller arena. Checked: the plan, the generated trainer
# and the summary say so; the host holds no second copy (its pinned bytes
# are the plan's); 3 steps bit for bit as the plan that keeps every weight
# on the GPU, and a checkpoint after 2 steps resumed bit for bit; with the
# optimizer state on NVMe, and in tf32, bit for bit likewise.
set -u
source "$(dirname "$0")/lib/preamble.bash"
# shellcheck source=lib/trainer.bash
source "$SRC/tests/cli/lib/trainer.bash"
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "gpu_copies_fp32: SKIPPED: $PY cannot import numpy"
  exit 0
fi
fresh_work
copies_fixture

ARGS="--batch 4 --sub-batch 1 --library-reserve 0 --optimizer adamw --refine=false"
TRAIN="--data tok.npy --labels next.npy --iterations 3 --lr 0.01 --weight-decay 0.01 --eps 1e-3 --log-every 1"

# host_kib dir: the pinned host memory dir's plan homes, in KiB.
host_kib() {
  "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["host_home_bytes"] // 1024)' "$1/plan.json"
}

build_trainer kept g.onnx $ARGS --device slow.json --budget 150KiB --host-budget 1GiB
build_trainer gpu g.onnx $ARGS --device slow.json --budget 2MiB
n=$(kept_copies kept)
[ "$n" -gt 0 ] || fail "the slow link's fp32 plan keeps no copy on the GPU"
[ "$(grep -c '\.copyOnGpu = true' kept/src/main.cpp)" -eq "$n" ] ||
  fail "the trainer does not keep the plan's $n copies on the device"
summary_says kept "^copies .*as an f32 working copy" \
  "the report does not say which weights keep an f32 copy on the GPU"
# Masters, gradients and both moments of 109 KiB of weights: no copy.
[ "$(host_kib kept)" -le 437 ] ||
  fail "the plan homes $(host_kib kept) KiB: a second copy at home"

run_trainer kept train $TRAIN --save kept.onnx
run_trainer gpu train $TRAIN --save gpu.onnx
cmp -s kept.onnx gpu.onnx ||
  fail "f32 copies kept on the GPU train other weights than the plan on the GPU"
grep -q "host memory: 0.43 MiB" kept/train.log ||
  fail "the trainer's pinned host memory is not the plan's"
echo "gpu_copies_fp32: $n f32 copies on the GPU train bit for bit as on the GPU"

run_trainer kept first $TRAIN --iterations 2 --checkpoint ck \
  --checkpoint-every 1
run_trainer kept resumed $TRAIN --checkpoint ck --resume --save resumed.onnx
cmp -s resumed.onnx gpu.onnx || fail "the resumed run differs"
echo "gpu_copies_fp32: resumed bit for bit"

# 240 KiB of host: part of the optimizer state goes to NVMe.
mkdir -p plan-drive run-drive
build_trainer nv g.onnx $ARGS --device slow-nvme.json --budget 150KiB \
  --host-budget 240KiB --nvme plan-drive
[ "$(kept_copies nv)" -gt 0 ] || fail "the NVMe plan keeps no copy on the GPU"
summary_says nv "^nvme .*optimizer state" \
  "the NVMe plan puts no optimizer state on NVMe"
run_trainer nv train $TRAIN --nvme run-drive --save nv.onnx
cmp -s nv.onnx gpu.onnx || fail "with state on NVMe the run differs"
echo "gpu_copies_fp32: with optimizer state on NVMe, bit for bit"

# tf32: the copies hold the masters' bits; tensor-core rounding is the
# operators'.
build_trainer kt g.onnx $ARGS --device slow.json --precision tf32 \
  --budget 150KiB --host-budget 1GiB
build_trainer gt g.onnx $ARGS --device slow.json --precision tf32 --budget 2MiB
[ "$(kept_copies kt)" -gt 0 ] || fail "the tf32 plan keeps no copy on the GPU"
run_trainer kt train $TRAIN --save kt.onnx
run_trainer gt train $TRAIN --save gt.onnx
cmp -s kt.onnx gt.onnx || fail "tf32: kept copies train otherwise"
echo "gpu_copies_fp32: tf32 bit for bit"
