# Shared by tools/quickstart and tools/test: install what is missing, build.
# Sourced, not run.

MEMFIT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MEMFIT_BUILD=${MEMFIT_BUILD:-$MEMFIT_ROOT/build}
MEMFIT_JOBS=${MEMFIT_JOBS:-$(nproc 2>/dev/null || echo 2)}

# Debian packages memfit needs. python3-torch/torchvision/onnx are the
# independent reference the tests compare against; chromium renders reports.
MEMFIT_PACKAGES="cmake make g++ libonnx-dev libprotobuf-dev protobuf-compiler \
llvm-14-dev nlohmann-json3-dev catch2 ccache libopenblas-dev coinor-libcbc-dev pkg-config python3 python3-numpy python3-onnx \
python3-torch python3-torchvision chromium"

memfit_install_missing() {
  local missing=()
  for p in $MEMFIT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "memfit: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q >&2 || return 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

memfit_build() {
  # ccache (when present) makes rebuilds in fresh clones cheap; CCACHE_BASEDIR
  # lets clones at different paths share entries.
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$MEMFIT_ROOT")}
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$MEMFIT_ROOT" -B "$MEMFIT_BUILD" -DCMAKE_BUILD_TYPE=${MEMFIT_BUILD_TYPE:-RelWithDebInfo} "${launcher[@]}" >&2 || return 1
  cmake --build "$MEMFIT_BUILD" -j "$MEMFIT_JOBS" >&2
}
