#!/usr/bin/env bash
# Builds generated trainers with the CUDA backend (CUDA and cuDNN compile
# and link here even without a GPU) and runs them: an fp32 plan that
# offloads and recomputes, a bf16 CNN with BatchNorm under a tight budget
# (16-bit convolutions, staged weight gradients, working copies), and an
# fp16 GPT (16-bit matrix products, fused attention, LayerNorm, loss
# scaling), and a GPT whose weights are homed on the host with their
# gradients through a pinned pool (host functions that start and wait for
# the host's updates on the copy-out stream). Without a GPU each must stop cleanly with "no CUDA device" and
# exit 1; with one each must train. Skipped (77) when memfit was built
# without CUDA.
set -u
MEMFIT=$1
WORK=$2
BUILD=$(cd "$(dirname "$MEMFIT")/.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q "MEMFIT_RUNTIME_HAVE_CUDA ON" "$BUILD/memfit-runtime.cmake" ||
  { echo "memfit was built without CUDA: skipped"; exit 77; }

SRC=$(cd "$(dirname "$0")/../.." && pwd)

build_and_run() { # dir
  local d=$1
  cmake -S "$d" -B "$d/build" -DMEMFIT_BACKEND=cuda >"$d.cmake.log" 2>&1 ||
    { cat "$d.cmake.log"; fail "configure $d"; }
  cmake --build "$d/build" -j 2 >"$d.build.log" 2>&1 ||
    { tail -30 "$d.build.log"; fail "build $d"; }
  "$d/build/trainer" --synthetic --iterations 3 >"$d.run.log" 2>&1
  local rc=$?
  if grep -q "no CUDA device" "$d.run.log"; then
    [ $rc -eq 1 ] || fail "$d: exit code $rc without a GPU, expected 1"
    echo "$d: built; no GPU here: $(cat "$d.run.log")"
  else
    [ $rc -eq 0 ] || { cat "$d.run.log"; fail "the CUDA trainer $d failed ($rc)"; }
    grep -q "^done:" "$d.run.log" || fail "$d: no summary line"
    echo "$d: trained: $(tail -1 "$d.run.log")"
  fi
}

"$MEMFIT" zoo tiny-bn -o tiny-bn.onnx >/dev/null || fail zoo
"$MEMFIT" compile tiny-bn.onnx --batch 8 --budget 100% --device h100-sxm \
  --policy chen-sqrt -o trainer --quiet || fail compile
build_and_run trainer

"$MEMFIT" compile tiny-bn.onnx --batch 8 --budget 60% --device h100-sxm \
  --precision bf16 -o trainer-bf16 --quiet || fail "compile bf16"
grep -q 'x.arena16(' trainer-bf16/src/*.cpp || fail "bf16: no 16-bit blocks"
grep -q 'x.weightCopy(' trainer-bf16/src/*.cpp || fail "bf16: no working copies"
build_and_run trainer-bf16

"$MEMFIT" compile "$SRC/tests/models/torch2/gpt-torchscript.onnx" --batch 4 \
  --budget 85% --device h100-sxm --precision fp16 -o trainer-fp16 --quiet ||
  fail "compile fp16"
build_and_run trainer-fp16

"$MEMFIT" zoo gpt2-tiny -o gpt2-tiny.onnx >/dev/null || fail "zoo gpt2-tiny"
"$MEMFIT" compile gpt2-tiny.onnx --batch 4 --budget 700KiB \
  --library-reserve 0 --device h100-sxm --optimizer adamw \
  --host-budget 360KiB --refine=false -o trainer-pool --quiet ||
  fail "compile pool"
grep -q 'x.waitHost(CopyOut, ' trainer-pool/src/round_0.cpp ||
  fail "pool: no copy-out waits for a host update"
grep -q '.gradPoolOffset = ' trainer-pool/src/main.cpp ||
  fail "pool: no gradient in the pool"
build_and_run trainer-pool
