//===- Activation.cpp - Element-wise functions of one activation ----------===//
//
// Every activation is one entry of kActivations: its OpKind and the runtime
// kind its kernel runs (runtime/kernels/Activations.def, through
// RuntimeKinds.h). The entry's Reads decides the autodiff rule: a derivative
// of the output (Relu, Sigmoid, Tanh, Clip, Sqrt, ...) reads Y alone and
// lets the forward overwrite its input; one of the input (Erf, Gelu,
// Softplus, Mish, Celu, LogSigmoid, ...) reads X; Neg's reads neither. The
// name generated code spells (`ActKind::Name`) comes from the same entry.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"
#include "compiler/ops/RuntimeKinds.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

/// An activation without attributes, of the kind that imports its op type.
llvm::Error importUnary(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  const OpDef *def = opDefForOnnx(node.opType());
  assert(def && "dispatched by one of its definition's ONNX types");
  return node
      .emit(def->kind, {*x}, {{node.outputName(0), dimsOfValue(node, *x)}})
      .takeError();
}

/// An activation whose attributes `read` parses into its OpAttrs.
template <OpKind Kind, llvm::Error (*Read)(OnnxNode &, OpAttrs &)>
llvm::Error importWithAttrs(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  OpAttrs a;
  if (llvm::Error e = Read(node, a))
    return e;
  return node.emit(Kind, {*x}, {{node.outputName(0), dimsOfValue(node, *x)}}, a)
      .takeError();
}

llvm::Error leakyReluAttrs(OnnxNode &node, OpAttrs &a) {
  auto alpha = node.attrFloat("alpha", 0.01f);
  if (!alpha)
    return alpha.takeError();
  a.alpha = *alpha;
  return llvm::Error::success();
}

llvm::Error hardSigmoidAttrs(OnnxNode &node, OpAttrs &a) {
  auto alpha = node.attrFloat("alpha", 0.2f);
  auto beta = node.attrFloat("beta", 0.5f);
  if (llvm::Error e = firstError(alpha, beta))
    return e;
  a.alpha = *alpha;
  a.beta = *beta;
  return llvm::Error::success();
}

/// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): alpha divides.
llvm::Error celuAttrs(OnnxNode &node, OpAttrs &a) {
  auto alpha = node.attrFloat("alpha", 1.0f);
  if (!alpha)
    return alpha.takeError();
  if (!(*alpha != 0.0f && std::isfinite(*alpha)))
    return node.fail("alpha must be a finite, nonzero float");
  a.alpha = *alpha;
  return llvm::Error::success();
}

llvm::Error emitClip(OnnxNode &node, ValueId x, float lo, float hi) {
  OpAttrs a;
  a.minValue = lo;
  a.maxValue = hi;
  return node
      .emit(OpKind::Clip, {x}, {{node.outputName(0), dimsOfValue(node, x)}}, a)
      .takeError();
}

llvm::Error importClip(OnnxNode &node) {
  float lo = std::numeric_limits<float>::lowest();
  float hi = std::numeric_limits<float>::max();
  if (node.opType() == "Max" || node.opType() == "Min") {
    // max(x, c) and min(x, c) with a scalar constant clip x on one side
    // (OPT's scores clamped to the float minimum, torch.max(s, min)).
    int xi = node.numInputs() == 2 && node.isActivation(node.inputName(1));
    if (node.numInputs() != 2 || node.isActivation(node.inputName(1 - xi)))
      return node.fail("memfit supports " + node.opType().str() +
                       " of an activation and a scalar constant");
    auto x = node.activation(xi);
    auto c = node.scalarFloat(1 - xi);
    if (llvm::Error e = firstError(x, c))
      return e;
    (node.opType() == "Max" ? lo : hi) = *c;
    return emitClip(node, *x, lo, hi);
  }
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
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
  return emitClip(node, *x, lo, hi);
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

OpWork oneFlop(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {elems(g.value(op.outputs[0]), b)};
}

/// An exponential forward, a product backward.
OpWork transcendental(const Graph &g, const Op &op, TaskKind kind, int,
                      int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 4 : 3) * out};
}

/// The operator kinds that run as an activation kernel, and the runtime
/// kind each runs (Gelu's tanh approximation runs GeluTanh). Registration
/// walks this table, so every activation definition has its entry.
struct Activation {
  OpKind kind;
  RtAct runtime;
  OpWork (*work)(const Graph &, const Op &, TaskKind, int, int64_t);
  /// OpDef::forms: what sets the op apart. Where the batch may lie and
  /// whether the input may be computed from weights the operator table
  /// says from the definition and the importer's list
  /// (OperatorTable.cpp).
  std::string_view forms;
  std::string_view gradient = "the input"; // OpDef::gradient
};
constexpr Activation kActivations[] = {
    {OpKind::Relu, RtAct::Relu, oneFlop,
     "Elementwise, no attributes. A constant X is refused (not folded)."},
    {OpKind::LeakyRelu, RtAct::LeakyRelu, oneFlop,
     "Elementwise; `alpha` (default 0.01)."},
    {OpKind::Sigmoid, RtAct::Sigmoid, transcendental,
     "Elementwise. Log(Sigmoid(x)), the Sigmoid read by that Log alone, "
     "becomes one LogSigmoid. A constant X is refused (not folded)."},
    {OpKind::Tanh, RtAct::Tanh, transcendental,
     "Elementwise. Inside torch's tanh GELU expansion or Mul(x, "
     "Tanh(Softplus(x))) it becomes Gelu or Mish. A constant X is refused "
     "(not folded)."},
    {OpKind::Clip, RtAct::Clip, oneFlop,
     "Clip: bounds from float32 scalar constant inputs (opset 11+) or the "
     "`min` and `max` attributes (before); an absent bound is the float "
     "limit. Max and Min of exactly two operands, an activation and a float32 "
     "scalar constant in either order, are a one-sided Clip; of two "
     "activations they are refused."},
    {OpKind::Sqrt, RtAct::Sqrt, transcendental,
     "Elementwise, no attributes. Of constants it folds."},
    {OpKind::Erf, RtAct::Erf, transcendental,
     "Elementwise. Inside torch's erf GELU expansion it becomes one Gelu."},
    {OpKind::HardSigmoid, RtAct::HardSigmoid, oneFlop,
     "Elementwise; `alpha` (default 0.2) and `beta` (default 0.5)."},
    {OpKind::HardSwish, RtAct::HardSwish, oneFlop,
     "Elementwise, no attributes."},
    {OpKind::Pow, RtAct::Pow, transcendental,
     "Pow: to a constant exponent, operand 1 with one element (float32 or an "
     "integer); an exponent computed at run time is refused. Reciprocal is "
     "the power -1. Of constants both fold.",
     "the input (not the exponent)"},
    {OpKind::Gelu, RtAct::Gelu, transcendental,
     "Opset 20's Gelu, `approximate` none or tanh. Before opset 20 torch "
     "writes it as Div or Mul, Erf, Add, Mul, Mul (tanh: eight nodes), "
     "recognized as one Gelu where the intermediates feed nothing else and "
     "the constants are torch's."},
    {OpKind::Neg, RtAct::Neg, oneFlop,
     "Elementwise. Of constants it folds; on the token ids it is a step of "
     "an integer program."},
    {OpKind::NanTo, RtAct::NanTo, oneFlop,
     "Only as Where(IsNaN(x), c, x) with c a float32 scalar (a Constant node "
     "or an initializer) and the IsNaN read by that Where alone: "
     "torch.export's guard after attention's softmax, one op that replaces the "
     "NaNs of x by c. IsNaN anywhere else is refused.",
     "the input (zero where it was NaN)"},
    {OpKind::Softplus, RtAct::Softplus, transcendental,
     "Elementwise, PyTorch's form (x itself past 20). In Mul(x, "
     "Tanh(Softplus(x))) it becomes one Mish."},
    {OpKind::Mish, RtAct::Mish, transcendental,
     "Opset 18's Mish. torch.onnx's Mul(x, Tanh(Softplus(x))), its "
     "intermediates feeding nothing else, is recognized as one Mish."},
    {OpKind::Celu, RtAct::Celu, transcendental,
     "Elementwise; `alpha` (default 1) finite and nonzero."},
    {OpKind::LogSigmoid, RtAct::LogSigmoid, transcendental,
     "Log(Sigmoid(x)), the Sigmoid read by that Log alone: nn.LogSigmoid as "
     "torch.onnx writes it, one op in PyTorch's stable form."},
    {OpKind::Exp, RtAct::Exp, transcendental,
     "Elementwise (Swin V2's logit scale, a parameter). Of constants it "
     "folds."},
    {OpKind::Abs, RtAct::Abs, oneFlop,
     "Elementwise; its derivative is torch's, 0 at 0. Of constants it folds."},
    {OpKind::Log, RtAct::Log, transcendental,
     "Elementwise, the natural logarithm. Log(Sigmoid(x)) becomes one "
     "LogSigmoid. Of constants it folds."},
};
// One autodiff rule serves both forms of Gelu.
static_assert(runtimeKind(RtAct::Gelu).reads ==
              runtimeKind(RtAct::GeluTanh).reads);

const Activation &entryOf(OpKind kind) {
  for (const Activation &e : kActivations)
    if (e.kind == kind)
      return e;
  // Only definitions made from an entry reach here (registerActivation).
  llvm_unreachable("an activation definition without its entry");
}

RtAct runtimeAct(const Op &op) {
  if (op.kind == OpKind::Gelu && op.attrs.tanhApprox)
    return RtAct::GeluTanh;
  return entryOf(op.kind).runtime;
}

void readsOutput(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.output);
}

void readsInput(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
}

void readsNothing(const GradOperands &, std::vector<BlockId> &) {}

llvm::Expected<OpParamsText> params(const Graph &, const Op &op) {
  const OpAttrs &a = op.attrs;
  std::string beta =
      op.kind == OpKind::HardSigmoid ? ", .beta = " + f32(a.beta) : "";
  return OpParamsText{
      "ActParams",
      llvm::formatv("{{.kind = ActKind::{0}, .alpha = {1}, .lo = {2}, "
                    ".hi = {3}{4}}",
                    runtimeKind(runtimeAct(op)).name, f32(a.alpha),
                    f32(a.minValue), f32(a.maxValue), beta)
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
    // A derivative that reads neither x nor y (Neg's) gets dY in their
    // place.
    GradReads reads = runtimeKind(runtimeAct(x.op)).reads;
    std::string src = reads == GradReads::Nothing
                          ? x.grad(y)
                          : x.value(reads == GradReads::Input ? in : y);
    return EmittedCall{formatv("x.actBackward({0}, {1}, {2}, {3}, {4}, {5})",
                               x.params, perSample, src, x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  }
  default:
    return noWeightGrad(x.op);
  }
}

/// The definition of entry `e`: named as its runtime kind, imported from
/// the ONNX op type of that name, its backward reading what the kind's
/// Reads says.
OpDef activation(const Activation &e) {
  RtKindInfo rt = runtimeKind(e.runtime);
  OpDef d{.kind = e.kind,
          .name = rt.name,
          .onnxTypes = {rt.name},
          .importOnnx = importUnary,
          // Element by element.
          .batchLayout = OpDef::BatchLayout::Any,
          .work = e.work,
          .params = params,
          .emit = emit,
          .forms = e.forms,
          .gradient = e.gradient};
  switch (rt.reads) {
  case GradReads::Output:
    d.mayRunInPlace = true;
    d.dataGradReads = readsOutput;
    break;
  case GradReads::Input:
    d.dataGradReads = readsInput;
    break;
  case GradReads::Nothing:
  case GradReads::Operands: // not an activation's
    d.mayRunInPlace = true;
    d.dataGradReads = readsNothing;
    break;
  }
  return d;
}

} // namespace

void registerActivation(std::vector<OpDef> &defs) {
  for (const Activation &e : kActivations) {
    OpDef d = activation(e);
    switch (e.kind) {
    case OpKind::LeakyRelu:
      d.importOnnx = importWithAttrs<OpKind::LeakyRelu, leakyReluAttrs>;
      break;
    case OpKind::HardSigmoid:
      d.importOnnx = importWithAttrs<OpKind::HardSigmoid, hardSigmoidAttrs>;
      break;
    case OpKind::Celu:
      d.importOnnx = importWithAttrs<OpKind::Celu, celuAttrs>;
      break;
    case OpKind::Clip:
      // Clip(0, max) runs as a clipped ReLU, other bounds as a generic
      // kernel.
      d.importOnnx = importClip;
      d.onnxTypes = {"Clip", "Max", "Min"};
      d.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
        printFloat(os, "min", op.attrs.minValue);
      };
      break;
    case OpKind::Pow:
      d.importOnnx = importPow;
      d.onnxTypes = {"Pow", "Reciprocal"}; // 1 / x is x ** -1
      d.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
        printFloat(os, "exponent", op.attrs.alpha);
      };
      break;
    case OpKind::Gelu:
      // ONNX names Gelu from opset 20; before, it is recognized from its
      // Erf or tanh expansion (compiler/onnx).
      d.importOnnx = importGelu;
      d.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
        os << " approximate=" << (op.attrs.tanhApprox ? "tanh" : "none");
      };
      break;
    case OpKind::NanTo:
      // Where(IsNaN(x), c, x), the guard torch.export puts after the
      // softmax of scaled_dot_product_attention, is recognized as one
      // operator (compiler/onnx); IsNaN on its own is refused.
      d.onnxTypes = {"IsNaN"};
      d.importOnnx = [](OnnxNode &node) {
        return node.fail("memfit supports IsNaN only as the guard "
                         "Where(IsNaN(x), c, x) with a constant scalar c");
      };
      d.signatureAttrs = [](llvm::raw_ostream &os, const Op &op) {
        printFloat(os, "fill", op.attrs.alpha);
      };
      break;
    case OpKind::LogSigmoid:
      // ONNX has no LogSigmoid: torch.onnx writes nn.LogSigmoid as
      // Log(Sigmoid(x)), which compiler/onnx recognizes as this operator.
      d.onnxTypes = {};
      d.importOnnx = nullptr;
      break;
    default: // the attribute-free rest (Relu, Tanh, Softplus, Mish, ...)
      break;
    }
    defs.push_back(std::move(d));
  }
}

} // namespace memfit::ops
