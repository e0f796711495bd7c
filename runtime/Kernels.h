//===- Kernels.h - Operation parameters and reference kernels ---*- C++ -*-===//
//
// The operations a generated trainer runs, described by plain parameter
// structs that codegen writes out as constants. The CPU reference kernels
// here define the semantics (PyTorch's training semantics, fp32, NCHW); the
// CUDA backend implements the same operations with cuDNN, cuBLAS and small
// kernels and must agree with them.
//
// Conventions: `n` is the number of samples in this call (a sub-batch, the
// last one possibly smaller); per-sample shapes come from the params.
// Backward kernels with an `accumulate` flag add into their output when it
// is true and overwrite it when false (gradient accumulation at fan-out and
// across sub-batches).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_H
#define MEMFIT_RUNTIME_KERNELS_H

#include <cstdint>

namespace memfit::rt {

struct ConvParams {
  int64_t cin, hin, win;    // input per sample
  int64_t cout, hout, wout; // output per sample
  int64_t kh, kw, sh, sw;
  int64_t padTop, padLeft; // begin pads (end pads follow from the shapes)
  int64_t dh, dw;
  int64_t group;
};
/// Arena bytes a 16-bit program's convolution backward-filter stages its
/// weight gradient in, at the start of the task's planned workspace: the
/// gradient is computed in 16 bits (what cuDNN's backward filter writes for
/// 16-bit inputs, and what torch.autocast's gradient of a 16-bit weight
/// copy is) and then added to the fp32 master gradient. The algorithm's own
/// workspace follows, 256-byte aligned. Both backends use this; the planner
/// has a twin (compiler/cost/ConvAlgo.h) that ConvAlgoTest holds equal.
inline int64_t convGradStagingBytes(int64_t weightCount) {
  return (weightCount * 2 + 255) / 256 * 256;
}
void convForward(const ConvParams &p, int64_t n, const float *x, const float *w,
                 const float *bias /*nullable*/, float *y);
void convBackwardData(const ConvParams &p, int64_t n, const float *w,
                      const float *dy, float *dx, bool accumulate);
void convBackwardFilter(const ConvParams &p, int64_t n, const float *x,
                        const float *dy, float *dw, float *dbias /*nullable*/,
                        bool accumulate);

enum class PoolKind : uint8_t { Max, Average };
struct PoolParams {
  PoolKind kind;
  int64_t c, hin, win, hout, wout;
  int64_t kh, kw, sh, sw, padTop, padLeft;
  // End pads as the model gives them (a ceil-mode output may have windows
  // reaching past them): with countIncludePad a window counts the padding
  // up to these pads but not its overhang beyond them, as PyTorch does.
  int64_t padBottom, padRight;
  bool countIncludePad; // Average: divide by the window incl. padding
};
void poolForward(const PoolParams &p, int64_t n, const float *x, float *y);
/// Max pooling routes dy to the first maximum of each window (x and y
/// locate it); average pooling spreads it.
void poolBackward(const PoolParams &p, int64_t n, const float *x,
                  const float *y, const float *dy, float *dx, bool accumulate);

/// Mean over the spatial positions: [n, c, spatial] -> [n, c].
void globalAvgPoolForward(int64_t n, int64_t c, int64_t spatial, const float *x,
                          float *y);
void globalAvgPoolBackward(int64_t n, int64_t c, int64_t spatial,
                           const float *dy, float *dx, bool accumulate);

/// What an element-wise derivative reads besides dY (the .def files'
/// Reads column).
enum class GradReads : uint8_t { Output, Input, Nothing, Operands };

/// The activation kinds: runtime/kernels/Activations.def.
enum class ActKind : uint8_t {
#define MEMFIT_ACTIVATION(kind, reads) kind,
#include "runtime/kernels/Activations.def"
};
struct ActParams {
  ActKind kind;
  float alpha = 0; // LeakyRelu slope; HardSigmoid alpha; Pow exponent; NanTo
                   // fill; Celu alpha
  float lo = 0, hi = 0; // Clip bounds; Sqrt: lo != 0, a norm's (0 at 0)
  float beta = 0;       // HardSigmoid beta
};
/// What the derivative of `k` reads: y (Output), x (Input) or neither.
constexpr GradReads activationGradReads(ActKind k) {
  switch (k) {
#define MEMFIT_ACTIVATION(kind, reads)                                         \
  case ActKind::kind:                                                          \
    return GradReads::reads;
#include "runtime/kernels/Activations.def"
  }
  return GradReads::Output; // not reached: the switch names every kind
}
/// The enumerator's name, as generated code spells it.
constexpr const char *activationName(ActKind k) {
  switch (k) {
#define MEMFIT_ACTIVATION(kind, reads)                                         \
  case ActKind::kind:                                                          \
    return #kind;
#include "runtime/kernels/Activations.def"
  }
  return "";
}
void activationForward(const ActParams &p, int64_t count, const float *x,
                       float *y);
/// `src` is y or x, as activationGradReads says (a forward whose derivative
/// needs only y may run in place; a kind that reads neither ignores it).
void activationBackward(const ActParams &p, int64_t count, const float *src,
                        const float *dy, float *dx, bool accumulate);

struct BatchNormParams {
  int64_t c, spatial;
  float epsilon;
  float momentum; // ONNX: running = running * momentum + batch * (1 - m)
  /// Rows per sample: a value whose batch shares axis 0 with other rows
  /// ([N * T, C], BatchNorm1d over tokens) normalizes n * rows rows of
  /// [c, spatial] each, every row of every sample counted.
  int64_t rows = 1;
  /// A ReLU fused after it: y = max(normalized, 0), and the backward
  /// kernels mask dy where the normalized value, recomputed from x, is not
  /// positive (kernels::bnMaskedDy): they then take scale and bias.
  bool relu = false;
  /// A Clip fused after it instead (ReLU6): y = clamp(normalized, lo, hi),
  /// dy masked outside (lo, hi), as Clip's backward masks it.
  bool clip = false;
  float lo = 0, hi = 0;
};
/// Training mode: normalizes with the statistics of these n samples, saves
/// mean and 1/sqrt(var + eps) (biased var) for the backward, and when
/// `updateRunning` updates the running mean and the running variance (with
/// the unbiased variance, as PyTorch does).
void batchNormForward(const BatchNormParams &p, int64_t n, const float *x,
                      const float *scale, const float *bias, float *runMean,
                      float *runVar, float *y, float *savedMean,
                      float *savedInvStd, bool updateRunning);
/// y from statistics saved by batchNormForward: what a recomputed forward
/// runs. Bit-identical to the y batchNormForward wrote with those statistics.
/// Evaluation: y normalized with the running statistics (eval mode).
void batchNormInference(const BatchNormParams &p, int64_t n, const float *x,
                        const float *scale, const float *bias,
                        const float *runMean, const float *runVar, float *y);
void batchNormApply(const BatchNormParams &p, int64_t n, const float *x,
                    const float *scale, const float *bias,
                    const float *savedMean, const float *savedInvStd, float *y);
/// `bias` (and the weight task's `scale`) are read only with a fused ReLU
/// (p.relu); null otherwise.
void batchNormBackwardData(const BatchNormParams &p, int64_t n, const float *x,
                           const float *scale, const float *savedMean,
                           const float *savedInvStd, const float *dy, float *dx,
                           bool accumulate, const float *bias = nullptr);
void batchNormBackwardWeight(const BatchNormParams &p, int64_t n,
                             const float *x, const float *savedMean,
                             const float *savedInvStd, const float *dy,
                             float *dscale, float *dbias, bool accumulate,
                             const float *scale = nullptr,
                             const float *bias = nullptr);
// A batch split into chunks (passes/search/Chunk.h): each chunk's statistics
// are combined into the stats block (kernels::bnChunkState), the first chunk
// run starting the combination; Finalize saves the batch's mean and inverse
// deviation there and updates the running statistics once; BP-data of a
// chunk takes the batch's sums of dy * xhat and dy from the weight
// gradients, over `batchCount` values per channel.
void batchNormChunkStatistics(const BatchNormParams &p, int64_t n,
                              const float *x, float *stats, bool accumulate);
void batchNormFinalize(const BatchNormParams &p, float *stats, float *runMean,
                       float *runVar);
void batchNormBackwardDataBatch(const BatchNormParams &p, int64_t n,
                                double batchCount, const float *x,
                                const float *scale, const float *saved,
                                const float *sumDyXhat, const float *sumDy,
                                const float *dy, float *dx, bool accumulate,
                                const float *bias = nullptr);

struct LRNParams {
  int64_t c, spatial;
  int64_t size;
  float alpha, beta, bias; // y = x / (bias + alpha / size * sum x^2)^beta
};
void lrnForward(const LRNParams &p, int64_t n, const float *x, float *y);
void lrnBackward(const LRNParams &p, int64_t n, const float *x, const float *y,
                 const float *dy, float *dx, bool accumulate);

/// Inverted dropout with a counter-based mask: element i of sample s is kept
/// when uniform(key, s, i) >= ratio, where `key` mixes the seed, the
/// iteration and the task, and `firstSample` is the sub-batch's offset in
/// the batch. The same key gives the same mask, so a recomputed forward and
/// the backward see exactly the forward's mask.
/// With `wholeSample` one draw (element 0's) keeps or drops the whole
/// sample: stochastic depth (drop path), as Hugging Face's and timm's
/// drop_path compute it.
struct DropoutParams {
  int64_t perSample;
  float ratio;
  bool wholeSample = false;
};
uint64_t dropoutKey(uint64_t seed, uint64_t iteration, uint64_t task);
float dropoutUniform(uint64_t key, uint64_t sample, uint64_t element);
void dropoutForward(const DropoutParams &p, int64_t n, uint64_t key,
                    int64_t firstSample, const float *x, float *y);
void dropoutBackward(const DropoutParams &p, int64_t n, uint64_t key,
                     int64_t firstSample, const float *dy, float *dx,
                     bool accumulate);

/// y[n, m] = alpha * x[n, k] * op(W) + beta * bias[m]; W is [m, k] when
/// transB (PyTorch Linear) and [k, m] otherwise (MatMul).
struct GemmParams {
  int64_t k, m;
  bool transB;
  float alpha, beta;
  int64_t rows = 1; // rows of x per sample (MatMul on [N, ..., K])
};
void gemmForward(const GemmParams &p, int64_t n, const float *x, const float *w,
                 const float *bias /*nullable*/, float *y);
void gemmBackwardData(const GemmParams &p, int64_t n, const float *w,
                      const float *dy, float *dx, bool accumulate);
void gemmBackwardWeight(const GemmParams &p, int64_t n, const float *x,
                        const float *dy, float *dw, float *dbias /*nullable*/,
                        bool accumulate);

/// y = a (op) b where b has `bSize` values (per sample when batched, else
/// for all samples) broadcast as b[(i / inner) % bSize] over each sample's
/// `perSample` elements (per channel: inner = h*w, bSize = c; the same
/// shape: inner = 1, bSize = perSample).
/// RSub and RDiv take the broadcast operand first: y = b - a, y = b / a.
/// The kinds: runtime/kernels/Binary.def.
enum class BinaryKind : uint8_t {
#define MEMFIT_BINARY(kind, reads) kind,
#include "runtime/kernels/Binary.def"
};
/// What the derivatives of `k` read: both operands, or Nothing.
constexpr GradReads binaryGradReads(BinaryKind k) {
  switch (k) {
#define MEMFIT_BINARY(kind, reads)                                             \
  case BinaryKind::kind:                                                       \
    return GradReads::reads;
#include "runtime/kernels/Binary.def"
  }
  return GradReads::Nothing; // not reached
}
struct BinaryParams {
  BinaryKind kind;
  int64_t perSample;
  bool bBatched;
  int64_t bSize, inner;
};
void binaryForward(const BinaryParams &p, int64_t n, const float *a,
                   const float *b, float *y);
/// Gradients of a and/or b (either pointer may be null). For a broadcast b
/// the gradient is reduced over the broadcast positions and the n samples.
void binaryBackward(const BinaryParams &p, int64_t n, const float *a,
                    const float *b, const float *dy, float *da, float *db,
                    bool accumulateA, bool accumulateB);

/// Concatenation along axis 1 of inputs with `parts[i]` elements per sample
/// each (channels x spatial); backward splits dy (a null dInputs[i] is
/// skipped: that input needs no gradient).
void concatForward(int64_t n, int64_t numInputs, const int64_t *parts,
                   const float *const *inputs, float *y);
void concatBackward(int64_t n, int64_t numInputs, const int64_t *parts,
                    const float *dy, float *const *dInputs,
                    const bool *accumulate);

struct PadParams {
  int64_t c, hin, win, hout, wout;
  int64_t padTop, padLeft;
  float value;
};
void padForward(const PadParams &p, int64_t n, const float *x, float *y);
void padBackward(const PadParams &p, int64_t n, const float *dy, float *dx,
                 bool accumulate);

/// Softmax over the `features` of each of n rows (the last axis).
void softmaxForward(int64_t n, int64_t features, bool log, const float *x,
                    float *y);
void softmaxBackward(int64_t n, int64_t features, bool log, const float *y,
                     const float *dy, float *dx, bool accumulate);

/// Where the classes lie in each sample's logits: [outer, classes, inner]
/// (axis 1 of an image or segmentation output: outer 1, inner h*w; the last
/// axis of a sequence's [T, V]: outer T, inner 1); one label per (outer,
/// inner) position.
struct LossShape {
  int64_t outer, classes, inner;
};
/// Mean softmax cross-entropy over the `count` positions of the whole
/// batch whose label is not `ignore` (kernels::countsLabel): adds this
/// sub-batch's share (its sum / count) to *loss and writes dlogits =
/// (softmax - onehot) / count, zero at ignored positions. With no position
/// counted (count 0) it adds nothing, where torch's mean would be NaN.
/// Labels out of range are an error the caller checks beforehand
/// (validateLabels).
void softmaxCrossEntropy(const LossShape &shape, int64_t n, double count,
                         const float *logits, const int32_t *labels,
                         int32_t ignore, float *loss, float *dlogits);
/// Every label in [0, classes) or `ignore`.
bool validateLabels(int64_t n, int64_t classes, const int32_t *labels,
                    int32_t ignore);
/// Evaluation: adds the cross-entropy of n samples' counted positions
/// (summed, in double) to `loss`, to `correct` those whose first largest
/// logit is the label's (torch.argmax's choice), and their number to
/// `counted`.
void crossEntropySums(const LossShape &shape, int64_t n, const float *logits,
                      const int32_t *labels, int32_t ignore, double &loss,
                      double &correct, double &counted);
/// Evaluation: the sum of (y - target)^2 over `elements`, in double.
double sumSquaredError(int64_t elements, const float *y, const float *target);
/// Mean squared error over all batch x features elements.
void meanSquaredError(int64_t n, int64_t features, int64_t batch,
                      const float *y, const float *target, float *loss,
                      float *dy);

/// Up to this many axes, the batch's included, for layout operations.
constexpr int kMaxRank = 7;

/// y = x with its axes permuted: y's axis i is x's axis perm[i]. `dims` are
/// x's, the batch's axis (`batchAxis`) holding the factor the n samples
/// multiply (1, or the heads merged with it).
struct TransposeParams {
  int32_t rank;
  int64_t dims[kMaxRank];
  int32_t perm[kMaxRank];
  int32_t batchAxis;
};
void transposeForward(const TransposeParams &p, int64_t n, const float *x,
                      float *y);
void transposeBackward(const TransposeParams &p, int64_t n, const float *dy,
                       float *dx, bool accumulate);

/// y = the window of x starting at `starts` with y's dims, taking every
/// steps[i]-th element along axis i (positive steps; 1 unless given); the
/// batch's axis (`batchAxis`, dims as in TransposeParams) is kept whole.
/// The backward writes zeros where no y element reads.
struct SliceParams {
  int32_t rank;
  int64_t xdims[kMaxRank];
  int64_t ydims[kMaxRank];
  int64_t starts[kMaxRank];
  int32_t batchAxis;
  int64_t steps[kMaxRank] = {1, 1, 1, 1, 1, 1, 1};
};
void sliceForward(const SliceParams &p, int64_t n, const float *x, float *y);
/// y = x repeated along the axes where x's extent is 1 and y's is not
/// (numpy broadcasting, the ranks equal); the batch's axis is kept. The
/// backward sums dy over the repeats.
struct ExpandParams {
  int32_t rank;
  int64_t xdims[kMaxRank];
  int64_t ydims[kMaxRank];
  int32_t batchAxis;
};
void expandForward(const ExpandParams &p, int64_t n, const float *x, float *y);
void expandBackward(const ExpandParams &p, int64_t n, const float *dy,
                    float *dx, bool accumulate);
void sliceBackward(const SliceParams &p, int64_t n, const float *dy, float *dx,
                   bool accumulate);

/// The widest query/key (d) and value (dv) rows attention runs fused.
constexpr int64_t kMaxAttentionWidth = 256;

/// softmax(scale * Q K^T (masked)) V per sample and head, without the
/// T x S matrices (runtime/kernels/Attention.h): Q [heads, T, d], K
/// [kvHeads, S, d] (or [kvHeads, d, S] when kTransposed), V [kvHeads, S,
/// dv], O [heads, T, dv], and one log-sum-exp per query row, [heads, T].
/// kvHeads is heads or 1 (shared by every head). The mask (maskMode 1:
/// added; 2: the score becomes `fill` where (mask != 0) == fillWhere) has
/// maskSize elements repeating along the trailing axes of [heads, T, S].
/// A band mask is no operand but a rule: score (t, s) is masked where
/// s - t < bandLo or s - t > bandHi (a causal mask: bandHi 0), and then
/// takes `fill` added (maskMode 1) or in its place (2); every query row
/// keeps at least one key. Tiles wholly outside the band are skipped where
/// `fill` makes their probabilities exactly 0 (attnSkipTile).
/// Dropout of ratio `dropout` acts on the probabilities, keyed as the
/// Dropout operator's mask by the task and the sample.
struct AttentionParams {
  int64_t heads, kvHeads;
  int64_t t, s, d, dv;
  bool kTransposed;
  float scale;
  int32_t maskMode;
  int64_t maskSize;
  float fill;
  bool fillWhere;
  float dropout;
  bool nanToZero; // a row without a finite score gives 0 (else NaN)
  bool band = false;
  int64_t bandLo = 0, bandHi = 0;
};
void attentionForward(const AttentionParams &p, int64_t n, uint64_t key,
                      int64_t firstSample, const float *q, const float *k,
                      const float *v, const float *mask, float *o, float *lse);
/// Gradients of Q, K and V (any may be null), recomputing the scores.
void attentionBackward(const AttentionParams &p, int64_t n, uint64_t key,
                       int64_t firstSample, const float *q, const float *k,
                       const float *v, const float *mask, const float *o,
                       const float *lse, const float *dO, float *dq, float *dk,
                       float *dv, bool accQ, bool accK, bool accV);

/// Per sample, `batch` products y[b] = a[b] (m x k) * b[b] (k x cols); an
/// operand whose aBatch/bBatch is 1 is shared by the products of a sample.
/// An operand marked aShared/bShared is one for every sample (a value
/// computed from weights, without a batch): its gradient sums over them.
struct BatchMatMulParams {
  int64_t batch, m, k, cols;
  int64_t aBatch, bBatch;
  bool aShared = false, bShared = false;
};
void batchMatMulForward(const BatchMatMulParams &p, int64_t n, const float *a,
                        const float *b, float *y);
/// Gradients of a and/or b (either may be null).
void batchMatMulBackward(const BatchMatMulParams &p, int64_t n, const float *a,
                         const float *b, const float *dy, float *da, float *db,
                         bool accumulateA, bool accumulateB);

/// Layer normalization of `rows` rows of `d` features per sample, with
/// per-feature scale and bias (bias nullable), as torch's layer_norm (biased
/// variance). The backward recomputes the row statistics from x.
struct LayerNormParams {
  int64_t rows, d;
  float epsilon;
};
void layerNormForward(const LayerNormParams &p, int64_t n, const float *x,
                      const float *scale, const float *bias, float *y);
void layerNormBackwardData(const LayerNormParams &p, int64_t n, const float *x,
                           const float *scale, const float *dy, float *dx,
                           bool accumulate);
void layerNormBackwardWeight(const LayerNormParams &p, int64_t n,
                             const float *x, const float *dy, float *dscale,
                             float *dbias /*nullable*/, bool accumulate);

/// y = mask == fillWhere ? value : x, the mask (0/1 floats, `maskSize`
/// values) broadcast as in BinaryParams: a masked fill.
/// With `maskBatched` the mask holds maskSize values per sample (a padding
/// mask computed from the token ids), else one set for every sample.
struct WhereParams {
  int64_t perSample, maskSize, inner;
  float value;
  bool fillWhere;
  bool maskBatched = false;
};
void whereForward(const WhereParams &p, int64_t n, const float *mask,
                  const float *x, float *y);
void whereBackward(const WhereParams &p, int64_t n, const float *mask,
                   const float *dy, float *dx, bool accumulate);

/// Rows of a [vocab, d] table: `rows` lookups per sample, by the ids of
/// the sample (int32) or, when `ids` is null, by the same `fixedIds`
/// (float-held integers) for every sample, or, both null, row 0 (a weight
/// broadcast over the batch). The ids are checked beforehand.
struct EmbeddingParams {
  int64_t rows, d, vocab;
  /// The row whose lookups add nothing to dtable (nn.Embedding's
  /// padding_idx); -1 for none.
  int64_t frozenRow = -1;
};
void embeddingForward(const EmbeddingParams &p, int64_t n, const int32_t *ids,
                      const float *fixedIds, const float *table, float *y);
/// dtable (+)= the rows of dy added at their ids.
void embeddingBackward(const EmbeddingParams &p, int64_t n, const int32_t *ids,
                       const float *fixedIds, const float *dy, float *dtable,
                       bool accumulate);
/// Whether every id is in [0, vocab).
bool validateIds(int64_t count, int64_t vocab, const int32_t *ids);

/// The instructions of an integer program: runtime/kernels/IntOps.def.
enum class IntOpKind : uint8_t {
#define MEMFIT_INT_OP(kind, operands, onnx) kind,
#include "runtime/kernels/IntOps.def"
};
/// One instruction: its result is register k (its index in the program);
/// a, b and c name earlier registers (-1 unused).
struct IntInstr {
  IntOpKind kind;
  int8_t a = -1, b = -1, c = -1;
  int64_t imm = 0;
};
/// The longest program a kernel runs (its registers live in the thread).
constexpr int kMaxIntInstrs = 32;
/// A forward-only integer program over the token ids, evaluated per
/// position in 64-bit integers: each sample's `perSample` ids form rows of
/// `inner` positions, along which CumSum and ArgMax run (CumSum from the
/// row's end when `reverse`); the last instruction's result is the output,
/// int32 or, when the model casts it to float, a float: one per position,
/// or one per row when `perRow` (a reduction of the row).
struct IntProgramParams {
  int64_t perSample, inner;
  bool reverse = false, perRow = false;
  int32_t count = 0;
  IntInstr code[kMaxIntInstrs] = {};
};
/// Exactly one of yInt and yFloat is non-null.
void intProgram(const IntProgramParams &p, int64_t n, const int32_t *ids,
                int32_t *yInt, float *yFloat);

/// torch.optim.SGD (dampening 0, no Nesterov): g = dw + wd * w;
/// buf = first ? g : momentum * buf + g; w -= lr * buf. With momentum 0,
/// `buf` may be null and w -= lr * g.
void sgdUpdate(int64_t count, float lr, float momentum, float weightDecay,
               bool first, float *w, const float *dw, float *buf);

/// Resize of [c, hin, win] planes to [c, hout, wout] as ONNX's Resize:
/// nearest or (bi)linear interpolation; the output position maps to the
/// input by the coordinate transformation mode (0 half_pixel, 1
/// pytorch_half_pixel, 2 align_corners, 3 asymmetric) with scales out / in
/// (or the model's), nearest positions rounding by `nearestMode` (0
/// round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil).
struct ResizeParams {
  int64_t c, hin, win, hout, wout;
  bool linear;
  int32_t coordMode, nearestMode;
  float scaleH, scaleW;
};
void resizeForward(const ResizeParams &p, int64_t n, const float *x, float *y);
void resizeBackward(const ResizeParams &p, int64_t n, const float *dy,
                    float *dx, bool accumulate);

/// torch.optim.Adam (weight decay added to the gradient) or, `decoupled`,
/// torch.optim.AdamW (w *= 1 - lr * wd first), at step t >= 1.
struct AdamParams {
  float lr, beta1, beta2, eps, weightDecay;
  uint64_t step;
  bool decoupled;
};
void adamUpdate(const AdamParams &p, int64_t count, float *w, const float *dw,
                float *m, float *v);

/// y += x (gradient accumulation helpers).
void accumulate(int64_t count, const float *x, float *y);

} // namespace memfit::rt

#endif
