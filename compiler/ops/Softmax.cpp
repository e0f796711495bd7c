//===- Softmax.cpp - Softmax and LogSoftmax over the features -------------===//
//
// A Softmax or LogSoftmax that ends a model trained with cross-entropy is
// folded into the loss (autodiff); these entries are the ones left in the
// graph.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importSoftmax(OnnxNode &node) {
  auto x = node.activation(0);
  auto axisAttr = node.attrInt("axis", node.opset() >= 13 ? -1 : 1);
  if (llvm::Error e = firstError(x, axisAttr))
    return e;
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis >= rank)
    return node.fail(llvm::formatv("axis {0} is out of range for shape {1}",
                                   *axisAttr, dimsStr(xd)));
  if (axis <= node.graph().values[*x].batchAxis)
    return node.fail("normalizes across the batch (axis " +
                     std::to_string(axis) +
                     "); memfit keeps samples independent");
  int64_t trailing = 1;
  for (int64_t i = axis + 1; i < rank; ++i)
    trailing *= xd[i];
  if (node.opset() < 13 && trailing != 1)
    return node.fail("before opset 13 normalizes over all axes from axis " +
                     std::to_string(axis) +
                     " on; memfit supports that only when the axes "
                     "after it have size 1");
  OpAttrs a;
  a.axis = axis;
  OpKind kind =
      node.opType() == "Softmax" ? OpKind::Softmax : OpKind::LogSoftmax;
  return node.emit(kind, {*x}, {{node.outputName(0), xd}}, a).takeError();
}

void readsOutput(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.output);
}

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 5 : 4) * out};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  os << " axis=" << op.attrs.axis;
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  int64_t axis = op.attrs.axis < 0 ? op.attrs.axis + (int64_t)x.dims.size()
                                   : op.attrs.axis;
  for (size_t i = axis + 1; i < x.dims.size(); ++i)
    if (x.dims[i] != 1)
      return unsupportedByRuntime(op, "softmax over the last axis only");
  return OpParamsText{};
}

/// Rows of the normalized axis per sample, and their length.
void rowsOf(const Value &x, const Op &op, int64_t &rows, int64_t &features) {
  int64_t axis = op.attrs.axis < 0 ? op.attrs.axis + (int64_t)x.dims.size()
                                   : op.attrs.axis;
  features = x.dims[axis];
  rows = x.elementsPerSample() / features;
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  int64_t rows, features;
  rowsOf(x.graph.value(in), x.op, rows, features);
  std::string rowArg = rows == 1 ? "" : ", " + std::to_string(rows);
  const char *log = x.op.kind == OpKind::LogSoftmax ? "true" : "false";
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.softmaxForward({0}, {1}, {2}, {3}{4})",
                               features, log, x.value(in), x.value(y), rowArg)
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.softmaxBackward({0}, {1}, {2}, {3}, {4}, "
                               "{5}{6})",
                               features, log, x.value(y), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in), rowArg)
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

OpDef softmax(OpKind kind, std::string_view name, std::string_view forms) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .importOnnx = importSoftmax,
          .batchLayout = OpDef::BatchLayout::Any,
          .dataGradReads = readsOutput,
          .costClass = CostClass::Softmax,
          .work = work,
          .signatureAttrs = signature,
          .params = params,
          .emit = emit,
          .forms = forms,
          .gradient = "the input (from Y and dY); where it ends a model "
                      "trained with softmax cross-entropy over its class axis, "
                      "the loss takes its place and differentiates the logits"};
}

} // namespace

void registerSoftmax(std::vector<OpDef> &defs) {
  defs.push_back(softmax(
      OpKind::Softmax, "Softmax",
      "An activation; `axis` (default -1 from opset 13, 1 before) must lie "
      "after the batch's axis. Before opset 13, which normalizes all axes from "
      "`axis` on, the axes after it must have size 1. Code generation "
      "normalizes only the last axis (or `axis` followed by axes of size 1). "
      "On a weight, or a value computed from weights, it gives a value without "
      "a batch."));
  defs.push_back(softmax(
      OpKind::LogSoftmax, "LogSoftmax",
      "An activation; `axis` (default -1 from opset 13, 1 before) must lie "
      "after the batch's axis. Before opset 13, which normalizes all axes from "
      "`axis` on, the axes after it must have size 1. Code generation "
      "normalizes only the last axis (or `axis` followed by axes of size 1)."));
}

} // namespace memfit::ops
