//===- KernelCost.cpp - The analytic model on one library kernel ----------===//
#include "compiler/cost/KernelCost.h"

#include <algorithm>

namespace memfit {

namespace {

double d(int64_t x) { return static_cast<double>(x); }

/// Work of the kernel at the shape's batch, before the split into the part
/// that scales with the batch and the fixed part.
TaskWork convWorkAt(const DeviceSpec &spec, const ConvShape &s,
                    ConvDirection dir, int algo) {
  TaskWork w;
  double x = d(s.batch) * d(s.c) * d(s.inSpatial());
  double y = d(s.batch) * d(s.k) * d(s.outSpatial());
  double f =
      d(s.k) * d(s.c / std::max<int64_t>(s.group, 1)) * d(s.kernelSpatial());
  // Each direction reads two of X, W, Y (or their gradients) and writes
  // the third: the same three tensors cross memory once each.
  w.bytes = 4.0 * (x + y + f) + convWorkspaceTraffic(s, dir, algo);
  w.flops = convFlops(s, dir, algo);
  w.launches = convLaunches(dir, algo);
  w.efficiency = spec.convEfficiency(dir, algo);
  w.reduction = convReductionDepth(s, dir);
  w.stridePenalty = convStridePenalty(s, dir, algo);
  return w;
}

} // namespace

bool convKernelShape(const ConvKernel &c, ConvShape &out) {
  auto extent = [](int64_t in, int64_t pad, int64_t kernel, int64_t stride) {
    return (in + 2 * pad - kernel) / stride + 1;
  };
  ConvShape s;
  s.batch = c.n;
  s.c = c.c;
  s.k = c.k;
  s.in = {c.h, c.w};
  s.kernel = {c.r, c.s};
  s.strides = {c.strideH, c.strideW};
  s.pads = {c.padH, c.padW, c.padH, c.padW};
  s.dilations = {1, 1};
  s.out = {extent(c.h, c.padH, c.r, c.strideH),
           extent(c.w, c.padW, c.s, c.strideW)};
  if (s.out[0] <= 0 || s.out[1] <= 0 || c.h + 2 * c.padH < c.r ||
      c.w + 2 * c.padW < c.s)
    return false;
  out = std::move(s);
  return true;
}

TaskWork convKernelWork(const DeviceSpec &spec, const ConvShape &s,
                        ConvDirection dir, int algo) {
  TaskWork w = convWorkAt(spec, s, dir, algo);
  ConvShape none = s;
  none.batch = 0;
  TaskWork fixed = convWorkAt(spec, none, dir, algo);
  w.fixedFlops = std::min(fixed.flops, w.flops);
  w.fixedBytes = std::min(fixed.bytes, w.bytes);
  w.parallelItems = convParallelItems(s, dir);
  w.batchReduction = dir == ConvDirection::BackwardFilter;
  return w;
}

TaskWork gemmKernelWork(const DeviceSpec &spec, const GemmKernel &g) {
  TaskWork w;
  double m = d(g.m), n = d(g.n), k = d(g.k);
  w.flops = 2.0 * m * n * k;
  w.bytes = 4.0 * (m * k + k * n + m * n);
  w.parallelItems = m * n;
  w.reduction = k;
  w.launches = 1;
  w.efficiency = spec.classEfficiency(CostClass::Gemm);
  return w;
}

FastestConv fastestConvSeconds(const DeviceSpec &spec, const ConvShape &s,
                               ConvDirection dir) {
  FastestConv best;
  bool found = false;
  for (int id : applicableConvAlgos(s, dir)) {
    double t = workSeconds(spec, convKernelWork(spec, s, dir, id));
    if (!found || t < best.seconds) {
      best = {id, t};
      found = true;
    }
  }
  return best;
}

} // namespace memfit
