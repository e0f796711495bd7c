#!/usr/bin/env bash
# memfit profile: on a machine without a usable GPU (or a build without
# CUDA) it exits 1 with a message saying so and writes nothing; on a GPU it
# writes a profile with entries. Either way it refuses to overwrite a file.
set -u
MEMFIT=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null 2>&1 || fail "zoo tiny-cnn exited $?"

"$MEMFIT" profile tiny.onnx --sub-batches 1,2 --repeats 2 --warmup 1 \
  -o profile.json >out.txt 2>err.txt
rc=$?
if [ $rc -eq 0 ]; then
  grep -q '"schema_version": 1' profile.json || fail "no schema_version"
  grep -q '"signature": "Conv(' profile.json || fail "no conv entry"
else
  [ $rc -eq 1 ] || fail "exit code $rc, expected 1"
  grep -Eq "no CUDA device found|memfit was built without CUDA" err.txt ||
    fail "unclear message: $(cat err.txt)"
  [ ! -e profile.json ] || fail "wrote a profile without a GPU"
fi

echo '{}' >taken.json
"$MEMFIT" profile tiny.onnx -o taken.json >out.txt 2>err.txt
[ $? -eq 1 ] || fail "overwrote an existing file"
grep -q "taken.json exists; use --force" err.txt || fail "no --force hint"
[ "$(cat taken.json)" = "{}" ] || fail "existing file changed"

"$MEMFIT" profile tiny.onnx >out.txt 2>err.txt
[ $? -eq 1 ] || fail "no -o did not exit 1"
grep -q "no output file given" err.txt || fail "no -o not explained"
exit 0
