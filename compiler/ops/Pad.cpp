//===- Pad.cpp - Constant padding ----------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importPad(OnnxNode &node) {
  auto x = node.activation(0);
  auto mode = node.attrString("mode", "constant");
  if (!x || !mode)
    return llvm::joinErrors(x.takeError(), mode.takeError());
  if (*mode != "constant")
    return node.fail("mode " + quoteName(*mode) +
                     " is not supported; memfit supports constant "
                     "padding");
  if (node.hasInput(3))
    return node.fail("the axes input (opset 18) is not supported; memfit "
                     "reads pads for every axis");
  std::vector<int64_t> pads;
  float value = 0.0f;
  if (node.opset() >= 11) {
    auto p = node.intVector(1);
    if (!p)
      return p.takeError();
    pads = std::move(*p);
    if (node.hasInput(2)) {
      auto v = node.scalarFloat(2);
      if (!v)
        return v.takeError();
      value = *v;
    }
  } else {
    auto p = node.attrInts("pads");
    auto v = node.attrFloat("value", 0.0f);
    if (!p || !v)
      return llvm::joinErrors(p.takeError(), v.takeError());
    pads = p->value_or(std::vector<int64_t>());
    value = *v;
  }
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  size_t rank = xd.size();
  if (pads.size() != 2 * rank)
    return node.fail(llvm::formatv("has {0} pads; the input of rank {1} "
                                   "needs {2}",
                                   pads.size(), rank, 2 * rank));
  for (int64_t p : pads)
    if (p < 0 || p > (int64_t(1) << 40))
      return node.fail("pads " + dimsStr(pads) +
                       " are invalid; memfit supports non-negative "
                       "padding (no cropping)");
  if (pads[0] != 0 || pads[rank] != 0)
    return node.fail("pads the batch axis, which would change the batch");
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; })) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  std::vector<int64_t> padded;
  for (size_t i = 0; i < rank; ++i)
    if (pads[i] || pads[rank + i])
      padded.push_back(static_cast<int64_t>(i));
  if (padded.size() > 2 || (padded.size() == 2 && padded[1] != padded[0] + 1))
    return node.fail("pads " + dimsStr(pads) +
                     " pad two axes that are not adjacent, or more; memfit "
                     "pads one axis after the batch's, or two adjacent ones "
                     "(H and W of NCHW or of NHWC)");
  std::vector<int64_t> out = xd;
  for (size_t i = 0; i < rank; ++i)
    out[i] += pads[i] + pads[rank + i];
  OpAttrs a;
  a.pads = pads;
  a.padValue = value;
  return node.emit(OpKind::Pad, {*x}, {{node.outputName(0), out}}, a)
      .takeError();
}

OpWork noFlops(const Graph &, const Op &, TaskKind, int, int64_t) {
  return {0};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  printList(os, "pads", op.attrs.pads);
}

/// The kernel pads [n, c, h, w] along h and w. Any padding of one axis
/// after the batch's (MobileBERT's trigram embedding pads the tokens of
/// [N, T, E]), or of two adjacent ones, is that: the axes before the padded
/// ones merged into c; after one padded axis, the rest into w; after two
/// (H and W of NHWC, Swin's patch merging), the rest into each w position,
/// whose pads then count that many elements each.
llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  const std::vector<int64_t> &d = x.dims;
  const auto rank = static_cast<int64_t>(d.size());
  std::vector<int64_t> padded;
  for (int64_t i = 0; i < rank && a.pads.size() == size_t(2 * rank); ++i)
    if (a.pads[i] || a.pads[rank + i])
      padded.push_back(i);
  bool one = padded.size() == 1 && padded[0] >= 1;
  bool two = padded.size() == 2 && padded[1] == padded[0] + 1 && padded[0] >= 1;
  // The batch alone on axis 0, or its outer factor there (each sample's
  // rows together: BoTNet's relative logits, [N * heads * H, W, 2W - 1]),
  // whose rows are planes of c.
  const bool sampleMajor = x.batchAxis == 0 && x.batchOuter == 1;
  if (!(x.canonical() || sampleMajor) || !(one || two))
    return unsupportedByRuntime(op, "pads more than one axis, or two that "
                                    "are not adjacent");
  const int64_t hAxis = padded[0];
  int64_t c = x.batched ? x.batchInner : 1, w = 1, inner = 1;
  for (int64_t i = 1; i < hAxis; ++i)
    c *= d[i];
  for (int64_t i = hAxis + 1; i < rank; ++i)
    w *= d[i];
  if (two)
    for (int64_t i = hAxis + 2; i < rank; ++i)
      inner *= d[i];
  int64_t h = d[hAxis];
  int64_t ho = h + a.pads[hAxis] + a.pads[rank + hAxis];
  int64_t left = two ? a.pads[hAxis + 1] * inner : 0;
  int64_t wo = two ? w + left + a.pads[rank + hAxis + 1] * inner : w;
  return OpParamsText{
      "PadParams",
      llvm::formatv("{{.c = {0}, .hin = {1}, .win = {2}, .hout = {3}, "
                    ".wout = {4}, .padTop = {5}, "
                    ".padLeft = {6}, .value = {7}}",
                    c, h, w, ho, wo, a.pads[hAxis], left, f32(a.padValue))
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.padForward({0}, {1}, {2})", x.params,
                               x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.padBackward({0}, {1}, {2}, {3})", x.params,
                               x.grad(y), x.gradIfWritten(in),
                               x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

} // namespace

void registerPad(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::Pad,
       .name = "Pad",
       .onnxTypes = {"Pad"},
       .importOnnx = importPad,
       .batchLayout = OpDef::BatchLayout::SampleMajor,
       .costClass = CostClass::Copy,
       .work = noFlops,
       .signatureAttrs = signature,
       .params = params,
       .emit = emit,
       .forms =
           "An activation with the batch alone on axis 0 or as the outer "
           "factor of axis 0 (each sample's rows together); mode `constant` "
           "only (edge, reflect and wrap are refused); `pads` from a "
           "constant input (opset 11) or the attribute, non-negative (no "
           "cropping), none on axis 0; the value a float32 scalar "
           "constant input or the `value` attribute; no `axes` input "
           "(opset 18). One padded axis after the batch's (a sequence "
           "padded, MobileBERT's trigram embedding), or two adjacent "
           "ones (H and W of NCHW, or of NHWC as Swin's patch merging "
           "pads them); more are refused. All-zero pads pass the input "
           "through.",
       .gradient = "the input"});
}

} // namespace memfit::ops
