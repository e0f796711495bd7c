#!/usr/bin/env bash
# Schedule reports: memfit plan -o and memfit compile write plan.json,
# trace.json and report.html; plan.json has the documented fields; trace.json
# is a Chrome trace with the three stream tracks and the arena counter;
# report.html loads nothing from the network; memfit report reads plan.json
# alone and refuses bad files with exit 1 naming them; memfit compare runs
# every policy at every budget; every command has --help; exit codes.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work
# A budget at which the plan offloads (the assertions below need every
# kind of decision).
PLAN="tiny.onnx --batch 8 --budget 45% --device k40m"

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null || fail "zoo tiny-cnn"

# --- memfit plan -o ---------------------------------------------------------
"$MEMFIT" plan $PLAN -o out --quiet >out.txt 2>err.txt ||
  fail "plan -o exited $?: $(cat err.txt)"
[ -s out.txt ] && fail "plan --quiet printed: $(cat out.txt)"
for f in plan.json trace.json report.html; do
  [ -s "out/$f" ] || fail "plan -o did not write $f"
done
ls -a | grep -q '\.tmp' && fail "temporary directory left behind"
"$MEMFIT" plan $PLAN -o out >/dev/null 2>err.txt
rc=$?
[ $rc -eq 1 ] || fail "plan -o onto an existing directory exited $rc, expected 1"
grep -q "out" err.txt || fail "no message naming the directory: $(cat err.txt)"
"$MEMFIT" plan $PLAN --json >summary.json 2>err.txt || fail "plan --json exited $?"

$PY - out/plan.json summary.json <<'PY' || fail "plan.json content"
import json, sys
p = json.load(open(sys.argv[1]))
summary = json.load(open(sys.argv[2]))
assert p["schema_version"] == 1
for k in ("model", "model_file", "device", "profile", "policy", "batch",
          "sub_batch", "sub_batches", "budget_bytes", "summary", "notes",
          "tasks", "transfers", "blocks", "events"):
    assert k in p, "missing " + k
s = p["summary"]
# Every field of `memfit plan --json` is in plan.json.
for k in summary:
    key = {"file": "model_file"}.get(k, k)
    # plan_seconds is wall time: a plan file must be deterministic.
    if key in ("profile", "plan_seconds"):
        continue
    assert key in p or key in s, "plan.json lacks plan --json field " + k
assert p["model"] == "tiny-cnn" and p["batch"] == 8 and p["device"] == "k40m"
assert p["policy"] == "memfit"
assert s["feasible"] is True
# The budget holds the library reserve too (docs/memory.md).
share = p["budget_bytes"] - p["library_reserve_bytes"]
assert p["library_reserve_bytes"] == 144 * 1048576
assert s["planned_bytes"] <= share
assert s["lower_bound_bytes"] <= share < s["ideal_peak_bytes"]
assert s["planned_bytes"] == s["resident_bytes"] + s["arena_bytes"]
assert 0 < s["allocation_efficiency"] <= 1
assert s["planned_seconds"] >= s["ideal_seconds"] > 0
assert abs(s["overhead"] - (s["planned_seconds"] / s["ideal_seconds"] - 1)) < 1e-9
# The proven bound of the plan's space: at or below the plan, and no lower
# than the ideal plan's tasks could allow for being split into rounds.
assert 0 < s["bound_seconds"] <= s["planned_seconds"], (s["bound_seconds"], s["planned_seconds"])
assert p["sub_batch"] * p["sub_batches"] >= p["batch"]
kinds = {t["kind"] for t in p["tasks"]}
assert {"FP", "BP-data", "BP-weight", "loss", "update"} <= kinds, kinds
for t in p["tasks"]:
    assert 0 <= t["start"] <= t["end"], t
    assert t["stream"] == "compute"
    assert t["section"] in ("round", "update")
    assert t["algo_name"], t
    assert (t["node"] == "") == (t["kind"] == "loss"), t
    if t["op"] == "Conv" and t["kind"] != "update":
        assert t["algo_name"] != "default", t
stall = sum(t["stall_seconds"] for t in p["tasks"])
assert stall > 0 and stall <= s["stall_seconds"] + 1e-12
decisions = {b["decision"] for b in p["blocks"]}
assert {"offload", "resident", "keep", "load", "view"} <= decisions, decisions
for b in p["blocks"]:
    assert b["why"], b
    for r in b["residencies"]:
        assert r["offset"] >= 0 and r["offset"] + r["bytes"] <= s["arena_bytes"]
        assert r["start"] <= r["end"]
    if b["decision"] == "offload":
        assert "task '" in b["why"], b
moved = sum(x["bytes"] for x in p["transfers"] if x["direction"] == "to_host")
assert moved > 0
PY

$PY - out/trace.json out/plan.json <<'PY' || fail "trace.json is not the Chrome trace expected"
import json, sys
t = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
tracks = {e["tid"]: e["args"]["name"] for e in ev
          if e["ph"] == "M" and e["name"] == "thread_name"}
assert sorted(tracks) == [1, 2, 3], tracks
assert tracks[1].startswith("compute") and tracks[2].startswith("copy-out") \
    and tracks[3].startswith("copy-in"), tracks
slices = [e for e in ev if e["ph"] == "X"]
for e in slices:
    for k in ("name", "ph", "ts", "dur", "pid", "tid"):
        assert k in e, (k, e)
    assert e["dur"] >= 0
assert {e["tid"] for e in slices} == {1, 2, 3}
names = [e["name"] for e in slices if e["tid"] == 1]
assert sorted(names) == sorted(x["task"] for x in p["tasks"])
assert len([e for e in slices if e["tid"] != 1]) == len(p["transfers"])
counters = [e for e in ev if e["ph"] == "C"]
assert len(counters) > 2
assert max(e["args"]["bytes"] for e in counters) == p["summary"]["max_live_bytes"]
PY

grep -Eqi 'https?:|src=|href=|@import' out/report.html &&
  fail "report.html refers to something outside itself"

# --- memfit report ----------------------------------------------------------
"$MEMFIT" report out/plan.json >report.txt 2>err.txt ||
  fail "report exited $?: $(cat err.txt)"
for s in "^feasible   yes" "^memory     budget" "lower bound" "ideal peak" \
         "allocation efficiency" "^time       ideal" "overhead" "stall" \
         "^bound      .* the plan is .* above it" \
         "^traffic    to host" "^recompute  " "^sub-batch  " \
         "^layers (in execution order" "^  conv1 " "^why blocks move" \
         "^largest stalls"; do
  grep -q -- "$s" report.txt || fail "memfit report lacks '$s':
$(cat report.txt)"
done
"$MEMFIT" report out/plan.json --json >report.json || fail "report --json exited $?"
$PY -c "
import json, sys
r = json.load(open('report.json'))
for k in ('feasible', 'memory', 'time', 'traffic', 'recompute', 'sub_batch', 'layers', 'stalls'):
    assert k in r, k
assert [l['node'] for l in r['layers']][:2] == ['conv1', 'relu1'], r['layers']
" || fail "report --json content"

expect_error() { # rc-expected pattern command...
  local want=$1 pattern=$2
  shift 2
  "$@" >o.txt 2>e.txt
  local rc=$?
  [ $rc -eq "$want" ] || fail "'$*' exited $rc, expected $want: $(cat e.txt)"
  grep -q -- "$pattern" e.txt || fail "'$*': no '$pattern' in: $(cat e.txt)"
}
expect_error 1 "cannot read missing.json" "$MEMFIT" report missing.json
echo '{"schema_version": 1, "model": ' >broken.json
expect_error 1 "broken.json: not valid JSON" "$MEMFIT" report broken.json
echo '{"schema_version": 99}' >future.json
expect_error 1 "future.json: schema_version 99 is not supported" "$MEMFIT" report future.json
echo '{"hello": 1}' >other.json
expect_error 1 "other.json: not a memfit plan" "$MEMFIT" report other.json
$PY -c "
import json
p = json.load(open('out/plan.json'))
p['tasks'][2]['end'] = 'late'
json.dump(p, open('wrong.json', 'w'))
"
expect_error 1 "wrong.json: tasks\[2\]: field 'end' must be a number" "$MEMFIT" report wrong.json

# --- exact plans ---------------------------------------------------------------
# BatchNorm: whole batches, or the batch in chunks inside one round, by
# default ("exact": true); split into sub-batches only under
# --sub-batch-statistics, and then plan.json, the summary and the report say
# the plan is not exact.
"$MEMFIT" zoo tiny-bn -o bn.onnx >/dev/null || fail "zoo tiny-bn"
BN="bn.onnx --batch 16 --device k40m"
"$MEMFIT" inspect bn.onnx --batch 16 | grep -q "^exact lower bound .* with the batch of 16 in chunks of 1" ||
  fail "inspect does not show the exact floor of a BatchNorm model"
"$MEMFIT" inspect bn.onnx --batch 16 --json | "$PY" -c '
import json, sys
j = json.load(sys.stdin)
assert j["exact_lower_bound_bytes"] > j["lower_bound_bytes"], j' ||
  fail "inspect --json: the exact floor is not above Mmin"
"$MEMFIT" inspect tiny.onnx --batch 8 | grep -q "^exact lower bound" &&
  fail "inspect shows an exact floor for a model without BatchNorm"
"$MEMFIT" plan $BN --budget 90% -o bn-exact --quiet || fail "plan bn exact"
"$MEMFIT" plan $BN --budget 70% --sub-batch-statistics --sub-batch 8 -o bn-split \
  >bn-split.txt || fail "plan bn split"
"$PY" - <<'PYEOF' || fail "exact in plan.json"
import json
e = json.load(open("bn-exact/plan.json"))
s = json.load(open("bn-split/plan.json"))
assert e["exact"] is True and e["sub_batches"] == 1, (e["exact"], e["sub_batches"])
assert s["exact"] is False and s["sub_batches"] > 1, (s["exact"], s["sub_batches"])
assert any(n.startswith("not exact: BatchNorm") for n in s["notes"]), s["notes"]
PYEOF
grep -q "^note     not exact: BatchNorm statistics" bn-split.txt ||
  fail "the summary does not say the plan is not exact: $(cat bn-split.txt)"
"$MEMFIT" report bn-split/plan.json | grep -q "^semantics  NOT exact" ||
  fail "memfit report does not say the plan is not exact"
"$MEMFIT" report bn-exact/plan.json | grep -q "^semantics  exact" ||
  fail "memfit report does not say the plan is exact"
# At 70% the whole batch does not fit: memfit splits it into chunks and
# stays exact; a policy that keeps whole batches is refused there.
"$MEMFIT" plan $BN --budget 70% -o bn-chunks >bn-chunks.txt ||
  fail "plan bn in chunks"
"$PY" - <<'PYEOF' || fail "chunks in plan.json"
import json
c = json.load(open("bn-chunks/plan.json"))
assert c["exact"] is True and c["sub_batches"] == 1, (c["exact"], c["sub_batches"])
assert c["chunks"] > 1 and c["chunks"] * c["sub_batch"] == 16, c["chunks"]
assert [t["chunks"] for t in c["summary"]["chunks_tried"]][0] == 2, c["summary"]
assert any(n.startswith("exact in chunks") for n in c["notes"]), c["notes"]
PYEOF
grep -q "^batch    [0-9]* chunks of" bn-chunks.txt ||
  fail "the summary does not show the chunks: $(cat bn-chunks.txt)"
"$MEMFIT" report bn-chunks/plan.json | grep -q "^sub-batch  none: the batch of 16 in one round, as" ||
  fail "memfit report does not show the chunks"
"$MEMFIT" plan $BN --budget 70% --policy chen-sqrt >/dev/null 2>bn-err.txt &&
  fail "an exact plan below its floor was accepted"
grep -q -- "--sub-batch-statistics" bn-err.txt ||
  fail "the refusal does not name --sub-batch-statistics: $(cat bn-err.txt)"

# --- memfit compile writes the same reports ---------------------------------
"$MEMFIT" compile $PLAN -o cout --quiet >/dev/null 2>err.txt ||
  fail "compile exited $?: $(cat err.txt)"
for f in plan.json trace.json report.html report.txt; do
  [ -s "cout/$f" ] || fail "compile did not write $f"
done
"$MEMFIT" report cout/plan.json >creport.txt || fail "report of compile's plan"
cmp -s creport.txt cout/report.txt || fail "report.txt differs from memfit report"
# The same plan gives the same reports (determinism) whichever command wrote them.
cmp -s out/trace.json cout/trace.json || fail "trace.json differs between plan -o and compile"
cmp -s out/report.html cout/report.html || fail "report.html differs between plan -o and compile"

# --- memfit compare -----------------------------------------------------------
"$MEMFIT" compare tiny.onnx --batch 8 --device k40m --budgets 100%,40%,1% \
  --json >compare.json 2>err.txt || fail "compare exited $?: $(cat err.txt)"
$PY - <<'PY' || fail "compare --json content"
import json
c = json.load(open("compare.json"))
assert c["policies"] == ["vdnn-all", "vdnn-conv", "modnn", "chen-sqrt",
                        "superneurons", "memfit"]
assert [b["label"] for b in c["budgets"]] == ["100%", "40%", "1%"]
assert len(c["cells"]) == 18
for x in c["cells"]:
    if x["budget"] == "1%":
        assert not x["feasible"] and "lower bound" in x["reason"], x
    if x["feasible"]:
        assert x["planned_bytes"] <= x["budget_bytes"], x
        assert x["overhead"] >= -1e-9, x
memfit = [x for x in c["cells"] if x["policy"] == "memfit"]
assert memfit[0]["feasible"] and memfit[1]["feasible"]
assert memfit[0]["overhead"] < 1e-9  # the ideal peak fits without moving
PY
"$MEMFIT" compare tiny.onnx --batch 8 --device k40m --budgets 100%,40%,1% \
  -o cmp >compare.txt 2>err.txt || fail "compare -o exited $?"
grep -q "infeasible" compare.txt || fail "compare shows no infeasible cell"
grep -q "^overhead" compare.txt || fail "compare prints no overhead table"
[ -s cmp/compare.html ] || fail "compare -o wrote no compare.html"
grep -Eqi 'https?:|src=|href=' cmp/compare.html && fail "compare.html refers outside"
expect_error 1 "use --budgets" "$MEMFIT" compare tiny.onnx --budget 50%
expect_error 1 "unknown policy 'fast'" "$MEMFIT" compare tiny.onnx --policies memfit,fast

# --- command line: --help, exit codes, messages, progress ----------------------
for cmd in plan compile compare report inspect zoo device profile; do
  "$MEMFIT" $cmd --help >help.txt 2>&1 || fail "memfit $cmd --help exited $?"
  grep -q "USAGE: memfit $cmd" help.txt || fail "memfit $cmd --help: $(head -3 help.txt)"
done
grep -q -- "--quiet" <("$MEMFIT" plan --help) || fail "plan --help lacks --quiet"
grep -q -- "--verbose" <("$MEMFIT" compare --help) || fail "compare --help lacks --verbose"
expect_error 1 "tiny.onnx: budget .* is below the lower bound" \
  "$MEMFIT" plan tiny.onnx --batch 8 --budget 1KiB
expect_error 1 "invalid --budget '12 parsecs'" \
  "$MEMFIT" plan tiny.onnx --batch 8 --budget "12 parsecs"
expect_error 1 "mutually exclusive" "$MEMFIT" plan $PLAN --quiet --verbose
"$MEMFIT" plan $PLAN --verbose >/dev/null 2>verbose.txt || fail "plan --verbose exited $?"
grep -q "^memfit: planning .* done in" verbose.txt || fail "no stage timings: $(cat verbose.txt)"
"$MEMFIT" plan $PLAN >/dev/null 2>quiet.txt
[ -s quiet.txt ] && fail "a small plan printed progress without --verbose: $(cat quiet.txt)"
echo "ok"
