//===- Dropout.cpp - Inverted dropout with a counter-based mask -----------===//
//
// The mask is a function of (seed, iteration, task, sample, element), so
// the backward and any recomputed forward regenerate it instead of storing
// it: BP-data reads dY alone.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 2 : 1) * out};
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  return OpParamsText{"DropoutParams",
                      llvm::formatv("{{.perSample = {0}, .ratio = {1}}",
                                    x.elementsPerSample(), f32(op.attrs.ratio))
                          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  // The mask's key is the op's id, the same in the forward, its recompute
  // and the backward.
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.dropoutForward({0}, {1}, {2}, {3})", x.params,
                               x.task.op, x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.dropoutBackward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.task.op, x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

} // namespace

void registerDropout(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::Dropout,
                  .name = "Dropout",
                  .onnxTypes = {"Dropout"},
                  .mayRunInPlace = true,
                  .work = work,
                  .params = params,
                  .emit = emit});
}

} // namespace memfit::ops
