#!/usr/bin/env bash
# memfit zoo: writes models, refuses to overwrite without --force, reports
# unknown models on stderr with exit code 1, lists the zoo.
set -u
MEMFIT=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" zoo --list >list.txt 2>err.txt || fail "--list exited $?"
for name in alexnet vgg16 vgg101 vgg-N resnet50 resnet-N googlenet \
            densenet121 fcn mlp tiny-cnn tiny-dropout gpt2 gpt2-xl llama-1b \
            llama-70b gpt2-tiny llama-tiny; do
  grep -q "^  $name " list.txt || fail "--list lacks $name"
done

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >out.txt 2>err.txt || fail "tiny-cnn exited $?"
[ -s tiny.onnx ] || fail "tiny.onnx not written"
ls -a | grep -q '\.tmp-' && fail "temporary file left behind"

# A tiny model carries weights by default; --no-weights drops them.
"$MEMFIT" zoo tiny-cnn -o bare.onnx --no-weights >/dev/null 2>&1 || fail "--no-weights exited $?"
[ "$(stat -c %s bare.onnx)" -lt "$(stat -c %s tiny.onnx)" ] || fail "--no-weights file not smaller"
# Same name and options give the same bytes.
"$MEMFIT" zoo tiny-cnn -o again.onnx >/dev/null 2>&1 || fail "second tiny-cnn exited $?"
cmp -s tiny.onnx again.onnx || fail "output not deterministic"

# Refuses to overwrite; the file keeps its contents.
cp tiny.onnx before.onnx
"$MEMFIT" zoo mlp -o tiny.onnx >out.txt 2>err.txt
rc=$?
[ $rc -eq 1 ] || fail "overwrite without --force exited $rc, expected 1"
grep -q "exists; use --force" err.txt || fail "no overwrite message: $(cat err.txt)"
cmp -s tiny.onnx before.onnx || fail "file changed without --force"
"$MEMFIT" zoo mlp -o tiny.onnx --force >/dev/null 2>&1 || fail "--force exited $?"
cmp -s tiny.onnx before.onnx && fail "--force did not overwrite"

# Unknown model: exit 1, message on stderr listing the models, no file.
"$MEMFIT" zoo no-such-net -o x.onnx >out.txt 2>err.txt
rc=$?
[ $rc -eq 1 ] || fail "unknown model exited $rc, expected 1"
grep -q "unknown model 'no-such-net'" err.txt || fail "no unknown-model message: $(cat err.txt)"
grep -q "resnet-N" err.txt || fail "message does not list the models"
[ -s out.txt ] && fail "error printed on stdout"
[ -e x.onnx ] && fail "file written for an unknown model"

# Options reach the model: a fixed batch and a larger image.
"$MEMFIT" zoo resnet-50 -o r.onnx --batch 8 --image-size 64 --classes 7 >/dev/null 2>&1 \
  || fail "resnet-50 exited $?"
[ -s r.onnx ] || fail "r.onnx not written"
"$MEMFIT" zoo mlp -o m.onnx --image-size 8 >/dev/null 2>err.txt && fail "image size accepted for mlp"
"$MEMFIT" zoo mlp -o m.onnx --weights --no-weights >/dev/null 2>err.txt && fail "both weight flags accepted"
"$MEMFIT" zoo mlp >/dev/null 2>err.txt && fail "missing -o accepted"
grep -q "no output file" err.txt || fail "no missing-output message"

# Language models: --seq-len sets T up to the context; a 70B model's file
# without weights is small.
"$MEMFIT" zoo llama-70b -o l.onnx --seq-len 2048 --batch 2 >/dev/null 2>err.txt \
  || fail "llama-70b exited $?: $(cat err.txt)"
[ "$(stat -c %s l.onnx)" -lt 2000000 ] || fail "llama-70b's file is $(stat -c %s l.onnx) bytes"
"$MEMFIT" zoo gpt2 -o g.onnx --seq-len 2048 >/dev/null 2>err.txt && fail "gpt2 took T past 1024"
grep -q "up to 1024 tokens" err.txt || fail "no context message: $(cat err.txt)"
"$MEMFIT" zoo resnet18 -o g.onnx --seq-len 16 >/dev/null 2>err.txt && fail "seq-len accepted for resnet18"
# --layers: the same blocks at another depth; not for a CNN.
"$MEMFIT" zoo gpt2 -o g66.onnx --layers 3 >/dev/null 2>err.txt ||
  fail "gpt2 --layers 3 exited $?: $(cat err.txt)"
"$MEMFIT" inspect g66.onnx --batch 1 --json >g66.json 2>err.txt ||
  fail "inspect of gpt2 --layers 3: $(cat err.txt)"
grep -q '"parameters": 60648960' g66.json ||
  fail "gpt2 at 3 layers is not (50257 + 1024) 768 + 3 (12 768^2 + 13 768) + 2 768 parameters: $(grep parameters g66.json)"
"$MEMFIT" zoo resnet18 -o g.onnx --layers 3 >/dev/null 2>err.txt && fail "--layers accepted for resnet18"
grep -q "not a language model" err.txt || fail "no --layers message: $(cat err.txt)"
"$MEMFIT" zoo gpt2-xl -o g.onnx --weights >/dev/null 2>err.txt && fail "gpt2-xl written with weights"
grep -q "2 GiB" err.txt || fail "no file-size message: $(cat err.txt)"

# Checked by ONNX itself where Debian's python has it.
if /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
  /usr/bin/python3 - <<'PY' || fail "onnx python rejected the files"
import onnx
for f, shape in (("r.onnx", [8, 3, 64, 64]), ("bare.onnx", ["N", 3, 8, 8])):
    m = onnx.load(f)
    onnx.checker.check_model(m)
    onnx.shape_inference.infer_shapes(m, strict_mode=True)
    d = m.graph.input[0].type.tensor_type.shape.dim
    got = [x.dim_value if x.HasField("dim_value") else x.dim_param for x in d]
    assert got == shape, (f, got)
out = onnx.load("r.onnx").graph.output[0].type.tensor_type.shape.dim
assert [x.dim_value for x in out] == [8, 7]
m = onnx.load("l.onnx")
onnx.checker.check_model(m)
out = m.graph.output[0].type.tensor_type.shape.dim
assert [x.dim_value for x in out] == [2, 2048, 32000], out
PY
fi
echo "zoo CLI: ok"
