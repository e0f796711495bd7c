#!/usr/bin/env bash
# --policy optimal: memfit plan prints the integral program's outcome and
# the bound, plan --json carries it, plan.json is the same byte for byte
# twice; memfit compile emits a trainer that builds on the CPU emulation
# backend and trains bit-identically to the ideal plan (the whole batch in
# one round: offload and recompute change nothing computed); compare lists
# it; a graph larger than the solver handles is refused with exit 1.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work

"$MEMFIT" zoo tiny-cnn -o cnn.onnx >/dev/null || fail "zoo tiny-cnn"
# The whole batch in one round, under a budget that makes blocks leave.
PLAN="cnn.onnx --batch 8 --budget 90% --sub-batch 8 --device k40m --policy optimal"

"$MEMFIT" plan $PLAN >out.txt 2>err.txt || fail "plan exited $?: $(cat err.txt)"
grep -q "policy optimal" out.txt || fail "no policy line: $(cat out.txt)"
grep -q "^optimal  integral program over" out.txt || fail "no optimal line: $(cat out.txt)"
grep -q "memfit's own plan" out.txt || fail "no comparison with memfit: $(cat out.txt)"
grep -q "^bound " out.txt || fail "no bound line: $(cat out.txt)"

"$MEMFIT" plan $PLAN --json >summary.json 2>err.txt || fail "plan --json exited $?"
$PY - summary.json <<'PY' || fail "plan --json content"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["policy"] == "optimal", s["policy"]
o = s["optimal"]
for k in ("round_objective_seconds", "proven", "nodes", "max_nodes", "blocks",
          "offloaded", "recomputed", "memfit_seconds", "solve_seconds"):
    assert k in o, "missing optimal." + k
assert o["nodes"] <= o["max_nodes"]
assert o["offloaded"] + o["recomputed"] > 0, o
assert s["bound_seconds"] is not None
assert s["bound_seconds"] <= s["planned_seconds"] * (1 + 1e-12)
PY

# Deterministic: the same inputs give the same plan.json.
"$MEMFIT" plan $PLAN -o a --quiet || fail "plan -o a"
"$MEMFIT" plan $PLAN -o b --quiet || fail "plan -o b"
cmp -s a/plan.json b/plan.json || fail "two plan.json files differ"
$PY -c "import json; p = json.load(open('a/plan.json')); assert p['policy'] == 'optimal'" ||
  fail "plan.json policy"

# compile emits a trainer; it trains exactly as the ideal plan does.
build() { # dir
  cmake -S "$1" -B "$1/build" -DMEMFIT_BACKEND=cpu >"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log"; fail "configure $1"; }
  cmake --build "$1/build" -j 2 >"$1/build.log" 2>&1 ||
    { tail -30 "$1/build.log"; fail "build $1"; }
}
$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(7)
np.save("img.npy", r.standard_normal((16, 3, 8, 8)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, 16).astype(np.int64))
PY
train() { # dir
  "$1/build/trainer" --data img.npy --labels lab.npy --iterations 3 \
    --lr 0.05 --momentum 0.9 --log-every 1 --save "$1/trained.onnx" \
    >"$1/train.log" 2>&1 || { cat "$1/train.log"; fail "train $1"; }
}
"$MEMFIT" compile cnn.onnx --batch 8 --budget 100% --device k40m -o ideal \
  --quiet || fail "compile ideal"
"$MEMFIT" compile $PLAN -o opt --quiet || fail "compile --policy optimal"
[ -s opt/plan.json ] && [ -s opt/CMakeLists.txt ] || fail "no trainer emitted"
for d in ideal opt; do
  build $d
  train $d
done
diff <(grep '^iteration' ideal/train.log | cut -d' ' -f1-5) \
     <(grep '^iteration' opt/train.log | cut -d' ' -f1-5) >/dev/null ||
  fail "the optimal plan's losses differ from the ideal plan's"
cmp -s ideal/trained.onnx opt/trained.onnx ||
  fail "the optimal plan's trained weights differ from the ideal plan's"

# compare takes it among --policies.
"$MEMFIT" compare cnn.onnx --batch 8 --device k40m --budgets 90%,60% \
  --policies memfit,optimal >cmp.txt 2>err.txt ||
  fail "compare exited $?: $(cat err.txt)"
grep -q optimal cmp.txt || fail "compare lacks optimal: $(cat cmp.txt)"

# Too large for the solver: refused, exit 1, with the limit.
"$MEMFIT" zoo resnet101 -o r101.onnx >/dev/null || fail "zoo resnet-101"
"$MEMFIT" plan r101.onnx --batch 2 --budget 50% --device k40m \
  --policy optimal >/dev/null 2>err.txt
rc=$?
[ $rc -eq 1 ] || fail "a graph too large exited $rc, expected 1"
grep -q "solves graphs of up to [0-9]* tasks" err.txt ||
  fail "no message with the limit: $(cat err.txt)"
echo "ok"
