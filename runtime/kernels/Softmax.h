//===- Softmax.h - Softmax and loss kernels of both backends ----*- C++ -*-===//
//
// The per-element arithmetic of softmax, log-softmax, softmax cross-entropy
// and the mean squared error, in double, compiled into the CPU emulation and
// the CUDA backend alike. The row reductions they rest on (the row's max,
// sum of exponentials, sum of dy * y) are the part each backend schedules
// its own way: in order on the CPU, a block or warp reduction on the GPU,
// both in double (the max is exact either way).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_SOFTMAX_H
#define MEMFIT_RUNTIME_KERNELS_SOFTMAX_H

#include "runtime/kernels/Elementwise.h"

namespace memfit::rt::kernels {

/// One term of a row's sum of exponentials, shifted by the row's max.
MEMFIT_HD double expTerm(float x, double max) { return ::exp(double(x) - max); }

/// softmax(x) or log-softmax(x) from the row's max and log-sum-exp.
MEMFIT_HD float softmaxAt(float x, double max, double logSum, bool log) {
  double l = double(x) - max - logSum;
  return float(log ? l : ::exp(l));
}

/// One term of the row sum the backward needs: dy * y (softmax) or dy
/// (log-softmax).
MEMFIT_HD double softmaxGradTerm(float y, float dy, bool log) {
  return log ? double(dy) : double(dy) * y;
}

/// softmax:     dx = y * (dy - sum(dy * y))
/// log-softmax: dx = dy - exp(y) * sum(dy)
MEMFIT_HD float softmaxGrad(float y, float dy, double sum, bool log) {
  return float(log ? dy - ::exp(double(y)) * sum : y * (dy - sum));
}

/// A sample's cross-entropy: log-sum-exp of its logits minus its label's.
MEMFIT_HD double crossEntropyTerm(double max, double logSum, float labelLogit) {
  return max + logSum - labelLogit;
}

/// dlogits = (softmax - onehot) / count: the mean over the batch's
/// `count` positions that count (countsLabel).
MEMFIT_HD float crossEntropyGrad(float x, double max, double logSum,
                                 bool isLabel, double count) {
  double prob = ::exp(double(x) - max - logSum);
  return float((prob - (isLabel ? 1.0 : 0.0)) / count);
}

/// Whether a position's label counts in the cross-entropy: torch's
/// `ignore_index` (ProgramInfo::ignoreIndex, -100 by default) marks those
/// that do not (padding, prompt tokens); they add no loss and no gradient,
/// and the mean runs over the others.
MEMFIT_HD bool countsLabel(int32_t label, int32_t ignore) {
  return label != ignore;
}

/// The positions among labels[0, n) that count.
inline int64_t countedLabels(int64_t n, const int32_t *labels, int32_t ignore) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i)
    c += countsLabel(labels[i], ignore) ? 1 : 0;
  return c;
}

/// (y - target)^2, and its gradient 2 (y - target) / count through `grad`.
MEMFIT_HD double squaredErrorAt(float y, float target, double count,
                                float &grad) {
  double diff = double(y) - target;
  grad = float(2.0 * diff / count);
  return diff * diff;
}

} // namespace memfit::rt::kernels

#endif
