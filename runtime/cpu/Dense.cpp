//===- Dense.cpp - Reference gemm, softmax, losses and SGD ---------------===//
//
// GEMM is OpenBLAS's sgemm (cuBLAS's counterpart). Other reductions over
// the batch run in double; updates and
// element-wise results are float. Losses are means over the whole batch, so
// the sub-batches of one batch add up to the full batch's loss and gradient.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"
#include "runtime/kernels/Softmax.h"

#include <cblas.h>

#include <cassert>
#include <cmath>
#include <vector>

namespace memfit::rt {
using cpu::clearUnlessAccumulating;
using cpu::put;

// y[n, m] = alpha * x[n, k] * op(W) + beta * bias: W is [m, k] when transB.
void gemmForward(const GemmParams &p, int64_t n, const float *x, const float *w,
                 const float *bias, float *y) {
  // y may hold the emulation's NaN poison: cleared, then added to.
  std::fill(y, y + n * p.m, 0.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, p.transB ? CblasTrans : CblasNoTrans,
              n, p.m, p.k, p.alpha, x, p.k, w, p.transB ? p.k : p.m, 1.0f, y,
              p.m);
  if (bias)
    for (int64_t s = 0; s < n; ++s)
      for (int64_t j = 0; j < p.m; ++j)
        y[s * p.m + j] += p.beta * bias[j];
}

void gemmBackwardData(const GemmParams &p, int64_t n, const float *w,
                      const float *dy, float *dx, bool accumulate) {
  // dx[n, k] (+)= alpha * dy[n, m] * op(W)^T
  clearUnlessAccumulating(dx, n * p.k, accumulate);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, p.transB ? CblasNoTrans : CblasTrans,
              n, p.k, p.m, p.alpha, dy, p.m, w, p.transB ? p.k : p.m, 1.0f, dx,
              p.k);
}

void gemmBackwardWeight(const GemmParams &p, int64_t n, const float *x,
                        const float *dy, float *dw, float *dbias,
                        bool accumulate) {
  // dW[m, k] = alpha * dy^T x (transB), or dW[k, m] = alpha * x^T dy.
  clearUnlessAccumulating(dw, p.k * p.m, accumulate);
  if (p.transB)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.m, p.k, n, p.alpha,
                dy, p.m, x, p.k, 1.0f, dw, p.k);
  else
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.k, p.m, n, p.alpha,
                x, p.k, dy, p.m, 1.0f, dw, p.m);
  if (dbias)
    for (int64_t j = 0; j < p.m; ++j)
      put(dbias[j], float(double(p.beta) * kernels::columnSum(dy, n, p.m, j)),
          accumulate);
}

namespace {
/// max and log(sum(exp(x - max))) of one row, for a stable softmax.
void rowLogSumExp(int64_t features, const float *xs, double &max,
                  double &logSum) {
  max = xs[0];
  for (int64_t j = 1; j < features; ++j)
    max = std::max(max, double(xs[j]));
  double sum = 0;
  for (int64_t j = 0; j < features; ++j)
    sum += kernels::expTerm(xs[j], max);
  logSum = std::log(sum);
}
} // namespace

void softmaxForward(int64_t n, int64_t features, bool log, const float *x,
                    float *y) {
  for (int64_t s = 0; s < n; ++s) {
    const float *xs = x + s * features;
    double max, logSum;
    rowLogSumExp(features, xs, max, logSum);
    for (int64_t j = 0; j < features; ++j)
      y[s * features + j] = kernels::softmaxAt(xs[j], max, logSum, log);
  }
}

void softmaxBackward(int64_t n, int64_t features, bool log, const float *y,
                     const float *dy, float *dx, bool accumulate) {
  for (int64_t s = 0; s < n; ++s) {
    const float *ys = y + s * features, *dys = dy + s * features;
    double sum = 0;
    for (int64_t j = 0; j < features; ++j)
      sum += kernels::softmaxGradTerm(ys[j], dys[j], log);
    for (int64_t j = 0; j < features; ++j)
      put(dx[s * features + j], kernels::softmaxGrad(ys[j], dys[j], sum, log),
          accumulate);
  }
}

void softmaxCrossEntropy(const LossShape &sh, int64_t n, double count,
                         const float *logits, const int32_t *labels,
                         int32_t ignore, float *loss, float *dlogits) {
  const int64_t positions = sh.outer * sh.inner;
  assert(validateLabels(n * positions, sh.classes, labels, ignore));
  std::vector<float> row(sh.classes);
  double total = 0;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t o = 0; o < sh.outer; ++o)
      for (int64_t r = 0; r < sh.inner; ++r) {
        // The classes of one position, strided by `inner`.
        int64_t base = (s * sh.outer + o) * sh.classes * sh.inner + r;
        for (int64_t j = 0; j < sh.classes; ++j)
          row[j] = logits[base + j * sh.inner];
        int32_t label = labels[(s * sh.outer + o) * sh.inner + r];
        if (!kernels::countsLabel(label, ignore)) {
          for (int64_t j = 0; j < sh.classes; ++j)
            dlogits[base + j * sh.inner] = 0.0f;
          continue;
        }
        double max, logSum;
        rowLogSumExp(sh.classes, row.data(), max, logSum);
        total += kernels::crossEntropyTerm(max, logSum, row[label]);
        for (int64_t j = 0; j < sh.classes; ++j)
          dlogits[base + j * sh.inner] =
              kernels::crossEntropyGrad(row[j], max, logSum, j == label, count);
      }
  if (count > 0)
    *loss += float(total / count);
}

void crossEntropySums(const LossShape &sh, int64_t n, const float *logits,
                      const int32_t *labels, int32_t ignore, double &loss,
                      double &correct, double &counted) {
  std::vector<float> row(sh.classes);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t o = 0; o < sh.outer; ++o)
      for (int64_t r = 0; r < sh.inner; ++r) {
        int64_t base = (s * sh.outer + o) * sh.classes * sh.inner + r;
        int64_t best = 0;
        for (int64_t j = 0; j < sh.classes; ++j) {
          row[j] = logits[base + j * sh.inner];
          if (row[j] > row[best])
            best = j;
        }
        int32_t label = labels[(s * sh.outer + o) * sh.inner + r];
        if (!kernels::countsLabel(label, ignore))
          continue;
        double max, logSum;
        rowLogSumExp(sh.classes, row.data(), max, logSum);
        loss += kernels::crossEntropyTerm(max, logSum, row[label]);
        correct += best == label ? 1.0 : 0.0;
        counted += 1.0;
      }
}

double sumSquaredError(int64_t elements, const float *y, const float *target) {
  double total = 0;
  for (int64_t e = 0; e < elements; ++e) {
    double d = double(y[e]) - target[e];
    total += d * d;
  }
  return total;
}

bool validateLabels(int64_t n, int64_t classes, const int32_t *labels,
                    int32_t ignore) {
  for (int64_t s = 0; s < n; ++s)
    if (kernels::countsLabel(labels[s], ignore) &&
        (labels[s] < 0 || labels[s] >= classes))
      return false;
  return true;
}

void meanSquaredError(int64_t n, int64_t features, int64_t batch,
                      const float *y, const float *target, float *loss,
                      float *dy) {
  const double count = double(batch) * double(features);
  double total = 0;
  for (int64_t e = 0; e < n * features; ++e)
    total += kernels::squaredErrorAt(y[e], target[e], count, dy[e]);
  *loss += float(total / count);
}

void sgdUpdate(int64_t count, float lr, float momentum, float weightDecay,
               bool first, float *w, const float *dw, float *buf) {
  assert((buf || momentum == 0.0f) && "momentum needs a buffer");
  for (int64_t i = 0; i < count; ++i)
    kernels::sgdAt(i, lr, momentum, weightDecay, first, w, dw, buf);
}

void adamUpdate(const AdamParams &p, int64_t count, float *w, const float *dw,
                float *m, float *v) {
  for (int64_t i = 0; i < count; ++i)
    kernels::adamAt(p, i, w, dw, m, v);
}

void batchMatMulForward(const BatchMatMulParams &p, int64_t n, const float *a,
                        const float *b, float *y) {
  const int64_t aStep = p.aBatch == 1 ? 0 : p.m * p.k;
  const int64_t bStep = p.bBatch == 1 ? 0 : p.k * p.cols;
  const int64_t aSample = p.aShared ? 0 : p.aBatch * p.m * p.k;
  const int64_t bSample = p.bShared ? 0 : p.bBatch * p.k * p.cols;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < p.batch; ++i) {
      const float *as = a + s * aSample + i * aStep;
      const float *bs = b + s * bSample + i * bStep;
      float *ys = y + (s * p.batch + i) * p.m * p.cols;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p.m, p.cols, p.k,
                  1.0f, as, p.k, bs, p.cols, 0.0f, ys, p.cols);
    }
}

void batchMatMulBackward(const BatchMatMulParams &p, int64_t n, const float *a,
                         const float *b, const float *dy, float *da, float *db,
                         bool accumulateA, bool accumulateB) {
  const int64_t aStep = p.aBatch == 1 ? 0 : p.m * p.k;
  const int64_t bStep = p.bBatch == 1 ? 0 : p.k * p.cols;
  const int64_t aSample = p.aShared ? 0 : p.aBatch * p.m * p.k;
  const int64_t bSample = p.bShared ? 0 : p.bBatch * p.k * p.cols;
  // da before db: when both operands are one value, db adds to what da
  // wrote. A shared operand's gradient sums over the products and the
  // samples (beta 1).
  if (da)
    clearUnlessAccumulating(da, (p.aShared ? 1 : n) * p.aBatch * p.m * p.k,
                            accumulateA);
  if (db)
    clearUnlessAccumulating(db, (p.bShared ? 1 : n) * p.bBatch * p.k * p.cols,
                            accumulateB || (da && a == b));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < p.batch; ++i) {
      int64_t aAt = s * aSample + i * aStep;
      int64_t bAt = s * bSample + i * bStep;
      const float *dys = dy + (s * p.batch + i) * p.m * p.cols;
      if (da) // da[m, k] += dy[m, cols] * b^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p.m, p.k, p.cols,
                    1.0f, dys, p.cols, b + bAt, p.cols, 1.0f, da + aAt, p.k);
      if (db) // db[k, cols] += a^T * dy
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.k, p.cols, p.m,
                    1.0f, a + aAt, p.k, dys, p.cols, 1.0f, db + bAt, p.cols);
    }
}

namespace {
int64_t idAt(const EmbeddingParams &p, const int32_t *ids,
             const float *fixedIds, int64_t r) {
  return ids        ? ids[r]
         : fixedIds ? static_cast<int64_t>(fixedIds[r % p.rows])
                    : 0;
}
} // namespace

void embeddingForward(const EmbeddingParams &p, int64_t n, const int32_t *ids,
                      const float *fixedIds, const float *table, float *y) {
  for (int64_t r = 0; r < n * p.rows; ++r) {
    int64_t id = idAt(p, ids, fixedIds, r);
    assert(id >= 0 && id < p.vocab);
    std::copy(table + id * p.d, table + (id + 1) * p.d, y + r * p.d);
  }
}

void embeddingBackward(const EmbeddingParams &p, int64_t n, const int32_t *ids,
                       const float *fixedIds, const float *dy, float *dtable,
                       bool accumulate) {
  clearUnlessAccumulating(dtable, p.vocab * p.d, accumulate);
  for (int64_t r = 0; r < n * p.rows; ++r) {
    int64_t id = idAt(p, ids, fixedIds, r);
    if (id == p.frozenRow)
      continue;
    for (int64_t j = 0; j < p.d; ++j)
      dtable[id * p.d + j] += dy[r * p.d + j];
  }
}

bool validateIds(int64_t count, int64_t vocab, const int32_t *ids) {
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return false;
  return true;
}

} // namespace memfit::rt
