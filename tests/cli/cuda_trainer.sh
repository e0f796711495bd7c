#!/usr/bin/env bash
# Builds a generated trainer with the CUDA backend (CUDA and cuDNN compile
# and link here even without a GPU) for a plan that offloads and recomputes,
# and runs it: without a GPU it must stop cleanly with "no CUDA device" and
# exit 1; with one it must train. Skipped (77) when memfit was built
# without CUDA.
set -u
MEMFIT=$1
WORK=$2
BUILD=$(cd "$(dirname "$MEMFIT")/.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q "MEMFIT_RUNTIME_HAVE_CUDA ON" "$BUILD/memfit-runtime.cmake" ||
  { echo "memfit was built without CUDA: skipped"; exit 77; }

"$MEMFIT" zoo tiny-bn -o tiny-bn.onnx >/dev/null || fail zoo
"$MEMFIT" compile tiny-bn.onnx --batch 8 --budget 100% --device h100-sxm \
  --policy chen-sqrt -o trainer --quiet || fail compile
cmake -S trainer -B trainer/build -DMEMFIT_BACKEND=cuda >cmake.log 2>&1 ||
  { cat cmake.log; fail "configure"; }
cmake --build trainer/build -j 2 >build.log 2>&1 || { tail -30 build.log; fail "build"; }
trainer/build/trainer --synthetic --iterations 3 >run.log 2>&1
rc=$?
if grep -q "no CUDA device" run.log; then
  [ $rc -eq 1 ] || fail "exit code $rc without a GPU, expected 1"
  echo "cuda trainer built; no GPU here: $(cat run.log)"
else
  [ $rc -eq 0 ] || { cat run.log; fail "the CUDA trainer failed ($rc)"; }
  grep -q "^done:" run.log || fail "no summary line"
  echo "cuda trainer trained: $(tail -1 run.log)"
fi
