//===- KernelCost.h - The analytic model on one library kernel --*- C++ -*-===//
//
// The analytic model's time for one cuDNN convolution call or one SGEMM,
// described by its shape alone rather than by a task of a TaskGraph: what
// `memfit cost` prints for a CSV of kernels, and what `memfit calibrate`
// holds against measured times (DeepBench's layout, docs/cost-model.md).
//
// The work is counted as the planner counts it for the task that runs the
// same kernel (AnalyticCost.h): FLOPs of the algorithm's method, the bytes
// of its operands plus workspace traffic, the output elements as parallel
// work items and, for the directions whose reduction does not run over the
// batch, the reduction depth. So a calibration fitted on these kernels is
// the calibration the planner uses.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_KERNELCOST_H
#define MEMFIT_COMPILER_COST_KERNELCOST_H

#include "compiler/cost/AnalyticCost.h"

namespace memfit {

/// A 2-D convolution as DeepBench describes it (NCHW, one group, no bias).
/// `w`, `h` the input, `s`, `r` the filter width and height.
struct ConvKernel {
  int64_t w = 1, h = 1, c = 1, n = 1, k = 1, s = 1, r = 1;
  int64_t padW = 0, padH = 0, strideW = 1, strideH = 1;
};
/// C (m x n) = op(A) (m x k) op(B) (k x n), FP32.
struct GemmKernel {
  int64_t m = 1, n = 1, k = 1;
};

/// The ConvShape of `c`; false when the output would be empty.
bool convKernelShape(const ConvKernel &c, ConvShape &out);

/// Work of conv algorithm `algo` in direction `d` on shape `s`.
TaskWork convKernelWork(const DeviceSpec &spec, const ConvShape &s,
                        ConvDirection d, int algo);
/// Work of one SGEMM.
TaskWork gemmKernelWork(const DeviceSpec &spec, const GemmKernel &g);

/// The fastest applicable algorithm of direction `d` with no workspace
/// limit and its time (ties to the lower id, so the answer is
/// deterministic).
struct FastestConv {
  int algo = 0;
  double seconds = 0;
};
FastestConv fastestConvSeconds(const DeviceSpec &spec, const ConvShape &s,
                               ConvDirection d);

} // namespace memfit

#endif
