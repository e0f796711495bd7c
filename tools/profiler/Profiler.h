//===- Profiler.h - Measure task costs on a GPU -----------------*- C++ -*-===//
//
// `memfit profile` measures, on the GPU it runs on, what the analytic model
// estimates: for every distinct task signature of a model (OpSignature.h)
// and every requested sub-batch, the time and workspace of each cuDNN
// convolution algorithm that runs (cudnnFindConvolution*AlgorithmEx), the
// time of every other task (CUDA events, median of repeats after warm-up),
// the pinned host-device bandwidth both ways and the per-kernel launch
// floor. The result is a Profile (Profile.h) keyed by signature.
//
// This header needs no CUDA; the implementation is built only when CMake
// finds CUDA and cuDNN (MEMFIT_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_PROFILER_PROFILER_H
#define MEMFIT_TOOLS_PROFILER_PROFILER_H

#include "compiler/cost/Profile.h"
#include "compiler/ir/Graph.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace memfit {

struct ProfilerOptions {
  std::vector<int64_t> subBatches; // ascending, each at least 1
  int warmup = 3;                  // untimed runs before timing
  int repeats = 10;                // timed runs; the median is kept
  /// Let cuDNN and cuBLAS use TF32 tensor cores for FP32 (their default on
  /// Ampere and later); off measures strict FP32 as the analytic model does.
  bool allowTf32 = false;
  /// Share of the free device memory one convolution's workspace may take.
  double workspaceFraction = 0.5;
};

/// Succeeds when a CUDA device can be used; the error says why not.
llvm::Error checkCudaDevice();

/// Measures every task signature of `g` at every sub-batch of `opts`,
/// printing progress to `progress`. A measurement that fails (too large for
/// the device, configuration cuDNN refuses) is reported on `progress` and
/// left out, so the cost model falls back to its estimate for it.
llvm::Expected<Profile> runProfiler(const Graph &g, const ProfilerOptions &opts,
                                    llvm::raw_ostream &progress);

} // namespace memfit

#endif
