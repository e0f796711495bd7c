#!/usr/bin/env bash
# Models whose weight side is ten times the GPU budget, trained on the CPU
# emulation with every large weight, its gradient and its optimizer state
# homed in host memory: gpt2-tiny (437.6 KiB of weight side under a 40 KiB
# budget, AdamW, four sub-batches) and ResNet-18 at 64x64 with BatchNorm
# (171 MiB with AdamW under 15 MiB, 128 MiB with SGD under 12 MiB, the
# batch kept whole so that its statistics are the model's). gpt2 against
# PyTorch over 3 steps (fp32, float64 reference, within 1e-5 relative);
# ResNet-18 bit for bit as the plan that keeps every weight on the GPU,
# and with SGD against PyTorch (losses within 2e-4, updates within 2%);
# with AdamW its gradients stream through a pool smaller than they are
# (150 MiB of host for 167 MiB of homes), and the emulation stops a plan
# whose copy-out does not wait for the update it overwrites.
# No library reserve: the budget is all plan.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "homes_small_gpu: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
"$MEMFIT" zoo gpt2-tiny -o g.onnx >/dev/null || fail "zoo gpt2-tiny"
"$MEMFIT" zoo resnet18 --image-size 64 --classes 10 --weights -o r.onnx \
  >/dev/null || fail "zoo resnet18"
"$PY" - <<'PYEOF' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(5)
np.save("tok.npy", r.integers(0, 61, (4, 16)).astype(np.int64))
np.save("next.npy", r.integers(0, 61, (4, 16)).astype(np.int64))
np.save("img.npy", r.standard_normal((4, 3, 64, 64)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, (4,)).astype(np.int64))
PYEOF

# --host-budget is at most the device's host memory ('host': all of it).
out=$("$MEMFIT" plan g.onnx --batch 4 --device h100-sxm --budget 40% \
  --host-budget 300GiB -o p1 2>&1) && fail "300GiB on a 256 GiB host plans"
echo "$out" | grep -q "more than device h100-sxm's host memory, 256.00 GiB" ||
  fail "no clear error for a host budget past the host: $out"
[ -e p1 ] && fail "a refused plan wrote p1"
"$MEMFIT" plan g.onnx --batch 4 --device h100-sxm --budget 40% \
  --host-budget host -o p2 | grep -q "^host .* weights homed" ||
  fail "--host-budget host homes nothing"
out=$("$MEMFIT" plan g.onnx --batch 4 --device k40m --budget 40% \
  --host-budget host -o p3 2>&1) && fail "--host-budget host on k40m plans"
echo "$out" | grep -q "device k40m states no host memory" ||
  fail "no clear error for a device without a host: $out"

# inspect --host-budget: the lower bound once the weights are homed, below
# the 40 KiB budget planned next (the weight side alone is 437.6 KiB).
"$MEMFIT" inspect g.onnx --batch 4 --optimizer adamw --host-budget 1GiB \
  --json >inspect.json || fail "inspect --host-budget"
"$PY" - <<'PYEOF' || fail "inspect --host-budget: Mmin does not fall below the budget"
import json
j = json.load(open("inspect.json"))
h = j["host_budget"]
print(f"inspect: Mmin {j['lower_bound_bytes']} bytes, {h['lower_bound_bytes']} "
      f"with {h['homed_weights']} weights ({h['homed_bytes']} bytes) homed")
assert h["homed_bytes"] <= h["bytes"]
assert h["lower_bound_bytes"] < 40 * 1024 < j["weight_side_bytes"]
PYEOF

# compile dir model budget args...: the plan, checked to home at least ten
# times its budget.
compile() {
  local d=$1 model=$2 budget=$3
  shift 3
  # --refine=false: refinement takes most of a sanitized compile and
  # changes nothing checked here.
  "$MEMFIT" compile "$model" --batch 4 --device h100-sxm --budget "$budget" \
    --library-reserve 0 --host-budget "${HOST:-2GiB}" -o "$d" --quiet \
    --refine=false \
    "$@" ||
    fail "compile $d"
  "$PY" - "$d/plan.json" <<'PYEOF' || fail "$d: the weight side is not ten times the budget"
import json, sys
j = json.load(open(sys.argv[1]))
s = j["summary"]
side = s["resident_bytes"] + s["host_home_bytes"]
ratio = side / j["budget_bytes"]
print(f"{sys.argv[1]}: weight side {side} bytes, {ratio:.1f}x the budget; "
      f"{s['host_updates_overlapped']} of {s['host_updates']} host updates "
      "start inside the last round")
assert ratio >= 10, ratio
assert s["host_updates_overlapped"] > 0
PYEOF
  cmake -S "$d" -B "$d/build" -DMEMFIT_BACKEND=cpu >"$d/cmake.log" 2>&1 ||
    { cat "$d/cmake.log"; fail "configure $d"; }
  cmake --build "$d/build" -j 2 >"$d/build.log" 2>&1 ||
    { tail -30 "$d/build.log"; fail "build $d"; }
}
train() { # dir data labels trainer-args...
  local d=$1 x=$2 y=$3
  shift 3
  "$d/build/trainer" --data "$x" --labels "$y" --log-every 1 \
    --save "$d/trained.onnx" "$@" >"$d/train.log" 2>&1 ||
    { cat "$d/train.log"; fail "train $d"; }
}

# Adam's eps at 1e-3: gpt2's attention key bias and every bias before a
# BatchNorm have a zero true gradient, whose rounding noise eps 1e-8 would
# scale to whole steps.
ADAMW="--iterations 3 --lr 0.01 --weight-decay 0.01 --eps 1e-3"

compile gpt2 g.onnx 40KiB --sub-batch 1 --optimizer adamw
train gpt2 tok.npy next.npy $ADAMW
"$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx tok.npy next.npy \
  --heads 4 --kv-heads 4 --batch 4 --iterations 3 --optimizer adamw \
  --lr 0.01 --weight-decay 0.01 --eps 1e-3 --losses gpt2/train.log \
  --trained gpt2/trained.onnx --tol 1e-5 >gpt2/ref.log 2>&1 ||
  { cat gpt2/ref.log; fail "gpt2 disagrees with torch"; }
echo "gpt2 vs torch: $(cat gpt2/ref.log)"

# gpu_twin dir optimizer trainer-args...: the same model planned with every
# weight on the GPU trains to the same bytes as the homed plan in dir.
gpu_twin() {
  local d=$1 opt=$2 g=$1-gpu
  shift 2
  "$MEMFIT" compile r.onnx --batch 4 --sub-batch 4 --device h100-sxm \
    --budget 100% --optimizer "$opt" -o "$g" --quiet || fail "compile $g"
  grep -q "Home::Host" "$g/src/main.cpp" && fail "$g homes weights"
  cmake -S "$g" -B "$g/build" -DMEMFIT_BACKEND=cpu >"$g/cmake.log" 2>&1 ||
    fail "configure $g"
  cmake --build "$g/build" -j 2 >"$g/build.log" 2>&1 ||
    { tail -30 "$g/build.log"; fail "build $g"; }
  train "$g" img.npy lab.npy "$@"
  cmp -s "$d/trained.onnx" "$g/trained.onnx" ||
    fail "$d: homed weights differ from the GPU-homed plan's"
  [ "$(grep -o 'loss [^ ]*' "$d/train.log")" = \
    "$(grep -o 'loss [^ ]*' "$g/train.log")" ] || fail "$d: losses differ"
  echo "$d: bit for bit the GPU-homed plan"
}

# ResNet-18, SGD with momentum: against torch, and bit for bit the plan
# that keeps every weight on the GPU. Torch's weights are compared by
# update (--update-tol): a BatchNorm bias's few-step update is a small sum
# of cancelling terms, where fp32 rounding (the plan's or the GPU-homed
# plan's alike) shows as about 1% of it.
SGD="--iterations 3 --lr 0.01 --momentum 0.9 --weight-decay 0.001"
compile resnet18-sgd r.onnx 12MiB --sub-batch 4 --optimizer sgd
train resnet18-sgd img.npy lab.npy $SGD
"$PY" "$SRC/tests/e2e/torch_reference.py" r.onnx img.npy lab.npy --batch 4 \
  --iterations 3 --optimizer sgd --lr 0.01 --momentum 0.9 \
  --weight-decay 0.001 --losses resnet18-sgd/train.log \
  --trained resnet18-sgd/trained.onnx --update-tol 0.02 \
  >resnet18-sgd/ref.log 2>&1 ||
  { cat resnet18-sgd/ref.log; fail "resnet18-sgd disagrees with torch"; }
echo "resnet18-sgd vs torch: $(cat resnet18-sgd/ref.log)"
gpu_twin resnet18-sgd sgd $SGD

# ResNet-18, AdamW: bit for bit the GPU-homed plan. (Against float64
# torch, Adam's normalized steps turn the same rounding into updates that
# differ by up to 0.8% of conv1's weight, with or without tiers.)
# AdamW with 150 MiB of host for 167 MiB of homes: the gradients stream
# through a pool (GradPool.h) that holds the ones whose host updates are
# queued or running, not all of them.
ARGS="--iterations 3 --lr 0.001 --weight-decay 0.01 --eps 1e-3"
HOST=150MiB compile resnet18-adamw r.onnx 15MiB --sub-batch 4 --optimizer adamw
"$PY" - resnet18-adamw/plan.json <<'PYEOF' || fail "resnet18-adamw: no gradient pool"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(f"resnet18-adamw: {s['pooled_gradients']} gradients ({s['pooled_grad_bytes']} "
      f"bytes) through a {s['grad_pool_bytes']}-byte pool; pinned host "
      f"{s['host_memory_bytes']} of the homes' {s['host_home_bytes']} bytes")
assert s["pooled_gradients"] > 0 and s["grad_pool_bytes"] < s["pooled_grad_bytes"]
assert s["host_memory_bytes"] <= 150 << 20 < s["host_home_bytes"]
PYEOF
grep -q "x.waitHost(CopyOut, " resnet18-adamw/src/round_0.cpp ||
  fail "resnet18-adamw: no copy-out waits for a host update"
train resnet18-adamw img.npy lab.npy $ARGS
gpu_twin resnet18-adamw adamw $ARGS
if [ -z "${MEMFIT_SANITIZED:-}" ]; then
  # Without its first wait, a gradient lands on bytes whose update has not
  # read them: the emulation stops it.
  sed -i '0,/x.waitHost(/{/x.waitHost(/d}' resnet18-adamw/src/round_0.cpp
  cmake --build resnet18-adamw/build -j 2 >resnet18-adamw/build.log 2>&1 ||
    fail "rebuild resnet18-adamw without a wait"
  out=$(resnet18-adamw/build/trainer --data img.npy --labels lab.npy $ARGS 2>&1) &&
    fail "a gradient pool without its wait trains"
  echo "$out" | grep -q "copied into the gradient pool over that of .*whose host update has not been waited for" ||
    fail "unclear error for a missing pool wait: $out"
fi
echo "homes_small_gpu: weight sides ten times the budget train as torch does"
