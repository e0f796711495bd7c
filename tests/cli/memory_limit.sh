#!/usr/bin/env bash
# A model too large to plan in the memory this process may use is refused
# with a message (exit 1), never aborted or killed: under a ladder of
# address-space limits (ulimit -v), `memfit plan` on a deep ResNet either
# plans or fails saying it is out of memory, and at least one limit is
# refused up front by the estimate (compiler/support/MemoryLimit.h).
# Where memfit starts at all, that is: see the floor below. The ladder stops
# at the first refusal by the estimate: just above it, planning can still run
# out of address space (docs/testing.md, open problems).
# Not run under the sanitizers: ASan reserves terabytes of address space.
set -u
MEMFIT=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" zoo resnet-1001 -o deep.onnx >/dev/null || fail zoo
# The floor: below some limit memfit cannot even start (the loader cannot
# map its shared libraries, OpenBLAS's threads spin for memory before
# main), which no program can report. The ladder starts where a trivial
# command runs.
floor=
for mib in $(seq 200 50 4000); do
  if (ulimit -v $((mib * 1024)) && exec timeout 20 "$MEMFIT" zoo --list) \
    >/dev/null 2>&1; then
    floor=$mib
    break
  fi
done
[ -n "$floor" ] || fail "memfit does not start under 4000 MiB of address space"
echo "memfit starts under ulimit -v ${floor}MiB"
estimated=
for mib in $(seq "$floor" 25 $((floor + 3000))); do
  (
    ulimit -v $((mib * 1024))
    exec timeout 300 "$MEMFIT" plan deep.onnx --batch 8 --budget 50% \
      --device k40m --quiet
  ) >out.log 2>&1
  rc=$?
  [ $rc -eq 0 ] && break
  [ $rc -eq 1 ] || { tail -20 out.log; fail "ulimit -v ${mib}MiB: exit $rc, expected 0 or 1"; }
  grep -q "memory" out.log || { cat out.log; fail "ulimit -v ${mib}MiB: exit 1 without saying why"; }
  echo "ulimit -v ${mib}MiB: $(grep error: out.log | head -1)"
  if grep -q "too large to plan" out.log; then
    estimated=$mib
    break
  fi
done
[ -n "$estimated" ] || fail "no limit was refused by the estimate"
echo "memory_limit: refused with a message at every limit"
