//===- Measure.h - The profiler's individual measurements -------*- C++ -*-===//
//
// One function per kind of measurement; Profiler.cpp drives them. Each
// allocates what it needs, releases it on every path, and reports a failed
// allocation as OutOfDeviceMemory so the driver can skip just that entry.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_PROFILER_MEASURE_H
#define MEMFIT_TOOLS_PROFILER_MEASURE_H

#include "compiler/cost/ConvAlgo.h"
#include "compiler/cost/Profile.h"
#include "compiler/ops/OpSignature.h"
#include "tools/profiler/CudaSupport.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace memfit::profiler {

/// Every cuDNN algorithm of `dir` that runs on conv `s` (its batch is the
/// sub-batch), with cuDNN's own timing (median over several Find calls) and
/// workspace, the bias kernel's time added where the task runs one.
llvm::Expected<std::vector<AlgoMeasurement>>
timeConv(Context &ctx, const ConvShape &s, ConvDirection dir);

/// Seconds of a non-convolution task (FP/BP of an op, loss, update) at
/// sub-batch b, timed with events.
llvm::Expected<double> timeTask(Context &ctx, const Graph &g,
                                const ProfileRequest &r, int64_t b);

/// Pinned host-device copy rates and the fixed cost of one copy.
llvm::Expected<TransferMeasurement> measureTransfers(Context &ctx);

/// Seconds one back-to-back minimal kernel occupies the stream: the floor
/// every kernel pays (the device spec's launch_us).
llvm::Expected<double> measureLaunchFloor(Context &ctx);

} // namespace memfit::profiler

#endif
