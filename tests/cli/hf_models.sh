#!/usr/bin/env bash
# Today's exporters' models, end to end: Hugging Face Gemma (1 + w norms, a
# tied embedding, rotary tables from positions expanded over the batch, a
# causal mask tiled over it), Llama (tied here), BERT (an attention mask
# of ones the size of the batch) and T5 (relative position buckets folded,
# the bias table gathered by them), RoBERTa (position ids from the ids)
# and BLOOM (ALiBi, per-head slopes times positions reshaped to
# [N * heads, 1, T] and added to the scores), exported with torch's TorchScript
# exporter as the user guide says, compiled to a tight budget, trained
# two AdamW steps on the CPU emulation and compared with the transformers
# module itself in float64 (BLOOM in float32, hf_models.py says why).
# Then tools/model-suite.py on a few families more: each must import, plan
# and verify; and ALBERT's copies of shared
# weights named when torch's constant folding made them. Skipped where
# transformers is missing.
set -u
source "$(dirname "$0")/lib/preamble.bash"
source "$(dirname "$0")/lib/trainer.bash"
if ! "$PY" -c 'import torch, onnx, transformers' 2>/dev/null; then
  echo "hf_models: SKIPPED: $PY cannot import torch, onnx and transformers"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
export PYTHONPATH=$SRC/tests/e2e

# The default tier trains BERT (its padding row frozen, checked below; the
# tied and rotary decoders train in tests/cli/today.sh); the full tier all
# six.
names=(bert)
full && names+=(gemma llama t5 roberta bloom)
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
t = r.integers(0, V, (8, T + 1))
t[:, -3:] = 0  # padding: row 0 of a table with padding_idx=0 stays put
np.save("tok.npy", t[:, :T].astype(np.int64))
np.save("next.npy", t[:, 1:].astype(np.int64))
PYEOF
    { cat "$name.export.log"; fail "export $name"; }
  d=$name
  # An eighth of the way from the lower bound to what the whole batch
  # keeps live:
  # sub-batches, offload or recomputation.
  "$MEMFIT" inspect "$name.onnx" --batch 4 --optimizer adamw --json \
    >"$name.inspect.json" || fail "inspect $name"
  budget=$("$PY" -c "import json; d = json.load(open('$name.inspect.json')); print(d['lower_bound_bytes'] + (d['liveness_peak_bytes'] - d['lower_bound_bytes']) // 8)")
  # nn.Embedding(padding_idx=0) in Gemma and BERT: not in the file.
  frozen=
  case $name in
  gemma) frozen="--freeze-rows m.model.embed_tokens.weight:0" ;;
  bert) frozen="--freeze-rows m.bert.embeddings.word_embeddings.weight:0" ;;
  # Padding tokens look up position row 0 (the padding id) too.
  roberta) frozen="--freeze-rows m.roberta.embeddings.word_embeddings.weight:0
    --freeze-rows m.roberta.embeddings.position_embeddings.weight:0" ;;
  esac
  build_trainer "$d" "$name.onnx" --batch 4 --optimizer adamw \
    --library-reserve 0 --budget "$budget" $frozen
  "$d/build/trainer" --data tok.npy --labels next.npy --iterations 2 \
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
m = Logits(build(name).to(reference_dtype(name)))
init = {t.name: numpy_helper.to_array(t)
        for t in onnx.load(f"{name}.onnx").graph.initializer}
params = dict(m.named_parameters())
assert set(params) <= set(init), sorted(set(params) - set(init))
with torch.no_grad():
    for n, p in params.items():
        p.copy_(torch.tensor(init[n]))
opt = torch.optim.AdamW(params.values(), lr=0.01, eps=1e-3, weight_decay=0.01)
X, Y = torch.tensor(np.load("tok.npy")), torch.tensor(np.load("next.npy"))
losses = []
for it in range(2):
    opt.zero_grad()
    loss = F.cross_entropy(m(X[it * 4:it * 4 + 4]).reshape(-1, V),
                           Y[it * 4:it * 4 + 4].reshape(-1))
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
print(f"hf_models: {name}: sub-batch {plan['sub_batch']} of 4, {len(params)} "
      f"parameters, losses {got} (transformers "
      f"{[round(v, 7) for v in losses]}), worst weight {worst:.2e} ({wname})")
assert len(got) == 2
assert all(abs(a - b) <= 1e-5 * max(1, abs(b)) for a, b in zip(got, losses))
assert worst <= 1e-5
PYEOF
    { cat "$name.ref.log"; fail "$name disagrees with transformers"; }
  cat "$name.ref.log"
done

# Without --freeze-rows the padding row of BERT's table trains, unlike
# torch's.
"$MEMFIT" compile bert.onnx --batch 4 --optimizer adamw --budget 100% -o bert-free \
  --quiet || fail "compile bert-free"
grep -q "frozenRow" bert/src/*.cpp || fail "no frozen row in the trainer"
grep -q "frozenRow" bert-free/src/*.cpp && fail "a row frozen unasked"
out=$("$MEMFIT" plan bert.onnx --batch 4 --freeze-rows nope:0 -o x 2>&1) &&
  fail "--freeze-rows of no table plans"
echo "$out" | grep -q "no Gather looks up rows of a weight of that name" ||
  fail "unclear --freeze-rows error: $out"
out=$("$MEMFIT" plan bert.onnx --batch 4 -o x \
  --freeze-rows m.bert.embeddings.word_embeddings.weight:96 2>&1) &&
  fail "--freeze-rows past the table plans"
echo "$out" | grep -q "the table has rows 0 to 95" ||
  fail "unclear --freeze-rows error: $out"

# Three of the nineteen in the default tier, eight (one of each kind of
# graph) under the sanitizers (each family's plan took about a minute
# there), all of them in the full tier.
families="Mistral,Swin V2,Falcon"
nfamilies=3
if [ -n "${MEMFIT_SANITIZED:-}" ]; then
  families="BERT,ALBERT,OPT,Mistral,ViT,Swin V2,ConvNeXt V2,Falcon"
  nfamilies=8
elif full; then
  families="BERT,DeBERTa-v2,ALBERT,OPT,Mistral,Phi,ViT,MobileViT,MPNet,XLM-RoBERTa,DistilBERT,Swin V2,BEiT,ConvNeXt V2,PoolFormer,DeBERTa,MPT,RoFormer,Falcon"
  nfamilies=19
fi
"$PY" "$SRC/tools/model-suite.py" "$MEMFIT" suite --families "$families" \
  --json suite.json >suite.log 2>&1 || { cat suite.log; fail "model-suite"; }
NFAMILIES=$nfamilies "$PY" - <<'PYEOF' || { cat suite.log; fail "a family no longer plans"; }
import json, os
rows = json.load(open("suite.json"))["rows"]
bad = [r for r in rows if r["status"] != "plans and verifies"]
print(f"hf_models: {len(rows) - len(bad)} of {len(rows)} families plan and verify")
assert len(rows) == int(os.environ["NFAMILIES"]) and not bad, bad
PYEOF
# ALBERT shares one layer's weights across its layers and ties its output
# to the embedding: torch's constant folding copies them, and inspect says
# so; without folding, one parameter each and torch's count.
"$PY" - <<'PYEOF' >albert.log 2>&1 || { cat albert.log; fail "export albert"; }
import warnings
import torch, transformers as tf
warnings.filterwarnings("ignore")
from hf_models import Logits
torch.manual_seed(0)
m = tf.AlbertForMaskedLM(tf.AlbertConfig(
    vocab_size=96, embedding_size=16, hidden_size=32, num_hidden_layers=3,
    num_attention_heads=2, intermediate_size=64,
    max_position_embeddings=64)).train()
for fold in (True, False):
    torch.onnx.export(Logits(m), (torch.randint(3, 96, (3, 8)),),
                      f"albert{int(fold)}.onnx", opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=fold, input_names=["x"],
                      output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
open("albert.params", "w").write(str(sum(p.numel() for p in m.parameters())))
PYEOF
"$MEMFIT" inspect albert1.onnx --batch 2 >albert1.txt 2>albert1.err ||
  { cat albert1.err; fail "inspect albert1"; }
[ "$(grep -c "warning: weights .* hold the same values" albert1.err)" -ge 2 ] ||
  { cat albert1.err; fail "no warning for ALBERT's folded copies"; }
"$MEMFIT" inspect albert0.onnx --batch 2 >albert0.txt 2>albert0.err ||
  { cat albert0.err; fail "inspect albert0"; }
grep -q warning albert0.err && { cat albert0.err; fail "a warning unfolded"; }
grep -q "^parameters *$(cat albert.params) " albert0.txt ||
  fail "ALBERT unfolded: $(grep ^parameters albert0.txt), torch $(cat albert.params)"
echo "hf_models: ALBERT folded: $(grep -c warning albert1.err) copies named; unfolded: $(cat albert.params) parameters as torch"
echo "hf_models: transformers' models train as transformers does"
