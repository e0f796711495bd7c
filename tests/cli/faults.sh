#!/usr/bin/env bash
# Faults that lose nothing (CPU emulation backend):
# - a trainer SIGKILLed at random moments, checkpointing every iteration,
#   resumes to byte-identical weights (a small model, and one whose plan
#   offloads and recomputes);
# - a full disk (a small tmpfs) while memfit writes an output directory or a
#   trainer writes a checkpoint leaves the previous one intact and says so;
# - two `memfit compile -o DIR` into one new DIR at once: one wins whole, the
#   other fails cleanly.
# The full-disk part runs in a private mount namespace (unshare; as root, or
# through a user namespace); where neither is allowed it is skipped, saying so.
set -u
source "$(dirname "$0")/lib/preamble.bash"
if [ -z "${MEMFIT_FAULTS_NS:-}" ]; then
  for u in "unshare --mount --propagation private" "unshare --user --map-root-user --mount"; do
    # shellcheck disable=SC2086
    if $u true 2>/dev/null; then
      MEMFIT_FAULTS_NS=1 exec $u bash "$0" "$@"
    fi
  done
  export MEMFIT_FAULTS_NS=none
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(5)
np.save("img.npy", r.standard_normal((24, 3, 8, 8)).astype(np.float32))
np.save("vec.npy", r.standard_normal((24, 16)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, 24).astype(np.int64))
PY

build() { # dir
  cmake -S "$1" -B "$1/build" -DMEMFIT_BACKEND=cpu >"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log"; fail "configure $1"; }
  cmake --build "$1/build" -j 2 >"$1/build.log" 2>&1 ||
    { tail -30 "$1/build.log"; fail "build $1"; }
}
plan_field() { # dir expr-on-plan
  $PY -c "import json; p = json.load(open('$1/plan.json')); print($2)"
}

# --- SIGKILL at random moments --------------------------------------------
# Kill times are drawn over the length of a whole run that checkpoints every
# iteration, so they fall during start-up, inside iterations, inside
# checkpoint writes and between them; a temporary checkpoint that a kill
# left behind (new since the round began) shows that it hit a write.
random_kills() { # dir data kills
  local dir=$1 data=$2 want=$3 n=20
  local T=$dir/build/trainer
  local args=(--data "$data" --labels lab.npy --lr 0.05 --momentum 0.9 --shuffle
    --seed 4 --iterations $n --quiet)
  "$T" "${args[@]}" --save "$dir/full.onnx" || fail "$dir: uninterrupted run"
  local t0 t1
  rm -rf "$dir/ck-timing"
  t0=$(date +%s%N)
  "$T" "${args[@]}" --checkpoint "$dir/ck-timing" --checkpoint-every 1 ||
    fail "$dir: checkpointing run"
  t1=$(date +%s%N)
  local span=$(((t1 - t0) / 1000 + 1)) # microseconds
  local kills=0 torn=0 trials=0
  local tmp=$dir/ck/checkpoint.bin.tmp
  RANDOM=${MEMFIT_FAULTS_SEED:-18}
  # Trials from scratch until `want` kills have landed; each trial kills
  # and resumes until a run finishes, then compares the weights.
  while [ $kills -lt "$want" ]; do
    trials=$((trials + 1))
    rm -rf "$dir/ck" "$dir/out.onnx"
    while :; do
      local before
      before=$(stat -c %y "$tmp" 2>/dev/null)
      "$T" "${args[@]}" --checkpoint "$dir/ck" --checkpoint-every 1 --resume \
        --save "$dir/out.onnx" >"$dir/run.log" 2>&1 &
      local pid=$!
      local us=$(((RANDOM * 32768 + RANDOM) % span))
      sleep "$(printf '%d.%06d' $((us / 1000000)) $((us % 1000000)))"
      if kill -9 $pid 2>/dev/null; then
        wait $pid 2>/dev/null
        kills=$((kills + 1))
        [ -e "$tmp" ] && [ "$(stat -c %y "$tmp")" != "$before" ] &&
          torn=$((torn + 1))
      else
        wait $pid || { cat "$dir/run.log"; fail "$dir: a resumed run failed"; }
        break
      fi
    done
    # A kill may have hit a run that had just finished: finish for sure.
    "$T" "${args[@]}" --checkpoint "$dir/ck" --resume --save "$dir/out.onnx" \
      >"$dir/run.log" 2>&1 || { cat "$dir/run.log"; fail "$dir: last resume"; }
    cmp -s "$dir/full.onnx" "$dir/out.onnx" ||
      fail "$dir: trial $trials: weights differ from the uninterrupted run"
  done
  echo "$dir: $kills random SIGKILLs in $trials trials ($torn during a checkpoint write), each resumed to identical weights"
}

"$MEMFIT" zoo tiny-dropout -o drop.onnx >/dev/null || fail zoo
"$MEMFIT" compile drop.onnx --batch 8 --budget 90% --device k40m -o small \
  --quiet || fail "compile small"
build small
random_kills small vec.npy 20

# A plan that both offloads and recomputes: SuperNeurons' policy under a
# budget tight enough for both.
"$MEMFIT" zoo tiny-bn -o bn.onnx >/dev/null || fail zoo
ok=
for pct in 85 80 75 90 70 95; do
  rm -rf moves
  "$MEMFIT" compile bn.onnx --batch 8 --budget "$pct%" --device k40m \
    --policy superneurons --sub-batch 8 -o moves --quiet 2>/dev/null || continue
  off=$(plan_field moves "p['summary']['bytes_to_host']")
  rec=$(plan_field moves "sum(1 for t in p['tasks'] if t['recompute'])")
  [ "$off" -gt 0 ] && [ "$rec" -gt 0 ] && { ok=1; break; }
done
[ -n "$ok" ] || fail "no budget gives tiny-bn a plan that offloads and recomputes"
echo "moves: budget $pct%, $off bytes offloaded, $rec recomputed tasks"
build moves
random_kills moves img.npy 20

# --- Two compiles into one new directory ---------------------------------
for round in 1 2 3; do
  rm -rf race ./.race.tmp-*
  "$MEMFIT" compile bn.onnx --batch 8 --budget 100% --device k40m -o race \
    --quiet >a.log 2>&1 &
  pa=$!
  "$MEMFIT" compile bn.onnx --batch 8 --budget 95% --device k40m -o race \
    --quiet >b.log 2>&1 &
  pb=$!
  wait $pa
  ra=$?
  wait $pb
  rb=$?
  case "$ra$rb" in
  01) winner=a loser=b.log ;;
  10) winner=b loser=a.log ;;
  *) cat a.log b.log; fail "race $round: exit codes $ra and $rb, expected 0 and 1" ;;
  esac
  grep -q "error:.*race" $loser || { cat $loser; fail "race $round: the loser says nothing about race"; }
  [ -z "$(ls -A . | grep '^\.race')" ] || fail "race $round: temporary directories left behind"
  # The directory is the winner's, whole.
  [ -d ref-$winner ] || {
    b=100%
    [ $winner = b ] && b=95%
    "$MEMFIT" compile bn.onnx --batch 8 --budget $b --device k40m -o ref-$winner \
      --quiet || fail "reference compile"
  }
  diff -r -x report.txt race ref-$winner >/dev/null ||
    fail "race $round: DIR is not the winner's output, whole"
  echo "race $round: $winner won whole; the other: $(grep error: $loser | head -1)"
done

# --- A full disk ---------------------------------------------------------
if [ "$MEMFIT_FAULTS_NS" = none ]; then
  echo "full disk: skipped (no private mount namespace for a small tmpfs here)"
  echo "faults: random kills and the compile race lose nothing"
  exit 0
fi
mkdir disk && mount -t tmpfs -o size=4m tmpfs disk || fail "cannot mount a tmpfs"
"$MEMFIT" compile bn.onnx --batch 8 --budget 100% --device k40m -o disk/out \
  --quiet || fail "compile onto the tmpfs"
cp -a disk/out before
fill() { # leave KiB free
  dd if=/dev/zero of=disk/fill bs=64k >/dev/null 2>&1
  [ "$1" -gt 0 ] && truncate -s "-$1K" disk/fill
  sync
}
# Run out of space at different points of the writer.
for free in 0 8 24 48; do
  fill $free
  if "$MEMFIT" compile bn.onnx --batch 8 --budget 95% --device k40m \
    -o disk/out --force --quiet >full.log 2>&1; then
    fail "compile with ${free}KiB free succeeded; the test needs a fuller disk"
  fi
  grep -q "No space left on device" full.log || { cat full.log; fail "full disk ($free KiB free): not said"; }
  grep -q "left as it was" full.log || { cat full.log; fail "full disk: does not say the old DIR is intact"; }
  diff -r before disk/out >/dev/null || fail "full disk ($free KiB free): the previous output changed"
  [ "$(ls -A disk | sort | tr '\n' ' ')" = "fill out " ] ||
    fail "full disk ($free KiB free): leftovers: $(ls -A disk)"
  echo "compile onto a full disk ($free KiB free): $(grep error: full.log | cut -c1-150)"
  rm -f disk/fill
done

# A checkpoint onto a full disk.
T=small/build/trainer
targs=(--data vec.npy --labels lab.npy --lr 0.05 --seed 2 --quiet)
"$T" "${targs[@]}" --iterations 6 --save ref6.onnx || fail "reference run"
"$T" "${targs[@]}" --iterations 3 --checkpoint disk/ck || fail "first checkpoint"
cp disk/ck/checkpoint.bin ck3.bin
fill 0
"$T" "${targs[@]}" --iterations 6 --checkpoint disk/ck --checkpoint-every 1 \
  --resume >ckfull.log 2>&1 && fail "checkpoint onto a full disk succeeded"
grep -q "No space left on device" ckfull.log || { cat ckfull.log; fail "checkpoint: full disk not said"; }
grep -q "previous checkpoint is intact" ckfull.log || { cat ckfull.log; fail "checkpoint: not said that the previous one is intact"; }
cmp -s ck3.bin disk/ck/checkpoint.bin || fail "the previous checkpoint changed"
[ "$(ls disk/ck)" = checkpoint.bin ] || fail "checkpoint leftovers: $(ls disk/ck)"
echo "checkpoint onto a full disk: $(grep error: ckfull.log)"
rm -f disk/fill
"$T" "${targs[@]}" --iterations 6 --checkpoint disk/ck --resume \
  --save resumed6.onnx >ck.log 2>&1 || { cat ck.log; fail "resume after freeing space"; }
cmp -s ref6.onnx resumed6.onnx || fail "resumed after a full disk: weights differ"
echo "resumed after freeing space: identical weights"
umount disk
echo "faults: random kills, the compile race and full disks lose nothing"
