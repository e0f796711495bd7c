# Shared by tools/quickstart and tools/test: install what is missing, build.
# Sourced, not run.

MEMFIT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MEMFIT_BUILD=${MEMFIT_BUILD:-$MEMFIT_ROOT/build}
MEMFIT_JOBS=${MEMFIT_JOBS:-$(nproc 2>/dev/null || echo 2)}

# Debian packages memfit needs. python3-torch/torchvision/onnx are the
# independent reference the tests compare against; chromium renders reports.
MEMFIT_PACKAGES="cmake make g++ libonnx-dev libprotobuf-dev protobuf-compiler \
llvm-14-dev nlohmann-json3-dev catch2 ccache libopenblas-dev coinor-libcbc-dev openmpi-bin libopenmpi-dev pkg-config python3 python3-dev python3-numpy python3-onnx \
python3-pytest python3-matplotlib python3-torch python3-torchvision chromium clang-14 libfuzzer-14-dev"

# From PyPI, for the tests that export today's models (cli_hf_models;
# skipped without it): the last transformers that runs on Debian's torch.
MEMFIT_PYPI_PACKAGES="transformers==4.38.2"

# Installs PyPI requirements for Debian's python3 (--user) unless the
# Python statement CHECK runs; on failure says what is skipped and goes on.
# Usage: memfit_pip_install CHECK "REQUIREMENTS" "WITHOUT THEM" [pip flags]
memfit_pip_install() {
  local check=$1 reqs=$2 without=$3
  shift 3
  /usr/bin/python3 -c "$check" 2>/dev/null && return 0
  echo "memfit: installing $reqs from PyPI" >&2
  # shellcheck disable=SC2086 # a list of requirements
  /usr/bin/python3 -m pip install -q --user --break-system-packages "$@" \
    $reqs >&2 ||
    echo "memfit: could not install $reqs; $without" >&2
  return 0
}

memfit_install_pypi() {
  memfit_pip_install 'import transformers' "$MEMFIT_PYPI_PACKAGES" \
    "the tests that need it are skipped"
}

# cuDNN's graph API for the CUDA backend's convolutions (runtime/cuda/
# ConvGraph.cpp): NVIDIA's header-only C++ frontend, from its PyPI wheel
# (its Python half's dependencies are not needed: --no-deps). Only where
# CUDA is installed; without it the CUDA backend is built on cuDNN's legacy
# convolution API alone (CMake says so).
MEMFIT_CUDNN_FRONTEND=nvidia-cudnn-frontend==1.32.0
memfit_install_cudnn_frontend() {
  command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || return 0
  memfit_pip_install \
    'import importlib.metadata as m; m.distribution("nvidia-cudnn-frontend")' \
    "$MEMFIT_CUDNN_FRONTEND" "convolutions use cuDNN's legacy API only" --no-deps
}

# The Python package's build (tools/python, pyproject.toml): nanobind for
# the module, scikit-build-core for `pip install .`. Without them memfit
# builds without the package and its tests are skipped.
MEMFIT_PYPI_BUILD_PACKAGES="nanobind==3.1.0 scikit-build-core==1.1.2"
memfit_install_python_build() {
  memfit_pip_install 'import nanobind, scikit_build_core' \
    "$MEMFIT_PYPI_BUILD_PACKAGES" "the Python package is not built"
}

memfit_install_missing() {
  memfit_install_debian && memfit_install_pypi && memfit_install_cudnn_frontend &&
    memfit_install_python_build
}

memfit_install_debian() {
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

# Extra CMake arguments for memfit_build (tools/test --sanitize sets them).
MEMFIT_CMAKE_ARGS=${MEMFIT_CMAKE_ARGS:-}

memfit_build() {
  # ccache (when present) makes rebuilds in fresh clones cheap; CCACHE_BASEDIR
  # lets clones at different paths share entries. With -g ccache also hashes
  # the build's working directory unless told not to, and then a clone at
  # another path (CI's) misses every entry: NOHASHDIR, at the price of debug
  # info naming the directory of whichever build filled the entry.
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$MEMFIT_ROOT")}
    export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  # shellcheck disable=SC2086 # MEMFIT_CMAKE_ARGS is a list of arguments
  # The Python package is built for the interpreter the tests use (Debian's,
  # beside its torch).
  local python=()
  [ -x /usr/bin/python3 ] && python=(-DPython_EXECUTABLE=/usr/bin/python3)
  cmake -S "$MEMFIT_ROOT" -B "$MEMFIT_BUILD" -DCMAKE_BUILD_TYPE=${MEMFIT_BUILD_TYPE:-RelWithDebInfo} "${launcher[@]}" "${python[@]}" $MEMFIT_CMAKE_ARGS >&2 || return 1
  cmake --build "$MEMFIT_BUILD" -j "$MEMFIT_JOBS" >&2
}

# The sanitizer build (tools/test --sanitize): ASan and UBSan, no recovery,
# in its own directory, without the CUDA backend (no GPU code runs under the
# sanitizers). A Debug build, so assertions are checked too (CMakeLists.txt
# sets -O1 and line tables for it).
MEMFIT_SANITIZE_BUILD=${MEMFIT_SANITIZE_BUILD:-$MEMFIT_ROOT/build-sanitize}
# Tests the sanitizer run leaves to the plain one (a ctest -E pattern;
# docs/testing.md has the reasons and timings). Under ASan, UBSan and
# assertions the planner's search runs 20 to 40 times slower than in the
# plain build, so the sanitized run keeps what exercises memory the most per
# second: the unit tests but the search's [slow] cases, the tools' error
# paths, one trainer end to end per backend feature (e2e_cpu, nvme, trainer,
# lr_schedule, precision, homes' first case) and the parsers' fuzz replays.
# Left to the plain run: memory_limit sets `ulimit -v`, which ASan's shadow
# memory cannot live under; data_parallel runs trainers under mpirun, whose
# Open MPI leaves memory allocated at exit (LeakSanitizer reports it); the
# rest for time (sanitized, on CI's machine: unit_slow's cases 15 to 190 s
# each, attention 608 s, golden 455 s, homes_small_gpu 133 s, freeze 131 s,
# hf_models with eight families over 10 minutes; deep, today, forced,
# nvme_cnn, precision_train, weight_values and zoo_llama (206 s) train or
# plan the same code on larger models than the sanitized tests).
MEMFIT_SANITIZE_EXCLUDE=${MEMFIT_SANITIZE_EXCLUDE:-^(unit_slow|cli_(memory_limit|deep|today|today_exporters|data_parallel|nvme_cnn|forced|attention|fused_head|fuse|golden|homes_small_gpu|freeze|hf_models|precision_train|weight_values|zoo_llama))$}
memfit_build_sanitize() {
  MEMFIT_BUILD=$MEMFIT_SANITIZE_BUILD MEMFIT_BUILD_TYPE=Debug \
    MEMFIT_CMAKE_ARGS="-DMEMFIT_SANITIZE=ON -DMEMFIT_WITH_CUDA=OFF" memfit_build
}
