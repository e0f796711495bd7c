# Shared by tests/cli/nvme.sh and nvme_cnn.sh (sourced; not a test: ctest
# runs tests/cli/*.sh only). Expects MEMFIT, PY and fail() to be set.

# dev.json: the H100 SXM's figures with a drive's rates (the built-in
# states none, and --nvme needs them).
write_nvme_device() {
  "$MEMFIT" device h100-sxm --json >dev0.json || fail "memfit device --json"
  "$PY" - <<'PYEOF' || fail "cannot write the device file"
import json
d = json.load(open("dev0.json"))
d["name"] = "h100-sxm-nvme"
d["nvme_read_gbps"] = 6.0
d["nvme_write_gbps"] = 4.0
json.dump(d, open("dev.json", "w"))
PYEOF
}

# shellcheck source=trainer.bash
source "$(dirname "${BASH_SOURCE[0]}")/trainer.bash"

# compile_model dir model memfit-args...: compiled on dev.json and built
# for the CPU emulation.
compile_model() {
  local d=$1 model=$2
  shift 2
  build_trainer "$d" "$model" --device dev.json "$@"
}
