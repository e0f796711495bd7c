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

# copies_fixture: in the working directory, g.onnx (the zoo's gpt2-tiny),
# tok.npy and next.npy (4 x 16 token ids, seed 5) and device files from
# the H100: slow.json (links slowed to 50 MB/s, so that copying weights in
# for every sub-batch costs more than a smaller arena), nvme.json (an NVMe
# drive of 6 GB/s read, 4 GB/s write) and slow-nvme.json (both).
copies_fixture() {
  "$MEMFIT" zoo gpt2-tiny -o g.onnx >/dev/null || fail "zoo gpt2-tiny"
  "$MEMFIT" device h100-sxm --json >dev0.json || fail "memfit device --json"
  "$PY" - <<'PYEOF' || fail "cannot write data and the device files"
import json
import numpy as np
r = np.random.default_rng(5)
np.save("tok.npy", r.integers(0, 61, (4, 16)).astype(np.int64))
np.save("next.npy", r.integers(0, 61, (4, 16)).astype(np.int64))
def device(name, slow, nvme):
    d = json.load(open("dev0.json"))
    d["name"] = name
    if slow:
        d["h2d_gbps"] = d["d2h_gbps"] = 0.05
    if nvme:
        d["nvme_read_gbps"] = 6.0
        d["nvme_write_gbps"] = 4.0
    return d
json.dump(device("h100-sxm-slow-link", True, False), open("slow.json", "w"))
json.dump(device("h100-sxm-nvme", False, True), open("nvme.json", "w"))
json.dump(device("h100-sxm-slow-link-nvme", True, True),
          open("slow-nvme.json", "w"))
PYEOF
}

# kept_copies dir: how many weights of dir's plan keep their working copy
# on the GPU.
kept_copies() {
  "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"].get("gpu_copy_weights", 0))' "$1/plan.json"
}

# summary_says dir pattern why: dir's plan.json read back by memfit report
# has a summary line matching pattern.
summary_says() {
  "$MEMFIT" report "$1/plan.json" --layers 0 >"$1/report.txt" 2>&1 ||
    { cat "$1/report.txt"; fail "memfit report cannot read $1/plan.json"; }
  grep -q "$2" "$1/report.txt" || fail "$3"
}
