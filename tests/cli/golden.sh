#!/usr/bin/env bash
# Golden plans and code: compiles every case of tests/golden/cases.txt and
# checks that plan.json and each generated source hash to what
# tests/golden/manifest.txt recorded. A refactoring must leave them
# byte-identical; an intended change of plans or generated code reruns
# tools/golden-update and says why in its commit.
# Usage: golden.sh MEMFIT WORKDIR [--update MANIFEST]
set -u
MEMFIT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
mkdir -p "$2" && WORK=$(cd "$2" && pwd)
UPDATE=${4:-}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$(dirname "$MEMFIT")/.." && pwd)
CASES=$SRC/tests/golden/cases.txt
MANIFEST=$SRC/tests/golden/manifest.txt
TV=${MEMFIT_TESTMODELS:-$BUILD/testmodels}
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$WORK/manifest.txt
: >"$out"
skipped=0
while read -r name model batch budget device extra; do
  case "$name" in '' | '#'*) continue ;; esac
  case "$model" in
  zoo:*)
    file=$WORK/${model#zoo:}.onnx
    [ -s "$file" ] || "$MEMFIT" zoo "${model#zoo:}" -o "$file" >/dev/null ||
      fail "zoo ${model#zoo:}"
    ;;
  tv:*)
    file=$TV/${model#tv:}
    if ! [ -s "$file" ]; then
      echo "golden: $name skipped: $file was not exported (no torch)"
      skipped=$((skipped + 1))
      grep "^$name " "$MANIFEST" >>"$out" || true
      continue
    fi
    ;;
  *) fail "$name: bad model '$model'" ;;
  esac
  # shellcheck disable=SC2086
  "$MEMFIT" compile "$file" --batch "$batch" --budget "$budget" \
    --device "$device" $extra -o "$WORK/$name" --quiet ||
    fail "$name: compile exited $?"
  (cd "$WORK/$name" && find . -type f \( -name plan.json -o -name '*.cpp' \
    -o -name '*.h' -o -name CMakeLists.txt \) | LC_ALL=C sort |
    while read -r f; do
      # The build directory the trainer links is machine-specific.
      h=$(sed "s#$WORK#@WORK@#g; s#$BUILD#@MEMFIT_BUILD@#g" "$f" | sha256sum | cut -d' ' -f1)
      echo "$name ${f#./} $h"
    done) >>"$out"
done <"$CASES"

if [ "$UPDATE" != "" ]; then
  cp "$out" "$UPDATE" && echo "golden: wrote $UPDATE ($(wc -l <"$out") files)"
  exit 0
fi
if ! diff -u "$MANIFEST" "$out" >diff.txt; then
  cat diff.txt >&2
  fail "generated plans or sources differ from tests/golden/manifest.txt" \
    "(the cases above; tools/golden-update records an intended change)"
fi
echo "golden: $(wc -l <"$out") files identical ($skipped cases skipped)"
