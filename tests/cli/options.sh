#!/usr/bin/env bash
# Unknown options, on every memfit command and on the generated trainer:
# refused with exit status 2, naming the option and the nearest known one,
# nothing on stdout and nothing written. `--hxyz` and `--host-budget` used
# to be read as -h (help, exit 0). --help and -h still print help, exit 0.
set -u
MEMFIT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" zoo mlp -o mlp.onnx >/dev/null || fail "zoo"
"$MEMFIT" plan mlp.onnx --batch 4 --budget 100% -o rep --quiet || fail "plan -o"

refused() { # option suggestion command...
  local opt=$1 want=$2
  shift 2
  "$@" >out.txt 2>err.txt
  local rc=$?
  [ $rc -eq 2 ] || { cat out.txt err.txt | head -5; fail "'$*' exited $rc, expected 2"; }
  grep -q -- "unknown option '$opt'" err.txt ||
    fail "'$*': message does not name $opt: $(cat err.txt)"
  grep -q -- "did you mean '$want'" err.txt ||
    fail "'$*': message does not suggest $want: $(cat err.txt)"
  [ -s out.txt ] && fail "'$*': printed on stdout: $(head -3 out.txt)"
  echo "ok: $*: $(head -1 err.txt)"
}
M=$MEMFIT
refused --host-budgt --host-budget $M compile mlp.onnx --host-budgt 4GiB -o c1
refused --hxyz --help $M compile mlp.onnx --hxyz -o c2
[ -e c1 ] || [ -e c2 ] && fail "a refused compile wrote its directory"
refused --polcy --policy $M plan mlp.onnx --batch 4 --polcy vdnn-all
# A value that looks like an option is a value, not an unknown option.
refused --bugdet --budget $M plan mlp.onnx -o -dir --bugdet=50%
[ -e ./-dir ] && fail "a refused plan wrote its directory"
refused --policis --policies $M compare mlp.onnx --budgets 50% --policis memfit
refused --layer --layers $M report rep/plan.json --layer 3
refused --clases --classes $M zoo mlp -o z.onnx --clases 3
[ -e z.onnx ] && fail "a refused zoo wrote its file"
refused --batches --batch $M inspect mlp.onnx --batches 2
refused --jsn --json $M device --jsn
refused --hxyz --help $M --hxyz
refused -verison --version $M -verison

# Help is still help.
for cmd in "" compile plan compare report zoo inspect device; do
  # shellcheck disable=SC2086
  "$M" $cmd --help >help.txt 2>&1 || fail "'$cmd --help' exited $?"
  grep -q "USAGE\|OVERVIEW" help.txt || fail "'$cmd --help' printed no help"
  # shellcheck disable=SC2086
  "$M" $cmd -h >/dev/null 2>&1 || fail "'$cmd -h' exited $?"
done
# Known options in every spelling llvm::cl takes still work.
"$M" plan mlp.onnx -batch 4 --budget=100% -policy=memfit --quiet ||
  fail "single-dash and '=' spellings were refused"

# The generated trainer (CPU emulation: cheap to build).
"$M" compile mlp.onnx --batch 4 --budget 100% -o t --quiet || fail "compile"
cmake -S t -B t/build -DMEMFIT_BACKEND=cpu >t/cmake.log 2>&1 ||
  { cat t/cmake.log; fail "configure the trainer"; }
cmake --build t/build -j 2 >t/build.log 2>&1 ||
  { tail -30 t/build.log; fail "build the trainer"; }
T=t/build/trainer
refused --iteration --iterations $T --synthetic --iteration 2
refused --hxyz --help $T --synthetic --hxyz
refused --epoch --epochs $T --synthetic --epoch 1
refused --momentm --momentum $T --momentm 0.5 --synthetic
"$T" --help >help.txt 2>&1 || fail "trainer --help exited $?"
grep -q -- --iterations help.txt || fail "trainer --help printed no usage"
"$T" -h >/dev/null 2>&1 || fail "trainer -h exited $?"
"$T" --synthetic --lr=0.1 >out.txt 2>err.txt
[ $? -eq 2 ] || fail "trainer --lr=0.1 did not exit 2"
grep -q "next argument" err.txt || fail "trainer --lr=0.1: $(cat err.txt)"
"$T" --synthetic stray >out.txt 2>err.txt
[ $? -eq 2 ] || fail "trainer with a stray argument did not exit 2"
grep -q "unexpected argument 'stray'" err.txt || fail "stray: $(cat err.txt)"
"$T" --synthetic --iterations 1 --quiet >/dev/null 2>&1 ||
  fail "a valid trainer call failed"
echo "options: ok"
