//===- Pool.cpp - Max, average and global average pooling -----------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importPool(OnnxNode &node) {
  bool isMax = node.opType() == "MaxPool";
  auto x = node.activation(0);
  auto kernel = node.attrInts("kernel_shape");
  auto ceilMode = node.attrInt("ceil_mode", 0);
  auto countPad = node.attrInt("count_include_pad", 0);
  if (llvm::Error e = firstError(x, kernel, ceilMode, countPad))
    return e;
  if (!*kernel)
    return node.fail("has no kernel_shape");
  if (isMax && node.outputUsed(1))
    return node.fail("the Indices output is used; memfit supports only the "
                     "first output of MaxPool");
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto in = spatialInput(node, xd);
  if (!in)
    return in.takeError();
  auto win = window(node, *in, **kernel, *ceilMode != 0);
  if (!win)
    return win.takeError();
  if (llvm::any_of(win->dilations, [](int64_t d) { return d != 1; }))
    return node.fail("dilations " + dimsStr(win->dilations) +
                     " are not supported; memfit pools dense windows");
  OpAttrs a;
  a.kernel = **kernel;
  a.strides = win->strides;
  a.pads = win->pads;
  a.dilations = win->dilations;
  a.ceilMode = *ceilMode != 0;
  a.countIncludePad = !isMax && *countPad != 0;
  std::vector<int64_t> out = {xd[0], xd[1]};
  out.insert(out.end(), win->out.begin(), win->out.end());
  return node
      .emit(isMax ? OpKind::MaxPool : OpKind::AveragePool, {*x},
            {{node.outputName(0), out}}, a, win->inferenceDiffers)
      .takeError();
}

std::vector<int64_t> globalPooled(const std::vector<int64_t> &xd) {
  std::vector<int64_t> out(xd.size(), 1);
  out[0] = xd[0];
  out[1] = xd[1];
  return out;
}

llvm::Error importGlobalAveragePool(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  if (auto in = spatialInput(node, xd); !in)
    return in.takeError();
  return node
      .emit(OpKind::GlobalAveragePool, {*x},
            {{node.outputName(0), globalPooled(xd)}})
      .takeError();
}

/// ReduceMean over exactly the spatial axes is a global average pool; with
/// keepdims=0 the pooled N x C x 1 x ... is then reshaped to N x C.
llvm::Error importReduceMean(OnnxNode &node) {
  auto x = node.activation(0);
  auto axes = node.attrInts("axes");
  auto keep = node.attrInt("keepdims", 1);
  auto noop = node.attrInt("noop_with_empty_axes", 0);
  if (llvm::Error e = firstError(x, axes, keep, noop))
    return e;
  if (node.hasInput(1)) { // opset 18: axes as an input
    auto v = node.intVector(1);
    if (!v)
      return v.takeError();
    *axes = *v;
  }
  if (*noop && (!*axes || (*axes)->empty()))
    return node.fail("reduces no axis (noop_with_empty_axes); memfit "
                     "supports ReduceMean only over all spatial axes");
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  std::vector<int64_t> norm;
  for (int64_t a : axes->value_or(std::vector<int64_t>()))
    norm.push_back(a < 0 ? a + rank : a);
  std::sort(norm.begin(), norm.end());
  norm.erase(std::unique(norm.begin(), norm.end()), norm.end());
  // The reduced axes must be the last ones, not the batch's: each sample's
  // rows are averaged over their trailing elements (all spatial axes of an
  // image: a global average pool; the features of a token: RMSNorm's mean
  // square).
  if (!*axes) // every axis, the batch's included
    for (int64_t a = 0; a < rank; ++a)
      norm.push_back(a);
  bool suffix =
      !norm.empty() && norm.front() >= 1 && norm.back() == rank - 1 &&
      norm.back() - norm.front() + 1 == static_cast<int64_t>(norm.size());
  if (!suffix)
    return node.fail("reduces over axes " +
                     (*axes ? dimsStr(**axes) : std::string("(all)")) +
                     " of shape " + dimsStr(xd) +
                     "; memfit supports ReduceMean over the last axes (not "
                     "the batch's)");
  std::vector<int64_t> pooled = xd, kept;
  for (int64_t a = 0; a < rank; ++a) {
    if (a >= norm.front())
      pooled[a] = 1;
    else
      kept.push_back(xd[a]);
  }
  if (*keep)
    return node
        .emit(OpKind::GlobalAveragePool, {*x}, {{node.outputName(0), pooled}})
        .takeError();
  std::string mid = node.outputName(0) + "#pooled";
  auto gap = node.emit(OpKind::GlobalAveragePool, {*x}, {{mid, pooled}});
  if (!gap)
    return gap.takeError();
  OpAttrs a;
  a.shape = kept;
  std::string name =
      node.name().empty() ? std::string() : node.name() + "#flatten";
  return node
      .emit(OpKind::Reshape, {node.graph().ops[*gap].outputs[0]},
            {{node.outputName(0), a.shape}}, a, false, name)
      .takeError();
}

/// GlobalAveragePool, or ReduceMean over every spatial axis.
llvm::Error importGlobal(OnnxNode &node) {
  return node.opType() == "ReduceMean" ? importReduceMean(node)
                                       : importGlobalAveragePool(node);
}

void signature(llvm::raw_ostream &os, const Op &op) {
  const OpAttrs &a = op.attrs;
  printList(os, "kernel", a.kernel);
  printList(os, "strides", a.strides);
  printList(os, "pads", a.pads);
  if (op.kind == OpKind::AveragePool)
    os << " count_include_pad=" << (a.countIncludePad ? 1 : 0);
}

OpWork windowWork(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  int64_t window = 1;
  for (int64_t k : op.attrs.kernel)
    window *= k;
  return {double(window) * elems(g.value(op.outputs[0]), b)};
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const OpAttrs &a = op.attrs;
  const Value &x = g.value(op.inputs[0]);
  const Value &y = g.value(op.outputs[0]);
  int64_t c, h, w, co, ho, wo;
  if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || a.kernel.size() != 2)
    return unsupportedByRuntime(op, "only 2-D pooling (NCHW) is supported");
  auto pad = [&](size_t i) { return at(a.pads, i, 0); };
  bool isMax = op.kind == OpKind::MaxPool;
  return OpParamsText{
      "PoolParams",
      llvm::formatv("{{.kind = PoolKind::{0}, .c = {1}, .hin = {2}, "
                    ".win = {3}, .hout = {4}, .wout = {5}, .kh = {6}, "
                    ".kw = {7}, .sh = {8}, .sw = {9}, .padTop = {10}, "
                    ".padLeft = {11}, .padBottom = {12}, .padRight = {13}, "
                    ".countIncludePad = {14}}",
                    isMax ? "Max" : "Average", c, h, w, ho, wo, a.kernel[0],
                    a.kernel[1], at(a.strides, 0, 1), at(a.strides, 1, 1),
                    pad(0), pad(1), pad(2), pad(3),
                    a.countIncludePad ? "true" : "false")
          .str()};
}

llvm::Expected<EmittedCall> emitPool(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.poolForward({0}, {1}, {2})", x.params,
                               x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    // Average pooling's backward reads only dY (its autodiff rule), so x
    // and y may be gone: nullptr then.
    return EmittedCall{formatv("x.poolBackward({0}, {1}, {2}, {3}, {4}, {5})",
                               x.params, x.valueIfRead(in), x.valueIfRead(y),
                               x.grad(y), x.gradIfWritten(in),
                               x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

OpWork globalWork(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {elems(g.value(op.inputs[0]), b)};
}

llvm::Expected<EmittedCall> emitGlobal(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  // Rows of the output, each the mean of `spatial` trailing elements.
  const Value &xv = x.graph.value(in);
  int64_t channels = x.graph.value(y).elementsPerSample(),
          spatial = xv.elementsPerSample() / channels;
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.gapForward({0}, {1}, {2}, {3})", channels,
                               spatial, x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.gapBackward({0}, {1}, {2}, {3}, {4})",
                               channels, spatial, x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

/// Max pooling routes dY to the maximum, which x and y locate.
void maxReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
  reads.push_back(o.output);
}

} // namespace

void registerPool(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::MaxPool,
                  .name = "MaxPool",
                  .onnxTypes = {"MaxPool"},
                  .importOnnx = importPool,
                  .dataGradReads = maxReads,
                  .costClass = CostClass::Pooling,
                  .work = windowWork,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emitPool});
  defs.push_back({.kind = OpKind::AveragePool,
                  .name = "AveragePool",
                  .onnxTypes = {"AveragePool"},
                  .importOnnx = importPool,
                  .costClass = CostClass::Pooling,
                  .work = windowWork,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emitPool});
  // ReduceMean over all spatial axes imports as this kind too.
  defs.push_back({.kind = OpKind::GlobalAveragePool,
                  .name = "GlobalAveragePool",
                  .onnxTypes = {"GlobalAveragePool", "ReduceMean"},
                  .importOnnx = importGlobal,
                  .costClass = CostClass::Pooling,
                  .work = globalWork,
                  .emit = emitGlobal});
}

} // namespace memfit::ops
