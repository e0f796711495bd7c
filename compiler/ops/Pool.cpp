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

/// The kept axes and the reduced ones (last in a value's dims) as the rows
/// and columns of one plane, [N, K, 1, L], and that plane pooled to one
/// element a row, [N, K, 1, 1]: ReduceMax, ReduceMin and ReduceLogSumExp
/// find each row's maximum with a max pool of one [1, L] window a row (dY
/// goes to the row's first maximum, as with torch.max(x, dim)).
struct RowPlane {
  std::vector<int64_t> rows, pooled;
  OpAttrs view, maxPool;
};

/// The plane of `v` (dims `dims`, the first `keptAxes` kept), or an error
/// when the batch is not alone on axis 0, which the pool needs.
llvm::Expected<RowPlane> rowPlane(OnnxNode &node, ValueId v,
                                  const std::vector<int64_t> &dims,
                                  size_t keptAxes) {
  if (!node.graph().values[v].canonical())
    return node.fail("reduces a value whose batch is not alone on axis 0; "
                     "memfit supports " +
                     node.opType().str() + " with the batch there");
  int64_t kept = 1, len = 1;
  for (size_t i = 1; i < dims.size(); ++i)
    (i < keptAxes ? kept : len) *= dims[i];
  RowPlane p;
  p.rows = {dims[0], kept, 1, len};
  p.pooled = {dims[0], kept, 1, 1};
  p.view.shape = p.rows;
  p.maxPool.kernel = {1, len};
  p.maxPool.strides = {1, len};
  p.maxPool.pads = {0, 0, 0, 0};
  p.maxPool.dilations = {1, 1};
  return p;
}

/// The last step of a reduction whose result has dims `have`: a view to
/// ONNX's shape `out` where they differ.
template <typename Step>
llvm::Error viewTo(const std::vector<int64_t> &out,
                   const std::vector<int64_t> &have, ValueId v, Step &step) {
  if (out == have)
    return llvm::Error::success();
  OpAttrs a;
  a.shape = out;
  return step(OpKind::Reshape, {v}, out, a, true, "view");
}

/// The rest of ReduceMax and ReduceMin once the reduced axes are last in
/// `dims` (the value `v`): the row plane's max pool, negated before and
/// after for the minimum, and a view to ONNX's shape.
template <typename Step>
llvm::Error reduceExtreme(OnnxNode &node, bool min, size_t keptAxes,
                          const std::vector<int64_t> &out, ValueId &v,
                          std::vector<int64_t> &dims, Step &step) {
  auto plane = rowPlane(node, v, dims, keptAxes);
  if (!plane)
    return plane.takeError();
  if (min)
    if (llvm::Error e = step(OpKind::Neg, {v}, dims, {}, false, "negated"))
      return e;
  if (llvm::Error e =
          step(OpKind::Reshape, {v}, plane->rows, plane->view, false, "rows"))
    return e;
  bool view = out != plane->pooled;
  if (llvm::Error e = step(OpKind::MaxPool, {v}, plane->pooled, plane->maxPool,
                           !view && !min, "max"))
    return e;
  if (min)
    if (llvm::Error e = step(OpKind::Neg, {v}, dims, {}, !view, "min"))
      return e;
  return viewTo(out, plane->pooled, v, step);
}

/// ReduceLogSumExp once the reduced axes are last in `dims` (the value
/// `v`), as torch.logsumexp computes it: each row's maximum m (the row
/// plane's max pool), exp(x - m) summed (the global pool times the row's
/// length), its Log, plus m, and a view to ONNX's shape. The gradient
/// through m is 1 - sum(softmax), zero but for rounding, as in torch's own
/// backward.
template <typename Step>
llvm::Error reduceLogSumExp(OnnxNode &node, size_t keptAxes,
                            const std::vector<int64_t> &out, ValueId &v,
                            std::vector<int64_t> &dims, Step &step) {
  auto plane = rowPlane(node, v, dims, keptAxes);
  if (!plane)
    return plane.takeError();
  const std::vector<int64_t> &rowDims = plane->rows, &pooled = plane->pooled;
  if (llvm::Error e =
          step(OpKind::Reshape, {v}, rowDims, plane->view, false, "rows"))
    return e;
  const ValueId rows = v;
  if (llvm::Error e =
          step(OpKind::MaxPool, {rows}, pooled, plane->maxPool, false, "max"))
    return e;
  const ValueId max = v;
  if (llvm::Error e =
          step(OpKind::Sub, {rows, max}, rowDims, {}, false, "shifted"))
    return e;
  if (llvm::Error e = step(OpKind::Exp, {v}, rowDims, {}, false, "exp"))
    return e;
  if (llvm::Error e =
          step(OpKind::GlobalAveragePool, {v}, pooled, {}, false, "mean"))
    return e;
  ValueId c = node.scalarConstant(static_cast<float>(rowDims[3]));
  if (llvm::Error e = step(OpKind::Mul, {v, c}, pooled, {}, false, "sum"))
    return e;
  if (llvm::Error e = step(OpKind::Log, {v}, pooled, {}, false, "log"))
    return e;
  if (llvm::Error e =
          step(OpKind::Add, {v, max}, pooled, {}, out == pooled, "lse"))
    return e;
  return viewTo(out, pooled, v, step);
}

/// ReduceMean, ReduceSum, ReduceSumSquare, ReduceL1 and ReduceL2 over any
/// axes but the batch's, as the ops memfit has: the reduced axes moved
/// last (Transpose, when they are not; ConvNeXt's channels-first
/// LayerNorm, ConvNeXt V2's norm over H and W of NHWC), squared (Pow 2)
/// for the sums of squares or Abs for L1, a global average pool over them,
/// times their count for the sums, Sqrt for L2 (x.norm(dim=...),
/// F.normalize), and a view to the ONNX shape (keepdims or not). Each step
/// has its own backward.
llvm::Error importReduce(OnnxNode &node) {
  llvm::StringRef op = node.opType();
  auto x = node.activation(0);
  auto axes = node.attrInts("axes");
  auto keep = node.attrInt("keepdims", 1);
  auto noop = node.attrInt("noop_with_empty_axes", 0);
  if (llvm::Error e = firstError(x, axes, keep, noop))
    return e;
  if (node.hasInput(1)) { // axes as an input (ReduceSum 13, the rest 18)
    auto v = node.intVector(1);
    if (!v)
      return v.takeError();
    *axes = *v;
  }
  if (*noop && (!*axes || (*axes)->empty()))
    return node.fail("reduces no axis (noop_with_empty_axes); memfit "
                     "supports " +
                     op.str() + " over axes other than the batch's");
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  std::vector<int64_t> norm;
  for (int64_t a : axes->value_or(std::vector<int64_t>()))
    norm.push_back(a < 0 ? a + rank : a);
  if (!*axes || axes->value().empty()) // every axis, the batch's included
    for (int64_t a = 0; a < rank; ++a)
      norm.push_back(a);
  std::sort(norm.begin(), norm.end());
  norm.erase(std::unique(norm.begin(), norm.end()), norm.end());
  // Axes after the batch's only: the batch stays where it is through the
  // steps below (a value whose batch lies on axis 1, [T, N, C], reduces C).
  const Value &xv = node.graph().values[*x];
  const int64_t after = xv.batched ? xv.batchAxis + 1 : 1;
  if (norm.empty() || norm.front() < after || norm.back() >= rank)
    return node.fail("reduces over axes " +
                     (*axes ? dimsStr(**axes) : std::string("(all)")) +
                     " of shape " + dimsStr(xd) + "; memfit supports " +
                     op.str() + " over axes after the batch's");
  std::vector<int64_t> perm, out;
  for (int64_t a = 0; a < rank; ++a)
    if (!std::binary_search(norm.begin(), norm.end(), a))
      perm.push_back(a);
  size_t keptAxes = perm.size();
  perm.insert(perm.end(), norm.begin(), norm.end());
  for (int64_t a = 0; a < rank; ++a) {
    bool reduced = std::binary_search(norm.begin(), norm.end(), a);
    if (!reduced || *keep)
      out.push_back(reduced ? 1 : xd[a]);
  }
  int64_t count = 1;
  for (int64_t a : norm)
    count *= xd[a];
  bool squares = op == "ReduceL2" || op == "ReduceSumSquare";
  bool sums = op != "ReduceMean";
  std::string name = node.outputName(0);
  // The steps still to emit after the one at hand: the last takes the
  // node's output name, the others the name with the step's.
  std::vector<int64_t> dims = xd;
  ValueId v = *x;
  auto step = [&](OpKind kind, std::vector<ValueId> in, std::vector<int64_t> d,
                  OpAttrs a, bool last, const char *what) -> llvm::Error {
    std::string out = last ? name : name + "#" + what;
    // The pool is the node's op; the other steps are named after it.
    // (ReduceLogSumExp's maximum is a step of its sum.)
    bool named = kind == OpKind::GlobalAveragePool ||
                 (kind == OpKind::MaxPool && op != "ReduceLogSumExp");
    std::string opName =
        node.name().empty() || named ? std::string() : node.name() + "#" + what;
    auto id = node.emit(kind, std::move(in), {{out, d}}, a, false, opName);
    if (!id)
      return id.takeError();
    v = node.graph().ops[*id].outputs[0];
    dims = std::move(d);
    return llvm::Error::success();
  };
  bool moved = !std::is_sorted(perm.begin(), perm.end());
  bool view = moved || !*keep;
  if (moved) {
    OpAttrs a;
    a.perm = perm;
    std::vector<int64_t> d;
    for (int64_t p : perm)
      d.push_back(xd[p]);
    if (llvm::Error e = step(OpKind::Transpose, {v}, d, a, false, "moved"))
      return e;
  }
  if (op == "ReduceMax" || op == "ReduceMin")
    return reduceExtreme(node, op == "ReduceMin", keptAxes, out, v, dims, step);
  if (op == "ReduceLogSumExp")
    return reduceLogSumExp(node, keptAxes, out, v, dims, step);
  if (squares) {
    OpAttrs a;
    a.alpha = 2.0f;
    if (llvm::Error e = step(OpKind::Pow, {v}, dims, a, false, "squared"))
      return e;
  }
  if (op == "ReduceL1")
    if (llvm::Error e = step(OpKind::Abs, {v}, dims, {}, false, "absolute"))
      return e;
  std::vector<int64_t> pooled = dims;
  for (size_t i = keptAxes; i < pooled.size(); ++i)
    pooled[i] = 1;
  bool tail = !sums && !view;
  if (llvm::Error e =
          step(OpKind::GlobalAveragePool, {v}, pooled, {}, tail, "mean"))
    return e;
  if (sums) {
    tail = op != "ReduceL2" && !view;
    ValueId c = node.scalarConstant(static_cast<float>(count));
    if (llvm::Error e = step(OpKind::Mul, {v, c}, dims, {}, tail, "sum"))
      return e;
  }
  if (op == "ReduceL2") {
    OpAttrs root;
    root.minValue = 1.0f; // the derivative at a zero norm is 0 (ActParams)
    if (llvm::Error e = step(OpKind::Sqrt, {v}, dims, root, !view, "norm"))
      return e;
  }
  if (!view)
    return llvm::Error::success();
  // The steps above left the node's output to this view, even where the
  // shapes agree (a moved axis of extent 1).
  OpAttrs a;
  a.shape = out;
  return step(OpKind::Reshape, {v}, out, a, true, "view");
}

/// InstanceNormalization (nn.InstanceNorm, and nn.GroupNorm as torch
/// exports it: a reshape to [N, groups, -1] around it) per sample and
/// channel over the trailing axes: the LayerNorm operator over [N, C, L]
/// (the trailing axes viewed as one) with a unit scale, one kernel whose
/// backward recomputes the statistics from x, so nothing but x is kept;
/// then the scale and bias per channel where they are not ones and zeros.
/// The scale and bias are constants there (torch writes them so for
/// GroupNorm, whose affine parameters follow as Mul and Add).
llvm::Error importInstanceNorm(OnnxNode &node) {
  auto x = node.activation(0);
  auto eps = node.attrFloat("epsilon", 1e-5f);
  if (llvm::Error e = firstError(x, eps))
    return e;
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  if (xd.size() < 3)
    return node.fail("normalizes a value of shape " + dimsStr(xd) +
                     "; InstanceNormalization needs [N, C, ...]");
  if (!node.graph().values[*x].canonical())
    return node.fail("normalizes a value whose batch is not alone on axis 0; "
                     "InstanceNormalization needs [N, C, ...]");
  std::vector<float> affine[2];
  for (int i = 1; i <= 2; ++i) {
    if (!node.isLiteral(i))
      return node.fail(
          llvm::formatv("operand {0} ({1}) is a parameter; memfit supports "
                        "InstanceNormalization with constant scale and bias "
                        "(nn.GroupNorm as torch exports it, "
                        "nn.InstanceNorm2d without affine)",
                        i, quoteName(node.inputName(i))));
    auto v = node.floatVector(i);
    if (!v)
      return v.takeError();
    if (static_cast<int64_t>(v->size()) != xd[1])
      return node.fail(llvm::formatv("operand {0} has {1} elements for {2} "
                                     "channels",
                                     i, v->size(), xd[1]));
    affine[i - 1] = std::move(*v);
  }
  const std::vector<int64_t> rows = {xd[0], xd[1], product(xd, 2, xd.size())};
  const bool view = xd.size() > 3;
  std::string out = node.outputName(0);
  bool scaled = llvm::any_of(affine[0], [](float s) { return s != 1.0f; });
  bool shifted = llvm::any_of(affine[1], [](float b) { return b != 0.0f; });
  ValueId v = *x;
  auto step = [&](OpKind kind, std::vector<ValueId> in,
                  const std::vector<int64_t> &d, OpAttrs a,
                  const char *what) -> llvm::Error {
    bool last = llvm::StringRef(what) == (shifted  ? "shifted"
                                          : scaled ? "scaled"
                                          : view   ? "view"
                                                   : "normalized");
    std::string opName =
        node.name().empty() ? std::string() : node.name() + "#" + what;
    auto id = node.emit(kind, std::move(in),
                        {{last ? out : out + "#" + what, d}}, a, false, opName);
    if (!id)
      return id.takeError();
    v = node.graph().ops[*id].outputs[0];
    return llvm::Error::success();
  };
  if (view) {
    OpAttrs a;
    a.shape = rows;
    if (llvm::Error e = step(OpKind::Reshape, {v}, rows, a, "rows"))
      return e;
  }
  OpAttrs ln;
  ln.axis = 2;
  ln.epsilon = *eps;
  ValueId unit = node.expandedConstant(node.scalarConstant(1.0f), {rows[2]});
  if (llvm::Error e =
          step(OpKind::LayerNorm, {v, unit}, rows, ln, "normalized"))
    return e;
  if (view) {
    OpAttrs a;
    a.shape = xd;
    if (llvm::Error e = step(OpKind::Reshape, {v}, xd, a, "view"))
      return e;
  }
  // Per channel: [C, 1, ...] against the per-sample [C, ...].
  std::vector<int64_t> perChannel(xd.begin() + 1, xd.end());
  std::fill(perChannel.begin() + 1, perChannel.end(), 1);
  for (int i = 0; i < 2; ++i) {
    if (!(i == 0 ? scaled : shifted))
      continue;
    auto c = node.constantWeight(i + 1);
    if (!c)
      return c.takeError();
    ValueId w = node.expandedConstant(*c, perChannel);
    if (llvm::Error e = step(i == 0 ? OpKind::Mul : OpKind::Add, {v, w}, xd, {},
                             i == 0 ? "scaled" : "shifted"))
      return e;
  }
  return llvm::Error::success();
}

/// GlobalAveragePool, a reduction over axes other than the batch's, or
/// InstanceNormalization, built on the pool.
llvm::Error importGlobal(OnnxNode &node) {
  if (node.opType() == "InstanceNormalization")
    return importInstanceNorm(node);
  return node.opType() == "GlobalAveragePool" ? importGlobalAveragePool(node)
                                              : importReduce(node);
}

/// MaxPool, or ReduceMax and ReduceMin, built on it.
llvm::Error importMaxPool(OnnxNode &node) {
  return node.opType() == "MaxPool" ? importPool(node) : importReduce(node);
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
  defs.push_back(
      {.kind = OpKind::MaxPool,
       .name = "MaxPool",
       .onnxTypes = {"MaxPool", "ReduceMax", "ReduceMin"},
       .importOnnx = importMaxPool,
       .dataGradReads = maxReads,
       .costClass = CostClass::Pooling,
       .work = windowWork,
       .signatureAttrs = signature,
       .params = params,
       .emit = emitPool,
       .forms = "An [N, C, D1, ...] activation, the batch alone on axis 0; "
                "`kernel_shape` (required), `strides`, `pads`, `auto_pad` "
                "(NOTSET, VALID, SAME_UPPER, SAME_LOWER), `ceil_mode`; "
                "`dilations` only 1; the Indices output must be unused. Code "
                "generation pools 2-D (NCHW) only. ReduceMax and ReduceMin "
                "(`x.amax`, `torch.max(x, dim)[0]`) of a value with the batch "
                "alone on axis 0 over constant `axes` after it, either "
                "`keepdims`: the axes moved last "
                "(Transpose), viewed as [N, K, 1, L], a pool of one [1, L] "
                "window a row, Neg before and after for the minimum, a view to "
                "ONNX's shape. Of constants they fold.",
       .gradient = "the input (dY routed to each window's first maximum, "
                   "located from X and Y: for ReduceMax and ReduceMin, as "
                   "torch.max(x, dim) routes it; x.amax splits ties)"});
  defs.push_back(
      {.kind = OpKind::AveragePool,
       .name = "AveragePool",
       .onnxTypes = {"AveragePool"},
       .importOnnx = importPool,
       .costClass = CostClass::Pooling,
       .work = windowWork,
       .signatureAttrs = signature,
       .params = params,
       .emit = emitPool,
       .forms =
           "An [N, C, D1, ...] activation, the batch alone on axis 0; "
           "`kernel_shape` (required), `strides`, `pads`, `auto_pad` (NOTSET, "
           "VALID, SAME_UPPER, SAME_LOWER), `ceil_mode`, `count_include_pad`; "
           "`dilations` only 1. Code generation pools 2-D (NCHW) only.",
       .gradient = "the input (from dY alone)"});
  // Reductions over axes other than the batch's import through it.
  defs.push_back(
      {.kind = OpKind::GlobalAveragePool,
       .name = "GlobalAveragePool",
       .onnxTypes = {"GlobalAveragePool", "ReduceMean", "ReduceSum",
                     "ReduceSumSquare", "ReduceL1", "ReduceL2",
                     "ReduceLogSumExp", "InstanceNormalization"},
       .importOnnx = importGlobal,
       // Rows of trailing elements, wherever the batch lies
       // before them (Swin V2's windows x batch on axis 0).
       .batchLayout = OpDef::BatchLayout::Any,
       .costClass = CostClass::Pooling,
       .work = globalWork,
       .emit = emitGlobal,
       .forms =
           "GlobalAveragePool: an [N, C, D1, ...] activation. ReduceMean, "
           "ReduceSum, ReduceSumSquare, ReduceL1, ReduceL2: over constant "
           "`axes` (attribute, or input from opset 13 or 18) after the batch's "
           "axis, either `keepdims`; all axes (`axes` absent or empty) and "
           "none (`noop_with_empty_axes`) are refused; built as a Transpose "
           "moving the axes last, Pow 2 or Abs, this pool, Mul by the count, "
           "Sqrt, Reshape, as needed. ReduceLogSumExp (torch.logsumexp), the "
           "same axes with the batch alone on axis 0: the rows' maximum m (a "
           "max pool), exp(x - m) summed by this pool, Log, + m. Of constants "
           "every reduction folds. InstanceNormalization: [N, C, ...] with "
           "the batch alone on axis 0, `epsilon`, scale and bias of C "
           "elements from Constant nodes, not initializers (nn.GroupNorm as "
           "torch exports it): the LayerNorm operator over the trailing axes "
           "viewed as one ([N, C, L], a unit scale), whose backward "
           "recomputes the statistics from x, then Mul and Add per channel "
           "where the scale and bias are not ones and zeros.",
       .gradient = "the input; each step of a reduction has its own "
                   "backward (InstanceNormalization's: LayerNorm's; its "
                   "scale and bias are constants)"});
}

} // namespace memfit::ops
