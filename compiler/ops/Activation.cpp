//===- Activation.cpp - Element-wise functions of one activation ----------===//
//
// Relu, LeakyRelu, Sigmoid, Tanh, Clip and Sqrt have a derivative that is a
// function of the output, so the backward reads Y alone and the forward may
// overwrite its input. Erf, HardSigmoid, HardSwish, Pow (by a constant) and
// Gelu differentiate from their input X, which the backward reads instead.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importUnary(OnnxNode &node) {
  static const std::map<std::string, OpKind> kinds = {
      {"Relu", OpKind::Relu},
      {"Sigmoid", OpKind::Sigmoid},
      {"Tanh", OpKind::Tanh},
      {"LeakyRelu", OpKind::LeakyRelu},
      {"Sqrt", OpKind::Sqrt},
      {"Erf", OpKind::Erf},
      {"HardSigmoid", OpKind::HardSigmoid},
      {"HardSwish", OpKind::HardSwish},
      {"Neg", OpKind::Neg}};
  auto x = node.activation(0);
  auto alpha = node.attrFloat("alpha", 0.01f);
  if (llvm::Error e = firstError(x, alpha))
    return e;
  OpAttrs a;
  if (node.opType() == "LeakyRelu")
    a.alpha = *alpha;
  if (node.opType() == "HardSigmoid") {
    auto hsAlpha = node.attrFloat("alpha", 0.2f);
    auto hsBeta = node.attrFloat("beta", 0.5f);
    if (llvm::Error e = firstError(hsAlpha, hsBeta))
      return e;
    a.alpha = *hsAlpha;
    a.beta = *hsBeta;
  }
  return node
      .emit(kinds.at(node.opType().str()), {*x},
            {{node.outputName(0), dimsOfValue(node, *x)}}, a)
      .takeError();
}

llvm::Error importClip(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  float lo = std::numeric_limits<float>::lowest();
  float hi = std::numeric_limits<float>::max();
  if (node.opset() >= 11) {
    for (int i : {1, 2}) {
      if (!node.hasInput(i))
        continue;
      auto v = node.scalarFloat(i);
      if (!v)
        return v.takeError();
      (i == 1 ? lo : hi) = *v;
    }
  } else {
    auto mn = node.attrFloat("min", lo);
    auto mx = node.attrFloat("max", hi);
    if (llvm::Error e = firstError(mn, mx))
      return e;
    lo = *mn;
    hi = *mx;
  }
  OpAttrs a;
  a.minValue = lo;
  a.maxValue = hi;
  return node
      .emit(OpKind::Clip, {*x}, {{node.outputName(0), dimsOfValue(node, *x)}},
            a)
      .takeError();
}

/// Opset 20's Gelu: exact (erf) or its tanh approximation.
llvm::Error importGelu(OnnxNode &node) {
  auto x = node.activation(0);
  auto approx = node.attrString("approximate", "none");
  if (llvm::Error e = firstError(x, approx))
    return e;
  if (*approx != "none" && *approx != "tanh")
    return node.fail("approximate " + quoteName(*approx) +
                     " is not 'none' or 'tanh'");
  OpAttrs a;
  a.tanhApprox = *approx == "tanh";
  return node
      .emit(OpKind::Gelu, {*x}, {{node.outputName(0), dimsOfValue(node, *x)}},
            a)
      .takeError();
}

/// x ** c for a constant exponent c.
llvm::Error importPow(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  float exponent = 0;
  if (node.opType() == "Reciprocal") {
    exponent = -1.0f;
  } else if (auto f = node.scalarFloat(1)) {
    exponent = *f;
  } else {
    llvm::consumeError(f.takeError());
    auto c = node.intConstant(1);
    if (!c)
      return c.takeError();
    if (c->isFloat || c->numel() != 1 || c->isBatch(0))
      return node.fail("the exponent must be a scalar constant; memfit "
                       "supports powers by a constant");
    exponent = static_cast<float>(c->ints[0]);
  }
  OpAttrs a;
  a.alpha = exponent;
  return node
      .emit(OpKind::Pow, {*x}, {{node.outputName(0), dimsOfValue(node, *x)}}, a)
      .takeError();
}

void readsOutput(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.output);
}

void readsInput(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
}

/// As the kind's definition says (fromInput in registerActivation).
bool gradReadsInput(OpKind k) { return opDef(k).dataGradReads == readsInput; }

OpWork oneFlop(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {elems(g.value(op.outputs[0]), b)};
}

/// An exponential forward, a product backward.
OpWork transcendental(const Graph &g, const Op &op, TaskKind kind, int,
                      int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 4 : 3) * out};
}

/// Clip(0, max) runs as a clipped ReLU, other bounds as a generic kernel.
void clipSignature(llvm::raw_ostream &os, const Op &op) {
  printFloat(os, "min", op.attrs.minValue);
}

const char *actKind(const Op &op) {
  switch (op.kind) {
  case OpKind::Relu:
    return "Relu";
  case OpKind::LeakyRelu:
    return "LeakyRelu";
  case OpKind::Sigmoid:
    return "Sigmoid";
  case OpKind::Tanh:
    return "Tanh";
  case OpKind::Sqrt:
    return "Sqrt";
  case OpKind::Erf:
    return "Erf";
  case OpKind::HardSigmoid:
    return "HardSigmoid";
  case OpKind::HardSwish:
    return "HardSwish";
  case OpKind::Pow:
    return "Pow";
  case OpKind::Gelu:
    return op.attrs.tanhApprox ? "GeluTanh" : "Gelu";
  case OpKind::Neg:
    return "Neg";
  case OpKind::NanTo:
    return "NanTo";
  default:
    return "Clip";
  }
}

llvm::Expected<OpParamsText> params(const Graph &, const Op &op) {
  const OpAttrs &a = op.attrs;
  std::string beta =
      op.kind == OpKind::HardSigmoid ? ", .beta = " + f32(a.beta) : "";
  return OpParamsText{
      "ActParams",
      llvm::formatv("{{.kind = ActKind::{0}, .alpha = {1}, .lo = {2}, "
                    ".hi = {3}{4}}",
                    actKind(op), f32(a.alpha), f32(a.minValue), f32(a.maxValue),
                    beta)
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  int64_t perSample = x.graph.value(in).elementsPerSample();
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.actForward({0}, {1}, {2}, {3})", x.params,
                               perSample, x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData: {
    // Neg's derivative reads neither x nor y: dY stands in for them.
    std::string src = x.op.kind == OpKind::Neg
                          ? x.grad(y)
                          : x.value(gradReadsInput(x.op.kind) ? in : y);
    return EmittedCall{formatv("x.actBackward({0}, {1}, {2}, {3}, {4}, {5})",
                               x.params, perSample, src, x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  }
  default:
    return noWeightGrad(x.op);
  }
}

OpDef activation(OpKind kind, std::string_view name,
                 OpWork (*work)(const Graph &, const Op &, TaskKind, int,
                                int64_t)) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .importOnnx = importUnary,
          .mayRunInPlace = true,
          .dataGradReads = readsOutput,
          .work = work,
          .params = params,
          .emit = emit};
}

} // namespace

void registerActivation(std::vector<OpDef> &defs) {
  defs.push_back(activation(OpKind::Relu, "Relu", oneFlop));
  defs.push_back(activation(OpKind::LeakyRelu, "LeakyRelu", oneFlop));
  defs.push_back(activation(OpKind::Sigmoid, "Sigmoid", transcendental));
  defs.push_back(activation(OpKind::Tanh, "Tanh", transcendental));
  OpDef clip = activation(OpKind::Clip, "Clip", oneFlop);
  clip.signatureAttrs = clipSignature;
  clip.importOnnx = importClip;
  defs.push_back(std::move(clip));
  defs.push_back(activation(OpKind::Sqrt, "Sqrt", transcendental));
  auto fromInput = [](OpDef d) {
    d.mayRunInPlace = false;
    d.dataGradReads = readsInput;
    return d;
  };
  defs.push_back(fromInput(activation(OpKind::Erf, "Erf", transcendental)));
  defs.push_back(
      fromInput(activation(OpKind::HardSigmoid, "HardSigmoid", oneFlop)));
  defs.push_back(
      fromInput(activation(OpKind::HardSwish, "HardSwish", oneFlop)));
  OpDef pow = fromInput(activation(OpKind::Pow, "Pow", transcendental));
  pow.importOnnx = importPow;
  pow.onnxTypes = {"Pow", "Reciprocal"}; // 1 / x is x ** -1
  pow.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
    printFloat(os, "exponent", op.attrs.alpha);
  };
  defs.push_back(std::move(pow));
  // ONNX names Gelu from opset 20; before, it is recognized from its Erf
  // or tanh expansion (compiler/onnx).
  OpDef gelu = fromInput(activation(OpKind::Gelu, "Gelu", transcendental));
  gelu.importOnnx = importGelu;
  gelu.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
    os << " approximate=" << (op.attrs.tanhApprox ? "tanh" : "none");
  };
  defs.push_back(std::move(gelu));
  // Llama's rotate_half; its gradient is -dY, reading nothing.
  OpDef neg = activation(OpKind::Neg, "Neg", oneFlop);
  neg.dataGradReads = [](const GradOperands &, std::vector<BlockId> &) {};
  defs.push_back(std::move(neg));
  // Where(IsNaN(x), c, x), the guard torch.export puts after the softmax of
  // scaled_dot_product_attention, is recognized as one operator
  // (compiler/onnx); IsNaN on its own is refused.
  OpDef nanTo = fromInput(activation(OpKind::NanTo, "NanTo", oneFlop));
  nanTo.onnxTypes = {"IsNaN"};
  nanTo.importOnnx = [](OnnxNode &node) {
    return node.fail("memfit supports IsNaN only as the guard "
                     "Where(IsNaN(x), c, x) with a constant scalar c");
  };
  nanTo.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
    printFloat(os, "fill", op.attrs.alpha);
  };
  defs.push_back(std::move(nanTo));
}

} // namespace memfit::ops
