#!/usr/bin/env bash
# Weights are values: a decoder that computes on its weights the way real
# models do (a position table sliced to the sequence length, Gemma's
# RMSNorm scale 1 + w, a relative position table permuted to heads first,
# an output projection tied to the embedding through a Transpose; Swin V2's
# cosine attention scaled by clamp(logit_scale).exp() and its position bias,
# an MLP over a constant coordinate table gathered by a relative index,
# 16 * sigmoid of it; DeBERTa's query bias [1, heads, 1, d] added over
# [N, heads, T, d]; halves of a table joined by a Concat; a table tiled
# along its own axes, w.repeat(1, 2, 1)), exported
# by torch, compiled under budgets from the whole batch to one sample per
# sub-batch and with the weights homed on the host, trained with AdamW on
# the CPU emulation and compared with the torch module itself (float64).
# Then dropout of a parameter and of a constant table: the same mask for
# every sub-batch of an iteration, so two sub-batches train as one.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "weight_values: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

cat >model.py <<'PYEOF'
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

V, D, H, T, MAXT = 50, 16, 2, 8, 12


class RMSNorm(nn.Module):  # Gemma's: the scale is stored as w, used as 1 + w
    def __init__(s):
        super().__init__()
        s.w = nn.Parameter(0.1 * torch.randn(D))

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + s.w)


class Decoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(V, D)
        s.pos = nn.Parameter(0.1 * torch.randn(1, MAXT, D))
        s.rel = nn.Parameter(0.1 * torch.randn(T, T, H))
        s.n1, s.n2 = RMSNorm(), RMSNorm()
        s.qkv, s.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.logit = nn.Parameter(torch.log(10 * torch.ones(H, 1, 1)))
        s.qb = nn.Parameter(0.1 * torch.randn(D))  # DeBERTa's query bias
        s.tiled = nn.Parameter(0.1 * torch.randn(1, T // 2, D))
        s.cpb = nn.Sequential(nn.Linear(1, 16), nn.ReLU(),
                              nn.Linear(16, H, bias=False))

    def forward(s, x):
        B, t = x.shape
        p = s.pos[:, :t]  # joined again, RoFormer's sin/cos interleave
        h = s.emb(x) + torch.cat([p[..., :D // 2], 2 * p[..., D // 2:]], -1)
        h = h + s.tiled.repeat(1, 2, 1)  # Tile of a weight along its axes
        q, k, v = s.qkv(s.n1(h)).split(D, dim=2)
        q, k, v = (z.view(B, t, H, D // H).transpose(1, 2) for z in (q, k, v))
        q = q + s.qb.view(1, 1, H, D // H).transpose(1, 2)
        att = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        att = att * torch.clamp(s.logit, max=math.log(100)).exp()
        rel = torch.cat([s.rel[..., :1], 1.5 * s.rel[..., 1:]], -1)
        att = att + rel.permute(2, 0, 1)
        coords = torch.arange(-(t - 1), t, dtype=s.logit.dtype)[:, None] / t
        idx = torch.arange(t)[:, None] - torch.arange(t)[None, :] + t - 1
        bias = s.cpb(coords)[idx.reshape(-1)].view(t, t, H).permute(2, 0, 1)
        att = att + 16 * torch.sigmoid(bias)
        y = (torch.softmax(att, -1) @ v).transpose(1, 2).reshape(B, t, D)
        h = h + s.o(y)
        return s.n2(h) @ s.emb.weight.t()
PYEOF

"$PY" - <<'PYEOF' >export.log 2>&1 || { cat export.log; fail "export"; }
import numpy as np, torch
from model import *
torch.manual_seed(0)
m = Decoder().train()
torch.onnx.export(m, (torch.randint(0, V, (4, T)),), "m.onnx",
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["tokens"])
r = np.random.default_rng(1)
t = r.integers(0, V, (8, T + 1))
np.save("tok.npy", t[:, :T].astype(np.int64))
np.save("next.npy", t[:, 1:].astype(np.int64))
open("params.txt", "w").write(str(sum(p.numel() for p in m.parameters())))
PYEOF

# One parameter per module parameter (the tied one once), and the
# computations on them in the op list without a batch.
"$MEMFIT" inspect m.onnx --batch 4 --json >inspect.json 2>inspect.err ||
  { cat inspect.err; fail "inspect"; }
"$PY" - "$(cat params.txt)" <<'PYEOF' || fail "inspect counts other parameters"
import json, sys
n = json.load(open("inspect.json"))
print(f"weight_values: {n['parameters']} parameters, torch counts {sys.argv[1]}")
assert n["parameters"] == int(sys.argv[1]) and n["warnings"] == []
PYEOF

ARGS="--batch 4 --optimizer adamw --library-reserve 0"
TRAIN="--data tok.npy --labels next.npy --iterations 2 --lr 0.01 --weight-decay 0.01 --eps 1e-3 --log-every 1"
run() { # dir memfit-args...
  local d=$1
  shift
  "$MEMFIT" compile m.onnx $ARGS -o "$d" --quiet "$@" || fail "compile $d"
  cmake -S "$d" -B "$d/build" -DMEMFIT_BACKEND=cpu >"$d/cmake.log" 2>&1 ||
    { cat "$d/cmake.log"; fail "configure $d"; }
  cmake --build "$d/build" -j 2 >"$d/build.log" 2>&1 ||
    { tail -30 "$d/build.log"; fail "build $d"; }
  "$d/build/trainer" $TRAIN --save "$d/trained.onnx" >"$d/train.log" 2>&1 ||
    { cat "$d/train.log"; fail "train $d"; }
  "$PY" - "$d" <<'PYEOF' || fail "$d disagrees with torch"
import json, re, sys
import numpy as np, onnx, torch, torch.nn.functional as F
from onnx import numpy_helper
from model import *
d = sys.argv[1]
plan = json.load(open(f"{d}/plan.json"))
m = Decoder().double()
init = {t.name: numpy_helper.to_array(t)
        for t in onnx.load("m.onnx").graph.initializer}
with torch.no_grad():
    for n, p in m.named_parameters():
        p.copy_(torch.tensor(init[n]))
opt = torch.optim.AdamW(m.parameters(), lr=0.01, eps=1e-3, weight_decay=0.01)
X, Y = torch.tensor(np.load("tok.npy")), torch.tensor(np.load("next.npy"))
losses = []
for it in range(2):
    opt.zero_grad()
    out = m(X[it * 4:it * 4 + 4])
    loss = F.cross_entropy(out.reshape(-1, V), Y[it * 4:it * 4 + 4].reshape(-1))
    loss.backward()
    opt.step()
    losses.append(float(loss))
got = [float(v) for v in re.findall(r"^iteration \d+\s+loss (\S+)",
                                    open(f"{d}/train.log").read(), re.M)]
trained = {t.name: numpy_helper.to_array(t)
           for t in onnx.load(f"{d}/trained.onnx").graph.initializer}
worst, name = max((np.max(np.abs(trained[n] - p.detach().numpy())) /
                   max(1e-3, np.max(np.abs(p.detach().numpy()))), n)
                  for n, p in m.named_parameters())
moved = max(np.max(np.abs(p.detach().numpy() - init[n]))
            for n, p in m.named_parameters())
print(f"{d}: sub-batch {plan['sub_batch']}, losses {got} (torch "
      f"{[round(v, 7) for v in losses]}), worst weight {worst:.2e} ({name})")
assert len(got) == 2 and moved > 1e-3
assert all(abs(a - b) <= 1e-5 * max(1, abs(b)) for a, b in zip(got, losses))
assert worst <= 1e-5
PYEOF
}
run whole --budget 1GiB
run tight --budget 42KiB
grep -q "OneSample one(x);" tight/src/round_0.cpp ||
  fail "the computations on weights do not run on one sample"
run homed --budget 30KiB --host-budget 64KiB

# Dropout of a parameter (DropConnect) and of a constant table (Funnel's
# sinusoids): values without a batch, masked once an iteration, so the
# batch in two sub-batches trains as it does whole (no torch to compare
# with: its random numbers are its own).
cat >drop.py <<'PYEOF'
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.table = nn.Parameter(torch.randn(8, 16))
        s.fc = nn.Linear(16, 10)
    def forward(s, x):
        sin = torch.sin(torch.arange(16.0)).repeat(8, 1)
        h = x + F.dropout(s.table, 0.2, True) + F.dropout(sin, 0.1, True)
        return s.fc(h.mean(1))
torch.manual_seed(0)
torch.onnx.export(M().train(), (torch.randn(4, 8, 16),), "drop.onnx",
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, opset_version=17,
                  input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
rng = np.random.default_rng(0)
np.save("dx.npy", rng.standard_normal((8, 8, 16)).astype(np.float32))
np.save("dy.npy", rng.integers(0, 10, 8).astype(np.int64))
PYEOF
"$PY" drop.py >drop.log 2>&1 || { cat drop.log; fail "export drop.onnx"; }
for d in drop-whole drop-halves; do
  extra=()
  [ $d = drop-halves ] && extra=(--sub-batch 2)
  "$MEMFIT" compile drop.onnx --batch 4 --budget 1GiB --library-reserve 0 \
    -o $d --quiet "${extra[@]}" || fail "compile $d"
  cmake -S $d -B $d/build -DMEMFIT_BACKEND=cpu >$d/cmake.log 2>&1 &&
    cmake --build $d/build -j 2 >$d/build.log 2>&1 || fail "build $d"
  $d/build/trainer --data dx.npy --labels dy.npy --iterations 3 --lr 0.05 \
    --save $d/trained.onnx >$d/train.log 2>&1 || { cat $d/train.log; fail "train $d"; }
done
"$PY" - <<'PYEOF' || fail "dropout of values without a batch differs by sub-batch"
import json, numpy as np, onnx
from onnx import numpy_helper
def load(f):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(f).graph.initializer}
assert json.load(open("drop-halves/plan.json"))["sub_batch"] == 2
w, h, init = load("drop-whole/trained.onnx"), load("drop-halves/trained.onnx"), load("drop.onnx")
diff = max(float(np.max(np.abs(w[k] - h[k]))) for k in w)
moved = float(np.max(np.abs(w["table"] - init["table"])))
print(f"dropout on values: whole and in halves differ by {diff:.1e}, table moved {moved:.1e}")
assert diff <= 1e-6 and moved > 1e-3
PYEOF
echo "weight_values: computations on weights train as torch does"
