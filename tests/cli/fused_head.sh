#!/usr/bin/env bash
# The head's product computed by the cross-entropy loss in chunks of rows
# (--fuse-head): a tied GPT with a quarter of its labels ignored (-100)
# trains on the CPU emulation as PyTorch trains it, fused whole, fused in
# chunks of 5 rows over two sub-batches, and as written; validation counts
# the same positions; bf16 stays within torch.autocast's bound. The plan
# says which form it took; the chunk shrinks where the budget needs it; a
# head that cannot be fused is refused by name.
set -u
source "$(dirname "$0")/lib/preamble.bash"
needs_torch fused_head
fresh_work

source "$SRC/tests/e2e/verify.sh"

# AdamW at eps 1e-3: the key bias's zero true gradient (tests/cli/today.sh).
EXPORT_ARGS=(--ignore -100)
TRAIN_ARGS=(--eps 1e-3)
REF_ARGS=(--optimizer adamw --eps 1e-3 --weight-decay 0.01)
ITERATIONS=3
LR=0.01
COMPILE_ARGS=(--optimizer adamw --fuse-head=true)
PLANS=(ideal tight)
check gpt-tied 75% 80% 85% 90%
for d in ideal-gpt-tied tight-gpt-tied; do
  grep -q 'x.headLoss(' $d/src/round_*.cpp || fail "$d does not fuse its head"
  grep -q 'x.evalHeadLoss(' $d/src/eval_round_*.cpp ||
    fail "$d's evaluation does not fuse its head"
  [ "$($PY -c "import json; print(json.load(open('$d/plan.json'))['fused_head']['chunk_rows'])")" = 64 ] ||
    fail "$d: plan.json does not say the head is fused in chunks of 64 rows"
done

# Chunks of 5 rows (the last of a sub-batch's 32 rows is 2 long) in two
# sub-batches, each dividing by the whole batch's count.
for f in .onnx -x.npy -y.npy; do cp "gpt-tied$f" "gpt-chunks$f" || fail "copy"; done
COMPILE_ARGS=(--optimizer adamw --fuse-head=true --head-chunk-rows 5 --sub-batch 2)
PLANS=(tight)
verify gpt-chunks 75% 80% 85% 90%
grep -q 'x.headLoss(P[0-9]*, 5,' tight-gpt-chunks/src/round_*.cpp ||
  fail "gpt-chunks is not fused in chunks of 5 rows"

# As written: the logits stored, no fused call, no fused_head in plan.json.
for f in .onnx -x.npy -y.npy; do cp "gpt-tied$f" "gpt-written$f" || fail "copy"; done
COMPILE_ARGS=(--optimizer adamw --fuse-head=false)
verify gpt-written 75% 80% 85% 90%
! grep -q 'headLoss' tight-gpt-written/src/*.cpp || fail "--fuse-head=false fused"
[ "$($PY -c "import json; print('fused_head' in json.load(open('tight-gpt-written/plan.json')))")" = False ] ||
  fail "plan.json of the head as written says it is fused"

# Validation of the fused trainer against torch's eval mode on the weights
# it saved (the positions of ignored labels not counted).
d=tight-gpt-chunks
"$d/build/trainer" --data gpt-tied-x.npy --labels gpt-tied-y.npy \
  --iterations 1 --lr $LR "${TRAIN_ARGS[@]}" --val-data gpt-tied-x.npy \
  --val-labels gpt-tied-y.npy --save "$d/val.onnx" >"$d/val.log" 2>&1 ||
  { cat "$d/val.log"; fail "validate $d"; }
"$PY" "$SRC/tests/e2e/torch_reference.py" gpt-tied.onnx gpt-tied-x.npy \
  gpt-tied-y.npy --batch 4 --iterations 1 --val-x gpt-tied-x.npy \
  --val-y gpt-tied-y.npy --val-from-trained --rtol 1e-5 \
  --losses "$d/val.log" --trained "$d/val.onnx" >"$d/val.ref" 2>&1 ||
  { cat "$d/val.ref"; fail "$d's validation disagrees with torch"; }
echo "$d validation: $(cat "$d/val.ref")"

# bf16 in chunks of 7 rows: the update against torch.autocast's within the
# precision tests' bound (tests/cli/precision_train.sh's SAME).
d=bf16-gpt
"$MEMFIT" compile gpt-tied.onnx --batch 4 --budget 85% --device a100-40g \
  --optimizer adamw --precision bf16 --fuse-head=true --head-chunk-rows 7 \
  -o $d --quiet || fail "compile $d"
build $d
"$d/build/trainer" --data gpt-tied-x.npy --labels gpt-tied-y.npy \
  --iterations $ITERATIONS --lr $LR "${TRAIN_ARGS[@]}" --log-every 1 \
  --save "$d/trained.onnx" >"$d/train.log" 2>&1 || { cat "$d/train.log"; fail "train $d"; }
"$PY" "$SRC/tests/e2e/torch_reference.py" gpt-tied.onnx gpt-tied-x.npy \
  gpt-tied-y.npy --batch 4 --iterations $ITERATIONS --lr $LR "${REF_ARGS[@]}" \
  --rtol 0.02 --update-tol 0.05 --autocast bf16 --losses "$d/train.log" \
  --trained "$d/trained.onnx" >"$d/ref.log" 2>&1 ||
  { cat "$d/ref.log"; fail "$d disagrees with torch's autocast"; }
echo "$d: $(cat "$d/ref.log")"

# The default plans both forms and says which it kept; inspect shows both.
out=$("$MEMFIT" plan gpt-tied.onnx --batch 4 --budget 80% --device a100-40g) ||
  fail "plan gpt-tied"
grep -q '^note     head .*predicted .* fused, .* as written' <<<"$out" ||
  { echo "$out"; fail "the summary does not say which head form was kept"; }
out=$("$MEMFIT" inspect gpt-tied.onnx --batch 4 --summary) || fail "inspect"
grep -q "^fused head  .*'/head/MatMul' fused with the loss above: liveness peak" <<<"$out" ||
  { echo "$out"; fail "inspect does not compare the head's forms"; }

# The batch in two chunks with the default forms: the percentage budget is
# of the ideal plan, which splits nothing (it used to be refused).
"$MEMFIT" compile gpt-tied.onnx --batch 4 --budget 80% --device a100-40g \
  --chunks 2 -o chunks2 --quiet || fail "--chunks 2 with auto forms"
[ "$($PY -c "import json; print(json.load(open('chunks2/plan.json'))['chunks'])")" = 2 ] ||
  fail "the plan of --chunks 2 is not in two chunks"

# The chunk is the planner's where memory needs it: GPT-2's shape (declared
# weights, planned only). inspect's lower bound is at one row a chunk;
# --budget lb plans the largest chunk that reaches it, and a budget of that
# lower bound, which the default 166 rows do not fit, is planned in
# smaller chunks; --head-chunk-rows pins the chunk and is then refused.
"$MEMFIT" zoo gpt2 --vocab 50304 --seq-len 1024 -o gpt2.onnx --force >/dev/null ||
  fail "zoo gpt2"
lb=$("$MEMFIT" inspect gpt2.onnx --batch 8 --fuse-head=true --json |
  "$PY" -c "import json, sys; print(json.load(sys.stdin)['lower_bound_bytes'])") ||
  fail "inspect gpt2"
rows_of() { sed -n 's/.*chunks of \([0-9]*\) rows.*/\1/p'; }
plan_json() { "$MEMFIT" plan gpt2.onnx --batch 8 --fuse-head=true --json --quiet "$@"; }
out=$(plan_json --budget lb) || fail "--budget lb with the fused head"
got=$("$PY" -c "import json, sys; j = json.loads(sys.argv[1]); print(j['lower_bound_bytes'], j['head'])" "$out")
[ "${got%% *}" = "$lb" ] ||
  fail "--budget lb planned at lower bound ${got%% *}, inspect says $lb"
rows=$(rows_of <<<"$got")
[ -n "$rows" ] && [ "$rows" -lt 166 ] && [ "$rows" -ge 1 ] ||
  fail "--budget lb kept chunks of ${rows:-?} rows (the default 166 does not reach the bound)"
budget=$((lb + 144 * 1048576))B
out=$(plan_json --budget "$budget") || fail "a budget at the lower bound was refused"
rows=$(rows_of <<<"$out")
[ -n "$rows" ] && [ "$rows" -lt 166 ] ||
  fail "at the lower bound the head was not planned in smaller chunks (${rows:-?} rows)"
if plan_json --budget "$budget" --head-chunk-rows 166 >/dev/null 2>&1; then
  fail "chunks of 166 rows planned under a budget they do not fit"
fi

# A classifier with a bias cannot be fused: --fuse-head=true says why.
"$PY" "$SRC/tests/e2e/today_models.py" cnn-bn cnn.onnx cnn-x.npy cnn-y.npy \
  --batch 4 --no-data || fail "export cnn-bn"
if out=$("$MEMFIT" plan cnn.onnx --batch 4 --budget 80% --fuse-head=true 2>&1); then
  fail "--fuse-head=true planned a head with a bias"
fi
grep -q "cnn.onnx: --fuse-head=true: the model's head cannot be fused: the head's product adds a bias" <<<"$out" ||
  { echo "$out"; fail "the refusal does not say why"; }
"$MEMFIT" plan cnn.onnx --batch 4 --budget 80% --quiet >/dev/null ||
  fail "auto refuses a model whose head cannot be fused"
echo "fused_head: OK"
