#!/usr/bin/env bash
# Integer programs on the token ids: a model whose table lookups all go
# through index arithmetic (ids hashed by Mod into a small table, positions
# that skip padding by a running sum minus the mask, a mask cast to float
# and scaled, a masked_fill of the padding: a condition per sample), so no embedding reads the ids themselves. Exported by torch,
# compiled, trained two SGD steps (momentum 0.9, the trainer's default) on the CPU emulation and compared with
# the torch module (float64); the synthetic-data path runs too, with the
# ids bounded only by what the programs compute.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "int_programs: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

cat >model.py <<'PYEOF'
import torch
import torch.nn as nn

V, T, D, C = 40, 6, 8, 5


class Hashed(nn.Module):
    def __init__(s):
        super().__init__()
        s.word = nn.Embedding(7, D)  # ids hashed into 7 rows
        s.pos = nn.Embedding(T + 1, D)
        s.head = nn.Linear(D, C)

    def forward(s, x):
        keep = (x != 0).long()
        # Positions of the kept tokens before each, padding excluded.
        before = keep.cumsum(1) - keep
        h = s.word(x % 7) + s.pos(before * keep)
        h = h * (1.0 + 0.5 * keep.unsqueeze(-1).float())
        h = h.masked_fill((x == 0).unsqueeze(-1), 0.25)
        return s.head(torch.tanh(h))
PYEOF

"$PY" - <<'PYEOF' >export.log 2>&1 || { cat export.log; fail "export"; }
import numpy as np, torch
from model import *
torch.manual_seed(0)
m = Hashed()
torch.onnx.export(m, (torch.randint(1, V, (4, T)),), "m.onnx",
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["x"],
                  dynamic_axes={"x": {0: "N"}})
r = np.random.default_rng(2)
x = r.integers(1, V, (8, T))
x[:, -2:] = 0
np.save("x.npy", x.astype(np.int64))
np.save("y.npy", r.integers(0, C, (8, T)).astype(np.int64))
PYEOF

"$MEMFIT" inspect m.onnx --batch 4 >inspect.txt 2>&1 || { cat inspect.txt; fail "inspect"; }
[ "$(grep -c ' IntProgram ' inspect.txt)" -ge 2 ] ||
  { cat inspect.txt; fail "no integer programs"; }
"$MEMFIT" compile m.onnx --batch 4 --budget 100% -o t --quiet || fail "compile"
grep -q "inputVocab = 2147483647" t/src/*.cpp || fail "ids bounded by a table"
cmake -S t -B t/build -DMEMFIT_BACKEND=cpu >cmake.log 2>&1 || { cat cmake.log; fail "configure"; }
cmake --build t/build -j 2 >build.log 2>&1 || { tail -30 build.log; fail "build"; }
t/build/trainer --data x.npy --labels y.npy --iterations 2 --lr 0.1 \
  --log-every 1 --save t/trained.onnx >train.log 2>&1 || { cat train.log; fail "train"; }
t/build/trainer --synthetic --iterations 1 >synthetic.log 2>&1 ||
  { cat synthetic.log; fail "synthetic data"; }
"$PY" - <<'PYEOF' || fail "disagrees with torch"
import re
import numpy as np, onnx, torch, torch.nn.functional as F
from onnx import numpy_helper
from model import *
m = Hashed().double()
init = {t.name: numpy_helper.to_array(t) for t in onnx.load("m.onnx").graph.initializer}
with torch.no_grad():
    for n, p in m.named_parameters():
        p.copy_(torch.tensor(init[n]))
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
X, Y = torch.tensor(np.load("x.npy")), torch.tensor(np.load("y.npy"))
losses = []
for it in range(2):
    opt.zero_grad()
    loss = F.cross_entropy(m(X[it * 4:it * 4 + 4]).reshape(-1, C),
                           Y[it * 4:it * 4 + 4].reshape(-1))
    loss.backward()
    opt.step()
    losses.append(float(loss))
got = [float(v) for v in re.findall(r"^iteration \d+\s+loss (\S+)",
                                    open("train.log").read(), re.M)]
trained = {t.name: numpy_helper.to_array(t)
           for t in onnx.load("t/trained.onnx").graph.initializer}
worst = max(np.max(np.abs(trained[n] - p.detach().numpy())) /
            max(1e-3, np.max(np.abs(p.detach().numpy())))
            for n, p in m.named_parameters())
print(f"int_programs: losses {got} (torch {[round(v, 7) for v in losses]}), "
      f"worst weight {worst:.2e}")
assert len(got) == 2
assert all(abs(a - b) <= 1e-5 * max(1, abs(b)) for a, b in zip(got, losses))
assert worst <= 1e-5
PYEOF
echo "int_programs: index arithmetic on the ids trains as torch does"
