# Shared by the CLI tests that build trainers (sourced; not a test: ctest
# runs tests/cli/*.sh only). Expects MEMFIT and fail() to be set.

# build_trainer dir model memfit-args...: `memfit compile` into dir, then
# the trainer built for the CPU emulation (dir/build/trainer); the logs of
# a failed step are printed.
build_trainer() {
  local d=$1 model=$2
  shift 2
  "$MEMFIT" compile "$model" -o "$d" --quiet "$@" || fail "compile $d"
  cmake -S "$d" -B "$d/build" -DMEMFIT_BACKEND=cpu >"$d/cmake.log" 2>&1 ||
    { cat "$d/cmake.log"; fail "configure $d"; }
  cmake --build "$d/build" -j 2 >"$d/build.log" 2>&1 ||
    { tail -30 "$d/build.log"; fail "build $d"; }
}

# run_trainer dir name trainer-args...: dir's trainer run with the args,
# its output in dir/name.log, printed when it fails.
run_trainer() {
  local d=$1 name=$2
  shift 2
  "./$d/build/trainer" "$@" >"$d/$name.log" 2>&1 ||
    { cat "$d/$name.log"; fail "$d: $name"; }
}
