//===- Concat.cpp - Concatenation along the channels ----------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

/// One strided copy per input, or per input gradient.
OpWork work(const Graph &, const Op &op, TaskKind kind, int gradsWritten,
            int64_t) {
  return {0, kind == TaskKind::Forward
                 ? std::max<int>(static_cast<int>(op.inputs.size()), 1)
                 : gradsWritten};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  os << " axis=" << op.attrs.axis;
}

llvm::Expected<OpParamsText> params(const Graph &, const Op &op) {
  if (op.attrs.axis != 1)
    return unsupportedByRuntime(op, "concatenation along axis 1 only");
  return OpParamsText{};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId y = op.outputs[0];
  std::string parts;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    parts += (i ? ", " : "") +
             std::to_string(x.graph.value(op.inputs[i]).elementsPerSample());
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward: {
    std::string ins;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      ins += (i ? ", " : "") + x.value(op.inputs[i]);
    return EmittedCall{
        formatv("{{ static const int64_t parts[] = {{{0}}; const float "
                "*in[] = {{{1}}; x.concatForward({2}, parts, in, {3}); }",
                parts, ins, op.inputs.size(), x.value(y))
            .str()};
  }
  case TaskKind::BackwardData: {
    std::string ds, accs;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      ValueId v = op.inputs[i];
      ds += (i ? ", " : "") + x.gradIfWritten(v);
      accs += (i ? ", " : "") + x.accumulates(v);
    }
    return EmittedCall{
        formatv("{{ static const int64_t parts[] = {{{0}}; float *d[] = "
                "{{{1}}; const bool acc[] = {{{2}}; "
                "x.concatBackward({3}, parts, {4}, d, acc); }",
                parts, ds, accs, op.inputs.size(), x.grad(y))
            .str()};
  }
  default:
    return noWeightGrad(op);
  }
}

} // namespace

void registerConcat(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::Concat,
                  .name = "Concat",
                  .onnxTypes = {"Concat"},
                  .costClass = CostClass::Copy,
                  .work = work,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit});
}

} // namespace memfit::ops
