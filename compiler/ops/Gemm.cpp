//===- Gemm.cpp - Dense layers: Gemm and MatMul ---------------------------===//
//
// cuBLAS on the GPU. y[n, m] = alpha * x[n, k] * op(W) + beta * bias[m];
// MatMul is the case without bias, transposition or scaling.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importGemm(OnnxNode &node) {
  auto a = node.activation(0);
  auto b = node.weight(1, WeightInit::GlorotUniform, true);
  auto alpha = node.attrFloat("alpha", 1.0f);
  auto beta = node.attrFloat("beta", 1.0f);
  auto transA = node.attrInt("transA", 0);
  auto transB = node.attrInt("transB", 0);
  if (llvm::Error e = firstError(a, b, alpha, beta, transA, transB))
    return e;
  std::vector<ValueId> inputs = {*a, *b};
  if (node.hasInput(2)) {
    auto c = node.weight(2, WeightInit::Zeros, true);
    if (!c)
      return c.takeError();
    inputs.push_back(*c);
  }
  std::vector<int64_t> ad = dimsOfValue(node, *a), bd = dimsOfValue(node, *b);
  if (ad.size() != 2 || bd.size() != 2)
    return node.fail("operands of shapes " + dimsStr(ad) + " and " +
                     dimsStr(bd) + " must both be matrices");
  if (*transA)
    return node.fail("transA=1 would move the batch off axis 0 of A");
  int64_t k = *transB ? bd[1] : bd[0], cols = *transB ? bd[0] : bd[1];
  if (k != ad[1])
    return node.fail("A of shape " + dimsStr(ad) + " and B of shape " +
                     dimsStr(bd) + (*transB ? " (transposed)" : "") +
                     " do not multiply");
  if (inputs.size() == 3) {
    std::vector<int64_t> cd = dimsOfValue(node, inputs[2]);
    while (!cd.empty() && cd.front() == 1)
      cd.erase(cd.begin());
    // One element broadcast over every feature is not what the kernels
    // read (a bias per feature), so only one feature may take it.
    if (cd.size() > 1 || (cd.empty() ? cols != 1 : cd[0] != cols))
      return node.fail("bias C of shape " +
                       dimsStr(dimsOfValue(node, inputs[2])) +
                       llvm::formatv(" must broadcast per output "
                                     "feature ([{0}] or [1, {0}])",
                                     cols)
                           .str());
  }
  OpAttrs at;
  at.alpha = *alpha;
  at.beta = *beta;
  at.transA = false;
  at.transB = *transB != 0;
  return node
      .emit(OpKind::Gemm, inputs, {{node.outputName(0), {ad[0], cols}}}, at)
      .takeError();
}

/// x [N, ..., K] times a weight [K, M] (or the transpose of an [M, K] one,
/// PyTorch's Linear): one GEMM over all rows. Two activations multiply as
/// batched products.
llvm::Error importMatMul(OnnxNode &node) {
  // A matrix computed from weights (MobileBERT's output table, the tied
  // embedding transposed beside a dense weight) is read as a weight: one
  // GEMM over all rows, its gradient X^T dY a value's (BP-data).
  bool valueB = false;
  if (node.isActivation(node.inputName(0)) &&
      node.isActivation(node.inputName(1))) {
    auto a = node.activation(0), b = node.activation(1);
    if (llvm::Error e = firstError(a, b))
      return e;
    const Value &va = node.graph().values[*a], &vb = node.graph().values[*b];
    valueB = va.batched && !vb.batched && vb.dims.size() == 2;
    if (!valueB)
      return importBatchMatMul(node);
  }
  auto a = node.activation(0);
  if (!a)
    return a.takeError();
  bool transB = !valueB && node.isTransposedWeight(1);
  auto b = valueB   ? node.activation(1)
           : transB ? node.transposedWeight(1, WeightInit::GlorotUniform, true)
                    : node.weight(1, WeightInit::GlorotUniform, true);
  if (!b)
    return b.takeError();
  std::vector<int64_t> ad = dimsOfValue(node, *a), bd = dimsOfValue(node, *b);
  int64_t k = bd.size() == 2 ? bd[transB ? 1 : 0] : -1;
  int64_t cols = bd.size() == 2 ? bd[transB ? 0 : 1] : -1;
  if (ad.size() < 2 || bd.size() != 2 || ad.back() != k)
    return node.fail("activation of shape " + dimsStr(ad) +
                     " and weight of shape " + dimsStr(bd) +
                     (transB ? " (transposed)" : "") +
                     " do not multiply (memfit supports N x ... x K "
                     "times a K x M weight)");
  std::vector<int64_t> out = ad;
  out.back() = cols;
  OpAttrs at;
  at.transB = transB;
  return node.emit(OpKind::MatMul, {*a, *b}, {{node.outputName(0), out}}, at)
      .takeError();
}

/// Exact: the only compute-bound work besides convolution.
OpWork work(const Graph &g, const Op &op, TaskKind kind, int gradsWritten,
            int64_t b) {
  const Value &a = g.value(op.inputs.at(0));
  const Value &y = g.value(op.outputs.at(0));
  double out = elems(y, b);
  int64_t kred = a.dims.empty() ? 1 : a.dims.back();
  if (op.kind == OpKind::Gemm && op.attrs.transA && a.dims.size() >= 2)
    kred = a.dims[a.dims.size() - 2];
  double gemm = 2.0 * out * double(kred);
  bool bias = op.kind == OpKind::Gemm && op.inputs.size() >= 3;
  if (kind == TaskKind::BackwardData)
    // One GEMM per operand whose gradient the task writes; dX = dY W^T
    // reduces over the output features.
    return {gemm * gradsWritten, gradsWritten,
            double(std::max<int64_t>(y.dims.empty() ? 1 : y.dims.back(), 1))};
  // The bias is broadcast into Y before the GEMM, or reduced from dY after
  // it: one more kernel either way. The weight gradient reduces over the
  // batch rows (no depth factor).
  return {gemm + (bias ? out : 0), bias ? 2 : 1,
          kind == TaskKind::Forward ? double(kred) : 0.0};
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
  bool gemm = op.kind == OpKind::Gemm;
  if (x.dims.size() < 2 || y.dims.size() != x.dims.size() ||
      (gemm && x.dims.size() != 2))
    return unsupportedByRuntime(op, "expects [batch, ..., features] operands");
  bool transB = a.transB;
  float alpha = gemm ? a.alpha : 1.0f;
  float beta = gemm ? a.beta : 0.0f;
  // Rows of x per sample, wherever the batch lies ([T * N, E] rows too).
  int64_t rows = x.elementsPerSample() / x.dims.back();
  std::string rowsField = rows == 1 ? "" : ", .rows = " + std::to_string(rows);
  return OpParamsText{"GemmParams",
                      llvm::formatv("{{.k = {0}, .m = {1}, .transB = {2}, "
                                    ".alpha = {3}, .beta = {4}{5}}",
                                    x.dims.back(), y.dims.back(),
                                    transB ? "true" : "false", f32(alpha),
                                    f32(beta), rowsField)
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
  case TaskKind::BackwardData: {
    // B a value computed from weights: its gradient is written here too.
    bool valueB = x.graph.value(w).kind != ValueKind::Weight;
    std::string code;
    if (!valueB || x.writesGrad(in))
      code = formatv("x.gemmBackwardData({0}, {1}, {2}, {3}, {4})", x.params,
                     x.value(w), x.grad(y), x.gradIfWritten(in),
                     x.accumulates(in));
    if (valueB && x.writesGrad(w))
      code += formatv("{0}x.gemmBackwardWeight({1}, {2}, {3}, {4}, nullptr, "
                      "{5})",
                      code.empty() ? "" : "; ", x.params, x.value(in),
                      x.grad(y), x.grad(w), x.accumulates(w))
                  .str();
    return EmittedCall{code};
  }
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
          .batchLayout = OpDef::BatchLayout::Any,
          .dataGradReads = otherOperandReads,
          .weightGradReads = dataOperandReads,
          .lowerPrecision = true,
          .costClass = CostClass::Gemm,
          .tensorCores = true,
          .work = work,
          .params = params,
          .emit = emit};
}

/// What importGemm accepts and refuses (OpDef::forms).
constexpr std::string_view kGemmForms =
    "A a 2-D activation [rows, K], the batch anywhere in its rows, `transA` 0 "
    "only; B a 2-D float32 weight (not a computed value) [K, M], or [M, K] "
    "with `transB`; optional C a weight of shape [M] or [1, M]; `alpha`, "
    "`beta`. A float constant A that is no initializer (a Constant node, a "
    "fold) with a weight B is read as a table without a batch (Swin V2's "
    "position-bias MLP).";
/// What importMatMul accepts and refuses (OpDef::forms).
constexpr std::string_view kMatMulForms =
    "A [..., K] of rank 2 or more (the batch anywhere: one GEMM over all "
    "rows) times B a 2-D float32 weight [K, M], or Transpose(W) of a 2-D "
    "weight, read transposed without a copy, or a 2-D value computed from "
    "weights (MobileBERT's output table: a Concat of weights), whose "
    "gradient X^T dY flows back to them. Two activations multiply as "
    "BatchMatMul: of one rank of 3 or more, the batch outermost, [..., M, K] "
    "x [..., K, P] with equal leading axes or 1s on one side. A float "
    "constant A (no initializer) with a weight B is read as a table without a "
    "batch.";

} // namespace

void registerGemm(std::vector<OpDef> &defs) {
  OpDef gemm = dense(OpKind::Gemm, "Gemm");
  gemm.signatureAttrs = gemmSignature;
  gemm.importOnnx = importGemm;
  gemm.forms = kGemmForms;
  gemm.gradient = "A, B and C (not a constant B or C)";
  defs.push_back(std::move(gemm));
  OpDef matMul = dense(OpKind::MatMul, "MatMul");
  matMul.importOnnx = importMatMul;
  matMul.forms = kMatMulForms;
  matMul.gradient = "A and B (not a constant B); BatchMatMul: both";
  defs.push_back(std::move(matMul));
}

} // namespace memfit::ops
