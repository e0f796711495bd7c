#!/usr/bin/env bash
# What memfit says about a model that imports but is not what its author
# trains, on torch's own exports: a tied embedding that constant folding
# copied (a warning naming both weights; none without folding), a registered
# buffer counted as a parameter until --constants names it (then the count
# is torch's), and --constants on plan and compile.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "import_notes: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
"$PY" - <<'PYEOF' >torch.log 2>&1 || { cat torch.log; fail "export"; }
import torch, torch.nn as nn
torch.manual_seed(0)
class Tied(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(50, 16)
        s.norm = nn.LayerNorm(16)
        s.head = nn.Linear(16, 50, bias=False)
        s.head.weight = s.emb.weight  # tied, as GPT-2 and Gemma do
        s.register_buffer("scale", torch.rand(16) + 0.5)
    def forward(s, x):
        return s.head(s.norm(s.emb(x)) * s.scale)
m = Tied().train()
x = torch.randint(0, 50, (4, 8))
for fold in (True, False):
    torch.onnx.export(m, (x,), f"fold{int(fold)}.onnx", opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=fold, input_names=["tokens"])
open("params.txt", "w").write(str(sum(p.numel() for p in m.parameters())))
PYEOF
params=$(cat params.txt)

# Folded: the tied weight is two initializers, and inspect says so.
"$MEMFIT" inspect fold1.onnx --batch 4 >fold1.txt 2>fold1.err ||
  { cat fold1.err; fail "inspect fold1"; }
grep -q "warning: weights 'emb.weight' and '.*' hold the same values" fold1.err ||
  { cat fold1.err; fail "no warning for the folded copy of a tied weight"; }
grep -q "do_constant_folding=False" fold1.err || fail "the warning gives no fix"
# Unfolded: one parameter, no warning; the buffer counts until --constants.
"$MEMFIT" inspect fold0.onnx --batch 4 >fold0.txt 2>fold0.err ||
  { cat fold0.err; fail "inspect fold0"; }
grep -q "warning" fold0.err && { cat fold0.err; fail "a warning without a copy"; }
"$MEMFIT" inspect fold0.onnx --batch 4 --constants '^scale$' --json \
  >const.json 2>const.err || { cat const.err; fail "inspect --constants"; }
"$PY" - "$params" <<'PYEOF' || fail "parameters differ from torch's"
import json, sys
n = json.load(open("const.json"))
print(f"import_notes: {n['parameters']} parameters with --constants, torch "
      f"counts {sys.argv[1]}")
assert n["parameters"] == int(sys.argv[1]) and n["warnings"] == []
PYEOF
grep -q "^parameters *$((params + 16)) " fold0.txt ||
  fail "without --constants the buffer's 16 values should count: $(grep ^parameters fold0.txt)"

# plan and compile take it too: the buffer is a constant of the trainer.
"$MEMFIT" compile fold0.onnx --batch 4 --budget 100% --constants '^scale$' \
  -o c --quiet || fail "compile --constants"
grep -q "onnxName = \"scale\".*\.trainable = false" c/src/main.cpp ||
  fail "the trainer trains the buffer"
out=$("$MEMFIT" plan fold0.onnx --batch 4 --budget 100% --constants 'nope' -o p 2>&1) &&
  fail "a --constants that matches nothing plans"
echo "$out" | grep -q "matches no initializer of the model" ||
  fail "unclear error for --constants: $out"
# A parameter read where memfit takes a fixed value: torch.clamp(y,
# max=self.cap) (through torch's Casts) is refused naming the weights;
# an initializer read directly as a Clip bound warns that it will not
# train; --constants says either is a buffer.
"$PY" - <<'PYEOF' >cap.log 2>&1 || { cat cap.log; fail "export cap"; }
import numpy as np, onnx, torch, torch.nn as nn
from onnx import helper, numpy_helper, TensorProto
class Capped(nn.Module):
    def __init__(s):
        super().__init__()
        s.fc, s.cap = nn.Linear(8, 8), nn.Parameter(torch.tensor(0.5))
    def forward(s, x):
        return torch.clamp(s.fc(x), max=s.cap)
torch.onnx.export(Capped().train(), torch.randn(4, 8), "cap.onnx",
                  opset_version=14, do_constant_folding=False,
                  training=torch.onnx.TrainingMode.TRAINING,
                  input_names=["x"], dynamic_axes={"x": {0: "N"}})
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
w = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "floor_p")
g = helper.make_graph([helper.make_node("Max", ["x", "floor_p"], ["y"])],
                      "g", [x], [y], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
          "floor.onnx")
PYEOF
"$MEMFIT" inspect cap.onnx --batch 4 >/dev/null 2>cap.err &&
  fail "a parameter clamping bound imported as a constant"
grep -q "computed from trainable weights" cap.err || { cat cap.err; fail "unclear error for a parameter bound"; }
"$MEMFIT" inspect cap.onnx --batch 4 --constants '^cap$' >/dev/null 2>cap2.err ||
  { cat cap2.err; fail "--constants cap"; }
"$MEMFIT" inspect floor.onnx --batch 4 >/dev/null 2>floor.err || fail "inspect floor"
grep -q "warning: initializer 'floor_p' is read as a fixed value" floor.err ||
  { cat floor.err; fail "no warning for an initializer read as a fixed value"; }
"$MEMFIT" inspect floor.onnx --batch 4 --constants floor_p >/dev/null 2>floor2.err
grep -q warning floor2.err && { cat floor2.err; fail "a warning for a declared buffer"; }
echo "import_notes: copies of tied weights are named, buffers declared"
