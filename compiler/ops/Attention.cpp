//===- Attention.cpp - Scaled dot-product attention as one operator -------===//
//
// softmax(scale * Q K^T (masked)) V, with optional dropout on the
// probabilities, as compiler/onnx/AttentionFusion.cpp finds it in imported
// graphs. Operands Q, K (or K^T), V and an optional constant mask; outputs
// O and one log-sum-exp per query row. Nothing of size T x S is stored:
// BP-data recomputes the scores from Q and K (runtime/kernels/
// Attention.h), so the saved state is O(batch x heads x T).
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

struct Shape {
  int64_t heads, kvHeads, t, s, d, dv;
};

Shape shapeOf(const Graph &g, const Op &op) {
  const Value &q = g.value(op.inputs[0]), &k = g.value(op.inputs[1]);
  const Value &v = g.value(op.inputs[2]), &o = g.value(op.outputs[0]);
  size_t r = q.dims.size();
  Shape s;
  s.t = q.dims[r - 2];
  s.d = q.dims[r - 1];
  s.s = op.attrs.transB ? k.dims[r - 1] : k.dims[r - 2];
  s.dv = v.dims[r - 1];
  s.heads = o.elementsPerSample() / (s.t * s.dv);
  s.kvHeads = v.elementsPerSample() / (s.s * s.dv);
  return s;
}

/// Q, K and V for the scores and products, the mask, O and the
/// log-sum-exp.
void dataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.insert(reads.end(), o.inputs.begin(), o.inputs.end());
  reads.insert(reads.end(), o.outputs.begin(), o.outputs.end());
}

/// The share of the T x S scores the kernels compute: all but the 64 x 64
/// tiles a band mask skips (runtime/kernels/Attention.h's attnSkipTile,
/// whose key tiles narrow for heads wider than 96; 64 here is the
/// estimate).
double computedShare(const Shape &s, const OpAttrs &a) {
  if (!a.maskBand || !(a.padValue <= -1e30f))
    return 1.0;
  const int64_t tile = 64;
  int64_t run = 0;
  for (int64_t t0 = 0; t0 < s.t; t0 += tile)
    for (int64_t s0 = 0; s0 < s.s; s0 += tile) {
      int64_t tc = std::min(tile, s.t - t0), sc = std::min(tile, s.s - s0);
      if (!(s0 - (t0 + tc - 1) > a.bandHi || (s0 + sc - 1) - t0 < a.bandLo))
        run += tc * sc;
    }
  return double(run) / double(s.t * s.s);
}

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  Shape s = shapeOf(g, op);
  // Scores and products, 2 flops per multiply-add; the backward recomputes
  // the scores twice (for dQ and for dK, dV) and forms four products.
  double pairs = double(s.heads * s.t * s.s) * computedShare(s, op.attrs);
  double one = 2.0 * pairs * double(s.d + s.dv);
  double exps = pairs;
  if (kind == TaskKind::BackwardData)
    return {double(b) * (2.5 * one + 2 * exps), 2};
  return {double(b) * (one + exps), 1};
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  Shape s = shapeOf(g, op);
  const OpAttrs &a = op.attrs;
  int64_t maskSize =
      op.inputs.size() > 3 ? g.value(op.inputs[3]).elementsPerSample() : 1;
  if (s.d > 256 || s.dv > 256)
    return unsupportedByRuntime(op, "heads wider than 256");
  return OpParamsText{
      "AttentionParams",
      llvm::formatv(
          "{{.heads = {0}, .kvHeads = {1}, .t = {2}, .s = {3}, .d = {4}, "
          ".dv = {5}, .kTransposed = {6}, .scale = {7}, .maskMode = {8}, "
          ".maskSize = {9}, .fill = {10}, .fillWhere = {11}, .dropout = {12}, "
          ".nanToZero = {13}{14}}",
          s.heads, s.kvHeads, s.t, s.s, s.d, s.dv, a.transB ? "true" : "false",
          f32(a.alpha), a.maskMode, maskSize, f32(a.padValue),
          a.fillWhere ? "true" : "false", f32(a.attnDropout ? a.ratio : 0.0f),
          a.nanToZero ? "true" : "false",
          a.maskBand ? llvm::formatv(", .band = true, .bandLo = {0}, "
                                     ".bandHi = {1}",
                                     a.bandLo, a.bandHi)
                           .str()
                     : std::string())
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId q = op.inputs[0], k = op.inputs[1], v = op.inputs[2];
  ValueId o = op.outputs[0], lse = op.outputs[1];
  std::string mask = op.inputs.size() > 3 ? x.value(op.inputs[3]) : "nullptr";
  // Dropout's mask is keyed by the Dropout op it replaced.
  int64_t key = op.attrs.attnDropout ? op.attrs.dropoutKey : x.task.op;
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{
        formatv("x.attentionForward({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7})",
                x.params, key, x.value(q), x.value(k), x.value(v), mask,
                x.value(o), x.value(lse))
            .str()};
  case TaskKind::BackwardData:
    return EmittedCall{
        formatv("x.attentionBackward({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                "{8}, {9}, {10}, {11}, {12}, {13}, {14})",
                x.params, key, x.value(q), x.value(k), x.value(v), mask,
                x.value(o), x.value(lse), x.grad(o), x.gradIfWritten(q),
                x.gradIfWritten(k), x.gradIfWritten(v), x.accumulates(q),
                x.accumulates(k), x.accumulates(v))
            .str()};
  default:
    return noWeightGrad(op);
  }
}

} // namespace

} // namespace memfit::ops

namespace memfit {

int64_t attentionLocalBytes(const Graph &g, const Op &op) {
  if (op.kind != OpKind::Attention)
    return 0;
  ops::Shape s = ops::shapeOf(g, op);
  // The row state of kernels wider than 128: dK and dV of 256 floats.
  return std::max(s.d, s.dv) > 128 ? 2 * 256 * 4 : 0;
}

} // namespace memfit

namespace memfit::ops {

void registerAttention(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::Attention,
       .name = "Attention",
       .dataGradReads = dataReads,
       .lowerPrecision = true,
       .costClass = CostClass::Gemm,
       .work = work,
       .signatureAttrs =
           [](llvm::raw_ostream &os, const Op &op) {
             os << " mask=" << op.attrs.maskMode;
             if (op.attrs.maskBand)
               os << " band=" << op.attrs.bandLo << ":" << op.attrs.bandHi;
             os << " dropout=" << (op.attrs.attnDropout ? 1 : 0);
           },
       .params = params,
       .emit = emit,
       .forms =
           "No ONNX op type: where attention is fused (`--fuse-attention`), Q "
           "times K^T (or a Transpose of K's last two axes), then optionally "
           "Mul or Div by a constant scalar and Add or Where of a constant "
           "mask, Softmax over the last axis, optionally Where(IsNaN(p), 0, p) "
           "and training Dropout, times V, no intermediate read elsewhere. Q, "
           "K, V: distinct activations of one rank, the batch outermost on "
           "axis 0, heads up to 256 wide; K and V with Q's heads or one. A "
           "mask that is a band of key minus query position (causal, "
           "sliding window) with one masked value is a rule, not an operand: "
           "no T x S constant, and tiles wholly outside the band are skipped "
           "where their probabilities are exactly 0.",
       .gradient = "Q, K and V (the scores recomputed from Q and K); none for "
                   "the mask"});
}

} // namespace memfit::ops
