#!/usr/bin/env bash
# A model too large to plan in the memory this process may use is refused
# with a message (exit 1), never aborted or killed: under a ladder of
# address-space limits (ulimit -v), `memfit plan` on a deep ResNet either
# plans or fails saying it is out of memory, and at least one limit is
# refused up front by the estimate (compiler/support/MemoryLimit.h).
# Not run under the sanitizers: ASan reserves terabytes of address space.
set -u
MEMFIT=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" zoo resnet-1001 -o deep.onnx >/dev/null || fail zoo
estimated=
for mib in $(seq 200 50 3000); do
  (
    ulimit -v $((mib * 1024))
    exec "$MEMFIT" plan deep.onnx --batch 8 --budget 50% --device k40m --quiet
  ) >out.log 2>&1
  rc=$?
  [ $rc -eq 0 ] && break
  # Too little to even map memfit's shared libraries (CUDA's are large).
  [ $rc -eq 127 ] && grep -q "error while loading shared libraries" out.log && continue
  [ $rc -eq 1 ] || { tail -20 out.log; fail "ulimit -v ${mib}MiB: exit $rc, expected 0 or 1"; }
  grep -q "memory" out.log || { cat out.log; fail "ulimit -v ${mib}MiB: exit 1 without saying why"; }
  if grep -q "too large to plan" out.log; then
    estimated=$mib
    echo "ulimit -v ${mib}MiB: $(grep error: out.log)"
    break
  fi
  echo "ulimit -v ${mib}MiB: $(grep error: out.log | head -1)"
done
[ -n "$estimated" ] || fail "no limit was refused by the estimate"
echo "memory_limit: refused with a message at every limit"
