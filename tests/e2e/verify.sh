#!/usr/bin/env bash
# Helpers for the end-to-end checks against PyTorch (tests/cli/today.sh,
# tests/cli/attention.sh), sourced after MEMFIT, SRC, PY and fail() are set
# and the working directory is the test's.

build() { # dir
  cmake -S "$1" -B "$1/build" -DMEMFIT_BACKEND=cpu >"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log"; fail "configure $1"; }
  cmake --build "$1/build" -j 2 >"$1/build.log" 2>&1 ||
    { tail -30 "$1/build.log"; fail "build $1"; }
}
summary() { # dir -> "sub-batch S, B bytes offloaded, R recomputes"
  $PY -c "
import json; j = json.load(open('$1/plan.json'))
print('sub-batch %d, %d bytes offloaded, %d recomputes' % (j['sub_batch'],
  j['summary']['bytes_to_host'], sum(1 for t in j['tasks'] if t['recompute'])))"
}

# Extra export and compile flags and trainer/reference flags for the next
# checks.
EXPORT_ARGS=()
COMPILE_ARGS=()
TRAIN_ARGS=(--momentum 0.9 --weight-decay 0.001)
REF_ARGS=(--momentum 0.9 --weight-decay 0.001)
ITERATIONS=2
LR=0.05

check() { # model[@opset] budget... (the first budget that compiles is used)
  local model=${1/@/-opset} name=${1%@*} opset=17
  [ "$1" = "$name" ] || opset=${1#*@}
  shift
  "$PY" "$SRC/tests/e2e/today_models.py" "$name" "$model.onnx" \
    "$model-x.npy" "$model-y.npy" --batch 4 --opset "$opset" \
    "${EXPORT_ARGS[@]}" ||
    fail "export $model"
  verify "$model" "$@"
}

# The plans verify() trains: ideal and tight, or only the tight one where a
# model is there for its importer (the tight plan exercises more of the
# runtime, and a plan that keeps the model's semantics under one budget
# keeps them under another: that is the planner's own suite's to show).
# The default tier trains the tight plan alone (tests/cli/lib/preamble.bash,
# full); BOTH_PLANS is what a script resets PLANS to.
if full; then
  BOTH_PLANS=(ideal tight)
else
  BOTH_PLANS=(tight)
fi
PLANS=("${BOTH_PLANS[@]}")

verify() { # model budget...: plans, trains and compares $model.onnx
  local model=$1
  shift
  local ok=
  for budget in "$@"; do
    rm -rf "tight-$model"
    "$MEMFIT" compile "$model.onnx" --batch 4 --budget "$budget" \
      --device a100-40g "${COMPILE_ARGS[@]}" -o "tight-$model" --quiet \
      2>/dev/null && { ok=1; break; }
  done
  [ -n "$ok" ] || fail "$model: no tight budget compiles"
  [ "$(summary "tight-$model")" != "sub-batch 4, 0 bytes offloaded, 0 recomputes" ] ||
    fail "$model: the tight plan changes nothing"
  if [[ " ${PLANS[*]} " = *" ideal "* ]]; then
    "$MEMFIT" compile "$model.onnx" --batch 4 --budget 100% --device a100-40g \
      "${COMPILE_ARGS[@]}" -o "ideal-$model" --quiet ||
      fail "compile ideal $model"
  fi
  local runs=() p d
  for p in "${PLANS[@]}"; do
    d=$p-$model
    build "$d"
    "$d/build/trainer" --data "$model-x.npy" --labels "$model-y.npy" \
      --iterations $ITERATIONS --lr $LR "${TRAIN_ARGS[@]}" \
      --log-every 1 --save "$d/trained.onnx" >"$d/train.log" 2>&1 ||
      { cat "$d/train.log"; fail "train $d"; }
    runs+=(--losses "$d/train.log" --trained "$d/trained.onnx")
    echo "$d: $(summary "$d")"
  done
  # Torch trains once; each run is compared with it.
  "$PY" "$SRC/tests/e2e/torch_reference.py" "$model.onnx" "$model-x.npy" \
    "$model-y.npy" --batch 4 --iterations $ITERATIONS --lr $LR \
    "${REF_ARGS[@]}" --rtol 1e-5 "${runs[@]}" >"ref-$model.log" 2>&1 ||
    { cat "ref-$model.log"; fail "$model disagrees with torch"; }
  cat "ref-$model.log"
}
