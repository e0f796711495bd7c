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
source "$(dirname "$0")/lib/preamble.bash"
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
# Validation of a language model over --val-tokens' windows in file order
# (43 windows of 16: the last batch of 4 padded): the loss torch computes
# with the trainer's trained weights, and its perplexity.
"$PY" -c "import numpy as np; np.load('val.npy').astype(np.uint16).tofile('val16.bin')" ||
  fail "cannot write val16.bin"
./adamw/build/trainer --iterations 8 --log-every 1 "${NANO[@]}" \
  --clip-grad-norm 1 --val-tokens val16.bin --val-every 4 --save lmval.onnx \
  --log lmval.jsonl >lmval.log 2>&1 || { cat lmval.log; fail "train lmval"; }
"$PY" "$SRC/tests/e2e/zoo_llm_reference.py" gpt2 g.onnx --heads 4 --batch 4 \
  --iterations 8 --optimizer adamw "${NANO[@]}" --clip-grad-norm 1 \
  --losses lmval.log --trained lmval.onnx --curves-out lmval.json \
  --val-tokens val16.bin >lmval.ref 2>&1 || { cat lmval.ref; fail "lmval reference"; }
"$PY" - <<'PYEOF' || fail "the language model's validation disagrees with torch"
import json, math
ref = json.load(open("lmval.json"))["memfit_val_loss"]
vals = [json.loads(l) for l in open("lmval.jsonl") if "val_loss" in l]
assert [v["step"] for v in vals] == [4, 8], vals
v = vals[-1]
assert v["val_samples"] == 43, v
assert abs(v["val_loss"] - ref) <= 1e-5 * max(1, abs(ref)), (v, ref)
assert abs(v["val_perplexity"] - math.exp(v["val_loss"])) <= 1e-6 * v["val_perplexity"], v
print(f"language model validation: loss {v['val_loss']} against torch {ref}")
PYEOF
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
# the random windows, the clipping and the schedule follow the step; the
# validations (after steps 3, 6 and 8) are logged once each.
RUN=(--iterations 8 "${NANO[@]}" --clip-grad-norm 1 --log-every 1
  --val-tokens val.npy --val-every 3)
./adamw/build/trainer "${RUN[@]}" --save whole.onnx --log whole.jsonl \
  >whole.log || fail "train whole"
MEMFIT_KILL_AFTER_ITERATION=5 bash -c './adamw/build/trainer "$@"; exit $?' \
  trainer "${RUN[@]}" --checkpoint ck --checkpoint-every 4 \
  --log resumed.jsonl >killed.log 2>&1
rc=$?
[ $rc -eq 137 ] || fail "the killed trainer exited $rc, not by SIGKILL"
[ "$(wc -l <resumed.jsonl)" -eq 6 ] || fail "the killed run logged $(wc -l <resumed.jsonl) lines, not 5 steps and a validation"
./adamw/build/trainer "${RUN[@]}" --checkpoint ck --resume \
  --save resumed.onnx --log resumed.jsonl >resumed.log || fail "resume"
grep -q "resumed from ck at iteration 4" resumed.log ||
  { cat resumed.log; fail "not resumed at iteration 4"; }
cmp -s whole.onnx resumed.onnx || fail "a resumed token run trains otherwise"
"$PY" - <<'PYEOF' || fail "the resumed run's log is not the uninterrupted one's"
import json
def fields(name):
    rows = [json.loads(l) for l in open(name)]
    return [(r["step"], "val", r["val_loss"], r["val_samples"])
            if "val_loss" in r else (r["step"], r["loss"], r["lr"],
                                     r["grad_norm"]) for r in rows]
whole, resumed = fields("whole.jsonl"), fields("resumed.jsonl")
assert [r[0] for r in whole if r[1] != "val"] == list(range(1, 9)), whole
assert [r[0] for r in whole if r[1] == "val"] == [3, 6, 8], whole
assert whole == resumed, (whole, resumed)
rows = [json.loads(l) for l in open("whole.jsonl") if "val_loss" not in l]
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
# Random resized crops of 12 x 12 uint8 images to the model's 8 x 8: the
# reader's batch against torchvision's resized_crop (bilinear, no
# antialiasing), hflip and Normalize on the same boxes and flips; the boxes
# as RandomResizedCrop draws them (area 8-100%, aspect 3/4-4/3, inside).
BENCH=$(dirname "$MEMFIT")/memfit_reader_bench
"$PY" -c "import numpy as np; np.save('img12.npy', np.random.default_rng(6).integers(0, 256, (32, 3, 12, 12)).astype(np.uint8))" ||
  fail "cannot write img12.npy"
"$BENCH" img12.npy 1 32 1 --resized-crop 8 --dump rrc.npy >/dev/null ||
  fail "memfit_reader_bench --dump"
"$PY" - <<'PYEOF' || fail "random resized crops differ from torchvision's"
import numpy as np, torch
import torchvision.transforms.functional as TF
from torchvision.transforms import InterpolationMode
x, got = np.load("img12.npy"), np.load("rrc.npy")
boxes = np.loadtxt("rrc.npy.boxes", dtype=np.int64, ndmin=2)
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
worst, flips, sizes = 0.0, 0, set()
for s in range(32):
    top, left, h, w, flip = (int(v) for v in boxes[s])
    assert 0 <= top <= 12 - h and 0 <= left <= 12 - w, boxes[s]
    assert 0.08 * 144 * 0.9 <= h * w <= 144 and 0.5 <= w / h <= 2, boxes[s]
    t = torch.from_numpy(x[s]).float().div(255)
    try:
        r = TF.resized_crop(t, top, left, h, w, [8, 8],
                            InterpolationMode.BILINEAR, antialias=False)
    except TypeError:  # torchvision before antialias
        r = TF.resized_crop(t, top, left, h, w, [8, 8],
                            InterpolationMode.BILINEAR)
    if flip:
        r = TF.hflip(r)
    r = TF.normalize(r, mean, std).numpy()
    worst = max(worst, float(np.max(np.abs(r - got[s]))))
    flips += flip
    sizes.add((h, w))
print(f"resized crops vs torchvision: worst difference {worst:.2e}, "
      f"{flips} of 32 flipped, {len(sizes)} box sizes")
assert worst <= 2e-6 and 4 <= flips <= 28 and len(sizes) >= 8
PYEOF
cnn rrc --data img12.npy --labels lab64.npy --normalize $IMAGENET \
  --random-resized-crop --hflip --iterations 6
cnn rrc3 --data img12.npy --labels lab64.npy --normalize $IMAGENET \
  --random-resized-crop --hflip --iterations 6 --reader-threads 3
cmp -s rrc.onnx rrc3.onnx || fail "resized crops differ over reader threads"
cmp -s rrc.onnx u8.onnx && fail "resized crops changed nothing"
expect_error cnn "give --random-crop or --random-resized-crop, not both" \
  --data img12.npy --labels lab64.npy --random-crop 2 --random-resized-crop
expect_error cnn "img12.npy: each sample must have 192 values (the model's input), not 432" \
  --data img12.npy --labels lab64.npy
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
# Validation through the evaluation program: BatchNorm on its running
# statistics, uint8 images normalized as the training set, 21 samples (the
# last batch padded), evaluated in two sub-batches of a batch of 16 under a
# tight budget; against torch's eval mode on the same steps.
"$PY" - <<'PYEOF' || fail "cannot write validation data"
import numpy as np
r = np.random.default_rng(9)
np.save("val_u8.npy", r.integers(0, 256, (21, 3, 8, 8)).astype(np.uint8))
np.save("val_lab.npy", r.integers(0, 10, 21).astype(np.int64))
x = np.load("val_u8.npy")
mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
np.save("val_ref.npy", (x.astype(np.float32) / np.float32(255) - mean) / std)
PYEOF
build_trainer bn_val bn.onnx --batch 16 --budget 70% --refine=false
grep -q "^evaluate   forward only, batch 16 as 2 sub-batches of 8" \
  bn_val/report.txt || { cat bn_val/report.txt; fail "bn_val: no evaluation plan in the report"; }
"$PY" -c "import json,sys; e=json.load(open('bn_val/plan.json'))['evaluation']; sys.exit(not (e['sub_batches'] == 2 and e['arena_bytes'] > 0))" ||
  fail "plan.json lacks the evaluation plan"
grep -q "memfit_eval_round" bn_val/src/main.cpp || fail "no evaluation round"
./bn_val/build/trainer --data img_u8.npy --labels lab64.npy \
  --normalize $IMAGENET --val-data val_u8.npy --val-labels val_lab.npy \
  --val-every 2 --iterations 4 --lr 0.05 --log-every 1 --save bn_val.onnx \
  --log bn_val.jsonl >bn_val.log 2>&1 || { cat bn_val.log; fail "train bn_val"; }
"$PY" "$SRC/tests/e2e/torch_reference.py" bn.onnx img_ref.npy lab64.npy \
  --batch 16 --iterations 4 --lr 0.05 --losses bn_val.log \
  --trained bn_val.onnx --val-x val_ref.npy --val-y val_lab.npy \
  --val-every 2 >bn_val.ref 2>&1 ||
  { cat bn_val.log bn_val.ref; fail "validation disagrees with torch's eval mode"; }
echo "validation vs torch: $(cat bn_val.ref | tail -1)"
[ "$(grep -c '"val_loss"' bn_val.jsonl)" = 2 ] ||
  fail "--log holds no two validations"
"$MEMFIT" report bn_val/plan.json --run bn_val.jsonl --layers 0 |
  grep -q "2 validations, the last at step 4" ||
  fail "memfit report --run does not read the validations"
# Dropout passes its input through in evaluation: the trainer's validation
# against torch's eval mode of the weights it trained (its masks are its
# own, so nothing else is compared).
"$MEMFIT" zoo tiny-dropout -o drop.onnx >/dev/null || fail "zoo tiny-dropout"
build_trainer drop drop.onnx --batch 8 --budget 100% --refine=false
grep -q "x.copy(" drop/src/eval_round_0.cpp ||
  fail "evaluation does not pass dropout's input through"
"$PY" - <<'PYEOF' || fail "cannot write mlp data"
import numpy as np
r = np.random.default_rng(3)
np.save("mlp_x.npy", r.standard_normal((40, 16)).astype(np.float32))
np.save("mlp_y.npy", r.integers(0, 10, 40))
np.save("mlp_vx.npy", r.standard_normal((13, 16)).astype(np.float32))
np.save("mlp_vy.npy", r.integers(0, 10, 13))
PYEOF
./drop/build/trainer --data mlp_x.npy --labels mlp_y.npy --val-data mlp_vx.npy \
  --val-labels mlp_vy.npy --iterations 5 --lr 0.1 --save drop_t.onnx \
  >drop.log 2>&1 || { cat drop.log; fail "train drop"; }
"$PY" "$SRC/tests/e2e/torch_reference.py" drop.onnx mlp_x.npy mlp_y.npy \
  --batch 8 --iterations 5 --losses drop.log --trained drop_t.onnx \
  --val-x mlp_vx.npy --val-y mlp_vy.npy --val-from-trained >drop.ref 2>&1 ||
  { cat drop.log drop.ref; fail "dropout's evaluation disagrees with torch"; }
expect_error cnn "--val-data needs --val-labels" --synthetic --val-data val_u8.npy
expect_error adamw "--val-tokens is for a trainer reading --tokens" \
  --synthetic --val-tokens val.npy
expect_error cnn "--normalize gives 2 channels; img_u8.npy's samples have 3 on axis 1" \
  --data img_u8.npy --labels lab64.npy --normalize 0.5,0.5/0.2,0.2
expect_error cnn "every std must be above 0" \
  --data img_u8.npy --labels lab64.npy --normalize 0.5,0.5,0.5/0.2,0,0.2
expect_error cnn "lab_bad.npy: label 10 of sample 3 is outside \[0, 10)" \
  --data img_u8.npy --labels lab_bad.npy
expect_error adamw "--normalize is for --data" --synthetic --normalize 0/1
echo "train_recipe: token streams, clipping, accumulation, --no-decay, mapped and augmented data train as torch, numpy and torchvision do"
