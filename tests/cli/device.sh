#!/usr/bin/env bash
# memfit device: lists the built-in devices, prints one as JSON that reads
# back unchanged, and reports a broken device file naming the file and the
# field, with exit code 1.
set -u
MEMFIT=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" device >list.txt 2>err.txt || fail "listing exited $?"
for name in k40m titanx-maxwell v100 v100-32g-pcie a100-40g a100-80g h100-pcie h100-sxm h200 rtx-4090; do
  grep -q "^  $name " list.txt || fail "the list lacks $name"
done
# The hosts, per GPU: a DGX H100's share, its Adam rate derived (14 cores
# at 80 M parameters/s each, below 76.8 GB/s over 28 B), its SGD rate the
# bandwidth's (76.8 GB/s over 20 B, below 14 x 310 M); no host row for a
# GPU without a documented machine.
grep -q "^hosts, per GPU" list.txt || fail "the list lacks the hosts"
grep -Eq "^  h100-sxm +14 +76\.8 +256 +1120 +3840 +- +3576$" list.txt ||
  fail "h100-sxm's host is not listed as cited"
[ "$(grep -c "^  h100-pcie " list.txt)" = 1 ] || fail "h100-pcie got a host row"

"$MEMFIT" device h100-sxm >h100.json 2>err.txt || fail "h100-sxm exited $?"
grep -q '"fp32_tflops": 67.0' h100.json || fail "h100-sxm lacks its FP32 rate"
"$MEMFIT" device ./h100.json >again.json 2>err.txt || fail "reading the dump exited $?"
cmp -s h100.json again.json || fail "the dump does not read back unchanged"

grep -v '"fp32_tflops"' h100.json >missing.json
"$MEMFIT" device ./missing.json >out.txt 2>err.txt
[ $? -eq 1 ] || fail "a missing field did not exit 1"
grep -q "missing.json: field 'fp32_tflops' is missing" err.txt ||
  fail "missing field not named: $(cat err.txt)"

sed 's/"sm_count": 132/"sm_count": "many"/' h100.json >wrongtype.json
"$MEMFIT" device ./wrongtype.json >out.txt 2>err.txt
[ $? -eq 1 ] || fail "a wrong type did not exit 1"
grep -q "wrongtype.json: field 'sm_count' must be an integer, not a string" err.txt ||
  fail "wrong type not named: $(cat err.txt)"

"$MEMFIT" device nosuch >out.txt 2>err.txt
[ $? -eq 1 ] || fail "an unknown device did not exit 1"
grep -q "unknown device 'nosuch'" err.txt || fail "unknown device not named"
exit 0
