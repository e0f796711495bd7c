//===- Resize.cpp - Nearest and bilinear resizing of NCHW planes ----------===//
//
// ONNX Resize (and Upsample before opset 10) over the two spatial axes,
// with ONNX's coordinate transformation modes, so PyTorch's
// F.interpolate(mode='nearest'|'bilinear', align_corners=...) exports map
// onto it as they are. The backward sends each output's gradient to the
// input positions it read, with the same weights.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

#include <cmath>

namespace memfit::ops {
namespace {

llvm::Expected<int64_t> code(OnnxNode &node, llvm::StringRef what,
                             const std::string &value,
                             std::initializer_list<const char *> names) {
  int64_t i = 0;
  for (const char *n : names) {
    if (value == n)
      return i;
    ++i;
  }
  return node.fail(llvm::Twine(what) + " " + quoteName(value) +
                   " is not supported");
}

llvm::Error importResize(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  bool upsample = node.opType() == "Upsample";
  int64_t opset = node.opset();
  auto mode = node.attrString("mode", "nearest");
  auto coord =
      node.attrString("coordinate_transformation_mode",
                      upsample || opset < 11 ? "asymmetric" : "half_pixel");
  auto nearest = node.attrString(
      "nearest_mode", upsample || opset < 11 ? "floor" : "round_prefer_floor");
  auto exclude = node.attrInt("exclude_outside", 0);
  // Opset 18's additions, accepted where they change nothing.
  auto antialias = node.attrInt("antialias", 0);
  auto axes = node.attrInts("axes");
  auto policy = node.attrString("keep_aspect_ratio_policy", "stretch");
  if (llvm::Error e =
          firstError(mode, coord, nearest, exclude, antialias, axes, policy))
    return e;
  if (*axes && **axes != std::vector<int64_t>{0, 1, 2, 3})
    return node.fail("axes " + dimsStr(**axes) +
                     " are not supported; memfit reads scales or sizes for "
                     "all four axes");
  if (*policy != "stretch")
    return node.fail("keep_aspect_ratio_policy " + quoteName(*policy) +
                     " is not supported");
  bool linear = *mode == "linear" || *mode == "bilinear";
  if (!linear && *mode != "nearest")
    return node.fail("mode " + quoteName(*mode) +
                     " is not supported; memfit resizes by nearest or "
                     "linear interpolation");
  auto coordCode =
      code(node, "coordinate_transformation_mode", *coord,
           {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"});
  auto nearestCode =
      code(node, "nearest_mode", *nearest,
           {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  if (llvm::Error e = firstError(coordCode, nearestCode))
    return e;
  if (*exclude)
    return node.fail("exclude_outside is not supported");
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  if (xd.size() != 4)
    return node.fail("resizes a value of shape " + dimsStr(xd) +
                     "; memfit resizes the two spatial axes of NCHW values");
  // Scales (opset 10+ input 1 or 2; Upsample: input 1 or attribute) or
  // sizes (input 3).
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  int scalesAt = upsample || opset < 11 ? 1 : 2;
  if (upsample && opset < 9)
    return node.fail("Upsample before opset 9 is not supported");
  if (!upsample && opset >= 11 && node.hasInput(3)) {
    // torch writes sizes as Concat(Shape(x)[:2], [H, W]): the batch is
    // symbolic until planning fixes it.
    auto s = node.intConstant(3);
    if (!s)
      return s.takeError();
    bool ok = !s->isFloat && s->numel() == 4;
    for (int64_t i = 0; ok && i < 4; ++i)
      ok = s->isBatch(i) == (i == 0) || (i == 0 && s->ints[0] == xd[0]);
    if (!ok || s->ints[0] != xd[0] || s->ints[1] != xd[1])
      return node.fail("sizes " + s->str() +
                       " must keep the batch and the channels of " +
                       dimsStr(xd));
    sizes = s->ints;
  } else {
    auto s = node.floatVector(scalesAt);
    if (!s)
      return s.takeError();
    scales = *s;
  }
  std::vector<int64_t> out = xd;
  if (!sizes.empty()) {
    out = sizes;
    for (int i : {2, 3})
      scales.push_back(float(out[i]) / float(xd[i]));
  } else {
    if (scales.size() != 4 || scales[0] != 1.0f || scales[1] != 1.0f)
      return node.fail("scales must be 1 on the batch and the channels");
    scales.erase(scales.begin(), scales.begin() + 2);
    for (int i : {2, 3})
      out[i] = static_cast<int64_t>(std::floor(xd[i] * scales[i - 2]));
  }
  // Every coordinate mode above reads position i of a plane for output i
  // when the sizes agree, by either interpolation: the identity. BEiT
  // interpolates its relative position table to the window it has, which
  // is the table's own size for a model at its pretrained resolution.
  if (out == xd) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  if (!node.graph().value(*x).batched)
    return node.fail("resizes a value computed from weights from " +
                     dimsStr(xd) + " to " + dimsStr(out) +
                     "; memfit computes on such values only a Resize that "
                     "keeps their size");
  // Antialiasing only changes downscaling.
  if (*antialias && (scales[0] < 1 || scales[1] < 1))
    return node.fail("antialiased downscaling is not supported");
  if (out[2] <= 0 || out[3] <= 0 || out[2] > kMaxWindow ||
      out[3] > kMaxWindow || !(scales[0] > 0) || !(scales[1] > 0))
    return node.fail("resizes " + dimsStr(xd) + " to the invalid shape " +
                     dimsStr(out));
  OpAttrs a;
  a.linear = linear;
  a.coordMode = *coordCode;
  a.nearestMode = *nearestCode;
  a.scales = scales;
  return node.emit(OpKind::Resize, {*x}, {{node.outputName(0), out}}, a)
      .takeError();
}

OpWork work(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {(op.attrs.linear ? 8 : 1) * elems(g.value(op.outputs[0]), b)};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  os << " mode=" << (op.attrs.linear ? "linear" : "nearest")
     << " coord=" << op.attrs.coordMode;
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]), &y = g.value(op.outputs[0]);
  int64_t c, hin, win, cy, hout, wout;
  if (!chw(x, c, hin, win) || !chw(y, cy, hout, wout))
    return unsupportedByRuntime(op, "expects NCHW operands");
  return OpParamsText{
      "ResizeParams",
      llvm::formatv("{{.c = {0}, .hin = {1}, .win = {2}, .hout = {3}, "
                    ".wout = {4}, .linear = {5}, .coordMode = {6}, "
                    ".nearestMode = {7}, .scaleH = {8}, .scaleW = {9}}",
                    c, hin, win, hout, wout, op.attrs.linear ? "true" : "false",
                    op.attrs.coordMode, op.attrs.nearestMode,
                    f32(op.attrs.scales[0]), f32(op.attrs.scales[1]))
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.resizeForward({0}, {1}, {2})", x.params,
                               x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.resizeBackward({0}, {1}, {2}, {3})", x.params,
                               x.grad(y), x.gradIfWritten(in),
                               x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

} // namespace

void registerResize(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::Resize,
       .name = "Resize",
       .onnxTypes = {"Resize", "Upsample"},
       .importOnnx = importResize,
       .costClass = CostClass::Pooling,
       .work = work,
       .signatureAttrs = signature,
       .params = params,
       .emit = emit,
       .forms =
           "Resize (opset 10 on) and Upsample (opset 9 on) of a 4-D NCHW "
           "activation over H and W: `mode` nearest or linear (cubic refused); "
           "`coordinate_transformation_mode` half_pixel, pytorch_half_pixel, "
           "align_corners or asymmetric; any `nearest_mode`; constant float32 "
           "scales of 1 on N and C, or constant sizes (opset 11) keeping N and "
           "C; `antialias` only without downscaling; `axes` only all four; "
           "`keep_aspect_ratio_policy` stretch; no `exclude_outside`. A Resize "
           "to its input's own size is the identity, also on a value "
           "computed from weights.",
       .gradient = "the input"});
}

} // namespace memfit::ops
