//===- Pool.cpp - CPU max, average and global average pooling -------------===//
//
// Loops over the pooling kernels of runtime/kernels/Pool.h, the source the
// CUDA backend runs too. Global average pooling's forward sums each plane
// in double, in order.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Pool.h"
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memfit::rt {
using cpu::clearUnlessAccumulating;
using cpu::put;

void poolForward(const PoolParams &p, int64_t n, const float *x, float *y) {
  for (int64_t t = 0; t < n * p.c * p.hout * p.wout; ++t)
    y[t] = kernels::poolAt(p, x, t);
}

void poolBackward(const PoolParams &p, int64_t n, const float *x,
                  const float *y, const float *dy, float *dx, bool accumulate) {
  for (int64_t t = 0; t < n * p.c * p.hin * p.win; ++t)
    dx[t] = kernels::poolGradAt(p, x, dy, t, accumulate ? dx[t] : 0.0f);
}

void globalAvgPoolForward(int64_t n, int64_t c, int64_t spatial, const float *x,
                          float *y) {
  for (int64_t pl = 0; pl < n * c; ++pl) {
    double sum = 0;
    for (int64_t q = 0; q < spatial; ++q)
      sum += x[pl * spatial + q];
    y[pl] = float(sum / double(spatial));
  }
}

void globalAvgPoolBackward(int64_t n, int64_t c, int64_t spatial,
                           const float *dy, float *dx, bool accumulate) {
  for (int64_t t = 0; t < n * c * spatial; ++t)
    put(dx[t], kernels::gapGradAt(spatial, dy, t), accumulate);
}

} // namespace memfit::rt
