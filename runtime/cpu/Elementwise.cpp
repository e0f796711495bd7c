//===- Elementwise.cpp - CPU activations, binary ops, concat, pad ---------===//
//
// Loops over the element kernels of runtime/kernels/Elementwise.h, the
// source the CUDA backend runs too. Broadcast gradients of a binary op's b
// are summed in double.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Elementwise.h"
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace memfit::rt {
using cpu::put;

void activationForward(const ActParams &p, int64_t count, const float *x,
                       float *y) {
  for (int64_t i = 0; i < count; ++i)
    y[i] = kernels::activation(p, x[i]);
}

void activationBackward(const ActParams &p, int64_t count, const float *src,
                        const float *dy, float *dx, bool accumulate) {
  for (int64_t i = 0; i < count; ++i)
    put(dx[i], kernels::activationGrad(p, src[i], dy[i]), accumulate);
}

void binaryForward(const BinaryParams &p, int64_t n, const float *a,
                   const float *b, float *y) {
  assert(p.bBatched || (p.bSize > 0 && p.inner > 0));
  for (int64_t at = 0; at < n * p.perSample; ++at)
    y[at] = kernels::binary(p.kind, a[at], b[kernels::binaryBIndex(p, at)]);
}

void binaryBackward(const BinaryParams &p, int64_t n, const float *a,
                    const float *b, const float *dy, float *da, float *db,
                    bool accumulateA, bool accumulateB) {
  assert(p.bSize > 0 && p.inner > 0);
  const int64_t count = n * p.perSample;
  bool reads = kernels::binaryGradReadsOperands(p.kind);
  // An operand the gradient does not need may be absent (null: Mul's da
  // needs only b); reading it anyway is undefined even when the value goes
  // unused (UBSan caught it), so each is read only where it exists.
  auto aAt = [&](int64_t at) { return a ? a[at] : 0.0f; };
  auto bAt = [&](int64_t at) {
    return b ? b[kernels::binaryBIndex(p, at)] : 0.0f;
  };
  // da before db: when both operands are one value, db adds to what da
  // wrote.
  if (da)
    for (int64_t at = 0; at < count; ++at)
      put(da[at],
          reads ? kernels::binaryGradA(p.kind, dy[at], aAt(at), bAt(at))
                : kernels::binaryGradA(p.kind, dy[at], 0, 0),
          accumulateA);
  if (!db)
    return;
  auto gradB = [&](int64_t at) {
    return reads ? kernels::binaryGradB(p.kind, dy[at], aAt(at), bAt(at))
                 : kernels::binaryGradB(p.kind, dy[at], 0, 0);
  };
  if (p.bBatched && p.bSize == p.perSample) {
    for (int64_t at = 0; at < count; ++at)
      put(db[at], gradB(at), accumulateB);
    return;
  }
  // A broadcast b's gradient: summed in double over its positions.
  std::vector<double> sum(p.bBatched ? n * p.bSize : p.bSize, 0.0);
  for (int64_t at = 0; at < count; ++at)
    sum[kernels::binaryBIndex(p, at)] += gradB(at);
  for (size_t j = 0; j < sum.size(); ++j)
    put(db[j], float(sum[j]), accumulateB);
}

void concatForward(int64_t n, int64_t numInputs, const int64_t *parts,
                   const float *const *inputs, float *y) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < numInputs; ++k) {
      const float *src = inputs[k] + s * parts[k];
      std::copy(src, src + parts[k], y);
      y += parts[k];
    }
}

void concatBackward(int64_t n, int64_t numInputs, const int64_t *parts,
                    const float *dy, float *const *dInputs,
                    const bool *accumulate) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < numInputs; ++k) {
      if (float *dst = dInputs[k])
        for (int64_t i = 0; i < parts[k]; ++i)
          put(dst[s * parts[k] + i], dy[i], accumulate[k]);
      dy += parts[k];
    }
}

void padForward(const PadParams &p, int64_t n, const float *x, float *y) {
  for (int64_t t = 0; t < n * p.c * p.hout * p.wout; ++t)
    y[t] = kernels::padAt(p, x, t);
}

void padBackward(const PadParams &p, int64_t n, const float *dy, float *dx,
                 bool accumulate) {
  for (int64_t t = 0; t < n * p.c * p.hin * p.win; ++t)
    put(dx[t], kernels::padGradAt(p, dy, t), accumulate);
}

void accumulate(int64_t count, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i)
    y[i] += x[i];
}

} // namespace memfit::rt

namespace memfit::rt {

namespace {
int64_t elements(const int64_t *dims, int rank, int64_t n) {
  int64_t count = n;
  for (int i = 0; i < rank; ++i)
    count *= dims[i];
  return count;
}
} // namespace

void transposeForward(const TransposeParams &p, int64_t n, const float *x,
                      float *y) {
  for (int64_t t = 0; t < elements(p.dims, p.rank, n); ++t)
    y[t] = x[kernels::transposeSource(p, n, t)];
}

void transposeBackward(const TransposeParams &p, int64_t n, const float *dy,
                       float *dx, bool accumulate) {
  for (int64_t t = 0; t < elements(p.dims, p.rank, n); ++t)
    put(dx[t], dy[kernels::transposeTarget(p, n, t)], accumulate);
}

void sliceForward(const SliceParams &p, int64_t n, const float *x, float *y) {
  for (int64_t t = 0; t < elements(p.ydims, p.rank, n); ++t)
    y[t] = x[kernels::sliceSource(p, n, t)];
}

void sliceBackward(const SliceParams &p, int64_t n, const float *dy, float *dx,
                   bool accumulate) {
  for (int64_t t = 0; t < elements(p.xdims, p.rank, n); ++t)
    put(dx[t], kernels::sliceGradAt(p, n, dy, t), accumulate);
}

void expandForward(const ExpandParams &p, int64_t n, const float *x, float *y) {
  for (int64_t t = 0; t < elements(p.ydims, p.rank, n); ++t)
    y[t] = x[kernels::expandSource(p, n, t)];
}

void expandBackward(const ExpandParams &p, int64_t n, const float *dy,
                    float *dx, bool accumulate) {
  for (int64_t t = 0; t < elements(p.xdims, p.rank, n); ++t)
    put(dx[t], kernels::expandGradAt(p, n, dy, t), accumulate);
}

void whereForward(const WhereParams &p, int64_t n, const float *mask,
                  const float *x, float *y) {
  for (int64_t at = 0; at < n * p.perSample; ++at)
    y[at] = kernels::whereFilled(p, mask, at) ? p.value : x[at];
}

void whereBackward(const WhereParams &p, int64_t n, const float *mask,
                   const float *dy, float *dx, bool accumulate) {
  for (int64_t at = 0; at < n * p.perSample; ++at)
    put(dx[at], kernels::whereFilled(p, mask, at) ? 0.0f : dy[at], accumulate);
}

} // namespace memfit::rt

namespace memfit::rt {

void resizeForward(const ResizeParams &p, int64_t n, const float *x, float *y) {
  for (int64_t t = 0; t < n * p.c * p.hout * p.wout; ++t)
    y[t] = kernels::resizeAt(p, x, t);
}

/// Each output's gradient goes to the input positions it read, with the
/// weights it read them with, in output order.
void resizeBackward(const ResizeParams &p, int64_t n, const float *dy,
                    float *dx, bool accumulate) {
  cpu::clearUnlessAccumulating(dx, n * p.c * p.hin * p.win, accumulate);
  for (int64_t t = 0; t < n * p.c * p.hout * p.wout; ++t) {
    int64_t at[4];
    float w[4];
    kernels::resizeGradTaps(p, t, at, w);
    for (int k = 0; k < 4; ++k)
      dx[at[k]] += dy[t] * w[k];
  }
}

} // namespace memfit::rt
