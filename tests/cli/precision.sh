#!/usr/bin/env bash
# --precision on inspect, plan, compare and compile: 16-bit plans halve the
# activations (ResNet-50 at batch 256: the ideal peak in bf16 at most 0.55x
# fp32's), plan.json states the precision of the plan and of each block,
# fp32 plan.json carries no precision fields (so fp32 plans stay
# byte-identical), tensor cores make bf16 and tf32 plans predict faster
# iterations on an H100, bad values exit 1, and compile writes 16-bit
# trainers.
set -u
MEMFIT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }
num() { # file key: the value of top-level field "key"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

"$MEMFIT" zoo resnet50 -o r50.onnx --no-weights >/dev/null || fail "zoo resnet50"
for p in fp32 tf32 bf16 fp16; do
  "$MEMFIT" inspect r50.onnx --batch 256 --summary --json --precision $p \
    >inspect-$p.json 2>err.txt || fail "inspect --precision $p: $(cat err.txt)"
  "$MEMFIT" plan r50.onnx --batch 256 --policy ideal --device h100-sxm \
    --precision $p --json >plan-$p.json 2>err.txt ||
    fail "plan --precision $p: $(cat err.txt)"
  [ $p = fp32 ] || [ "$(num plan-$p.json precision)" = $p ] ||
    fail "plan --json lacks precision $p"
done
python3 - <<'PY' || fail "bf16 figures"
import json
ins = {p: json.load(open(f"inspect-{p}.json")) for p in ("fp32", "tf32", "bf16", "fp16")}
plan = {p: json.load(open(f"plan-{p}.json")) for p in ("fp32", "tf32", "bf16", "fp16")}
# Activations are exactly half; tf32 stores fp32.
assert ins["bf16"]["keep_all_bytes"] * 2 == ins["fp32"]["keep_all_bytes"], ins
assert ins["tf32"]["keep_all_bytes"] == ins["fp32"]["keep_all_bytes"]
assert ins["fp16"]["liveness_peak_bytes"] == ins["bf16"]["liveness_peak_bytes"]
# Mmin's task part (at sub-batch 1) about halves: int32 labels stay, and
# a convolution's backward-filter also stages its 16-bit weight gradient
# (2 bytes a weight: 4.7 MB for layer4's 3x3 convolutions, the largest
# footprint); its weight side grows by the working copies.
task = {p: ins[p]["lower_bound_bytes"] - ins[p]["weight_side_bytes"] for p in ins}
assert 0.5 * task["fp32"] < task["bf16"] <= 0.53 * task["fp32"], task
# Master weights, gradients and momentum stay fp32; the bf16 working
# copies of the convolution and fc weights add at most 2 bytes a parameter.
extra = ins["bf16"]["weight_side_bytes"] - ins["fp32"]["weight_side_bytes"]
assert 0 < extra <= 2 * ins["fp32"]["parameters"], extra
ratio = plan["bf16"]["peak_bytes"] / plan["fp32"]["peak_bytes"]
print(f"ideal peak bf16/fp32 = {ratio:.3f}")
assert ratio <= 0.55, ratio
# Tensor cores: tf32 and bf16 predict faster iterations than fp32 FMA.
t = {p: plan[p]["planned_time_ms"] for p in plan}
print("predicted ms:", t)
assert t["bf16"] < t["tf32"] < t["fp32"], t
PY

# plan.json: the precision of the plan and of each block, only when not fp32.
"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null || fail "zoo tiny-cnn"
"$MEMFIT" plan tiny.onnx --batch 8 --precision bf16 --budget 80% -o bf16 \
  >bf16.txt 2>err.txt || fail "plan -o bf16: $(cat err.txt)"
grep -q "precision bf16" bf16.txt || fail "summary lacks the precision: $(head -2 bf16.txt)"
"$MEMFIT" plan tiny.onnx --batch 8 --budget 80% -o fp32 >fp32.txt 2>err.txt ||
  fail "plan -o fp32: $(cat err.txt)"
grep -q "precision" fp32.txt && fail "fp32 summary names a precision"
python3 - <<'PY' || fail "plan.json precision fields"
import json
b = json.load(open("bf16/plan.json"))
f = json.load(open("fp32/plan.json"))
assert b["precision"] == "bf16"
assert "precision" not in f
assert all("dtype" not in blk for blk in f["blocks"])
kinds = {}
for blk in b["blocks"]:
    kinds.setdefault(blk["kind"], set()).add(blk["dtype"])
print(kinds)
assert kinds["Y"] == {"bf16"} and kinds["dY"] == {"bf16"}, kinds
assert kinds["W"] == {"f32"} and kinds["dW"] == {"f32"}, kinds
assert kinds["W copy"] == {"bf16"}, kinds
assert kinds["label"] == {"i32"}, kinds
PY
"$MEMFIT" report bf16/plan.json >report.txt 2>err.txt || fail "report: $(cat err.txt)"
grep -q "precision bf16" report.txt || fail "report lacks the precision: $(head -2 report.txt)"

# compare plans every policy at the precision asked for.
"$MEMFIT" compare tiny.onnx --batch 8 --precision fp16 --budgets 80% \
  >cmp.txt 2>err.txt || fail "compare --precision fp16: $(cat err.txt)"

# Bad values: exit 1, the message names the flag.
for cmd in "plan tiny.onnx --batch 8" "inspect tiny.onnx" \
           "compare tiny.onnx --batch 8"; do
  # shellcheck disable=SC2086
  "$MEMFIT" $cmd --precision=fp8 >out.txt 2>err.txt
  rc=$?
  [ $rc -eq 1 ] || fail "'$cmd --precision=fp8' exited $rc, expected 1"
  grep -q -- "precision" err.txt || fail "message does not name --precision: $(cat err.txt)"
done
# compile writes 16-bit trainers: 16-bit blocks through arena16 with their
# bytes, tensor-core operators read the weights' working copies, and the
# program states its precision (tests/cli/precision_train.sh trains them).
"$MEMFIT" compile tiny.onnx --batch 8 --budget 80% --precision bf16 -o out \
  --quiet 2>err.txt || fail "compile --precision bf16: $(cat err.txt)"
grep -q "x.arena16(" out/src/round_0.cpp || fail "no 16-bit block in the trainer"
grep -q "x.weightCopy(" out/src/round_0.cpp || fail "no working copy read"
grep -q ".precision = Precision::BF16" out/src/main.cpp || fail "no precision"
grep -q ".workingCopy = true" out/src/main.cpp || fail "no working copy declared"
"$MEMFIT" compile tiny.onnx --batch 8 --budget 80% --precision fp32 -o out32 \
  --quiet 2>err.txt || fail "compile fp32: $(cat err.txt)"
grep -q "arena16\|weightCopy\|precision\|workingCopy" out32/src/*.cpp &&
  fail "an fp32 trainer names 16-bit storage"
echo ok
