//===- Gemm.cpp - Dense layers: Gemm and MatMul ---------------------------===//
//
// cuBLAS on the GPU. y[n, m] = alpha * x[n, k] * op(W) + beta * bias[m];
// MatMul is the case without bias, transposition or scaling.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

/// Exact: the only compute-bound work besides convolution.
OpWork work(const Graph &g, const Op &op, TaskKind kind, int gradsWritten,
            int64_t b) {
  const Value &a = g.value(op.inputs.at(0));
  double out = elems(g.value(op.outputs.at(0)), b);
  int64_t kred = a.dims.empty() ? 1 : a.dims.back();
  if (op.kind == OpKind::Gemm && op.attrs.transA && a.dims.size() >= 2)
    kred = a.dims[a.dims.size() - 2];
  double gemm = 2.0 * out * double(kred);
  bool bias = op.kind == OpKind::Gemm && op.inputs.size() >= 3;
  if (kind == TaskKind::BackwardData)
    // One GEMM per operand whose gradient the task writes.
    return {gemm * gradsWritten, gradsWritten};
  // The bias is broadcast into Y before the GEMM, or reduced from dY after
  // it: one more kernel either way.
  return {gemm + (bias ? out : 0), bias ? 2 : 1};
}

void gemmSignature(llvm::raw_ostream &os, const Op &op) {
  os << " trans_a=" << (op.attrs.transA ? 1 : 0)
     << " trans_b=" << (op.attrs.transB ? 1 : 0);
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  const Value &y = g.value(op.outputs[0]);
  if (a.transA)
    return unsupportedByRuntime(op,
                                "transA on the activations is not supported");
  if (x.dims.size() != 2 || y.dims.size() != 2)
    return unsupportedByRuntime(op, "expects [batch, features] operands");
  bool gemm = op.kind == OpKind::Gemm;
  bool transB = gemm && a.transB;
  float alpha = gemm ? a.alpha : 1.0f;
  float beta = gemm ? a.beta : 0.0f;
  return OpParamsText{"GemmParams",
                      llvm::formatv("{{.k = {0}, .m = {1}, .transB = {2}, "
                                    ".alpha = {3}, .beta = {4}}",
                                    x.dims[1], y.dims[1],
                                    transB ? "true" : "false", f32(alpha),
                                    f32(beta))
                          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId in = op.inputs[0], w = op.inputs[1], y = op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward: {
    std::string bias = op.inputs.size() > 2 ? x.value(op.inputs[2]) : "nullptr";
    return EmittedCall{formatv("x.gemmForward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.value(in), x.value(w), bias,
                               x.value(y))
                           .str()};
  }
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.gemmBackwardData({0}, {1}, {2}, {3}, {4})",
                               x.params, x.value(w), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default: {
    std::string biasGrad =
        op.inputs.size() > 2 ? x.gradIfWritten(op.inputs[2]) : "nullptr";
    return EmittedCall{formatv("x.gemmBackwardWeight({0}, {1}, {2}, {3}, "
                               "{4}, {5})",
                               x.params, x.value(in), x.grad(y),
                               x.gradIfWritten(w), biasGrad, x.accumulates(w))
                           .str()};
  }
  }
}

OpDef dense(OpKind kind, std::string_view name) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .dataGradReads = otherOperandReads,
          .weightGradReads = dataOperandReads,
          .costClass = CostClass::Gemm,
          .work = work,
          .params = params,
          .emit = emit};
}

} // namespace

void registerGemm(std::vector<OpDef> &defs) {
  OpDef gemm = dense(OpKind::Gemm, "Gemm");
  gemm.signatureAttrs = gemmSignature;
  defs.push_back(std::move(gemm));
  defs.push_back(dense(OpKind::MatMul, "MatMul"));
}

} // namespace memfit::ops
