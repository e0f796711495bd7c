#!/usr/bin/env bash
# The NVMe tier on a CNN with BatchNorm, SGD with momentum: ResNet-18 at
# 64x64 (128 MiB of weight side under a 12 MiB GPU budget, 110 MiB of host)
# with part of its momentum on NVMe trains bit for bit as the plan that
# keeps it all on the host. Apart from nvme.sh because ResNet-18 under the
# sanitizers takes minutes; nvme.sh runs the same NVMe code there.
set -u
source "$(dirname "$0")/lib/preamble.bash"
# shellcheck source=lib/nvme.bash
source "$SRC/tests/cli/lib/nvme.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "nvme_cnn: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
mkdir nvme
write_nvme_device

"$MEMFIT" zoo resnet18 --image-size 64 --classes 10 --weights -o r.onnx \
  >/dev/null || fail "zoo resnet18"
"$PY" - <<'PYEOF' || fail "cannot write images"
import numpy as np
r = np.random.default_rng(5)
np.save("img.npy", r.standard_normal((4, 3, 64, 64)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, (4,)).astype(np.int64))
PYEOF
RARGS="--batch 4 --sub-batch 4 --budget 12MiB --library-reserve 0 --optimizer sgd"
SGD="--data img.npy --labels lab.npy --iterations 3 --lr 0.01 --momentum 0.9 --weight-decay 0.001 --log-every 1"
compile_model rtiered r.onnx $RARGS --host-budget 110MiB --nvme nvme
"$PY" - <<'PYEOF' || fail "resnet18 keeps no momentum on NVMe"
import json
s = json.load(open("rtiered/plan.json"))["summary"]
print(f"resnet18: {s['host_home_bytes']} bytes on the host, "
      f"{s['nvme_home_bytes']} on NVMe")
assert s["nvme_home_bytes"] > 0
PYEOF
compile_model rhost r.onnx $RARGS --host-budget 1GiB
for d in rtiered rhost; do
  ./$d/build/trainer $SGD --save $d/trained.onnx >$d/train.log 2>&1 ||
    { cat $d/train.log; fail "train $d"; }
done
cmp -s rtiered/trained.onnx rhost/trained.onnx ||
  fail "resnet18: momentum on NVMe trains other weights than on the host"
echo "nvme_cnn: momentum on NVMe trains ResNet-18 as on the host"
