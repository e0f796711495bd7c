//===- LRN.cpp - Local response normalization -----------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importLRN(OnnxNode &node) {
  auto x = node.activation(0);
  auto size = node.attrInt("size", 0);
  auto alpha = node.attrFloat("alpha", 1e-4f);
  auto beta = node.attrFloat("beta", 0.75f);
  auto bias = node.attrFloat("bias", 1.0f);
  if (llvm::Error e = firstError(x, size, alpha, beta, bias))
    return e;
  if (*size < 1)
    return node.fail("size must be a positive integer");
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  if (auto in = spatialInput(node, xd); !in)
    return in.takeError();
  OpAttrs a;
  a.size = *size;
  a.alpha = *alpha;
  a.beta = *beta;
  a.bias = *bias;
  return node.emit(OpKind::LRN, {*x}, {{node.outputName(0), xd}}, a)
      .takeError();
}

void dataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
  reads.push_back(o.output);
}

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  double size = double(op.attrs.size);
  return {(kind == TaskKind::Forward ? 2 * size + 6 : 3 * size + 8) * out};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  os << " size=" << op.attrs.size;
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  int64_t c = x.dims.size() > 1 ? x.dims[1] : 1;
  return OpParamsText{"LRNParams",
                      llvm::formatv("{{.c = {0}, .spatial = {1}, .size = {2}, "
                                    ".alpha = {3}, .beta = {4}, .bias = {5}}",
                                    c, x.elementsPerSample() / c, a.size,
                                    f32(a.alpha), f32(a.beta), f32(a.bias))
                          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.lrnForward({0}, {1}, {2})", x.params,
                               x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.lrnBackward({0}, {1}, {2}, {3}, {4}, {5})",
                               x.params, x.value(in), x.value(y), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

/// What importLRN accepts and refuses (OpDef::forms).
constexpr std::string_view kForms =
    "X [N, C, D1, ...] with at least one spatial axis, the batch alone on "
    "axis 0, normalized across channels; `size` a positive integer "
    "(required), `alpha`, `beta`, `bias` (defaults 1e-4, 0.75, 1).";
/// What its backward differentiates (OpDef::gradient).
constexpr std::string_view kGradient = "the input";

} // namespace

void registerLRN(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::LRN,
                  .name = "LRN",
                  .onnxTypes = {"LRN"},
                  .importOnnx = importLRN,
                  .dataGradReads = dataReads,
                  .costClass = CostClass::Normalization,
                  .work = work,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit,
                  .forms = kForms,
                  .gradient = kGradient});
}

} // namespace memfit::ops
