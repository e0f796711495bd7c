//===- View.cpp - Flatten and Reshape: the same bytes, another shape ------===//
//
// The output is a view of the input (no copy, no memory), and so is the
// gradient of the output of the input's gradient when the input has no
// other consumer. Only where the gradient views cannot alias does BP-data
// copy.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

OpWork noFlops(const Graph &, const Op &, TaskKind, int, int64_t) {
  return {0};
}

void flattenSignature(llvm::raw_ostream &os, const Op &op) {
  os << " axis=" << op.attrs.axis;
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{"// a view: the output shares its input's bytes", true};
  case TaskKind::BackwardData: {
    if (storageOf(x.tg, x.tg.gradBlock[y]) ==
        storageOf(x.tg, x.tg.gradBlock[in]))
      return EmittedCall{"// a view: the gradient already is the input's",
                         true};
    int64_t perSample = x.graph.value(in).elementsPerSample();
    std::string acc = x.accumulates(in);
    return EmittedCall{llvm::formatv("x.{0}({1}, {2}, {3})",
                                     acc == "false" ? "copy" : "accumulateInto",
                                     perSample, x.grad(y), x.gradIfWritten(in))
                           .str()};
  }
  default:
    return noWeightGrad(x.op);
  }
}

OpDef view(OpKind kind, std::string_view name) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .isView = true,
          .costClass = CostClass::Copy,
          .work = noFlops,
          .emit = emit};
}

} // namespace

void registerView(std::vector<OpDef> &defs) {
  OpDef flatten = view(OpKind::Flatten, "Flatten");
  flatten.signatureAttrs = flattenSignature;
  defs.push_back(std::move(flatten));
  defs.push_back(view(OpKind::Reshape, "Reshape"));
}

} // namespace memfit::ops
