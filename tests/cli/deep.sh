#!/usr/bin/env bash
# A very deep network plans end to end: ResNet-2018 at half its ideal peak
# fills the arena with more than 4096 segments, so the scheduler's focused
# eviction search runs; the plan verifies, the same inputs give the same
# plan.json, and --in-place=false runs nothing in place.
set -u
MEMFIT=$1
WORK=$2
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" zoo resnet-2018 -o deep.onnx >/dev/null || fail "zoo resnet-2018"
PLAN="deep.onnx --batch 16 --budget 50% --device k40m --quiet"
"$MEMFIT" plan $PLAN -o a || fail "plan exited $?"
"$MEMFIT" plan $PLAN -o b || fail "second plan exited $?"
cmp -s a/plan.json b/plan.json || fail "plan.json differs between two runs"
$PY - a/plan.json <<'PY' || fail "plan.json content"
import json, sys
p = json.load(open(sys.argv[1]))
s = p["summary"]
assert s["verified"] is True
assert s["planned_bytes"] <= p["budget_bytes"]
assert s["bytes_to_host"] > 0, "a half budget on a deep network must move data"
assert 0 < s["overhead"] < 0.5, s["overhead"]
print(f"resnet-2018: {len(p['tasks'])} tasks, overhead {s['overhead']:.1%}")
PY

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null || fail "zoo tiny-cnn"
for flag in --in-place=true --in-place=false; do
  "$MEMFIT" plan tiny.onnx --batch 8 --budget 100% --device k40m $flag \
    --json >"plan$flag.json" 2>err.txt || fail "plan $flag exited $?"
done
$PY - plan--in-place=true.json plan--in-place=false.json <<'PY' || fail "in-place counts"
import json, sys
on, off = (json.load(open(f)) for f in sys.argv[1:])
assert on["in_place_runs"] > 0, on["in_place_runs"]
assert off["in_place_runs"] == 0, off["in_place_runs"]
# Running in place never needs more memory in the ideal plan.
assert on["ideal_peak_bytes"] <= off["ideal_peak_bytes"]
PY
echo "deep: ok"
