//===- Layout.cpp - Transpose, Slice and Split of activations -------------===//
//
// Copies that move elements within each sample: a permutation of the
// per-sample axes (the batch stays on axis 0), repeats along axes of extent
// 1 (Expand), and windows with positive steps (Slice, each output of Split, an
// index selection x[:, i] as Gather with a constant scalar index). Their
// backward writes the gradient back in place (zeros outside a window).
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"
#include "compiler/ops/SliceArgs.h"

namespace memfit::ops {

namespace {

std::string list(const std::vector<int64_t> &v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

/// One Slice op over `x`: `starts` and `extents` per axis of x; `outDims`
/// may drop one axis of extent 1 (`dropped`, an index selection).
llvm::Error emitSlice(OnnxNode &node, ValueId x, const std::string &out,
                      std::vector<int64_t> starts, std::vector<int64_t> extents,
                      std::vector<int64_t> outDims, std::string opName = {},
                      int64_t dropped = -1, std::vector<int64_t> steps = {}) {
  const Value &v = node.graph().values[x];
  OpAttrs a;
  a.starts = std::move(starts);
  a.extents = std::move(extents);
  a.steps = std::move(steps);
  OutSpec o{out, std::move(outDims), v.batchAxis, v.batchOuter, v.batchInner};
  if (dropped >= 0 && dropped < v.batchAxis)
    --o.batchAxis;
  return node.emit(OpKind::Slice, {x}, {o}, a, false, std::move(opName))
      .takeError();
}

llvm::Error checkRank(OnnxNode &node, const std::vector<int64_t> &xd,
                      bool batched = true) {
  // The kernels see a value without a batch with a batch axis of 1 first.
  if (xd.size() + (batched ? 0 : 1) > static_cast<size_t>(7))
    return node.fail("operates on " + std::to_string(xd.size()) +
                     " axes; memfit supports at most 7 (the batch's "
                     "included)");
  return llvm::Error::success();
}

/// -1 for a value computed from weights: every axis is its own.
int32_t batchAxisOf(OnnxNode &node, ValueId x) {
  const Value &v = node.graph().values[x];
  return v.batched ? v.batchAxis : -1;
}

} // namespace

llvm::Error importIndexSelect(OnnxNode &node) {
  auto x = node.activation(0);
  auto idx = node.intConstant(1);
  auto axisAttr = node.attrInt("axis", 0);
  if (llvm::Error e = firstError(x, idx, axisAttr))
    return e;
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  // A one-element index keeps the axis (x[..., [i], :], Falcon's fused
  // query-key-value split); a scalar drops it.
  bool keep = idx->dims == std::vector<int64_t>{1};
  if (axis >= 0 && axis < rank && !idx->isFloat && idx->numel() > 1 &&
      idx->numel() == xd[axis]) {
    // Every index of the axis in order (torch.export's as_strided of a
    // contiguous value, a gather from its flattened elements): the axis
    // reshaped to the indices' shape.
    bool inOrder = true;
    for (int64_t k = 0; k < idx->numel() && inOrder; ++k)
      inOrder = !idx->isBatch(k) && idx->ints[k] == k;
    if (inOrder) {
      IntConstant t;
      t.dims = {0};
      for (int64_t k = 0; k < rank; ++k)
        if (k == axis)
          t.ints.insert(t.ints.end(), idx->dims.begin(), idx->dims.end());
        else
          t.ints.push_back(xd[k]);
      t.dims[0] = t.numel();
      t.text = dimsStr(t.ints);
      return importReshapeTo(node, *x, t);
    }
  }
  if (idx->isFloat || idx->numel() != 1 || (!idx->dims.empty() && !keep) ||
      idx->isBatch(0) || axis < 0 || axis >= rank ||
      axis == batchAxisOf(node, *x))
    return node.fail("memfit supports Gather of an activation only as an "
                     "index selection (x[:, i]): a scalar (or one-element) "
                     "constant index on an axis other than the batch's");
  if (llvm::Error e = checkRank(node, xd, node.graph().values[*x].batched))
    return e;
  int64_t i = idx->ints[0] < 0 ? idx->ints[0] + xd[axis] : idx->ints[0];
  if (i < 0 || i >= xd[axis])
    return node.fail(llvm::formatv("index {0} is out of range for axis {1} "
                                   "of size {2}",
                                   idx->ints[0], axis, xd[axis]));
  std::vector<int64_t> starts(rank, 0), extents = xd, out;
  starts[axis] = i;
  extents[axis] = 1;
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis || keep)
      out.push_back(k == axis ? 1 : xd[k]);
  return emitSlice(node, *x, node.outputName(0), starts, extents, out, {},
                   keep ? -1 : axis);
}

namespace {

llvm::Error importTranspose(OnnxNode &node) {
  auto x = node.activation(0);
  auto permAttr = node.attrInts("perm");
  if (llvm::Error e = firstError(x, permAttr))
    return e;
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  std::vector<int64_t> perm;
  if (*permAttr)
    perm = **permAttr;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm)
    ok = ok && p >= 0 && p < rank && !seen[p] && (seen[p] = true);
  if (!ok)
    return node.fail("perm " + dimsStr(perm) + " is not a permutation of " +
                     std::to_string(rank) + " axes");
  if (llvm::Error e = checkRank(node, xd, node.graph().values[*x].batched))
    return e;
  // The batch moves with its axis (nn.MultiheadAttention's [N, T, E] to
  // [T, N, E] and back).
  const Value &v = node.graph().values[*x];
  OutSpec o{node.outputName(0), {}, 0, v.batchOuter, v.batchInner};
  for (size_t i = 0; i < perm.size(); ++i) {
    o.dims.push_back(xd[perm[i]]);
    if (perm[i] == v.batchAxis)
      o.batchAxis = static_cast<int32_t>(i);
  }
  OpAttrs a;
  a.perm = perm;
  return node.emit(OpKind::Transpose, {*x}, {o}, a).takeError();
}

/// Resolves one axis's [start, end) with ONNX's clamping; steps must be 1.
bool window(int64_t dim, int64_t &s, int64_t &e) {
  if (s < 0)
    s += dim;
  if (e < 0)
    e += dim;
  s = std::clamp<int64_t>(s, 0, dim);
  e = std::clamp<int64_t>(e, 0, dim);
  return e > s;
}

llvm::Error importSlice(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  auto args = sliceArgs(node);
  if (!args)
    return args.takeError();
  const std::vector<int64_t> &starts = args->starts, &ends = args->ends,
                             &axes = args->axes, &steps = args->steps;
  if (llvm::Error e = checkRank(node, xd, node.graph().values[*x].batched))
    return e;
  std::vector<int64_t> first(rank, 0), extents = xd, stepOf(rank, 1);
  for (size_t j = 0; j < starts.size(); ++j) {
    int64_t a = axes[j] < 0 ? axes[j] + rank : axes[j];
    if (a < 0 || a >= rank)
      return node.fail(llvm::formatv("axis {0} is out of range", axes[j]));
    if (steps[j] < 1)
      return node.fail(llvm::formatv("slices axis {0} with step {1}; memfit "
                                     "supports positive steps",
                                     axes[j], steps[j]));
    int64_t s = starts[j], e = ends[j];
    // A bound that is the batch's size (x[:, :x.size(0)]) would hold the
    // batch the model was imported at, not the one each sub-batch runs.
    if (args->batchBound && a != batchAxisOf(node, *x) &&
        (s == node.graph().batch || e == node.graph().batch))
      return node.fail(llvm::formatv("slices axis {0} to a bound that is the "
                                     "batch size; memfit plans the model at "
                                     "other batch sizes too",
                                     axes[j]));
    if (!window(xd[a], s, e)) {
      // An empty part (x[..., 8:] of 8 channels) that a Concat joins back.
      if (a == batchAxisOf(node, *x))
        return node.fail("slices the batch to nothing");
      node.markEmpty(node.outputName(0));
      return llvm::Error::success();
    }
    if (a == batchAxisOf(node, *x) && (s != 0 || e != xd[a] || steps[j] != 1))
      return node.fail("slices the batch (axis " + std::to_string(a) +
                       "); memfit keeps every sample");
    first[a] = s;
    extents[a] = (e - s + steps[j] - 1) / steps[j];
    stepOf[a] = steps[j];
  }
  bool strided = llvm::any_of(stepOf, [](int64_t v) { return v != 1; });
  return emitSlice(node, *x, node.outputName(0), first, extents, extents, {},
                   -1, strided ? stepOf : std::vector<int64_t>());
}

llvm::Error importSplit(OnnxNode &node) {
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto args = splitArgs(node, xd);
  if (!args)
    return args.takeError();
  const int64_t axis = args->axis;
  const std::vector<int64_t> &sizes = args->sizes;
  if (axis == batchAxisOf(node, *x))
    return node.fail(llvm::formatv("splits axis {0}, the batch's; memfit "
                                   "splits the other axes",
                                   axis));
  if (llvm::Error e = checkRank(node, xd, node.graph().values[*x].batched))
    return e;
  auto rank = static_cast<int64_t>(xd.size());
  int outs = node.numOutputs();
  int64_t at = 0;
  for (int i = 0; i < outs; ++i) {
    std::vector<int64_t> starts(rank, 0), extents = xd;
    starts[axis] = at;
    extents[axis] = sizes[i];
    at += sizes[i];
    if (!node.outputUsed(i))
      continue;
    std::string opName =
        (node.name().empty() ? std::string("Split") : node.name()) + ":" +
        std::to_string(i);
    if (llvm::Error e = emitSlice(node, *x, node.outputName(i), starts, extents,
                                  extents, opName))
      return e;
  }
  return llvm::Error::success();
}

OpWork copyWork(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {elems(g.value(op.outputs[0]), b)};
}

/// Dims with the batch's axis holding only the factor the samples multiply.
/// A value without a batch runs with one sample (EmitRun.cpp) on a leading
/// batch axis of extent 1 that `unbatched` adds to every per-axis list.
std::vector<int64_t> perSample(const Value &v, std::vector<int64_t> dims) {
  if (!v.batched) {
    dims.insert(dims.begin(), 1);
    return dims;
  }
  dims[v.batchAxis] = v.batchOuter * v.batchInner;
  return dims;
}

/// A per-axis list of `v`'s axes for the kernels: `first` prepended for the
/// leading batch axis of a value without a batch.
std::vector<int64_t> axesList(const Value &v, std::vector<int64_t> l,
                              int64_t first) {
  if (!v.batched)
    l.insert(l.begin(), first);
  return l;
}

/// A permutation for the kernels: the leading batch axis stays first.
std::vector<int64_t> permList(const Value &v, std::vector<int64_t> perm) {
  if (v.batched)
    return perm;
  for (int64_t &p : perm)
    ++p;
  perm.insert(perm.begin(), 0);
  return perm;
}

size_t kernelRank(const Value &v) {
  return v.dims.size() + (v.batched ? 0 : 1);
}

llvm::Expected<OpParamsText> transposeParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  if (x.batchOuter != 1 && x.batchInner != 1)
    return unsupportedByRuntime(op, "the batch shares its axis on both sides");
  return OpParamsText{"TransposeParams",
                      llvm::formatv("{{.rank = {0}, .dims = {1}, .perm = {2}, "
                                    ".batchAxis = {3}}",
                                    kernelRank(x), list(perSample(x, x.dims)),
                                    list(permList(x, op.attrs.perm)),
                                    x.batchAxis)
                          .str()};
}

llvm::Expected<OpParamsText> sliceParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  // Steps are emitted only when strided: the struct defaults them to 1.
  std::string steps =
      op.attrs.steps.empty()
          ? ""
          : ", .steps = " + list(axesList(x, op.attrs.steps, 1));
  return OpParamsText{
      "SliceParams",
      llvm::formatv("{{.rank = {0}, .xdims = {1}, .ydims = {2}, "
                    ".starts = {3}, .batchAxis = {4}{5}}",
                    kernelRank(x), list(perSample(x, x.dims)),
                    list(perSample(x, op.attrs.extents)),
                    list(axesList(x, op.attrs.starts, 0)), x.batchAxis, steps)
          .str()};
}

llvm::Expected<EmittedCall> layoutEmit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  const char *name = x.op.kind == OpKind::Transpose ? "transpose"
                     : x.op.kind == OpKind::Expand  ? "expand"
                                                    : "slice";
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.{0}Forward({1}, {2}, {3})", name, x.params,
                               x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.{0}Backward({1}, {2}, {3}, {4})", name,
                               x.params, x.grad(y), x.gradIfWritten(in),
                               x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

void permSignature(llvm::raw_ostream &os, const Op &op) {
  printList(os, "perm", op.attrs.perm);
}

void sliceSignature(llvm::raw_ostream &os, const Op &op) {
  printList(os, "starts", op.attrs.starts);
  if (!op.attrs.steps.empty())
    printList(os, "steps", op.attrs.steps);
}

/// Expand of an activation along per-sample axes of extent 1 (grouped-query
/// attention repeating its key and value heads); of a weight, over the
/// batch (Transformer.cpp).
llvm::Error importExpand(OnnxNode &node) {
  if (!node.isActivation(node.inputName(0)))
    return importExpandWeight(node);
  auto x = node.activation(0);
  auto shape = node.intConstant(1);
  if (llvm::Error e = firstError(x, shape))
    return e;
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  const IntConstant &s = *shape;
  const Value &v = node.graph().values[*x];
  bool ok = !s.isFloat && s.dims.size() == 1 &&
            s.numel() == static_cast<int64_t>(xd.size());
  std::vector<int64_t> out = xd;
  for (int64_t i = 0; ok && i < s.numel(); ++i) {
    if (i == v.batchAxis) {
      // A fixed-batch export spells the batch as the number it was traced
      // at.
      const int64_t traced = v.batchOuter * node.modelBatch() * v.batchInner;
      ok = s.ints[i] == 1 || s.ints[i] == xd[i] ||
           (node.modelBatch() > 0 && !s.isBatch(i) && s.ints[i] == traced);
      continue;
    }
    ok = !s.isBatch(i) && s.ints[i] >= 1 &&
         (s.ints[i] == 1 || xd[i] == 1 || s.ints[i] == xd[i]);
    if (ok && s.ints[i] != 1)
      out[i] = s.ints[i];
  }
  if (!ok)
    return node.fail("expands the activation of shape " + dimsStr(xd) + " to " +
                     s.str() +
                     "; memfit supports Expand of an activation to its own "
                     "rank, along axes of extent 1 other than the batch's");
  if (llvm::Error e = checkRank(node, xd, node.graph().values[*x].batched))
    return e;
  if (out == xd) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  OutSpec o{node.outputName(0), out, v.batchAxis, v.batchOuter, v.batchInner};
  return node.emit(OpKind::Expand, {*x}, {o}).takeError();
}

/// Tile of value `x` (`x.repeat`) as the ops memfit has: an axis of extent
/// 1 put before each tiled axis (a view), an Expand along it, and a view
/// folding each repeat into its axis ([N, r, d] -> [N, r * d]), so the
/// backward sums the repeats as Expand's does. An axis of extent 1 is
/// expanded as it is. A value without a batch (a weight read as a value)
/// may repeat any axis.
llvm::Error tileValue(OnnxNode &node, ValueId x, const std::string &xName,
                      const IntConstant &r) {
  std::vector<int64_t> xd = dimsOfValue(node, x);
  const Value &v = node.graph().values[x];
  if (r.isFloat || r.dims.size() != 1 ||
      r.numel() != static_cast<int64_t>(xd.size()))
    return node.fail("repeats " + r.str() +
                     " do not give one count per axis "
                     "of the input of shape " +
                     dimsStr(xd));
  if (!v.canonical())
    return node.fail("tiles a value whose batch is not alone on axis 0; "
                     "memfit supports Tile with the batch there");
  if (v.batched && (r.isBatch(0) || r.ints[0] != 1))
    return node.fail("repeats the batch (" + r.str() +
                     "); memfit supports Tile along the other axes");
  std::vector<int64_t> viewIn, expanded, out;
  for (size_t i = 0; i < xd.size(); ++i) {
    if ((i > 0 || !v.batched) && (r.isBatch(i) || r.ints[i] < 1))
      return node.fail("repeats " + r.str() + " must be positive counts");
    int64_t n = r.ints[i];
    if (n > 1 && xd[i] > 1) {
      viewIn.push_back(1);
      expanded.push_back(n);
    }
    viewIn.push_back(xd[i]);
    expanded.push_back(xd[i] == 1 ? n : xd[i]);
    out.push_back(xd[i] * n);
  }
  if (out == xd) {
    node.alias(node.outputName(0), xName);
    return llvm::Error::success();
  }
  if (llvm::Error e = checkRank(node, expanded))
    return e;
  std::string name = node.outputName(0);
  const std::string &opName = node.name();
  auto named = [&](const char *step) {
    return opName.empty() ? opName : opName + "#" + step;
  };
  ValueId in = x;
  if (viewIn != xd) {
    OpAttrs a;
    a.shape = viewIn;
    auto id = node.emit(OpKind::Reshape, {in}, {{name + "#axes", viewIn}}, a,
                        false, named("axes"));
    if (!id)
      return id.takeError();
    in = node.graph().ops[*id].outputs[0];
  }
  bool last = expanded == out;
  auto id = node.emit(OpKind::Expand, {in},
                      {{last ? name : name + "#repeats", expanded}}, {}, false,
                      opName);
  if (!id || last)
    return id.takeError();
  OpAttrs a;
  a.shape = out;
  return node
      .emit(OpKind::Reshape, {node.graph().ops[*id].outputs[0]}, {{name, out}},
            a, false, named("view"))
      .takeError();
}

/// Tile of an activation, or of a weight: over the batch alone (a class
/// token, `cls.repeat(x.shape[0], 1, 1)`) Expand's lookup of its one row
/// per sample; along its own axes, the weight read as a value and tiled,
/// its gradient the repeats' sum.
llvm::Error importTile(OnnxNode &node) {
  auto reps = node.intConstant(1);
  if (!reps)
    return reps.takeError();
  if (!node.isActivation(node.inputName(0))) {
    bool overBatch = !reps->isFloat && reps->numel() >= 1 && reps->isBatch(0);
    for (int64_t i = 1; overBatch && i < reps->numel(); ++i)
      overBatch = !reps->isBatch(i) && reps->ints[i] == 1;
    if (overBatch)
      return importExpandWeight(node);
    for (int64_t i = 0; i < reps->numel(); ++i)
      if (reps->isBatch(i))
        return node.fail("tiles a weight by " + reps->str() +
                         "; memfit supports Tile of a weight over the batch "
                         "alone ([N, 1, ...]) or along its own axes");
    auto w = node.weightValue(0);
    if (!w)
      return w.takeError();
    return tileValue(node, *w, node.graph().values[*w].name, *reps);
  }
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  return tileValue(node, *x, node.inputName(0), *reps);
}

llvm::Error importExpandOrTile(OnnxNode &node) {
  return node.opType() == "Tile" ? importTile(node) : importExpand(node);
}

llvm::Expected<OpParamsText> expandParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]), &y = g.value(op.outputs[0]);
  return OpParamsText{
      "ExpandParams",
      llvm::formatv("{{.rank = {0}, .xdims = {1}, .ydims = {2}, "
                    ".batchAxis = {3}}",
                    kernelRank(x), list(perSample(x, x.dims)),
                    list(perSample(x, y.dims)), x.batchAxis)
          .str()};
}

llvm::Error importSliceOrSplit(OnnxNode &node) {
  if (node.opType() == "ScatterND")
    return importScatterND(node);
  return node.opType() == "Split" ? importSplit(node) : importSlice(node);
}

} // namespace

void registerLayout(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::Transpose,
       .name = "Transpose",
       .onnxTypes = {"Transpose"},
       .importOnnx = importTranspose,
       .batchLayout = OpDef::BatchLayout::Any,
       .costClass = CostClass::Copy,
       .work = copyWork,
       .signatureAttrs = permSignature,
       .params = transposeParams,
       .emit = layoutEmit,
       .forms = "Any permutation (`perm`, default reversed) of an activation "
                "of at most 7 axes; the batch moves with its axis "
                "(nn.MultiheadAttention's [T, N, E]). A 2-D weight with `perm` "
                "[1, 0] or none is MatMul's weight read transposed (no copy), "
                "or a transposed value as a data operand; any other Transpose "
                "of a weight computes on it as a value without a batch.",
       .gradient = "the input"});
  defs.push_back(
      {.kind = OpKind::Slice,
       .name = "Slice",
       .onnxTypes = {"Slice", "Split", "ScatterND"},
       .importOnnx = importSliceOrSplit,
       .batchLayout = OpDef::BatchLayout::Any,
       .costClass = CostClass::Copy,
       .work = copyWork,
       .signatureAttrs = sliceSignature,
       .params = sliceParams,
       .emit = layoutEmit,
       .forms = "Slice: constant `starts`, `ends` (operands from opset 10, "
                "attributes before; clamped as ONNX does), `axes` and positive "
                "`steps`; the batch's axis only whole; a slice to nothing is "
                "an empty tensor only Concat may read; a sliced weight (a "
                "position table) is a value without a batch. Split: any axis "
                "but the batch's; sizes from the `split` input (opset 13) or "
                "attribute, `num_outputs` (18) or equal parts; one Slice per "
                "used output. ScatterND of an activation (torch.export's "
                "assignment to a slice): indices [k, 1] of contiguous rows of "
                "axis 0, not the batch's, updates of the data's shape there; "
                "the data's rows before and after the window sliced, the "
                "updates between them, joined by a Concat with the batch "
                "first (Transposes around it). At most 7 axes.",
       .gradient = "the input (zeros outside the window); ScatterND: the data "
                   "outside the window, the updates inside"});
  defs.push_back(
      {.kind = OpKind::Expand,
       .name = "Expand",
       .onnxTypes = {"Expand", "Tile"},
       .importOnnx = importExpandOrTile,
       // The batch's axis is never expanded: its extent, n times
       // the factors beside the batch, maps the same on any
       // layout.
       .batchLayout = OpDef::BatchLayout::Any,
       .costClass = CostClass::Copy,
       .work = copyWork,
       .params = expandParams,
       .emit = layoutEmit,
       .forms =
           "An activation to its own rank along axes of extent 1 other than "
           "the batch's (grouped-query attention repeating key and value "
           "heads), the shape a constant; to its own shape it is the input. A "
           "float weight expanded over the batch alone to [N, ...its shape], "
           "the batch's symbol first (ViT's class token), is a lookup of its "
           "one row per sample; a value computed from weights expanded so "
           "passes through; constants fold. Tile (`x.repeat`) of an "
           "activation with the batch alone on axis 0, not repeated there, "
           "positive constant counts: views around an Expand ([N, d] -> [N, "
           "1, d] -> [N, r, d] -> [N, r*d]), so the backward sums the "
           "repeats. Tile of a weight over the batch alone (repeats [N, 1, "
           "...], a class token's `cls.repeat(x.shape[0], 1, 1)`) is "
           "Expand's lookup; along the weight's own axes (`w.repeat(2, 1)`) "
           "the weight is read as a value without a batch and tiled the "
           "same way, its gradient the repeats' sum; so is a value computed "
           "from weights.",
       .gradient = "the input (its repeats summed), or the expanded weight"});
}

} // namespace memfit::ops
