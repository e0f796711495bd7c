//===- Pad.cpp - Constant spatial padding ---------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

OpWork noFlops(const Graph &, const Op &, TaskKind, int, int64_t) {
  return {0};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  printList(os, "pads", op.attrs.pads);
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  const Value &y = g.value(op.outputs[0]);
  int64_t c, h, w, co, ho, wo;
  if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || co != c)
    return unsupportedByRuntime(op, "only spatial padding of NCHW tensors");
  if (a.pads.size() != 8 || a.pads[0] || a.pads[1] || a.pads[4] || a.pads[5])
    return unsupportedByRuntime(op, "only spatial padding of NCHW tensors");
  return OpParamsText{
      "PadParams",
      llvm::formatv("{{.c = {0}, .hin = {1}, .win = {2}, .hout = {3}, "
                    ".wout = {4}, .padTop = {5}, "
                    ".padLeft = {6}, .value = {7}}",
                    c, h, w, ho, wo, a.pads[2], a.pads[3], f32(a.padValue))
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.padForward({0}, {1}, {2})", x.params,
                               x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.padBackward({0}, {1}, {2}, {3})", x.params,
                               x.grad(y), x.gradIfWritten(in),
                               x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

} // namespace

void registerPad(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::Pad,
                  .name = "Pad",
                  .onnxTypes = {"Pad"},
                  .costClass = CostClass::Copy,
                  .work = noFlops,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit});
}

} // namespace memfit::ops
