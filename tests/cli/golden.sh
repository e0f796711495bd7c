#!/usr/bin/env bash
# Golden plans and code: compiles every case of tests/golden/cases.txt and
# checks that plan.json and each generated source hash to what
# tests/golden/manifest.txt recorded, and that the case's summary and
# per-layer decisions (`memfit report --layers 0`) read as
# tests/golden/text/CASE.txt does. A refactoring must leave both
# byte-identical; an intended change of plans or generated code reruns
# tools/golden-update (which writes both) and says why in its commit. The
# hashes catch any change; the text shows what changed.
# Usage: golden.sh MEMFIT WORKDIR [--update MANIFEST]
set -u
MEMFIT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
mkdir -p "$2" && WORK=$(cd "$2" && pwd)
UPDATE=${4:-}
# Relative to where it was called, not to WORK.
case "$UPDATE" in '' | /*) ;; *) UPDATE=$PWD/$UPDATE ;; esac
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$(dirname "$MEMFIT")/.." && pwd)
CASES=$SRC/tests/golden/cases.txt
MANIFEST=$SRC/tests/golden/manifest.txt
TEXT=$SRC/tests/golden/text
TV=${MEMFIT_TESTMODELS:-$BUILD/testmodels}
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$WORK/manifest.txt
: >"$out"
mkdir -p "$WORK/text"
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
      [ -f "$TEXT/$name.txt" ] && cp "$TEXT/$name.txt" "$WORK/text/"
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
  # The heading names the model's file: no machine's path in the golden.
  (cd "$WORK/$name" && "$MEMFIT" report plan.json --layers 0) |
    sed "s#$WORK#@WORK@#g; s#$BUILD#@MEMFIT_BUILD@#g" \
      >"$WORK/text/$name.txt" || fail "$name: report failed"
done <"$CASES"

if [ "$UPDATE" != "" ]; then
  cp "$out" "$UPDATE" && echo "golden: wrote $UPDATE ($(wc -l <"$out") files)"
  dir=$(dirname "$UPDATE")/text
  rm -rf "$dir" && cp -r "$WORK/text" "$dir" &&
    echo "golden: wrote $dir ($(find "$dir" -type f | wc -l) cases)"
  exit 0
fi
# The readable diff first: it says what changed in the plans.
status=0
if ! diff -ru "$TEXT" "$WORK/text" >text-diff.txt; then
  cat text-diff.txt >&2
  echo "FAIL: plan summaries or decisions differ from tests/golden/text" >&2
  status=1
fi
if ! diff -u "$MANIFEST" "$out" >diff.txt; then
  cat diff.txt >&2
  echo "FAIL: generated plans or sources differ from" \
    "tests/golden/manifest.txt" >&2
  status=1
fi
[ $status -eq 0 ] ||
  fail "golden cases changed (above); tools/golden-update records an" \
    "intended change"
echo "golden: $(wc -l <"$out") files identical, $(find "$WORK/text" -type f |
  wc -l) summaries identical ($skipped cases skipped)"
