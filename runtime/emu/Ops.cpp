//===- Ops.cpp - The emulation's operations -------------------------------===//
//
// Every operation of the compute stream runs the CPU reference kernels
// (runtime/cpu) at issue, on the sub-batch's samples; workspaces are
// poisoned after use, and in TF32 programs the inputs of convolutions and
// matrix products are rounded to TF32 first (Precision.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/emu/EmuImpl.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace memfit::rt {

// --- operations: the reference kernels, run at issue ---

void Exec::convForward(const ConvParams &p, int32_t, const float *x,
                       const float *w, const float *b, float *y, int64_t wsOff,
                       int64_t wsBytes) {
  x = impl->tensorCoreInput(0, x, n * p.cin * p.hin * p.win);
  w = impl->tensorCoreInput(1, w, convWeightCount(p));
  if (b && stores16Bit(prog.precision)) {
    // A GPU stores the 16-bit convolution, then adds the bias to it (cuDNN
    // wants one data type throughout, and the bias is an fp32 master): two
    // roundings, as there.
    const int64_t spatial = p.hout * p.wout;
    rt::convForward(p, n, x, w, nullptr, y);
    roundTo16Bit(prog.precision, y, n * p.cout * spatial);
    for (int64_t i = 0; i < n * p.cout * spatial; ++i)
      y[i] = y[i] + b[i / spatial % p.cout];
  } else {
    rt::convForward(p, n, x, w, b, y);
  }
  if (wsBytes > 0)
    poison(*impl, wsOff, wsBytes);
}
void Exec::convBackwardData(const ConvParams &p, int32_t, const float *w,
                            const float *dy, float *dx, bool acc, int64_t wsOff,
                            int64_t wsBytes) {
  w = impl->tensorCoreInput(1, w, convWeightCount(p));
  dy = impl->tensorCoreInput(2, dy, n * p.cout * p.hout * p.wout);
  rt::convBackwardData(p, n, w, dy, dx, acc);
  if (wsBytes > 0)
    poison(*impl, wsOff, wsBytes);
}
void Exec::convBackwardFilter(const ConvParams &p, int32_t, const float *x,
                              const float *dy, float *dw, float *db, bool acc,
                              int64_t wsOff, int64_t wsBytes) {
  x = impl->tensorCoreInput(0, x, n * p.cin * p.hin * p.win);
  dy = impl->tensorCoreInput(2, dy, n * p.cout * p.hout * p.wout);
  if (dw && stores16Bit(prog.precision)) {
    // The 16-bit weight gradient, staged where the plan put it, rounded,
    // then added to the fp32 master gradient (rt::convGradStagingBytes).
    const int64_t count = convWeightCount(p);
    if (wsBytes < convGradStagingBytes(count))
      fatal("the plan left no workspace to stage the 16-bit weight gradient");
    float *staged = arena(wsOff);
    // The staged gradient is written whole; the bias gradient still adds.
    std::vector<float> dbBefore(db && acc ? p.cout : 0);
    if (!dbBefore.empty())
      std::memcpy(dbBefore.data(), db, dbBefore.size() * sizeof(float));
    rt::convBackwardFilter(p, n, x, dy, staged, db, false);
    for (size_t i = 0; i < dbBefore.size(); ++i)
      db[i] = dbBefore[i] + db[i];
    roundTo16Bit(prog.precision, staged, count);
    for (int64_t i = 0; i < count; ++i)
      dw[i] = acc ? dw[i] + staged[i] : staged[i];
  } else {
    rt::convBackwardFilter(p, n, x, dy, dw, db, acc);
  }
  if (wsBytes > 0)
    poison(*impl, wsOff, wsBytes);
}
void Exec::convTransposeBackwardData(const ConvParams &p, const float *dy,
                                     const float *w, float *dx, bool acc) {
  if (!dx)
    return;
  dy = impl->tensorCoreInput(0, dy, n * p.cin * p.hin * p.win);
  w = impl->tensorCoreInput(1, w, convWeightCount(p));
  if (!acc) {
    rt::convForward(p, n, dy, w, nullptr, dx);
    return;
  }
  std::vector<float> t(static_cast<size_t>(n * p.cout * p.hout * p.wout));
  rt::convForward(p, n, dy, w, nullptr, t.data());
  for (size_t i = 0; i < t.size(); ++i)
    dx[i] += t[i];
}
void Exec::poolForward(const PoolParams &p, const float *x, float *y) {
  rt::poolForward(p, n, x, y);
}
void Exec::poolBackward(const PoolParams &p, const float *x, const float *y,
                        const float *dy, float *dx, bool acc) {
  rt::poolBackward(p, n, x, y, dy, dx, acc);
}
void Exec::gapForward(int64_t c, int64_t spatial, const float *x, float *y) {
  rt::globalAvgPoolForward(n, c, spatial, x, y);
}
void Exec::gapBackward(int64_t c, int64_t spatial, const float *dy, float *dx,
                       bool acc) {
  rt::globalAvgPoolBackward(n, c, spatial, dy, dx, acc);
}
void Exec::actForward(const ActParams &p, int64_t perSample, const float *x,
                      float *y) {
  rt::activationForward(p, perSample * n, x, y);
}
void Exec::actBackward(const ActParams &p, int64_t perSample, const float *src,
                       const float *dy, float *dx, bool acc) {
  rt::activationBackward(p, perSample * n, src, dy, dx, acc);
}
void Exec::bnForward(const BatchNormParams &p, const float *x,
                     const float *scale, const float *bias, float *runMean,
                     float *runVar, float *y, float *saved,
                     bool updateRunning) {
  rt::batchNormForward(p, n * p.rows, x, scale, bias, runMean, runVar, y, saved,
                       saved + p.c, updateRunning);
}
void Exec::bnInference(const BatchNormParams &p, const float *x,
                       const float *scale, const float *bias,
                       const float *runMean, const float *runVar, float *y) {
  rt::batchNormInference(p, n * p.rows, x, scale, bias, runMean, runVar, y);
}
void Exec::bnApply(const BatchNormParams &p, const float *x, const float *scale,
                   const float *bias, const float *saved, float *y) {
  rt::batchNormApply(p, n * p.rows, x, scale, bias, saved, saved + p.c, y);
}
void Exec::bnBackwardData(const BatchNormParams &p, const float *x,
                          const float *scale, const float *saved,
                          const float *dy, float *dx, bool acc,
                          const float *bias) {
  rt::batchNormBackwardData(p, n * p.rows, x, scale, saved, saved + p.c, dy, dx,
                            acc, bias);
}
void Exec::bnBackwardWeight(const BatchNormParams &p, const float *x,
                            const float *saved, const float *dy, float *dscale,
                            float *dbias, bool acc, const float *scale,
                            const float *bias) {
  rt::batchNormBackwardWeight(p, n * p.rows, x, saved, saved + p.c, dy, dscale,
                              dbias, acc, scale, bias);
}
void Exec::bnStatistics(const BatchNormParams &p, const float *x, float *stats,
                        bool acc) {
  rt::batchNormChunkStatistics(p, n * p.rows, x, stats, acc);
}
void Exec::bnFinalize(const BatchNormParams &p, float *stats, float *runMean,
                      float *runVar) {
  rt::batchNormFinalize(p, stats, runMean, runVar);
}
void Exec::bnBackwardDataBatch(const BatchNormParams &p, const float *x,
                               const float *scale, const float *saved,
                               const float *dscale, const float *dbias,
                               const float *dy, float *dx, bool acc,
                               const float *bias) {
  if (!dx)
    return;
  rt::batchNormBackwardDataBatch(
      p, n * p.rows, double(prog.batch * p.rows * p.spatial), x, scale, saved,
      dscale, dbias, dy, dx, acc, bias);
}
void Exec::lrnForward(const LRNParams &p, const float *x, float *y) {
  rt::lrnForward(p, n, x, y);
}
void Exec::lrnBackward(const LRNParams &p, const float *x, const float *y,
                       const float *dy, float *dx, bool acc) {
  rt::lrnBackward(p, n, x, y, dy, dx, acc);
}
void Exec::dropoutForward(const DropoutParams &p, uint64_t taskKey,
                          const float *x, float *y) {
  rt::dropoutForward(p, n, dropoutKey(seed, iteration, taskKey), firstSample, x,
                     y);
}
void Exec::dropoutBackward(const DropoutParams &p, uint64_t taskKey,
                           const float *dy, float *dx, bool acc) {
  rt::dropoutBackward(p, n, dropoutKey(seed, iteration, taskKey), firstSample,
                      dy, dx, acc);
}
void Exec::gemmForward(const GemmParams &p, const float *x, const float *w,
                       const float *b, float *y) {
  x = impl->tensorCoreInput(0, x, n * p.rows * p.k);
  w = impl->tensorCoreInput(1, w, p.k * p.m);
  if (b && stores16Bit(prog.precision)) {
    // The product is stored in 16 bits by cuBLAS, the bias added after
    // (as convForward says).
    const int64_t rows = n * p.rows;
    rt::gemmForward(p, rows, x, w, nullptr, y);
    roundTo16Bit(prog.precision, y, rows * p.m);
    for (int64_t s = 0; s < rows; ++s)
      for (int64_t j = 0; j < p.m; ++j)
        y[s * p.m + j] += p.beta * b[j];
  } else {
    rt::gemmForward(p, n * p.rows, x, w, b, y);
  }
}
void Exec::gemmBackwardData(const GemmParams &p, const float *w,
                            const float *dy, float *dx, bool acc) {
  w = impl->tensorCoreInput(1, w, p.k * p.m);
  dy = impl->tensorCoreInput(2, dy, n * p.rows * p.m);
  rt::gemmBackwardData(p, n * p.rows, w, dy, dx, acc);
}
void Exec::gemmBackwardWeight(const GemmParams &p, const float *x,
                              const float *dy, float *dw, float *db, bool acc) {
  x = impl->tensorCoreInput(0, x, n * p.rows * p.k);
  dy = impl->tensorCoreInput(2, dy, n * p.rows * p.m);
  rt::gemmBackwardWeight(p, n * p.rows, x, dy, dw, db, acc);
}
void Exec::binaryForward(const BinaryParams &p, const float *a, const float *b,
                         float *y) {
  rt::binaryForward(p, n, a, b, y);
}
void Exec::binaryBackward(const BinaryParams &p, const float *a, const float *b,
                          const float *dy, float *da, float *db, bool accA,
                          bool accB) {
  rt::binaryBackward(p, n, a, b, dy, da, db, accA, accB);
}
void Exec::concatForward(int64_t numInputs, const int64_t *parts,
                         const float *const *inputs, float *y, int64_t rows) {
  rt::concatForward(n * rows, numInputs, parts, inputs, y);
}
void Exec::concatBackward(int64_t numInputs, const int64_t *parts,
                          const float *dy, float *const *dInputs,
                          const bool *acc, int64_t rows) {
  rt::concatBackward(n * rows, numInputs, parts, dy, dInputs, acc);
}
void Exec::padForward(const PadParams &p, const float *x, float *y) {
  rt::padForward(p, n, x, y);
}
void Exec::padBackward(const PadParams &p, const float *dy, float *dx,
                       bool acc) {
  rt::padBackward(p, n, dy, dx, acc);
}
void Exec::softmaxForward(int64_t features, bool log, const float *x, float *y,
                          int64_t rows) {
  rt::softmaxForward(n * rows, features, log, x, y);
}
void Exec::softmaxBackward(int64_t features, bool log, const float *y,
                           const float *dy, float *dx, bool acc, int64_t rows) {
  rt::softmaxBackward(n * rows, features, log, y, dy, dx, acc);
}
void Exec::transposeForward(const TransposeParams &p, const float *x,
                            float *y) {
  rt::transposeForward(p, n, x, y);
}
void Exec::transposeBackward(const TransposeParams &p, const float *dy,
                             float *dx, bool acc) {
  rt::transposeBackward(p, n, dy, dx, acc);
}
void Exec::sliceForward(const SliceParams &p, const float *x, float *y) {
  rt::sliceForward(p, n, x, y);
}
void Exec::expandForward(const ExpandParams &p, const float *x, float *y) {
  rt::expandForward(p, n, x, y);
}
void Exec::expandBackward(const ExpandParams &p, const float *dy, float *dx,
                          bool acc) {
  rt::expandBackward(p, n, dy, dx, acc);
}
void Exec::sliceBackward(const SliceParams &p, const float *dy, float *dx,
                         bool acc) {
  rt::sliceBackward(p, n, dy, dx, acc);
}
void Exec::attentionForward(const AttentionParams &p, uint64_t taskKey,
                            const float *q, const float *k, const float *v,
                            const float *mask, float *o, float *lse) {
  rt::attentionForward(p, n, dropoutKey(seed, iteration, taskKey), firstSample,
                       q, k, v, mask, o, lse);
}
void Exec::attentionBackward(const AttentionParams &p, uint64_t taskKey,
                             const float *q, const float *k, const float *v,
                             const float *mask, const float *o,
                             const float *lse, const float *dO, float *dq,
                             float *dk, float *dv, bool accQ, bool accK,
                             bool accV) {
  rt::attentionBackward(p, n, dropoutKey(seed, iteration, taskKey), firstSample,
                        q, k, v, mask, o, lse, dO, dq, dk, dv, accQ, accK,
                        accV);
}
void Exec::batchMatMulForward(const BatchMatMulParams &p, const float *a,
                              const float *b, float *y) {
  a = impl->tensorCoreInput(0, a, n * p.aBatch * p.m * p.k);
  b = impl->tensorCoreInput(1, b, n * p.bBatch * p.k * p.cols);
  rt::batchMatMulForward(p, n, a, b, y);
}
void Exec::batchMatMulBackward(const BatchMatMulParams &p, const float *a,
                               const float *b, const float *dy, float *da,
                               float *db, bool accA, bool accB) {
  // The sum of a shared operand's gradients compares a with b: keep it.
  bool same = a == b;
  a = impl->tensorCoreInput(0, a, n * p.aBatch * p.m * p.k);
  b = same ? a : impl->tensorCoreInput(1, b, n * p.bBatch * p.k * p.cols);
  dy = impl->tensorCoreInput(2, dy, n * p.batch * p.m * p.cols);
  rt::batchMatMulBackward(p, n, a, b, dy, da, db, accA, accB);
}
void Exec::layerNormForward(const LayerNormParams &p, const float *x,
                            const float *scale, const float *bias, float *y) {
  rt::layerNormForward(p, n, x, scale, bias, y);
}
void Exec::layerNormBackwardData(const LayerNormParams &p, const float *x,
                                 const float *scale, const float *dy, float *dx,
                                 bool acc) {
  rt::layerNormBackwardData(p, n, x, scale, dy, dx, acc);
}
void Exec::layerNormBackwardWeight(const LayerNormParams &p, const float *x,
                                   const float *dy, float *dscale, float *dbias,
                                   bool acc) {
  rt::layerNormBackwardWeight(p, n, x, dy, dscale, dbias, acc);
}
void Exec::resizeForward(const ResizeParams &p, const float *x, float *y) {
  rt::resizeForward(p, n, x, y);
}
void Exec::resizeBackward(const ResizeParams &p, const float *dy, float *dx,
                          bool acc) {
  rt::resizeBackward(p, n, dy, dx, acc);
}
void Exec::whereForward(const WhereParams &p, const float *mask, const float *x,
                        float *y) {
  rt::whereForward(p, n, mask, x, y);
}
void Exec::whereBackward(const WhereParams &p, const float *mask,
                         const float *dy, float *dx, bool acc) {
  rt::whereBackward(p, n, mask, dy, dx, acc);
}
void Exec::intProgram(const IntProgramParams &p, const int32_t *ids,
                      int32_t *yInt, float *yFloat) {
  rt::intProgram(p, n, ids, yInt, yFloat);
}
void Exec::embeddingForward(const EmbeddingParams &p, const int32_t *ids,
                            const float *fixedIds, const float *table,
                            float *y) {
  if (ids && !rt::validateIds(n * p.rows, p.vocab, ids))
    fatal("a token id is outside [0, " + std::to_string(p.vocab) + ")");
  rt::embeddingForward(p, n, ids, fixedIds, table, y);
}
void Exec::embeddingBackward(const EmbeddingParams &p, const int32_t *ids,
                             const float *fixedIds, const float *dy,
                             float *dtable, bool acc) {
  rt::embeddingBackward(p, n, ids, fixedIds, dy, dtable, acc);
}
void Exec::copy(int64_t perSample, const float *x, float *y) {
  if (x != y)
    std::memmove(y, x, perSample * n * 4);
}
void Exec::accumulateInto(int64_t perSample, const float *x, float *y) {
  rt::accumulate(perSample * n, x, y);
}
namespace {
/// The `count` labels as int32 class ids, each in [0, classes) or the
/// ignored index; a trainer stops on any other.
const int32_t *checkedLabels(const Exec &x, const void *labels, int64_t count,
                             int64_t classes, int32_t ignore) {
  auto *lab = static_cast<const int32_t *>(labels);
  if (!rt::validateLabels(count, classes, lab, ignore))
    x.fatal("a label is outside [0, " + std::to_string(classes) +
            ") and is not the ignored index " + std::to_string(ignore));
  return lab;
}
} // namespace
void Exec::loss(const float *logits, const void *labels, float *loss,
                float *dlogits) {
  if (firstSample == 0) // the first sub-batch or chunk starts the sum
    *loss = 0;
  if (prog.mseLoss) {
    rt::meanSquaredError(n, prog.labelPerSample, prog.batch, logits,
                         static_cast<const float *>(labels), loss, dlogits);
    scaleLossGradient(dlogits, n * prog.labelPerSample, lossScale);
    return;
  }
  const int32_t *lab = checkedLabels(*this, labels, n * prog.labelPerSample,
                                     prog.classes, prog.ignoreIndex);
  rt::softmaxCrossEntropy({prog.lossOuter, prog.classes, prog.lossInner}, n,
                          lossPositions(), logits, lab, prog.ignoreIndex, loss,
                          dlogits);
  scaleLossGradient(dlogits, n * prog.lossOuter * prog.classes * prog.lossInner,
                    lossScale);
}
void Exec::evalLoss(const float *logits, const void *labels) {
  const int64_t valid = std::clamp<int64_t>(evalValidEnd - firstSample, 0, n);
  EvalSums &s = impl->evalSums;
  if (prog.mseLoss) {
    s.loss += rt::sumSquaredError(valid * prog.labelPerSample, logits,
                                  static_cast<const float *>(labels));
    s.count += double(valid * prog.labelPerSample);
    return;
  }
  const int32_t *lab = checkedLabels(*this, labels, valid * prog.labelPerSample,
                                     prog.classes, prog.ignoreIndex);
  rt::crossEntropySums({prog.lossOuter, prog.classes, prog.lossInner}, valid,
                       logits, lab, prog.ignoreIndex, s.loss, s.correct,
                       s.count);
}
void Exec::headLoss(const GemmParams &p, int64_t chunkRows, const float *x,
                    const float *w, const void *labels, float *scratch,
                    float *loss, float *dx, bool accX, float *dw, bool accW) {
  if (firstSample == 0) // the first sub-batch or chunk starts the sum
    *loss = 0;
  const int64_t rows = n * p.rows;
  const int32_t *lab =
      checkedLabels(*this, labels, rows, p.m, prog.ignoreIndex);
  x = impl->tensorCoreInput(0, x, rows * p.k);
  w = impl->tensorCoreInput(1, w, p.k * p.m);
  for (int64_t r0 = 0; r0 < rows; r0 += chunkRows) {
    const int64_t rr = std::min(chunkRows, rows - r0);
    const float *xc = x + r0 * p.k;
    // The chunk's logits and then their gradient, stored in the
    // activations' type as the unfused head's logits and gradient are.
    rt::gemmForward(p, rr, xc, w, nullptr, scratch);
    roundTo16Bit(prog.precision, scratch, rr * p.m);
    rt::softmaxCrossEntropy({rr, p.m, 1}, 1, lossPositions(), scratch, lab + r0,
                            prog.ignoreIndex, loss, scratch);
    scaleLossGradient(scratch, rr * p.m, lossScale);
    roundTo16Bit(prog.precision, scratch, rr * p.m);
    const float *dl = impl->tensorCoreInput(2, scratch, rr * p.m);
    if (dx)
      rt::gemmBackwardData(p, rr, w, dl, dx + r0 * p.k, accX);
    if (dw)
      rt::gemmBackwardWeight(p, rr, xc, dl, dw, nullptr, accW || r0 > 0);
  }
}
void Exec::evalHeadLoss(const GemmParams &p, int64_t chunkRows, const float *x,
                        const float *w, const void *labels, float *scratch) {
  const int64_t valid = std::clamp<int64_t>(evalValidEnd - firstSample, 0, n);
  const int64_t rows = valid * p.rows;
  const int32_t *lab =
      checkedLabels(*this, labels, rows, p.m, prog.ignoreIndex);
  EvalSums &s = impl->evalSums;
  x = impl->tensorCoreInput(0, x, rows * p.k);
  w = impl->tensorCoreInput(1, w, p.k * p.m);
  for (int64_t r0 = 0; r0 < rows; r0 += chunkRows) {
    const int64_t rr = std::min(chunkRows, rows - r0);
    rt::gemmForward(p, rr, x + r0 * p.k, w, nullptr, scratch);
    roundTo16Bit(prog.precision, scratch, rr * p.m);
    rt::crossEntropySums({rr, p.m, 1}, 1, scratch, lab + r0, prog.ignoreIndex,
                         s.loss, s.correct, s.count);
  }
}
} // namespace memfit::rt
