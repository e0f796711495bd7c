#!/usr/bin/env bash
# A decoder's sequence classification, end to end: transformers' GPT-2
# (and, in the full tier, Llama) *ForSequenceClassification score every
# position, then keep each sequence's last token before its padding,
# found as argmax(ids == pad) - 1 modulo T and gathered from the scores
# flattened to [N * T, C] at arange(N) * T + that. Exported with the
# TorchScript exporter as the user guide says, planned at a budget that
# splits the batch (the pick reads each sample's index in its sub-batch),
# trained two AdamW steps on the CPU emulation with padding at different
# places in each sequence (none; the last one, two or three tokens; the
# first), and compared with the transformers module in float64. Skipped
# where transformers is missing.
set -u
source "$(dirname "$0")/lib/preamble.bash"
source "$(dirname "$0")/lib/trainer.bash"
if ! "$PY" -c 'import torch, onnx, transformers' 2>/dev/null; then
  echo "seq_classification: SKIPPED: $PY cannot import torch, onnx and transformers"
  exit 0
fi
fresh_work
export PYTHONPATH=$SRC/tests/e2e

names=(gpt2-cls)
full && names+=(llama-cls)
for name in "${names[@]}"; do
  "$PY" - "$name" <<'PYEOF' >"$name.export.log" 2>&1 ||
import sys, warnings
import numpy as np, torch
warnings.filterwarnings("ignore")
from hf_models import *
name = sys.argv[1]
m = build(name)
torch.onnx.export(Logits(m), (torch.randint(3, V, (3, T)),), f"{name}.onnx",
                  opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["x"],
                  output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
r = np.random.default_rng(1)
t = r.integers(1, V, (8, T))
for i in range(7):  # no padding, then 1, 2, 3 tokens of it at the end
    if i % 4:
        t[i, -(i % 4):] = 0
t[7, 0] = 0  # padding first: argmax 0, so the last token (-1 mod T)
np.save("tok.npy", t.astype(np.int64))
np.save("cls.npy", r.integers(0, 3, (8,)).astype(np.int64))
PYEOF
    { cat "$name.export.log"; fail "export $name"; }
  d=$name
  "$MEMFIT" inspect "$name.onnx" --batch 4 --optimizer adamw --json \
    >"$name.inspect.json" || fail "inspect $name"
  # An eighth of the way from the lower bound to what the whole batch
  # keeps live: sub-batches, offload or recomputation.
  budget=$("$PY" -c "import json; d = json.load(open('$name.inspect.json')); print(d['lower_bound_bytes'] + (d['liveness_peak_bytes'] - d['lower_bound_bytes']) // 8)")
  # Llama's nn.Embedding(padding_idx=0): not in the file.
  frozen=
  [ "$name" = llama-cls ] && frozen="--freeze-rows m.model.embed_tokens.weight:0"
  build_trainer "$d" "$name.onnx" --batch 4 --optimizer adamw \
    --library-reserve 0 --budget "$budget" $frozen
  "$d/build/trainer" --data tok.npy --labels cls.npy --iterations 2 \
    --lr 0.01 --weight-decay 0.01 --eps 1e-3 --log-every 1 \
    --save "$d/trained.onnx" >"$d/train.log" 2>&1 ||
    { cat "$d/train.log"; fail "train $d"; }
  "$PY" - "$name" <<'PYEOF' >"$name.ref.log" 2>&1 ||
import json, re, sys, warnings
import numpy as np, onnx, torch, torch.nn.functional as F
from onnx import numpy_helper
warnings.filterwarnings("ignore")
from hf_models import *
name = sys.argv[1]
plan = json.load(open(f"{name}/plan.json"))
m = Logits(build(name).to(torch.float64))
init = {t.name: numpy_helper.to_array(t)
        for t in onnx.load(f"{name}.onnx").graph.initializer}
params = dict(m.named_parameters())
assert set(params) <= set(init), sorted(set(params) - set(init))
with torch.no_grad():
    for n, p in params.items():
        p.copy_(torch.tensor(init[n]))
opt = torch.optim.AdamW(params.values(), lr=0.01, eps=1e-3, weight_decay=0.01)
X, Y = torch.tensor(np.load("tok.npy")), torch.tensor(np.load("cls.npy"))
losses = []
for it in range(2):
    opt.zero_grad()
    loss = F.cross_entropy(m(X[it * 4:it * 4 + 4]), Y[it * 4:it * 4 + 4])
    loss.backward()
    opt.step()
    losses.append(float(loss))
got = [float(v) for v in re.findall(r"^iteration \d+\s+loss (\S+)",
                                    open(f"{name}/train.log").read(), re.M)]
trained = {t.name: numpy_helper.to_array(t)
           for t in onnx.load(f"{name}/trained.onnx").graph.initializer}
worst, wname = max((np.max(np.abs(trained[n] - p.detach().numpy())) /
                    max(1e-3, np.max(np.abs(p.detach().numpy()))), n)
                   for n, p in params.items())
print(f"seq_classification: {name}: sub-batch {plan['sub_batch']} of 4, "
      f"{len(params)} parameters, losses {got} (transformers "
      f"{[round(v, 7) for v in losses]}), worst weight {worst:.2e} ({wname})")
assert plan["sub_batch"] < 4, "the budget should split the batch"
assert len(got) == 2
assert all(abs(a - b) <= 1e-5 * max(1, abs(b)) for a, b in zip(got, losses))
assert worst <= 1e-5
PYEOF
    { cat "$name.ref.log"; fail "$name disagrees with transformers"; }
  cat "$name.ref.log"
done
echo "seq_classification: decoders classify sequences as transformers does"
