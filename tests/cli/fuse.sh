#!/usr/bin/env bash
# Fused forms (--fuse): ResNet-18's ReLUs after a BatchNorm run inside it,
# MobileNet-V2's ReLU6 (Clip) too.
# The summary, plan.json and inspect say so; --fuse none plans the model
# as written; a percentage is of the model as written either way (the
# same bytes); the default is never slower than the model as written; a
# model without a BatchNorm+ReLU pair says nothing; bad values are refused.
# (Training: tests/cli/e2e_cpu.sh compares the fused trainer with the
# model as written byte for byte, and both with PyTorch.)
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work
M="$(dirname "$MEMFIT")/../testmodels/resnet18.onnx"
[ -f "$M" ] || { echo "fuse: SKIPPED: no $M (tools/test exports it)"; exit 0; }
ARGS=(--batch 16 --device h100-sxm --json --quiet)
field() { # json-file python-expression-on-j
  "$PY" -c "import json,sys; j=json.load(open('$1')); print($2)"
}

for b in 100% 50%; do
  "$MEMFIT" plan "$M" "${ARGS[@]}" --budget $b >auto-$b.json || fail "plan auto $b"
  "$MEMFIT" plan "$M" "${ARGS[@]}" --budget $b --fuse none >none-$b.json ||
    fail "plan none $b"
  [ "$(field auto-$b.json "j['budget_bytes'] == json.load(open('none-$b.json'))['budget_bytes']")" = True ] ||
    fail "$b: --fuse auto and none resolve the percentage to different bytes"
  [ "$(field auto-$b.json "j['planned_seconds'] <= json.load(open('none-$b.json'))['planned_seconds']")" = True ] ||
    fail "$b: the default is slower than --fuse none"
  [ "$(field none-$b.json "'fuse' in j")" = False ] || fail "$b: --fuse none has a fuse note"
  echo "$b: $(field auto-$b.json "j['fuse']")"
done
# At the full budget the fused plan is at its own ideal time: chosen
# without planning the model as written, and faster than it.
field auto-100%.json "j['fuse']" | grep -q "^9 BatchNorm+ReLU fused: .*can be no faster" ||
  fail "100%: $(field auto-100%.json "j['fuse']")"
[ "$(field auto-100%.json "j['planned_seconds'] < json.load(open('none-100%.json'))['planned_seconds']")" = True ] ||
  fail "100%: fusing nine pairs saves no predicted time"

"$MEMFIT" plan "$M" --batch 16 --device h100-sxm --budget 100% -o out --quiet ||
  fail "plan -o"
[ "$(field out/plan.json "j['fused_forms']['batchnorm_relu']")" = 9 ] ||
  fail "plan.json: fused_forms is not 9 BatchNorm+ReLU"
[ "$(field out/plan.json "sum(t['op'] == 'BatchNormalization+Relu' and t['kind'] == 'FP' for t in j['tasks'])")" = 9 ] ||
  fail "plan.json: not nine fused forward tasks"
[ "$(field out/plan.json "sum(t['op'] == 'Relu' and t['kind'] == 'FP' for t in j['tasks'])")" = 8 ] ||
  fail "plan.json: the eight ReLUs after a residual addition are not left as written"
grep -q "9 BatchNorm+ReLU fused" out/report.html || fail "report.html has no fuse note"

"$MEMFIT" inspect "$M" --batch 16 --summary >inspect.txt 2>/dev/null || fail inspect
grep -q "^fused forms  *9 BatchNorm+ReLU (each activation runs inside" inspect.txt ||
  fail "inspect: $(grep fused inspect.txt)"
"$MEMFIT" inspect "$M" --batch 16 --json --fuse none >inspect.json 2>/dev/null ||
  fail "inspect --json"
[ "$(field inspect.json "j['fused_forms']")" = "{'batchnorm_relu': 9, 'batchnorm_clip': 0, 'fused': False}" ] ||
  fail "inspect --json --fuse none: $(field inspect.json "j['fused_forms']")"

"$MEMFIT" zoo tiny-cnn -o tiny-cnn.onnx >/dev/null || fail zoo
"$MEMFIT" plan tiny-cnn.onnx --batch 8 --budget 50% --device k40m --json --quiet \
  >tiny.json || fail "plan tiny-cnn"
[ "$(field tiny.json "'fuse' in j")" = False ] ||
  fail "a model without BatchNorm has a fuse note"

"$MEMFIT" plan tiny-cnn.onnx --batch 8 --budget 50% --fuse yes >bad.out 2>&1 &&
  fail "--fuse yes accepted"
grep -q "fuse" bad.out || fail "--fuse yes: $(cat bad.out)"
V2="$(dirname "$MEMFIT")/../testmodels/mobilenet_v2.onnx"
"$MEMFIT" plan "$V2" --batch 8 --budget 100% --device h100-sxm -o v2 --quiet ||
  fail "plan mobilenet_v2"
[ "$(field v2/plan.json "(j['fused_forms']['batchnorm_relu'], j['fused_forms']['batchnorm_clip'])")" = "(0, 35)" ] ||
  fail "mobilenet_v2: fused_forms $(field v2/plan.json "j['fused_forms']")"
"$MEMFIT" compile "$V2" --batch 8 --budget 100% --device h100-sxm -o v2c \
  --quiet || fail "compile mobilenet_v2"
grep -q "\.clip = true" v2c/src/*.cpp || fail "mobilenet_v2: no fused Clip generated"
echo "fuse: ok"
