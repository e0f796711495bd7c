//===- Conv.cpp - 2-D convolution -----------------------------------------===//
//
// cuDNN's convolution on the GPU; the cost model prices each direction per
// algorithm (compiler/cost/ConvAlgo), so the entry has no work formula.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importConv(OnnxNode &node) {
  auto x = node.activation(0);
  auto w = node.weight(1, WeightInit::HeNormal, true);
  auto group = node.attrInt("group", 1);
  auto kattr = node.attrInts("kernel_shape");
  if (llvm::Error e = firstError(x, w, group, kattr))
    return e;
  std::vector<ValueId> inputs = {*x, *w};
  if (node.hasInput(2)) {
    auto b = node.weight(2, WeightInit::Zeros, true);
    if (!b)
      return b.takeError();
    inputs.push_back(*b);
  }
  std::vector<int64_t> xd = dimsOfValue(node, *x), wd = dimsOfValue(node, *w);
  auto in = spatialInput(node, xd);
  if (!in)
    return in.takeError();
  if (wd.size() != xd.size())
    return node.fail("weight of shape " + dimsStr(wd) +
                     " does not match the input of shape " + dimsStr(xd));
  int64_t m = wd[0];
  if (*group < 1 || xd[1] != wd[1] * *group || m % *group != 0)
    return node.fail(llvm::formatv("input channels {0}, weight shape {1} "
                                   "and group {2} do not agree",
                                   xd[1], dimsStr(wd), *group));
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  if (*kattr && **kattr != kernel)
    return node.fail("kernel_shape " + dimsStr(**kattr) +
                     " does not match the weight of shape " + dimsStr(wd));
  if (inputs.size() == 3 && dimsOfValue(node, inputs[2]) != std::vector{m})
    return node.fail("bias of shape " + dimsStr(dimsOfValue(node, inputs[2])) +
                     llvm::formatv(" must be [{0}]", m).str());
  auto win = window(node, *in, kernel, false);
  if (!win)
    return win.takeError();
  OpAttrs a;
  a.kernel = kernel;
  a.strides = win->strides;
  a.pads = win->pads;
  a.dilations = win->dilations;
  a.group = *group;
  std::vector<int64_t> out = {xd[0], m};
  out.insert(out.end(), win->out.begin(), win->out.end());
  return node.emit(OpKind::Conv, inputs, {{node.outputName(0), out}}, a)
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

} // namespace

void registerConv(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::Conv,
                  .name = "Conv",
                  .onnxTypes = {"Conv"},
                  .importOnnx = importConv,
                  .dataGradReads = otherOperandReads,
                  .weightGradReads = dataOperandReads,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit});
}

} // namespace memfit::ops
