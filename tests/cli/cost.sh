#!/usr/bin/env bash
# memfit cost: predicts every row of a DeepBench CSV, keeping the rows and
# appending the predicted columns, and says on stderr how far they are off
# the file's measured times; refuses a malformed row naming the file
# and the line, with exit code 1. memfit calibrate: fits a device file to a
# user's own measurements, which then loads and predicts; --no-fit reports
# the error of the calibration as built.
set -u
MEMFIT=$1
WORK=$2
DATA=$(cd "$(dirname "$0")/../../docs/benchmarks/data/deepbench" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" cost --device v100 --csv "$DATA/deepbench_V100_conv_fp32.csv" \
  >conv.csv 2>err.txt || fail "cost on convolutions exited $?: $(cat err.txt)"
[ "$(wc -l <conv.csv)" -eq 95 ] || fail "expected 95 lines, got $(wc -l <conv.csv)"
head -1 conv.csv | grep -q ',fwd_algo,pred_fwd_ms,pred_bwd_data_ms,pred_bwd_filter_ms$' ||
  fail "conv header: $(head -1 conv.csv)"
# Every row is the input row (line breaks written as LF) plus three
# positive predictions.
tr -d '\r' <"$DATA/deepbench_V100_conv_fp32.csv" >input.csv
paste -d'|' input.csv conv.csv | tail -n +2 |
  awk -F'|' '{ if (index($2, $1 ",") != 1) exit 1;
               n = split(substr($2, length($1) + 2), p, ",");
               if (n != 3) exit 1;
               for (i = 1; i <= 3; i++) if (p[i] + 0 <= 0) exit 1 }' ||
  fail "a conv row was changed or lacks positive predictions"

# The measured columns against the predictions, on stderr, per direction:
# V100 is a Volta, where memfit has one whole-network comparison.
for k in conv_fwd conv_bwd_data conv_bwd_filter; do
  grep -q "^  $k  *[0-9][0-9]* kernels: median [-+][0-9.]*%, the middle 80% " err.txt ||
    fail "no $k band on stderr: $(cat err.txt)"
done
grep -q "^  whole networks on Volta in fp32: predicted iteration times were" err.txt ||
  fail "no whole-network line: $(cat err.txt)"
# A file of shapes alone gets its predictions and no band.
cut -d, -f1-12 "$DATA/deepbench_V100_conv_fp32.csv" >shapes.csv
"$MEMFIT" cost --device v100 --csv shapes.csv >shapes-pred.csv 2>err.txt ||
  fail "cost on shapes exited $?: $(cat err.txt)"
[ ! -s err.txt ] || fail "a band for a file that measures nothing: $(cat err.txt)"

"$MEMFIT" cost --device ./p100.json --csv "$DATA/deepbench_P100_gemm_fp32.csv" \
  >out.txt 2>err.txt
[ $? -eq 1 ] || fail "a missing device file did not exit 1"

# A device described by its datasheet alone.
cat >sheet.json <<'JSON'
{"name": "sheet", "fp32_tflops": 10.6, "memory_gbps": 732, "memory_gib": 16,
 "sm_count": 56, "h2d_gbps": 15.75, "d2h_gbps": 15.75}
JSON
"$MEMFIT" cost --device ./sheet.json --csv "$DATA/deepbench_P100_gemm_fp32.csv" \
  -o gemm.csv 2>err.txt || fail "cost on GEMMs exited $?: $(cat err.txt)"
[ "$(wc -l <gemm.csv)" -eq 161 ] || fail "expected 161 GEMM lines"
head -1 gemm.csv | grep -q '^app,M,N,K,transA,transB,ms,pred_ms$' ||
  fail "gemm header: $(head -1 gemm.csv)"
# The datasheet-only file and the built-in P100 predict the same.
"$MEMFIT" cost --device p100 --csv "$DATA/deepbench_P100_gemm_fp32.csv" \
  >builtin.csv 2>err.txt || fail "cost on p100 exited $?"
cmp -s gemm.csv builtin.csv || fail "datasheet file and built-in p100 differ"

printf 'app,M,N,K,transA,transB,ms\nx,1,2,3,N,N,0.1\nx,1,2,3,N,N\n' >bad.csv
"$MEMFIT" cost --device v100 --csv bad.csv >out.txt 2>err.txt
[ $? -eq 1 ] || fail "a short row did not exit 1"
grep -q "bad.csv:3: expected 7 fields as in the header, got 6" err.txt ||
  fail "short row not named: $(cat err.txt)"

# Calibrate a device file on one GPU's measurements; it loads and predicts.
head -41 "$DATA/deepbench_V100_gemm_fp32.csv" >mine.csv
"$MEMFIT" calibrate ./sheet.json=mine.csv -o fitted.json >report.md 2>err.txt ||
  fail "calibrate exited $?: $(cat err.txt)"
grep -q '^## Final fit on all GPUs' report.md || fail "no final fit in the report"
# Rows name each GPU by its device's name.
grep -q '^| sheet | gemm | 40 |' report.md || fail "no gemm row: $(cat report.md)"
"$MEMFIT" device ./fitted.json >/dev/null 2>err.txt ||
  fail "the fitted device does not load: $(cat err.txt)"
"$MEMFIT" cost --device ./fitted.json --csv mine.csv >/dev/null 2>err.txt ||
  fail "the fitted device does not predict: $(cat err.txt)"
# --no-fit: the error of the calibration as built, nothing written. The
# datasheet-only file takes the built-in calibration, so it reads as p100.
"$MEMFIT" calibrate --no-fit ./sheet.json="$DATA/deepbench_P100_gemm_fp32.csv" \
  p100="$DATA/deepbench_P100_gemm_fp32.csv" >nofit.md 2>err.txt ||
  fail "calibrate --no-fit exited $?: $(cat err.txt)"
grep -q '^## The calibration as built' nofit.md || fail "no --no-fit table: $(cat nofit.md)"
grep -q '^## Final fit' nofit.md && fail "--no-fit fitted"
[ "$(grep '^| sheet | gemm | 160 |' nofit.md | cut -d'|' -f4-)" = \
  "$(grep '^| p100 | gemm | 160 |' nofit.md | cut -d'|' -f4-)" ] ||
  fail "datasheet file and built-in p100 err differently: $(cat nofit.md)"
"$MEMFIT" calibrate --no-fit ./sheet.json=mine.csv -o x.json >out.txt 2>err.txt
[ $? -eq 1 ] || fail "--no-fit with -o did not exit 1"
grep -q -- "--no-fit fits nothing to write" err.txt || fail "--no-fit -o not refused: $(cat err.txt)"
"$MEMFIT" calibrate sheet.json >out.txt 2>err.txt
[ $? -eq 1 ] || fail "an argument without '=' did not exit 1"
grep -q "expected GPU=FILE.csv, got 'sheet.json'" err.txt || fail "bad argument not named"
exit 0
