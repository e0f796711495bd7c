#!/usr/bin/env bash
# tools/gpu-check without a GPU: its report from a results file checked in
# (tests/gpu_check/results.json, made up to pass some checks and fail
# others), what it reads from trainer and selfcheck output, its refusals
# of a bad matrix, and a pack --dry-run of one small model (exported from
# torchvision, zeroed, planned at two budgets; no trainer is built).
set -u
MEMFIT=$1
WORK=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TOOL=$SRC/tools/gpu-check
DATA=$SRC/tests/gpu_check
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { # file line: the exact line is in the file
  grep -qxF -- "$2" "$1" || { cat "$1"; fail "$1 lacks: $2"; }
}

# -- the report
"$TOOL" report "$DATA/results.json" --out gpu.md || fail "report"
has gpu.md "| selfcheck: no mismatch, no algorithm it could not run | **no** | 412 checks, 0 mismatches, 1 algorithms not run |"
has gpu.md "| every trainer runs | **no** | 4 of 6 ran; failed: gpt-bf16-100, vgg16-bf16-25 |"
# a loss above the tolerance shows PyTorch's own CPU-to-GPU difference
has gpu.md "| fp32 losses within 1e-05 relative of PyTorch's over 2 steps | **no** | 4 compared; above: vgg16-fp32-50 (PyTorch's CPU and GPU runs: 4.00e-05) |"
has gpu.md "| fp32 weights after 4 steps within 2x PyTorch's CPU-to-GPU difference | **no** | 4 compared; above: vgg16-fp32-50 |"
has gpu.md "| measured device memory never above the budget | **no** | 4 measured; above: vgg16-fp32-50 |"
has gpu.md "| at 50%, measured overhead of resnet50 and vgg16 within 5 points of the plan's | **no** | 2 compared; off: vgg16-fp32-50 |"
# trainer recipes against the CPU emulation: bn-val's loss is off
has gpu.md "| trainer recipes run and log within 1e-05 of the CPU emulation | **no** | 2 ran; off: bn-val |"
has gpu.md "| lm-val | yes | 1.07e-07 | 1.08e-07 | 4.80e-09 | yes |"
has gpu.md "| bn-val | yes | 3.00e-05 | - | 1.00e-09 | **no** |"
# what a recipe's GPU log is compared by: the largest relative difference
# per series, and whether the GPU logged every step the CPU did
printf 'iteration 1  loss 2.0  grad norm 1.0\niteration 2  loss 1.0\nvalidation after step 2  val loss 3.0  accuracy 1%%\n' >cpu.log
printf 'iteration 1  loss 2.0000002  grad norm 1.0\nvalidation after step 2  val loss 3.0\n' >gpu.log
"$PY" -c "
import sys; sys.path.insert(0, '$SRC/tools/gpu-check.d'); import recipes
r = recipes.compare(open('cpu.log').read(), open('gpu.log').read())
assert abs(r['loss'] - 1e-7) < 1e-12 and r['grad_norm'] == 0 and r['val_loss'] == 0, r
assert r['complete'] is False, r  # iteration 2 is missing
r = recipes.compare(open('cpu.log').read(), open('cpu.log').read())
assert r['complete'] and r['loss'] == 0, r
" || fail "recipes.compare"
# ab: two packs' shared trainers alternately; the rate after the first
# window; a trainer that fails is "failed", not a rate
for side in a b; do
  mkdir -p ab-$side/trainers/m-fp32-100 ab-$side/trainers/m-bf16-100 ab-$side/models
  echo '{"trainers": [{"id": "m-fp32-100", "model": "m", "dir": "trainers/m-fp32-100"}, {"id": "m-bf16-100", "model": "m", "dir": "trainers/m-bf16-100"}, {"id": "only-'$side'", "model": "m", "dir": "x"}]}' >ab-$side/matrix.json
  : >ab-$side/models/m.onnx
done
fake() { # file rate-after-startup [exit]
  printf '#!/bin/sh\necho "iteration 10  loss 1.0  images/s 5.0"\necho "iteration 20  loss 0.9  images/s %s"\necho "iteration 30  loss 0.8  images/s %s"\nexit %s\n' "$2" "$2" "${3:-0}" >"$1"
  chmod +x "$1"
}
fake ab-a/trainers/m-fp32-100/trainer 100
fake ab-b/trainers/m-fp32-100/trainer 125
fake ab-a/trainers/m-bf16-100/trainer 200
fake ab-b/trainers/m-bf16-100/trainer 200 1
"$TOOL" ab ab-a ab-b --out ab-out --repeats 2 >ab.txt 2>&1 || { cat ab.txt; fail "ab"; }
has ab-out/ab.md "| m-fp32-100 | 100.0 | 125.0 | +25.0% |"
has ab-out/ab.md "| m-bf16-100 | 200.0 | failed | - |"
grep -q "only-" ab-out/ab.md && fail "ab ran a trainer one pack lacks"
[ -f ab-out/logs/b-m-fp32-100-1.log ] || fail "ab keeps no trainer logs"
"$TOOL" ab ab-a ab-b --out ab-out --trainers only-a >ab.txt 2>&1 &&
  fail "ab ran a trainer not in both packs"
grep -q "not in both packs" ab.txt || { cat ab.txt; fail "ab: no reason given"; }
# weights: ratio to PyTorch's own CPU-GPU difference
has gpu.md "| resnet50 | fp32 | 50% | 6.91235 6.90123 | 3.00e-06 | 2.00e-06 | 1.50e-04 | 1.00e-04 | 1.50 |"
# speed against PyTorch; measured ms from the batch and rate; tokens for GPT
has gpu.md "| resnet50 | fp32 | 50% | 64 | 800.0 img/s | 1250.0 | 0.64x | 73.20 | 80.00 |"
has gpu.md "| gpt | bf16 | 100% | 16 | - | 25600.0 | - | 150.00 | - |"
# memory: the larger of measured and peak against the budget
has gpu.md "| vgg16 | fp32 | 50% | 4000.0 | 3990.0 | 4100.0 | - | - | - | - | **no** | 12000.0 |"
has gpu.md "| resnet50 | fp32 | 50% | 3000.0 | 2990.0 | 2911.5 | 2870.5 | 120.0 | 21.0 | 3500 | yes | 9000.0 |"
# overheads: 80 ms against 64 ms at 100% is 25%, planned 22%
has gpu.md "| resnet50 | fp32 | 50% | 22.0 | 25.0 | +3.0 |"
has gpu.md "| vgg16 | fp32 | 50% | 10.0 | 25.0 | +15.0 |"
has gpu.md "| resnet50 | fp32 | 50% | 2 | - | - | - |"
has gpu.md "| gpt-bf16-100 | error: cannot allocate the arena (800 bytes) on the device \\| out of memory |"
has gpu.md "| vgg16-bf16-25 | not planned: memfit: error: vgg16.onnx: budget 1900.00 MiB is below the lower bound Mmin = 2000.00 MiB |"
grep -q "| vgg16 | bf16 | 25%" gpu.md && fail "a trainer never planned is in the tables"
grep -q "on one Test GPU 80GB (81559 MiB, driver 999.1)" gpu.md || fail "no GPU line"
grep -q "2030-01-02" gpu.md || fail "no date"
# deterministic
"$TOOL" report "$DATA/results.json" --out again.md && cmp -s gpu.md again.md ||
  fail "two reports of one results file differ"
# everything passing says so
$PY - "$DATA/results.json" good.json <<'PY' || fail "cannot write good.json"
import json, sys
r = json.load(open(sys.argv[1]))
r["selfcheck"]["algorithm_fallbacks"] = 0
r["trainers"] = [t for t in r["trainers"] if not t["id"].startswith(("vgg16", "gpt"))]
r["recipes"] = [x for x in r["recipes"] if x["name"] != "bn-val"]
json.dump(r, open(sys.argv[2], "w"))
PY
"$TOOL" report good.json --out good.md || fail "report good"
[ "$(grep -c '| \*\*no\*\* |' good.md)" = 0 ] || { cat good.md; fail "a passing run reports a failure"; }
has good.md "| at 50%, measured overhead of resnet50 and vgg16 within 5 points of the plan's | yes | 1 compared |"
echo '{"schema": 2}' >bad.json
"$TOOL" report bad.json --out bad.md 2>err.txt && fail "a schema 2 file was reported"
grep -q "not a gpu-check results file" err.txt || fail "schema: $(cat err.txt)"

# -- one pack run in parts (--models): the parts' report is the whole's
$PY - "$DATA/results.json" <<'PY' || fail "cannot split results.json"
import json, sys
r = json.load(open(sys.argv[1]))
first = next(iter(r["models"]))
for name, keep in (("part1.json", lambda m: m == first),
                   ("part2.json", lambda m: m != first)):
    p = dict(r, models={k: v for k, v in r["models"].items() if keep(k)},
             trainers=[t for t in r["trainers"] if keep(t["model"])])
    json.dump(p, open(name, "w"))
other = dict(r, pack=dict(r["pack"], memfit_commit="another"))
json.dump(other, open("other-pack.json", "w"))
PY
"$TOOL" report part1.json part2.json --out parts.md || fail "report of parts"
cmp -s <(grep -v "^| every trainer runs" parts.md | sort) \
  <(grep -v "^| every trainer runs" gpu.md | sort) ||
  { diff parts.md gpu.md; fail "the parts' report differs from the whole's"; }
"$TOOL" report part1.json part1.json --out x.md 2>err.txt && fail "a model measured twice was merged"
grep -q "measured in an earlier file too" err.txt || fail "twice: $(cat err.txt)"
"$TOOL" report part1.json other-pack.json --out x.md 2>err.txt && fail "two packs were merged"
grep -q "another pack" err.txt || fail "packs: $(cat err.txt)"

# -- what it reads from a trainer and the selfcheck
got=$($PY "$SRC/tools/gpu-check.d/parse.py" trainer "$DATA/trainer.out" "$DATA/trainer.err") ||
  fail "parse trainer"
echo "$got" | grep -q '"algorithm_changes": 2' || fail "fallbacks: $got"
echo "$got" | grep -q '"steady_samples_s": 810.0' || fail "steady rate (first window left out): $got"
echo "$got" | grep -q '"measured_mib": 2911.5' || fail "measured: $got"
echo "$got" | grep -q '"loss": 6.80112457' || fail "losses: $got"
# the start-up algorithm check's count and the measured-memory line
got=$($PY "$SRC/tools/gpu-check.d/parse.py" trainer "$DATA/trainer-graph.out") ||
  fail "parse trainer (graph)"
echo "$got" | grep -q '"algorithm_changes": 5' || fail "changed algorithms: $got"
echo "$got" | grep -q '"peak_mib": 3022.25' || fail "peak: $got"
echo "$got" | grep -q '"library_mib": 121.5' || fail "libraries: $got"
echo "$got" | grep -q '"budget_mib": 3044.0' || fail "budget: $got"
echo "$got" | grep -q '"within_budget": true' || fail "within: $got"
echo "$got" | grep -q '"context_mib": 523.0' || fail "context: $got"
echo "$got" | grep -q '"allocated_mib": 2900.25' || fail "allocated: $got"
echo "$got" | grep -q '"iterations_added_mib": 0.5' || fail "added: $got"
# a trainer that timed cuDNN's algorithms says why each changed
got=$($PY "$SRC/tools/gpu-check.d/parse.py" trainer "$DATA/trainer-tuned.out") ||
  fail "parse trainer (tuned)"
echo "$got" | grep -q '"algorithm_changes": 31' || fail "tuned changes: $got"
echo "$got" | grep -q '"algorithm_refused": 2' || fail "refused: $got"
echo "$got" | grep -q '"algorithm_faster": 29' || fail "faster: $got"
echo "$got" | grep -q '"graph_engines": 68' || fail "graph engines: $got"
got=$($PY "$SRC/tools/gpu-check.d/parse.py" selfcheck "$DATA/selfcheck.log") || fail "parse selfcheck"
echo "$got" | grep -q '"algorithm_fallbacks": 1, "checks": 412, "mismatches": 0' || fail "selfcheck: $got"

# -- refusals
"$TOOL" pack x.tar.xz --dry-run --memfit "$MEMFIT" --precisions fp8 2>err.txt && fail "fp8 accepted"
grep -q "'fp8' is none of fp32, tf32, bf16, fp16" err.txt || fail "fp8: $(cat err.txt)"
"$TOOL" pack x.tar.xz --dry-run --memfit "$MEMFIT" --budgets 150 2>err.txt && fail "150% accepted"
grep -q "'150' is not a percentage" err.txt || fail "150: $(cat err.txt)"
"$TOOL" run nothing-here 2>err.txt && fail "run without a pack"
grep -q "not a gpu-check pack" err.txt || fail "run: $(cat err.txt)"

# -- a dry-run pack
"$TOOL" pack dry.tar.xz --dry-run --memfit "$MEMFIT" --models resnet18 \
  --precisions fp32 --budgets 100,75,5 --batch resnet18=4 >pack.log 2>&1 ||
  { cat pack.log; fail "pack --dry-run"; }
grep -q "lower bound" pack.log || fail "pack does not say why 5% was not planned"
mkdir dry && tar -xJf dry.tar.xz -C dry || fail "unpack"
for f in gpu-check py/runner.py py/models.py py/today_models.py py/report.py \
  models/resnet18.onnx models/resnet18.onnx.params.json matrix.json; do
  [ -f "dry/$f" ] || fail "the pack lacks $f"
done
$PY - dry <<'PY' || fail "the dry-run pack is wrong"
import json, sys
import numpy as np, onnx, torchvision
from onnx import numpy_helper
d = sys.argv[1]
m = json.load(open(d + "/matrix.json"))
ids = [t["id"] for t in m["trainers"]]
assert ids == ["resnet18-fp32-100", "resnet18-fp32-75", "resnet18-fp32-5"], ids
full, part, low = m["trainers"]
full, part = full["plan"], part["plan"]
# 5% is below the lower bound: recorded with memfit's reason, not packed
assert low["plan"] is None and "lower bound" in low["error"], low
assert m["models"]["resnet18"]["batch"] == 4 and m["pack"]["dry_run"], m
# 75% of the ideal peak, planned within it; the device budget adds the
# libraries' reserve
share = part["budget_bytes"] - part["library_reserve_bytes"]
assert part["library_reserve_bytes"] > 0, part
assert abs(share - full["ideal_peak_bytes"] * 0.75) <= 1, (part, full)
assert part["planned_bytes"] <= share < full["planned_bytes"]
params = json.load(open(d + "/models/resnet18.onnx.params.json"))["parameters"]
want = {k for k, _ in torchvision.models.resnet18().named_parameters()}
assert set(params) == want, set(params) ^ want
inits = {i.name: numpy_helper.to_array(i)
         for i in onnx.load(d + "/models/resnet18.onnx").graph.initializer}
assert all(not inits[k].any() for k in params), "a parameter is not zeroed"
# BatchNorm's running variances are no parameters: kept, at 1
assert inits["bn1.running_var"].min() == 1, inits["bn1.running_var"][:4]
print("dry-run pack:", len(params), "parameters zeroed,", ids)
PY
echo "gpu-check: report, parse, refusals and dry-run pack as expected"
