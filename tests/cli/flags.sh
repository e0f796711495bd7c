#!/usr/bin/env bash
# memfit's command line: --help shows memfit's commands and options only
# (not the hundreds LLVM's libraries register), and every numeric flag
# refuses NaN, infinities, negative and malformed values with a message
# naming the flag, exit code 1; sizes and counts whose default means "not
# given" (--batch, --sub-batch, --classes) refuse an explicit 0, and
# --momentum takes [0, 1).
set -u
MEMFIT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" --help >help.txt 2>&1 || fail "--help exited $?"
grep -Eq -- '--(amdgpu|aarch64|x86|arm|riscv|ppc|debug-pass|stats)' help.txt &&
  fail "--help shows LLVM's internal options: $(grep -E 'amdgpu|aarch64|x86' help.txt | head -3)"
for cmd in compare compile device inspect plan profile report zoo; do
  grep -q "^  $cmd " help.txt || fail "--help does not list '$cmd'"
done
[ "$(wc -l <help.txt)" -lt 40 ] || fail "--help has $(wc -l <help.txt) lines"
"$MEMFIT" plan --help >plan-help.txt 2>&1 || fail "plan --help exited $?"
for opt in --budget --batch --device --policy --momentum --sub-batch; do
  grep -q -- "$opt" plan-help.txt || fail "plan --help lacks $opt"
done
grep -q amdgpu plan-help.txt && fail "plan --help shows LLVM's options"

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null || fail "zoo"
expect_error() { # args... (checked: exit 1, the message names the flag)
  local flag=$1
  "$MEMFIT" "${@:2}" >out.txt 2>err.txt
  local rc=$?
  [ $rc -eq 1 ] || { cat err.txt; fail "'${*:2}' exited $rc, expected 1"; }
  grep -q -- "$flag" err.txt || fail "'${*:2}': message does not name $flag: $(cat err.txt)"
  [ -s out.txt ] && fail "'${*:2}': error printed on stdout"
  echo "ok: ${*:2}: $(head -1 err.txt)"
}
P="plan tiny.onnx --batch 8"
for v in nan inf -inf -1 x 1e400 1 5 1e30; do
  # shellcheck disable=SC2086
  expect_error --momentum $P --budget 50% --momentum=$v
done
for v in -1 2.5 nan x 0; do
  # shellcheck disable=SC2086
  expect_error --batch plan tiny.onnx --budget 50% --batch=$v
  # shellcheck disable=SC2086
  expect_error --sub-batch $P --budget 50% --sub-batch=$v
done
# --chunks: a whole number that divides the batch, not with --sub-batch.
for v in -1 2.5 nan x 0 3; do
  # shellcheck disable=SC2086
  expect_error --chunks $P --budget 50% --chunks=$v
done
# shellcheck disable=SC2086
expect_error --chunks $P --budget 50% --chunks 2 --sub-batch 4
for v in -5% nan% inf% 0% 1e9% -1GB nan 0; do
  # shellcheck disable=SC2086
  expect_error --budget $P --budget=$v
done
expect_error --budgets compare tiny.onnx --batch 8 --budgets=50%,nan%
expect_error --classes zoo tiny-cnn -o t2.onnx --classes=-3
expect_error --classes zoo tiny-cnn -o t2.onnx --classes=0
expect_error --image-size zoo tiny-cnn -o t2.onnx --image-size=nan
expect_error --image-size zoo tiny-cnn -o t2.onnx --image-size=0
expect_error --batch zoo mlp -o t2.onnx --batch=0
[ -e t2.onnx ] && fail "a refused zoo call wrote its file"
expect_error --batch inspect tiny.onnx --batch=-2
expect_error --batch inspect tiny.onnx --batch=0
# Parsed before the command runs, so no GPU is needed to see these.
expect_error --repeats profile tiny.onnx -o p.json --repeats=0
expect_error --sub-batches profile tiny.onnx -o p.json --sub-batches=4,0
expect_error --warmup profile tiny.onnx -o p.json --warmup=-1
"$MEMFIT" plan tiny.onnx --batch 8 --budget 50% -o rep --quiet || fail "plan -o"
for v in -1 nan inf 2.5 x; do
  expect_error --layers report rep/plan.json --layers=$v
  expect_error --stalls report rep/plan.json --stalls=$v
done
# A valid call still works.
"$MEMFIT" plan tiny.onnx --batch 8 --budget 50% --momentum 0.5 --quiet ||
  fail "a valid plan call failed"
"$MEMFIT" plan tiny.onnx --batch 8 --budget 50% --momentum 0 --sub-batch 4 \
  --quiet || fail "momentum 0 and an explicit sub-batch were refused"
echo "flags: ok"
