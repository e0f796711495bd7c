#!/usr/bin/env bash
# The trainer as a language-model recipe uses it, on the CPU emulation:
# gpt2-tiny trained from a flat token file (nanoGPT's raw uint16 train.bin,
# random windows; a 1-D .npy, sequential windows), gradients clipped by
# global norm (memfit's and the trainer's --clip-grad-norm), gradient
# accumulation over micro-batches (memfit's --accumulate), no weight
# decay on biases and norms (--no-decay auto, and by name), with a cosine
# warm-up, against the same in PyTorch (float64, clip_grad_norm_, two
# parameter groups, the same windows): losses, printed gradient norms and
# weights within 1e-5. A plan with weights homed on the host clips too
# (its host updates wait for the norm). tiny-cnn trains from mapped .npy
# images in uint8 with --normalize, float16, bfloat16 and float32 bit for
# bit as from the float32 array numpy computes the same way (int32 and
# uint8 labels as int64), and with --random-crop and --hflip bit for bit as
# from torchvision's transforms fed the same draws. A run killed mid-way resumes to
# the uninterrupted run's weights bit for bit and to its --log (JSON lines:
# step, loss, rate, gradient norm). Bad token files and flags
# are refused before the first step, naming the file, position or flag.
set -u
MEMFIT=$1
WORK=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=lib/trainer.bash
source "$SRC/tests/cli/lib/trainer.bash"
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "train_recipe: SKIPPED: $PY cannot import torch and onnx"
  exit 0
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
"$MEMFIT" zoo gpt2-tiny -o g.onnx >/dev/null || fail "zoo gpt2-tiny"
"$PY" - <<'PYEOF' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(11)
np.array(r.integers(0, 61, 3000), dtype=np.uint16).tofile("train.bin")
np.save("val.npy", r.integers(0, 61, 700).astype(np.int64))
bad = r.integers(0, 61, 700).astype(np.uint16)
bad[517] = 61
bad.tofile("bad.bin")
lab = r.integers(0, 10, 32).astype(np.int64)
lab[3] = 10
np.save("lab_bad.npy", lab)
np.save("grid.npy", r.integers(0, 61, (20, 16)).astype(np.uint16))
PYEOF
head -c 1001 train.bin >odd.bin

# The plan knows the updates wait for the norm; it says so and prices it.
"$MEMFIT" plan g.onnx --batch 4 --budget 100% --optimizer adamw \
  --clip-grad-norm 1 --refine=false -o planned >plan.txt ||
  fail "plan with clipping"
grep -q "gradients clipped to global norm 1" plan.txt ||
  { cat plan.txt; fail "the summary does not say the plan clips"; }
"$PY" -c "import json,sys; c=json.load(open('planned/plan.json'))['clip_grad_norm']; sys.exit(not (c['max_norm'] == 1 and c['seconds'] > 0))" ||
  fail "plan.json lacks clip_grad_norm"
"$MEMFIT" report planned/plan.json --layers 0 | grep -q "clipped to global norm 1" ||
  fail "memfit report does not read the clipping back"

build_trainer adamw g.onnx --batch 4 --budget 100% --optimizer adamw \
  --clip-grad-norm 1 --refine=false
build_trainer sgd g.onnx --batch 4 --budget 100% --optimizer sgd \
  --clip-grad-norm 0.5 --refine=false
build_trainer plain g.onnx --batch 4 --budget 100% --optimizer adamw \
  --refine=false
# Two micro-batches of 2 per optimizer step: one round each.
"$MEMFIT" plan g.onnx --batch 2 --accumulate 2 --budget 100% \
  --optimizer adamw --refine=false >acc_plan.txt || fail "plan --accumulate"
grep -q "^batch    2 sub-batches of 2" acc_plan.txt &&
  grep -q "gradient accumulation (--accumulate 2): each optimizer step takes 2 micro-batches of 2" acc_plan.txt ||
  { cat acc_plan.txt; fail "the plan does not run one round per micro-batch"; }
build_trainer accumulate g.onnx --batch 2 --accumulate 2 --budget 100% \
  --optimizer adamw --clip-grad-norm 1 --refine=false

check() { # name optimizer trainer-and-reference-flags...
  local name=$1 opt=$2
  shift 2
  ./$opt/build/trainer --iterations 8 --log-every 1 "$@" \
    --save $name.onnx >$name.log 2>&1 || { cat $name.log; fail "train $name"; }
  "$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx --heads 4 \
    --batch 4 --iterations 8 --optimizer $opt "$@" --losses $name.log \
    --trained $name.onnx --tol 1e-5 >$name.ref 2>&1 ||
    { cat $name.ref; fail "$name disagrees with torch"; }
  echo "$name vs torch: $(cat $name.ref)"
}
# Adam's eps at 1e-3: gpt2's attention key bias has a zero true gradient,
# whose rounding noise eps 1e-8 would scale to whole steps.
NANO=(--tokens train.bin --seq-len 16 --lr 0.01 --eps 1e-3
  --weight-decay 0.1 --no-decay auto --lr-schedule cosine --warmup-steps 2
  --min-lr 0.001)
check nano adamw "${NANO[@]}" --clip-grad-norm 1
# The trainer's value overrides the plan's (0.3 clips more steps).
check tighter adamw "${NANO[@]}" --clip-grad-norm 0.3
check sequential sgd --tokens val.npy --seq-len 16 --token-order sequential \
  --lr 0.05 --momentum 0.9 --weight-decay 0.01 --no-decay 'ln_|bias' \
  --clip-grad-norm 0.5
# The trainer's batch is the step's 4 samples; torch steps every second
# backward pass of 2, each loss halved.
./accumulate/build/trainer --iterations 8 --log-every 1 "${NANO[@]}" \
  --clip-grad-norm 1 --save acc.onnx >acc.log 2>&1 ||
  { cat acc.log; fail "train accumulate"; }
"$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx --heads 4 \
  --batch 4 --accumulate 2 --iterations 8 --optimizer adamw "${NANO[@]}" \
  --clip-grad-norm 1 --losses acc.log --trained acc.onnx --tol 1e-5 \
  >acc.ref 2>&1 || { cat acc.ref; fail "accumulate disagrees with torch"; }
echo "accumulate vs torch: $(cat acc.ref)"
grep -q "weight decay: none for 18 of 28 trained weights (--no-decay auto)" \
  nano.log || fail "nano: the exempt weights are not counted"
grep -q "tokens: train.bin, 3000 uint16 ids mapped, random windows of 16" \
  nano.log || fail "nano: the token stream is not described"

# Homed on the host: the host's updates wait for the norm too.
homed=""
for budget in 30% 40% 50% 60% 70%; do
  rm -rf homed
  "$MEMFIT" compile g.onnx --batch 4 --sub-batch 2 --optimizer adamw \
    --device h100-sxm --budget $budget --host-budget 1GiB \
    --clip-grad-norm 1 -o homed --quiet 2>/dev/null || continue
  grep -q "Home::Host" homed/src/main.cpp && { homed=$budget; break; }
done
[ -n "$homed" ] || fail "no budget homes weights on the host"
cat homed/src/round_*.cpp | grep -q "x.hostReady(" &&
  fail "homed: a host update starts inside the round of a clipping plan"
cmake -S homed -B homed/build -DMEMFIT_BACKEND=cpu >homed/cmake.log 2>&1 &&
  cmake --build homed/build -j 2 >homed/build.log 2>&1 ||
  { tail -30 homed/build.log; fail "build homed"; }
./homed/build/trainer --iterations 8 --log-every 1 "${NANO[@]}" \
  --clip-grad-norm 1 --save homed.onnx >homed.log 2>&1 ||
  { cat homed.log; fail "train homed"; }
"$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx --heads 4 \
  --batch 4 --iterations 8 --optimizer adamw "${NANO[@]}" \
  --clip-grad-norm 1 --losses homed.log --trained homed.onnx --tol 1e-5 \
  >homed.ref 2>&1 || { cat homed.ref; fail "homed disagrees with torch"; }
echo "homed at $homed vs torch: $(cat homed.ref)"

# Killed after step 5 of 8 (its last checkpoint at step 4) and resumed:
# the random windows, the clipping and the schedule follow the step.
RUN=(--iterations 8 "${NANO[@]}" --clip-grad-norm 1 --log-every 1)
./adamw/build/trainer "${RUN[@]}" --save whole.onnx --log whole.jsonl \
  >whole.log || fail "train whole"
MEMFIT_KILL_AFTER_ITERATION=5 bash -c './adamw/build/trainer "$@"; exit $?' \
  trainer "${RUN[@]}" --checkpoint ck --checkpoint-every 4 \
  --log resumed.jsonl >killed.log 2>&1
rc=$?
[ $rc -eq 137 ] || fail "the killed trainer exited $rc, not by SIGKILL"
[ "$(wc -l <resumed.jsonl)" -eq 5 ] || fail "the killed run logged $(wc -l <resumed.jsonl) steps, not 5"
./adamw/build/trainer "${RUN[@]}" --checkpoint ck --resume \
  --save resumed.onnx --log resumed.jsonl >resumed.log || fail "resume"
grep -q "resumed from ck at iteration 4" resumed.log ||
  { cat resumed.log; fail "not resumed at iteration 4"; }
cmp -s whole.onnx resumed.onnx || fail "a resumed token run trains otherwise"
"$PY" - <<'PYEOF' || fail "the resumed run's log is not the uninterrupted one's"
import json
def fields(name):
    rows = [json.loads(l) for l in open(name)]
    return [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in rows]
whole, resumed = fields("whole.jsonl"), fields("resumed.jsonl")
assert [r[0] for r in whole] == list(range(1, 9)), whole
assert whole == resumed, (whole, resumed)
rows = [json.loads(l) for l in open("whole.jsonl")]
assert all(abs(r["tokens_per_s"] - 16 * r["samples_per_s"])
           <= 1e-6 * r["tokens_per_s"] for r in rows), rows
PYEOF

# Refused before any step, naming the file, position or flag.
expect_error() { # trainer pattern trainer-args...
  local t=$1 pattern=$2
  shift 2
  out=$(./$t/build/trainer "$@" 2>&1) && fail "trained with $*"
  echo "$out" | grep -q -- "$pattern" || fail "unclear error for $*: $out"
  echo "$out" | grep -q "^iteration" && fail "stepped before refusing $*"
  return 0
}
expect_error adamw "bad.bin: token id 61 at position 517 is outside \[0, 61)" \
  --tokens bad.bin --seq-len 16
expect_error adamw "odd.bin: 1001 bytes is no whole number of uint16 tokens" \
  --tokens odd.bin --seq-len 16
expect_error adamw "grid.npy: a token file must be one-dimensional" \
  --tokens grid.npy --seq-len 16
expect_error adamw "--seq-len 32: this trainer's model reads sequences of 16" \
  --tokens train.bin --seq-len 32
expect_error adamw "--tokens needs --seq-len" --tokens train.bin
expect_error adamw "give one of --data and --labels, --tokens, or --synthetic" \
  --tokens train.bin --seq-len 16 --synthetic
expect_error adamw "invalid value 'shuffled' for --token-order" \
  --tokens train.bin --seq-len 16 --token-order shuffled
expect_error adamw "--no-decay 'nothing_here' matches none of the 28" \
  --synthetic --no-decay nothing_here
expect_error adamw "--no-decay: '(ln' is not a regular expression" \
  --synthetic --no-decay '(ln'
expect_error plain "this trainer's plan does not clip gradients" \
  --synthetic --clip-grad-norm 1
out=$("$MEMFIT" plan g.onnx --batch 2 --accumulate 2 --sub-batch 1 \
  --budget 100% 2>&1) && fail "planned --accumulate with --sub-batch"
echo "$out" | grep -q "give --sub-batch or --chunks without it" ||
  fail "unclear error for --accumulate with --sub-batch: $out"
out=$("$MEMFIT" plan g.onnx --accumulate 2 --budget 100% 2>&1) &&
  fail "planned --accumulate without --batch"
echo "$out" | grep -q "needs --batch" ||
  fail "unclear error for --accumulate without --batch: $out"

# Mapped --data of every element type: the trainer's conversion and
# normalization ((v / 255 - mean) / std per channel, in float32, as
# torchvision's ToTensor and Normalize compute) against numpy's on the same
# values.
"$MEMFIT" zoo tiny-cnn -o cnn.onnx >/dev/null || fail "zoo tiny-cnn"
build_trainer cnn cnn.onnx --batch 8 --budget 100% --refine=false
"$PY" - <<'PYEOF' || fail "cannot write image data"
import numpy as np
r = np.random.default_rng(5)
x = r.integers(0, 256, (32, 3, 8, 8)).astype(np.uint8)
y = r.integers(0, 10, 32)
np.save("img_u8.npy", x)
mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
ref = (x.astype(np.float32) / np.float32(255) - mean) / std
np.save("img_ref.npy", ref.astype(np.float32))
h = ref.astype(np.float16)
np.save("img_f16.npy", h)
np.save("img_f16_as32.npy", h.astype(np.float32))
# bfloat16 as ml_dtypes writes it: numpy records a 2-byte void ('<V2').
bits = (ref.view(np.uint32) >> 16).astype(np.uint16)
np.save("img_bf16.npy", bits.view(np.dtype("V2")))
np.save("img_bf16_as32.npy", (bits.astype(np.uint32) << 16).view(np.float32))
np.save("lab64.npy", y.astype(np.int64))
np.save("lab32.npy", y.astype(np.int32))
np.save("lab8.npy", y.astype(np.uint8))
PYEOF
cnn() { # name trainer-args...
  local name=$1
  shift
  ./cnn/build/trainer --iterations 6 --lr 0.05 "$@" --save $name.onnx \
    >$name.log 2>&1 || { cat $name.log; fail "train cnn $name"; }
}
IMAGENET=0.485,0.456,0.406/0.229,0.224,0.225
cnn u8 --data img_u8.npy --labels lab8.npy --normalize $IMAGENET
cnn ref --data img_ref.npy --labels lab64.npy
cmp -s u8.onnx ref.onnx ||
  fail "uint8 images with --normalize train otherwise than numpy's floats"
cnn f16 --data img_f16.npy --labels lab32.npy
cnn f16_as32 --data img_f16_as32.npy --labels lab64.npy
cmp -s f16.onnx f16_as32.onnx || fail "float16 data trains otherwise"
cnn bf16 --data img_bf16.npy --labels lab64.npy
cnn bf16_as32 --data img_bf16_as32.npy --labels lab64.npy
cmp -s bf16.onnx bf16_as32.onnx || fail "bfloat16 data trains otherwise"
cmp -s ref.onnx f16.onnx && fail "float16 rounding changed nothing: the test cannot tell"
# Augmented: each sample's crop offsets and flip come from its own draw;
# torchvision's pad, crop, hflip, ToTensor and Normalize on the same draws,
# written out in the trainer's sample order, train bit for bit alike.
"$PY" - <<'PYEOF' || fail "cannot augment with torchvision"
import numpy as np, torch
import torchvision.transforms.functional as TF
M = (1 << 64) - 1
def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)
def draw(seed, epoch, s):
    return mix(mix(mix(seed) ^ epoch) ^ s)
x = torch.tensor(np.load("img_u8.npy"))
y = np.load("lab64.npy")
P, seed = 2, 1 ^ 0x5851F42D4C957F2D
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
rows, labels, cursor, epoch = [], [], 0, 0
for it in range(6):
    if cursor + 8 > 32:
        cursor, epoch = 0, epoch + 1
    for s in range(cursor, cursor + 8):
        h = draw(seed, epoch, s)
        top, left = (h & 0xFFFF) % (2 * P + 1), ((h >> 16) & 0xFFFF) % (2 * P + 1)
        img = TF.crop(TF.pad(x[s], P), top, left, 8, 8)
        if (h >> 32) & 1:
            img = TF.hflip(img)
        img = TF.normalize(img.to(torch.float32).div(255), mean, std)
        rows.append(img.numpy())
        labels.append(y[s])
    cursor += 8
np.save("img_aug.npy", np.stack(rows).astype(np.float32))
np.save("lab_aug.npy", np.array(labels, dtype=np.int64))
PYEOF
# Shards: a directory of them in name order, or a list, read as one array.
"$PY" - <<'PYEOF' || fail "cannot write shards"
import numpy as np, os
x, y = np.load("img_u8.npy"), np.load("lab64.npy")
os.makedirs("shards", exist_ok=True)
for name, part in (("b", x[10:20]), ("a", x[:10]), ("c", x[20:])):
    np.save(f"shards/{name}.npy", part)
np.save("lab_head.npy", y[:13])
np.save("lab_tail.npy", y[13:])
os.makedirs("odd_shards", exist_ok=True)
np.save("odd_shards/a.npy", x[:16])
np.save("odd_shards/b.npy", x[16:].astype(np.int8))
os.makedirs("wide_shards", exist_ok=True)
np.save("wide_shards/a.npy", x[:16])
np.save("wide_shards/b.npy", np.zeros((16, 3, 8, 9), np.uint8))
PYEOF
cnn sharded --data shards --labels lab_head.npy,lab_tail.npy \
  --normalize $IMAGENET
cmp -s u8.onnx sharded.onnx || fail "shards train otherwise than one file"
expect_error cnn "odd_shards/b.npy: a shard of int8, not uint8 as odd_shards/a.npy" \
  --data odd_shards --labels lab64.npy
expect_error cnn "wide_shards/b.npy: samples of shape \[3, 8, 9\], not \[3, 8, 8\]" \
  --data wide_shards --labels lab64.npy
expect_error cnn "lab_head.npy: 13 labels, not 32" \
  --data img_u8.npy --labels lab_head.npy
cnn aug --data img_u8.npy --labels lab64.npy --normalize $IMAGENET \
  --random-crop 2 --hflip
cnn aug_ref --data img_aug.npy --labels lab_aug.npy
cmp -s aug.onnx aug_ref.onnx ||
  fail "--random-crop and --hflip train otherwise than torchvision's"
cmp -s aug.onnx u8.onnx && fail "augmentation changed nothing"
cnn aug3 --data img_u8.npy --labels lab64.npy --normalize $IMAGENET \
  --random-crop 2 --hflip --reader-threads 3
cmp -s aug.onnx aug3.onnx || fail "three reader threads fill other batches"
expect_error adamw "are for images; this trainer's model reads token ids" \
  --data grid.npy --labels grid.npy --hflip
# Accumulation with BatchNorm: each micro-batch normalized by its own
# statistics, as a PyTorch loop that steps every second backward pass.
"$MEMFIT" zoo tiny-bn -o bn.onnx >/dev/null || fail "zoo tiny-bn"
build_trainer bn_acc bn.onnx --batch 4 --accumulate 2 --budget 100% \
  --refine=false
grep -q "BatchNorm statistics are computed per micro-batch of 4" \
  bn_acc/report.txt || fail "bn_acc: the report does not say how BatchNorm runs"
./bn_acc/build/trainer --data img_ref.npy --labels lab64.npy --iterations 4 \
  --lr 0.05 --log-every 1 --save bn_acc.onnx >bn_acc.log 2>&1 ||
  { cat bn_acc.log; fail "train bn_acc"; }
"$PY" "$SRC/tests/e2e/torch_reference.py" bn.onnx img_ref.npy lab64.npy \
  --batch 8 --accumulate 2 --iterations 4 --lr 0.05 --losses bn_acc.log \
  --trained bn_acc.onnx >bn_acc.ref 2>&1 ||
  { cat bn_acc.ref; fail "BatchNorm accumulation disagrees with torch"; }
echo "bn accumulate vs torch: $(cat bn_acc.ref)"
expect_error cnn "--normalize gives 2 channels; img_u8.npy's samples have 3 on axis 1" \
  --data img_u8.npy --labels lab64.npy --normalize 0.5,0.5/0.2,0.2
expect_error cnn "every std must be above 0" \
  --data img_u8.npy --labels lab64.npy --normalize 0.5,0.5,0.5/0.2,0,0.2
expect_error cnn "lab_bad.npy: label 10 of sample 3 is outside \[0, 10)" \
  --data img_u8.npy --labels lab_bad.npy
expect_error adamw "--normalize is for --data" --synthetic --normalize 0/1
echo "train_recipe: token streams, clipping, accumulation, --no-decay, mapped and augmented data train as torch, numpy and torchvision do"
