# The opening the CLI tests share (sourced first, after `set -u`; not a
# test: ctest runs tests/cli/*.sh only). Every test is called as
# `bash tests/cli/NAME.sh MEMFIT WORK`.
MEMFIT=$1
WORK=$2
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
# Debian's Python: the one beside its torch and onnx.
PY=/usr/bin/python3
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# needs_torch NAME: ends the test as passed, saying it was skipped, where
# $PY cannot import torch and onnx.
needs_torch() {
  if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
    echo "$1: SKIPPED: $PY cannot import torch and onnx"
    exit 0
  fi
}
# fresh_work: an empty $WORK, the working directory from here on.
fresh_work() {
  rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
}
# full: true in the full tier (tools/test --full sets MEMFIT_TEST_FULL=1).
# The default tier keeps a representative model of each kind a sweep
# covers, so that the README's test command stays well under 20 minutes on
# two cores; the full tier adds the rest of each sweep (docs/testing.md,
# "Tiers").
full() {
  [ -n "${MEMFIT_TEST_FULL:-}" ]
}
