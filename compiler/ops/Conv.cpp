//===- Conv.cpp - 2-D convolution and transposed convolution -------------===//
//
// cuDNN's convolution on the GPU; the cost model prices each direction per
// algorithm (compiler/cost/ConvAlgo), so the entry has no work formula.
//
// A transposed convolution (ConvTranspose, torch's ConvTranspose2d) is the
// backward-data pass of the convolution that maps its output back to its
// input, with the same weight tensor: its forward runs that convolution's
// backward-data kernel, its backward-data the forward kernel, and its
// weight gradient the backward-filter kernel with the roles of input and
// output swapped. Its bias is a per-channel add. No new arithmetic, so the
// CPU emulation and cuDNN agree as they do for Conv.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"
#include "compiler/ops/RuntimeKinds.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

/// What Conv and ConvTranspose read alike: data, weight, optional bias,
/// `group` and `kernel_shape`, the input's spatial dims.
struct ConvOperands {
  std::vector<ValueId> inputs;
  std::vector<int64_t> xd, wd, spatial;
  int64_t group = 1;
  std::optional<std::vector<int64_t>> kernelAttr;
};

llvm::Expected<ConvOperands> convOperands(OnnxNode &node) {
  auto x = node.activation(0);
  auto w = node.weight(1, WeightInit::HeNormal, true);
  auto group = node.attrInt("group", 1);
  auto kattr = node.attrInts("kernel_shape");
  if (llvm::Error e = firstError(x, w, group, kattr))
    return std::move(e);
  ConvOperands c;
  c.inputs = {*x, *w};
  if (node.hasInput(2)) {
    auto b = node.weight(2, WeightInit::Zeros, true);
    if (!b)
      return b.takeError();
    c.inputs.push_back(*b);
  }
  c.xd = dimsOfValue(node, *x);
  c.wd = dimsOfValue(node, *w);
  auto in = spatialInput(node, c.xd);
  if (!in)
    return in.takeError();
  if (c.wd.size() != c.xd.size())
    return node.fail("weight of shape " + dimsStr(c.wd) +
                     " does not match the input of shape " + dimsStr(c.xd));
  c.spatial = *in;
  c.group = *group;
  c.kernelAttr = *kattr;
  return c;
}

llvm::Error importConv(OnnxNode &node) {
  auto ops = convOperands(node);
  if (!ops)
    return ops.takeError();
  const std::vector<int64_t> &xd = ops->xd, &wd = ops->wd;
  int64_t m = wd[0];
  if (ops->group < 1 || xd[1] != wd[1] * ops->group || m % ops->group != 0)
    return node.fail(llvm::formatv("input channels {0}, weight shape {1} "
                                   "and group {2} do not agree",
                                   xd[1], dimsStr(wd), ops->group));
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  if (ops->kernelAttr && *ops->kernelAttr != kernel)
    return node.fail("kernel_shape " + dimsStr(*ops->kernelAttr) +
                     " does not match the weight of shape " + dimsStr(wd));
  if (ops->inputs.size() == 3 &&
      dimsOfValue(node, ops->inputs[2]) != std::vector{m})
    return node.fail("bias of shape " +
                     dimsStr(dimsOfValue(node, ops->inputs[2])) +
                     llvm::formatv(" must be [{0}]", m).str());
  auto win = window(node, ops->spatial, kernel, false);
  if (!win)
    return win.takeError();
  OpAttrs a;
  a.kernel = kernel;
  a.strides = win->strides;
  a.pads = win->pads;
  a.dilations = win->dilations;
  a.group = ops->group;
  std::vector<int64_t> out = {xd[0], m};
  out.insert(out.end(), win->out.begin(), win->out.end());
  return node.emit(OpKind::Conv, ops->inputs, {{node.outputName(0), out}}, a)
      .takeError();
}

/// ConvTranspose: out = stride * (in - 1) + output_padding +
/// dilation * (kernel - 1) + 1 - pads, per spatial axis.
llvm::Error importConvTranspose(OnnxNode &node) {
  auto ops = convOperands(node);
  auto strides = node.attrInts("strides");
  auto pads = node.attrInts("pads");
  auto dilations = node.attrInts("dilations");
  auto outPad = node.attrInts("output_padding");
  auto outShape = node.attrInts("output_shape");
  auto autoPad = node.attrString("auto_pad", "NOTSET");
  if (llvm::Error e =
          firstError(ops, strides, pads, dilations, outPad, outShape, autoPad))
    return e;
  const std::vector<int64_t> &xd = ops->xd, &wd = ops->wd;
  const size_t r = ops->spatial.size();
  if (ops->group < 1 || xd[1] != wd[0] || wd[0] % ops->group != 0)
    return node.fail(llvm::formatv("input channels {0}, weight shape {1} "
                                   "and group {2} do not agree",
                                   xd[1], dimsStr(wd), ops->group));
  int64_t m = wd[1] * ops->group;
  if (*autoPad != "NOTSET")
    return node.fail("auto_pad " + quoteName(*autoPad) +
                     " is not supported; memfit reads explicit pads");
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  auto list = [&](const std::optional<std::vector<int64_t>> &v, size_t n,
                  int64_t dflt) {
    return v ? *v : std::vector<int64_t>(n, dflt);
  };
  std::vector<int64_t> st = list(*strides, r, 1), pd = list(*pads, 2 * r, 0),
                       dl = list(*dilations, r, 1), op = list(*outPad, r, 0);
  if ((ops->kernelAttr && *ops->kernelAttr != kernel) || st.size() != r ||
      pd.size() != 2 * r || dl.size() != r || op.size() != r)
    return node.fail("kernel_shape, strides, pads, dilations or "
                     "output_padding do not match the weight of shape " +
                     dimsStr(wd));
  if (ops->inputs.size() == 3 &&
      dimsOfValue(node, ops->inputs[2]) != std::vector{m})
    return node.fail("bias of shape " +
                     dimsStr(dimsOfValue(node, ops->inputs[2])) +
                     llvm::formatv(" must be [{0}]", m).str());
  std::vector<int64_t> out = {xd[0], m};
  for (size_t i = 0; i < r; ++i) {
    bool ok = st[i] >= 1 && st[i] <= kMaxWindow && dl[i] >= 1 &&
              dl[i] <= kMaxWindow && kernel[i] <= kMaxWindow && pd[i] >= 0 &&
              pd[i + r] >= 0 && pd[i] <= kMaxWindow &&
              pd[i + r] <= kMaxWindow && op[i] >= 0 && op[i] < st[i];
    int64_t o = st[i] * (ops->spatial[i] - 1) + op[i] +
                dl[i] * (kernel[i] - 1) + 1 - pd[i] - pd[i + r];
    if (!ok || o <= 0 || o > kMaxWindow)
      return node.fail(llvm::formatv(
          "spatial axis {0}: input {1}, kernel {2}, stride {3}, dilation "
          "{4}, pads {5} and {6}, output_padding {7} give no valid output "
          "(output_padding must be below the stride)",
          i, ops->spatial[i], kernel[i], st[i], dl[i], pd[i], pd[i + r],
          op[i]));
    out.push_back(o);
  }
  if (*outShape &&
      **outShape != std::vector<int64_t>(out.begin() + 2, out.end()) &&
      **outShape != out)
    return node.fail("output_shape " + dimsStr(**outShape) +
                     " differs from the shape the pads give, " + dimsStr(out) +
                     "; memfit reads explicit pads");
  OpAttrs a;
  a.kernel = kernel;
  a.strides = st;
  a.pads = pd;
  a.dilations = dl;
  a.group = ops->group;
  return node
      .emit(OpKind::ConvTranspose, ops->inputs, {{node.outputName(0), out}}, a)
      .takeError();
}

void signature(llvm::raw_ostream &os, const Op &op) {
  const OpAttrs &a = op.attrs;
  printList(os, "kernel", a.kernel);
  printList(os, "strides", a.strides);
  printList(os, "pads", a.pads);
  printList(os, "dilations", a.dilations);
  os << " group=" << a.group;
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  const Value &y = g.value(op.outputs[0]);
  int64_t c, h, w, co, ho, wo;
  if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || a.kernel.size() != 2)
    return unsupportedByRuntime(op,
                                "only 2-D convolutions (NCHW) are supported");
  auto pad = [&](size_t i) { return at(a.pads, i, 0); };
  return OpParamsText{
      "ConvParams",
      llvm::formatv(
          "{{.cin = {0}, .hin = {1}, .win = {2}, .cout = {3}, "
          ".hout = {4}, .wout = {5}, .kh = {6}, .kw = {7}, .sh = {8}, "
          ".sw = {9}, .padTop = {10}, .padLeft = {11}, .dh = {12}, "
          ".dw = {13}, .group = {14}}",
          c, h, w, co, ho, wo, a.kernel[0], a.kernel[1], at(a.strides, 0, 1),
          at(a.strides, 1, 1), pad(0), pad(1), at(a.dilations, 0, 1),
          at(a.dilations, 1, 1), a.group)
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId in = op.inputs[0], w = op.inputs[1], y = op.outputs[0];
  // The bias is the optional third operand.
  std::string bias = op.inputs.size() > 2 ? x.value(op.inputs[2]) : "nullptr";
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.convForward({0}, {1}, {2}, {3}, {4}, {5}, "
                               "{6})",
                               x.params, x.algo, x.value(in), x.value(w), bias,
                               x.value(y), x.workspace)
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.convBackwardData({0}, {1}, {2}, {3}, {4}, "
                               "{5}, {6})",
                               x.params, x.algo, x.value(w), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in),
                               x.workspace)
                           .str()};
  default: {
    std::string biasGrad =
        op.inputs.size() > 2 ? x.gradIfWritten(op.inputs[2]) : "nullptr";
    return EmittedCall{formatv("x.convBackwardFilter({0}, {1}, {2}, {3}, {4}, "
                               "{5}, {6}, {7})",
                               x.params, x.algo, x.value(in), x.grad(y),
                               x.gradIfWritten(w), biasGrad, x.accumulates(w),
                               x.workspace)
                           .str()};
  }
  }
}

// --- ConvTranspose ---

/// The multiply-adds of every direction: each input element meets every
/// tap of its group's output channels.
OpWork transposeWork(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  const Value &w = g.value(op.inputs[1]);
  double taps = 1;
  for (size_t i = 1; i < w.dims.size(); ++i)
    taps *= double(w.dims[i]);
  return {2 * elems(g.value(op.inputs[0]), b) * taps};
}

/// The convolution whose backward-data pass the op is: from the op's
/// output (its input) to the op's input (its output).
llvm::Expected<OpParamsText> transposeParams(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  const Value &y = g.value(op.outputs[0]);
  int64_t c, h, w, co, ho, wo;
  if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || a.kernel.size() != 2)
    return unsupportedByRuntime(
        op, "only 2-D transposed convolutions (NCHW) are supported");
  return OpParamsText{
      "ConvParams",
      llvm::formatv(
          "{{.cin = {0}, .hin = {1}, .win = {2}, .cout = {3}, "
          ".hout = {4}, .wout = {5}, .kh = {6}, .kw = {7}, .sh = {8}, "
          ".sw = {9}, .padTop = {10}, .padLeft = {11}, .dh = {12}, "
          ".dw = {13}, .group = {14}}",
          co, ho, wo, c, h, w, a.kernel[0], a.kernel[1], a.strides[0],
          a.strides[1], a.pads[0], a.pads[1], a.dilations[0], a.dilations[1],
          a.group)
          .str()};
}

/// The bias as a per-channel operand of an add over the output.
std::string biasParams(const Graph &g, const Op &op) {
  const Value &y = g.value(op.outputs[0]);
  int64_t c = y.dims[1], plane = y.elementsPerSample() / c;
  return llvm::formatv("BinaryParams{{.kind = BinaryKind::{0}, .perSample = "
                       "{1}, .bBatched = false, .bSize = {2}, .inner = {3}}",
                       runtimeKind(RtBinary::Add).name, y.elementsPerSample(),
                       c, plane)
      .str();
}

llvm::Expected<EmittedCall> transposeEmit(EmitContext &x) {
  const Op &op = x.op;
  ValueId in = op.inputs[0], w = op.inputs[1], y = op.outputs[0];
  bool bias = op.inputs.size() > 2;
  using llvm::formatv;
  // Algorithm 0 of each direction needs no workspace.
  switch (x.task.kind) {
  case TaskKind::Forward: {
    std::string code =
        formatv("x.convBackwardData({0}, 0, {1}, {2}, {3}, false, 0, 0)",
                x.params, x.value(w), x.value(in), x.value(y));
    if (bias)
      code +=
          formatv("; x.binaryForward({0}, {1}, {2}, {1})",
                  biasParams(x.graph, op), x.value(y), x.value(op.inputs[2]));
    return EmittedCall{code};
  }
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.convTransposeBackwardData({0}, {1}, {2}, "
                               "{3}, {4})",
                               x.params, x.grad(y), x.value(w),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default: {
    std::string code = formatv("x.convBackwardFilter({0}, 0, {1}, {2}, {3}, "
                               "nullptr, {4}, 0, 0)",
                               x.params, x.grad(y), x.value(in),
                               x.gradIfWritten(w), x.accumulates(w));
    if (bias && x.writesGrad(op.inputs[2]))
      code += formatv("; x.binaryBackward({0}, nullptr, nullptr, {1}, "
                      "nullptr, {2}, false, {3})",
                      biasParams(x.graph, op), x.grad(y), x.grad(op.inputs[2]),
                      x.accumulates(op.inputs[2]));
    return EmittedCall{code};
  }
  }
}

/// What importConv accepts and refuses (OpDef::forms).
constexpr std::string_view kConvForms =
    "X [N, C, D1, ...] with the batch alone on axis 0; W a float32 weight [M, "
    "C/group, k1, ...] (not a computed value), optional bias B [M]. `group` "
    "dividing C and M (depthwise too); `strides`, `dilations` at least 1, "
    "`pads` non-negative; `auto_pad` NOTSET, VALID or SAME_* (those without "
    "pads); `kernel_shape` must match W. Any number of spatial axes imports; "
    "generated code runs only 2-D.";
/// What importConvTranspose accepts and refuses (OpDef::forms).
constexpr std::string_view kConvTransposeForms =
    "X [N, C, D1, ...] with the batch alone on axis 0; W a float32 weight [C, "
    "M/group, k1, ...] (not a computed value), optional bias B [M]. `group` "
    "dividing C; `strides`, `dilations` at least 1, `pads` non-negative, "
    "`output_padding` below the stride; `auto_pad` NOTSET only; "
    "`output_shape` only when it equals what the pads give; `kernel_shape` "
    "must match W. Any number of spatial axes imports; generated code runs "
    "only 2-D.";
/// What the backward of either differentiates (OpDef::gradient).
constexpr std::string_view kGradient = "X, W and B (not a constant W or B)";

} // namespace

void registerConv(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::ConvTranspose,
                  .name = "ConvTranspose",
                  .onnxTypes = {"ConvTranspose"},
                  .importOnnx = importConvTranspose,
                  .dataGradReads = otherOperandReads,
                  .weightGradReads = dataOperandReads,
                  .lowerPrecision = true,
                  .costClass = CostClass::Gemm,
                  .tensorCores = true,
                  .work = transposeWork,
                  .signatureAttrs = signature,
                  .params = transposeParams,
                  .emit = transposeEmit,
                  .forms = kConvTransposeForms,
                  .gradient = kGradient});
  defs.push_back({.kind = OpKind::Conv,
                  .name = "Conv",
                  .onnxTypes = {"Conv"},
                  .importOnnx = importConv,
                  .dataGradReads = otherOperandReads,
                  .weightGradReads = dataOperandReads,
                  .lowerPrecision = true,
                  .tensorCores = true,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit,
                  .forms = kConvForms,
                  .gradient = kGradient});
}

} // namespace memfit::ops
