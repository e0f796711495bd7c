//===- Activation.cpp - Relu, LeakyRelu, Sigmoid, Tanh, Clip --------------===//
//
// Elementwise with a derivative that is a function of the output, so the
// backward reads Y alone and the forward may overwrite its input.
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
      {"LeakyRelu", OpKind::LeakyRelu}};
  auto x = node.activation(0);
  auto alpha = node.attrFloat("alpha", 0.01f);
  if (llvm::Error e = firstError(x, alpha))
    return e;
  OpAttrs a;
  if (node.opType() == "LeakyRelu")
    a.alpha = *alpha;
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

void readsOutput(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.output);
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

/// Clip(0, max) runs as a clipped ReLU, other bounds as a generic kernel.
void clipSignature(llvm::raw_ostream &os, const Op &op) {
  printFloat(os, "min", op.attrs.minValue);
}

const char *actKind(OpKind k) {
  return k == OpKind::Relu        ? "Relu"
         : k == OpKind::LeakyRelu ? "LeakyRelu"
         : k == OpKind::Sigmoid   ? "Sigmoid"
         : k == OpKind::Tanh      ? "Tanh"
                                  : "Clip";
}

llvm::Expected<OpParamsText> params(const Graph &, const Op &op) {
  const OpAttrs &a = op.attrs;
  return OpParamsText{
      "ActParams",
      llvm::formatv("{{.kind = ActKind::{0}, .alpha = {1}, .lo = {2}, "
                    ".hi = {3}}",
                    actKind(op.kind), f32(a.alpha), f32(a.minValue),
                    f32(a.maxValue))
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
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.actBackward({0}, {1}, {2}, {3}, {4}, {5})",
                               x.params, perSample, x.value(y), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
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
}

} // namespace memfit::ops
