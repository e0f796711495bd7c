#!/usr/bin/env bash
# Attention planned as one memory-efficient operator (--fuse-attention) on
# the CPU emulation: every attention of the models below becomes one
# Attention op, and training agrees with PyTorch (which materializes the
# scores) under a tight budget (and the ideal one in the full tier). With
# dropout inside attention, fused and materialized plans draw the same
# masks and train to the same weights.
set -u
source "$(dirname "$0")/lib/preamble.bash"
needs_torch attention
fresh_work

source "$SRC/tests/e2e/verify.sh"

fused() { # model.onnx -> "fused/softmaxes"
  local f s
  f=$("$MEMFIT" inspect "$1" --batch 4 | grep -c ' Attention ')
  s=$("$MEMFIT" inspect "$1" --batch 4 --fuse-attention=false |
    grep -c ' Softmax ')
  echo "$f/$s"
}

COMPILE_ARGS=(--fuse-attention)
# Causal -inf fill (GPT); in the full tier torchvision's ViT and
# nn.TransformerEncoder (BERT) too.
models=(gpt)
full && models+=(tv-vit bert)
for m in "${models[@]}"; do
  check "$m" 55% 60% 65% 70%
  [ "$(fused "$m.onnx")" = 2/2 ] || fail "$m: attention not fused ($(fused "$m.onnx"))"
done
# Torch 2: Hugging Face GPT-2's sdpa through dynamo (its NaN guard) and,
# in the full tier, Llama (grouped-query attention, rotary embeddings).
models=(hf-gpt2-sdpa-dynamo)
full && models+=(hf-llama-eager-torchscript)
for m in "${models[@]}"; do
  f=$SRC/tests/models/torch2/$m.onnx
  cp "$f" "${f%.onnx}-x.npy" "${f%.onnx}-y.npy" . || fail "copy $m"
  verify "$m" 50% 55% 60% 65% 70% 75%
  [ "$(fused "$m.onnx")" = 2/2 ] || fail "$m: attention not fused"
done

# The planner's own choice (the default): the note names the form it took
# and what the other forms would cost, and the trainer agrees with torch.
note=$("$MEMFIT" plan gpt.onnx --batch 4 --budget 60% --device a100-40g |
  grep '^note     attention') || fail "gpt: no attention note"
echo "$note" | grep -Eq 'predicted [0-9.]+ ms per iteration; (as written|all fused)' ||
  fail "gpt: the note does not compare the forms: $note"
"$MEMFIT" plan gpt.onnx --batch 4 --budget 60% --device a100-40g --json |
  grep -q '"attention": "attention' || fail "gpt: plan --json has no attention"
COMPILE_ARGS=()
cp gpt.onnx gpt-auto.onnx && cp gpt-x.npy gpt-auto-x.npy &&
  cp gpt-y.npy gpt-auto-y.npy || fail "copy gpt"
verify gpt-auto 55% 60% 65% 70%

# Dropout inside attention: the same masks fused and materialized, so the
# trained weights agree (to float rounding: the sums run in another order).
"$PY" "$SRC/tests/e2e/today_models.py" gpt-drop gpt-drop.onnx gpt-drop-x.npy \
  gpt-drop-y.npy --batch 4 || fail "export gpt-drop"
"$MEMFIT" compile gpt-drop.onnx --batch 4 --budget 100% --device a100-40g \
  --fuse-attention=false -o plain --quiet || fail "compile gpt-drop"
"$MEMFIT" compile gpt-drop.onnx --batch 4 --budget 60% --device a100-40g \
  --fuse-attention -o fused --quiet || fail "compile fused gpt-drop"
[ "$(summary fused)" != "sub-batch 4, 0 bytes offloaded, 0 recomputes" ] ||
  fail "gpt-drop: the tight plan changes nothing"
for d in plain fused; do
  build "$d"
  "$d/build/trainer" --data gpt-drop-x.npy --labels gpt-drop-y.npy \
    --iterations 2 --lr 0.05 --save "$d/trained.onnx" >"$d/train.log" 2>&1 ||
    { cat "$d/train.log"; fail "train $d"; }
done
"$PY" - <<'PYEOF' || fail "gpt-drop: fused and materialized attention differ"
import numpy as np, onnx
from onnx import numpy_helper
a = {t.name: numpy_helper.to_array(t) for t in onnx.load("plain/trained.onnx").graph.initializer}
b = {t.name: numpy_helper.to_array(t) for t in onnx.load("fused/trained.onnx").graph.initializer}
start = {t.name: numpy_helper.to_array(t) for t in onnx.load("gpt-drop.onnx").graph.initializer}
worst = max(np.max(np.abs(a[n] - b[n])) / max(1e-3, np.max(np.abs(a[n])))
            for n in a if a[n].dtype == np.float32)
moved = max(np.max(np.abs(a[n] - start[n])) for n in a if a[n].dtype == np.float32)
print(f"gpt-drop: fused and materialized agree: worst weight difference {worst:.2e} (training moved weights by up to {moved:.2e})")
assert worst <= 1e-5 and moved > 1e-3
PYEOF
echo "attention: fused attention agrees with torch and with the materialized form"
