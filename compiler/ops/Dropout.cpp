//===- Dropout.cpp - Inverted dropout with a counter-based mask -----------===//
//
// The mask is a function of (seed, iteration, task, sample, element), so
// the backward and any recomputed forward regenerate it instead of storing
// it: BP-data reads dY alone. Evaluation passes the input through.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

/// Opset 12 and later say whether Dropout trains (training_mode); without
/// it, or with it false, the node is the identity and disappears. Before
/// opset 12 the node stands for the network's dropout layer, applied in
/// training, so it is kept.
llvm::Error importDropout(OnnxNode &node) {
  float ratio = 0.5f;
  bool training = true;
  if (node.opset() >= 12) {
    if (node.hasInput(1)) {
      auto r = node.scalarFloat(1);
      if (!r)
        return r.takeError();
      ratio = *r;
    }
    training = false;
    if (node.hasInput(2)) {
      auto t = node.intConstant(2);
      if (!t)
        return t.takeError();
      if (t->isFloat || t->numel() != 1)
        return node.fail("training_mode must be a boolean scalar");
      training = t->ints[0] != 0;
    }
  } else {
    auto r = node.attrFloat("ratio", 0.5f);
    if (!r)
      return r.takeError();
    ratio = *r;
  }
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return node.fail(llvm::formatv("ratio {0} is not in [0, 1)", ratio));
  if (node.outputUsed(1))
    return node.fail("the mask output is used; memfit supports only the "
                     "first output of Dropout");
  if (!training || ratio == 0.0f) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  // A constant dropped out (Funnel's sinusoidal table): a value without a
  // batch, masked once for every sample as torch masks it once a forward.
  auto x = node.isActivation(node.inputName(0)) ? node.activation(0)
                                                : node.constantWeight(0);
  if (!x)
    return x.takeError();
  OpAttrs a;
  a.ratio = ratio;
  if (!node.graph().values[*x].batched) {
    OutSpec o{node.outputName(0), dimsOfValue(node, *x)};
    o.unbatched = true;
    return node.emit(OpKind::Dropout, {*x}, {o}, a).takeError();
  }
  return node
      .emit(OpKind::Dropout, {*x},
            {{node.outputName(0), dimsOfValue(node, *x)}}, a)
      .takeError();
}

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 2 : 1) * out};
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  return OpParamsText{
      "DropoutParams",
      llvm::formatv("{{.perSample = {0}, .ratio = {1}{2}}",
                    x.elementsPerSample(), f32(op.attrs.ratio),
                    op.attrs.wholeSample ? ", .wholeSample = true" : "")
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  // The mask's key is the op's id, the same in the forward, its recompute
  // and the backward.
  switch (x.task.kind) {
  case TaskKind::Forward:
    if (x.tg.evaluation) // eval mode: the identity
      return EmittedCall{formatv("x.copy({0}, {1}, {2})",
                                 x.graph.values[in].elementsPerSample(),
                                 x.value(in), x.value(y))
                             .str()};
    return EmittedCall{formatv("x.dropoutForward({0}, {1}, {2}, {3})", x.params,
                               x.task.op, x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.dropoutBackward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.task.op, x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

/// What importDropout accepts and refuses (OpDef::forms).
constexpr std::string_view kForms =
    "X with each sample's elements together (the batch outermost). Opset 12+: "
    "`ratio` a float32 scalar constant input (default 0.5), `training_mode` a "
    "boolean scalar constant input; absent or false, the node is the identity "
    "and disappears. Before 12 the node trains with its `ratio` attribute. "
    "Ratio in [0, 1); 0 disappears. The mask output must be unused. memfit "
    "draws its own mask, not torch's numbers.";
/// What its backward differentiates (OpDef::gradient).
constexpr std::string_view kGradient =
    "the input (its mask drawn again, not stored)";

} // namespace

void signature(llvm::raw_ostream &os, const Op &op) {
  if (op.attrs.wholeSample)
    os << " whole_sample";
}

void registerDropout(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::Dropout,
                  .name = "Dropout",
                  .onnxTypes = {"Dropout"},
                  .importOnnx = importDropout,
                  .batchLayout = OpDef::BatchLayout::SampleMajor,
                  .mayRunInPlace = true,
                  .work = work,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit,
                  .forms = kForms,
                  .gradient = kGradient});
}

} // namespace memfit::ops
