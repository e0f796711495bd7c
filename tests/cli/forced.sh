#!/usr/bin/env bash
# memfit never loses to itself with a flag forced (tools/bench/forced.py):
# on the zoo's tiny models at one or three budgets, exact and with
# --sub-batch-statistics, the default plan is within 0.5% of the best plan
# made with a forced sub-batch, order, chunk count, attention form or head
# form (gpt2-tiny has both); every forced plan gets the default's budget in
# bytes. The full tier adds gpt2-tiny with weights homed. The bigger models'
# sweep is docs/benchmarks/planner.md ("Never worse than a forced flag").
set -u
source "$(dirname "$0")/lib/preamble.bash"
FORCED=$SRC/tools/bench/forced.py
fresh_work

# The default tier: three models of different kinds at the tightest budget
# (where sub-batches, orders and forms differ most); the full tier: all
# five at three budgets.
models=(tiny-bn tiny-inception gpt2-tiny)
budgets=25
if full; then
  models=(tiny-bn tiny-cnn tiny-residual tiny-inception gpt2-tiny)
  budgets=75,50,25
fi
# No library reserve: 144 MiB would leave these models' budgets empty.
ARGS=(--memfit "$MEMFIT" --batch 16 --statistics
      --max-sub-batches 8 --plan-flags "--library-reserve 0")
list=$(IFS=,; echo "${models[*]}")
"$PY" "$FORCED" "${ARGS[@]}" --budgets $budgets --out sweep.md --models "$list" \
  >out.txt 2>&1 || fail "the default lost to a forced flag: $(cat out.txt)"
# Every model planned at some budget, exact and (tiny-bn) with statistics.
for m in "${models[@]}"; do
  grep -q "^| $m | 16 | [0-9]*% | exact | [0-9.]* | [0-9.]* " sweep.md ||
    fail "$m: no feasible exact row: $(cat sweep.md)"
done
grep -q "^| tiny-bn | 16 | [0-9]*% | statistics | [0-9.]* " sweep.md ||
  fail "tiny-bn: no row with --sub-batch-statistics: $(cat sweep.md)"
# The full tier: the same with weights homed on the host (gpt2-tiny at 10%
# homes 29 weights), where the tier search picks among homings; about 20 s
# a plan here.
if full; then
  "$PY" "$FORCED" --memfit "$MEMFIT" --batch 16 --max-sub-batches 8 \
    --plan-flags "--library-reserve 0 --host-budget 1GiB" --budgets 10 \
    --out homed.md --models gpt2-tiny >homed.txt 2>&1 ||
    fail "with weights homed the default lost to a forced flag: $(cat homed.txt)"
  grep -q "^| gpt2-tiny | 16 | 10% | exact | [0-9.]* | [0-9.]* " homed.md ||
    fail "gpt2-tiny homed: no feasible row: $(cat homed.md)"
fi
# The check fails where it should: with a negative tolerance every case
# with a forced plan is a loss.
"$PY" "$FORCED" "${ARGS[@]}" --models tiny-cnn --budgets 75 \
  --tolerance -1 >neg.txt 2>&1 && fail "a negative tolerance passed"
grep -q "^FAIL: tiny-cnn at 75% (exact): the default loses to" neg.txt ||
  fail "the failure does not name the case: $(cat neg.txt)"
echo "PASS"
