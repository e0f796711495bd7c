#!/usr/bin/env bash
# The budget covers the whole process (docs/memory.md): the library reserve
# (the device's, or --library-reserve) is taken off a size and added to a
# percentage; plan --json, plan.json, the summary and memfit report show
# it; a size that leaves the plan less than Mmin is refused naming both
# numbers; the emulated trainer's memory line adds up, and a peak over the
# budget exits 3.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work
MIB=1048576

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null || fail "zoo tiny-cnn"
P="tiny.onnx --batch 8 --device k40m"
field() { $PY -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# --- the default reserve, a percentage budget -------------------------------
"$MEMFIT" plan $P --budget 80% --json >pct.json 2>err.txt || fail "plan 80%: $(cat err.txt)"
$PY - pct.json <<'PY' || fail "80% with the default reserve"
import json, sys
j = json.load(open(sys.argv[1]))
r = 144 * 1048576
assert j["library_reserve_bytes"] == r, j["library_reserve_bytes"]
assert j["budget_bytes"] == int(0.8 * j["ideal_peak_bytes"]) + r, j
assert j["planned_bytes"] <= j["budget_bytes"] - r, j
PY

# --- --library-reserve ------------------------------------------------------
"$MEMFIT" plan $P --budget 80% --library-reserve 10MiB --json >r10.json 2>err.txt ||
  fail "--library-reserve 10MiB: $(cat err.txt)"
[ "$(field r10.json library_reserve_bytes)" = $((10 * MIB)) ] || fail "10MiB not read"
# The reserve does not change a percentage plan: the same planned bytes.
[ "$(field r10.json planned_bytes)" = "$(field pct.json planned_bytes)" ] ||
  fail "a percentage plan changed with the reserve"
"$MEMFIT" plan $P --budget 80% --library-reserve 0 --json >r0.json 2>err.txt ||
  fail "--library-reserve 0: $(cat err.txt)"
[ "$(field r0.json library_reserve_bytes)" = 0 ] || fail "0 not read"
for v in -1 abc 12XB; do
  "$MEMFIT" plan $P --budget 80% --library-reserve=$v >/dev/null 2>err.txt
  rc=$?
  [ $rc -eq 1 ] || fail "--library-reserve=$v exited $rc, expected 1"
  grep -q -- "--library-reserve" err.txt || fail "--library-reserve=$v: $(cat err.txt)"
done
# A device file states its own reserve.
"$MEMFIT" device k40m >k40m.json 2>err.txt || fail "device k40m: $(cat err.txt)"
$PY - <<'PY' || fail "device file"
import json
d = json.load(open("k40m.json"))
assert d["library_reserve_mib"] == 144, d.get("library_reserve_mib")
d["name"] = "lab"; d["library_reserve_mib"] = 64
json.dump(d, open("lab.json", "w"))
PY
"$MEMFIT" plan tiny.onnx --batch 8 --device lab.json --budget 80% --json >lab.out 2>err.txt ||
  fail "plan with lab.json: $(cat err.txt)"
[ "$(field lab.out library_reserve_bytes)" = $((64 * MIB)) ] || fail "device file reserve ignored"

# --- a size: the reserve comes off, the floor is reserve + Mmin --------------
lb=$(field r0.json lower_bound_bytes)
R=$((10 * MIB))
"$MEMFIT" plan $P --budget $((lb + R)) --library-reserve 10MiB --json >edge.json 2>err.txt ||
  fail "reserve + Mmin refused: $(cat err.txt)"
[ "$(field edge.json budget_bytes)" = $((lb + R)) ] || fail "size budget changed"
$PY - edge.json <<'PY' || fail "reserve + plan within the size"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["library_reserve_bytes"] + j["planned_bytes"] <= j["budget_bytes"], j
PY
"$MEMFIT" plan $P --budget $((lb + R - 1)) --library-reserve 10MiB >/dev/null 2>err.txt
rc=$?
[ $rc -eq 1 ] || fail "a byte under reserve + Mmin exited $rc, expected 1"
grep -q "less the library reserve 10.00 MiB" err.txt || fail "reserve not named: $(cat err.txt)"
grep -q "below the lower bound Mmin" err.txt || fail "Mmin not named: $(cat err.txt)"

# --- the summary and the report ----------------------------------------------
"$MEMFIT" plan $P --budget 80% >sum.txt 2>err.txt || fail "plan: $(cat err.txt)"
grep -q "library reserve 144.00 MiB" sum.txt || fail "summary: $(cat sum.txt)"
grep -q "CUDA context is not in the budget" sum.txt || fail "summary: no context line"
"$MEMFIT" compile $P --budget 80% -o t --quiet 2>err.txt || fail "compile: $(cat err.txt)"
$PY - t/plan.json pct.json <<'PY' || fail "plan.json"
import json, sys
p = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
assert p["library_reserve_bytes"] == 144 * 1048576, p["library_reserve_bytes"]
assert p["budget_bytes"] == s["budget_bytes"]
PY
"$MEMFIT" report t/plan.json >rep.txt 2>err.txt || fail "report: $(cat err.txt)"
grep -q "library reserve 144.00 MiB" rep.txt || fail "report: $(cat rep.txt)"
grep -q "CUDA context is not in the budget" rep.txt || fail "report: no context line"
grep -q "budgetBytes = $(field pct.json budget_bytes)" t/src/*.cpp ||
  fail "generated program lacks the budget"
grep -q "blasWorkspaceBytes = $((32 * MIB))" t/src/*.cpp ||
  fail "generated program lacks cuBLAS's workspace"

# --- the emulated trainer's memory line --------------------------------------
$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(5)
np.save("x.npy", r.standard_normal((16, 3, 8, 8)).astype(np.float32))
np.save("y.npy", r.integers(0, 10, 16).astype(np.int64))
PY
cmake -S t -B t/build -DMEMFIT_BACKEND=cpu >cmake.log 2>&1 || { cat cmake.log; fail configure; }
cmake --build t/build -j 2 >build.log 2>&1 || { tail -20 build.log; fail build; }
t/build/trainer --data x.npy --labels y.npy --iterations 2 >run.log 2>&1 ||
  { cat run.log; fail "trainer within the budget exited $?"; }
line=$(grep "^memory: " run.log) || { cat run.log; fail "no memory line"; }
$PY - "$line" pct.json <<'PY' || fail "memory line: $line"
import json, re, sys
m = re.fullmatch(r"memory: measured peak ([0-9.]+) MiB \(libraries ([0-9.]+) MiB "
                 r"of a ([0-9.]+) MiB reserve, trainer ([0-9.]+) MiB\) against the "
                 r"budget ([0-9.]+) MiB: within; the CUDA context \(0\.00 MiB\) "
                 r"is not in the budget", sys.argv[1])
assert m, "format"
peak, lib, res, trainer, budget = map(float, m.groups())
j = json.load(open(sys.argv[2]))
mib = lambda b: round(b / 1048576, 2)
assert lib == res == mib(j["library_reserve_bytes"]), (lib, res)
assert budget == mib(j["budget_bytes"]), budget
assert trainer == mib(j["planned_bytes"]), (trainer, j["planned_bytes"])
assert abs(peak - (lib + trainer)) <= 0.011, (peak, lib, trainer)
assert peak <= budget
PY
# Libraries that take more than their reserve: loud, and exit 3.
MEMFIT_EMU_LIBRARY_BYTES=$((1024 * MIB)) t/build/trainer --data x.npy --labels y.npy \
  --iterations 1 >over.log 2>over.err
rc=$?
[ $rc -eq 3 ] || { cat over.log over.err; fail "over the budget exited $rc, expected 3"; }
grep -q "^trainer: error: memory: measured peak .*: OVER; .* by [0-9.]* MiB" over.err ||
  fail "over: $(cat over.err)"
grep -q "^done: 1 iterations" over.log || fail "the run did not finish before the report"
echo "budget: ok ($line)"
