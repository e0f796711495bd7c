//===- IntProgram.cpp - Index arithmetic on the token ids -----------------===//
//
// The importer (compiler/onnx/IntPrograms.cpp) gathers the integer nodes
// that compute on the token ids (Equal, Not, Cast, CumSum, Add, Mul, ...)
// into one program per value a float op or an embedding reads; this is its
// operator: a forward task per sub-batch, no gradient (token ids have
// none), its output planned like any activation. Its steps are spelled in
// generated code from runtime/kernels/IntOps.def.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"
#include "compiler/ops/RuntimeKinds.h"

#include <cassert>

namespace memfit::ops {
namespace {

OpWork work(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  // Every step at every position of the ids, twice with a reduction.
  double passes = 1;
  for (const IntStep &s : op.attrs.program)
    if (s.kind == uint8_t(RtIntOp::ArgMax))
      passes = 2;
  return {elems(g.value(op.inputs[0]), b) * double(op.attrs.program.size()) *
          passes};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  std::vector<int64_t> kinds;
  for (const IntStep &s : op.attrs.program)
    kinds.push_back(s.kind);
  printList(os, "program", kinds);
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &y = g.value(op.outputs[0]);
  const OpAttrs &a = op.attrs;
  // The importer bounds the length; a longer program is a bug there.
  if (a.program.empty() || a.program.size() > 32)
    return unsupportedByRuntime(op, "an integer program of " +
                                        std::to_string(a.program.size()) +
                                        " steps (the runtime runs 1 to 32)");
  std::string code;
  for (const IntStep &s : a.program) {
    auto kind = static_cast<RtIntOp>(s.kind);
    code += llvm::formatv("{0}{{IntOpKind::{1}, {2}, {3}, {4}, {5}}",
                          code.empty() ? "" : ", ", runtimeKind(kind).name,
                          int(s.a), int(s.b), int(s.c), s.imm)
                .str();
  }
  // The program walks the ids; its output has their elements, or one per
  // row of them.
  const Value &ids = g.value(op.inputs[0]);
  int64_t row = a.programRow > 0 ? a.programRow : y.elementsPerSample();
  assert(row > 0 && ids.elementsPerSample() % row == 0 &&
         y.elementsPerSample() == (a.programPerRow
                                       ? ids.elementsPerSample() / row
                                       : ids.elementsPerSample()) &&
         "the importer shapes a program's output as the ids it walks");
  return OpParamsText{
      "IntProgramParams",
      llvm::formatv("{{.perSample = {0}, .inner = {1}, .reverse = {2}, "
                    ".perRow = {3}, .count = {4}, .code = {{{5}}}",
                    ids.elementsPerSample(), row,
                    a.programReverse ? "true" : "false",
                    a.programPerRow ? "true" : "false", a.program.size(), code)
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId ids = x.op.inputs[0], y = x.op.outputs[0];
  if (x.task.kind != TaskKind::Forward)
    return unsupportedByRuntime(x.op, "token ids have no gradient");
  bool ints = x.graph.value(y).dtype != DType::F32;
  return EmittedCall{llvm::formatv("x.intProgram({0}, {1}, {2}, {3})", x.params,
                                   x.value(ids), ints ? x.value(y) : "nullptr",
                                   ints ? "nullptr" : x.value(y))
                         .str()};
}

/// What the importer gathers into a program (OpDef::forms).
constexpr std::string_view kForms =
    "No ONNX operator of its own: integer nodes on the token ids (Add, Sub, "
    "Mul, Div, Mod, Min, Max, Neg, Abs, Equal, Less, Greater, LessOrEqual, "
    "GreaterOrEqual, And, Or, Xor, Not, Where, CumSum, ArgMax, Cast; Reshape, "
    "Unsqueeze, Squeeze keeping the batch alone on axis 0; Expand to the "
    "program's own shape) with constants holding one integer, or counting "
    "along the last axis (arange(T)), become one program per value a float "
    "op or an embedding reads: element by element, CumSum and ArgMax along "
    "the last axis only (one ArgMax a program, not of a value that needs "
    "another), at most 32 steps. arange(N) over the batch is each sample's "
    "index, read only to pick one row per sample of [N, T, ...] scores: a "
    "Gather of them flattened to [N * T, ...] at arange(N) * T + q, or a "
    "GatherND at the pairs (arange(N), q), with q a program known to lie in "
    "[0, T) (the last token that is not padding: transformers' "
    "*ForSequenceClassification on decoders); the pick is a one-hot of q "
    "times the scores, summed over T.";

} // namespace

void registerIntProgram(std::vector<OpDef> &defs) {
  // No ONNX op type of its own: the importer builds it from several.
  defs.push_back({.kind = OpKind::IntProgram,
                  .name = "IntProgram",
                  .work = work,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit,
                  .forms = kForms,
                  .gradient = "none: token ids have no gradient"});
}

} // namespace memfit::ops
