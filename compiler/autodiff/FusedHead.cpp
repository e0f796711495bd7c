//===- FusedHead.cpp - The language-model head fused with its loss --------===//
#include "compiler/autodiff/FusedHead.h"

#include <algorithm>

namespace memfit {

HeadFusion fusableHead(const Graph &g, LossKind loss, size_t classAxis) {
  if (loss != LossKind::SoftmaxCrossEntropy)
    return {kNoId, "the loss is not cross-entropy"};
  ValueId logits = g.output;
  OpId p = g.values[logits].producer;
  if (p >= 0 && (g.ops[p].kind == OpKind::Softmax ||
                 g.ops[p].kind == OpKind::LogSoftmax)) {
    // The loss folds a normalization over the classes (Autodiff.cpp); the
    // product is then the one before it.
    logits = g.ops[p].inputs[0];
    p = g.values[logits].producer;
  }
  if (p < 0)
    return {kNoId, "the model output is no operator's"};
  const Op &op = g.ops[p];
  if (op.kind != OpKind::MatMul && op.kind != OpKind::Gemm)
    return {kNoId, "the model output is not a matrix product (it is " +
                       std::string(op.onnxOp) + ")"};
  if (op.kind == OpKind::Gemm && op.inputs.size() > 2)
    return {kNoId, "the head's product adds a bias"};
  const Value &x = g.values[op.inputs[0]];
  const Value &w = g.values[op.inputs[1]];
  const Value &y = g.values[logits];
  if (w.kind != ValueKind::Weight || w.dtype != DType::F32)
    return {kNoId, "the head's second operand is not a weight"};
  if (!x.batched || !x.canonical() || x.dtype != DType::F32)
    return {kNoId, "the head's input does not hold the batch on axis 0"};
  if (y.dims.size() < 2 || classAxis + 1 != y.dims.size())
    return {kNoId, "cross-entropy reads the classes on another axis than "
                   "the product's last"};
  size_t readers = g.values[logits].consumers.size();
  if (readers > (logits == g.output ? 0u : 1u))
    return {kNoId, "the logits are read by another operator"};
  return {p, ""};
}

int64_t headChunkRows(int64_t classes, int64_t elementBytes,
                      int64_t batchRows) {
  int64_t rows = kHeadChunkBytes / std::max<int64_t>(1, classes * elementBytes);
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(1, batchRows));
}

} // namespace memfit
