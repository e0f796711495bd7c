//===- Binary.cpp - Add, Sub, Mul, Div with broadcasting ------------------===//
//
// The first operand is the activation; the second is an activation, weight
// or constant broadcast along one contiguous run of the first's per-sample
// dims (the same shape, per channel, per feature, a position table). Its
// gradient is the reduction of dY over the broadcast positions (a bias).
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"
#include "compiler/ops/RuntimeKinds.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

OpKind binaryKind(llvm::StringRef op) {
  return op == "Add"   ? OpKind::Add
         : op == "Sub" ? OpKind::Sub
         : op == "Mul" ? OpKind::Mul
                       : OpKind::Div;
}

} // namespace

bool broadcastRun(const std::vector<int64_t> &big, std::vector<int64_t> small,
                  int64_t &bSize, int64_t &inner) {
  while (small.size() > big.size() && small.front() == 1)
    small.erase(small.begin());
  if (small.size() > big.size())
    return false;
  small.insert(small.begin(), big.size() - small.size(), 1);
  int first = -1, last = -1;
  for (int i = 0; i < (int)small.size(); ++i)
    if (small[i] != 1) {
      if (small[i] != big[i])
        return false;
      // Axes of extent 1 in both ([heads, 1, T] added to [N, heads, 1, T],
      // LeViT's attention biases) neither vary nor repeat: a run may span
      // them.
      for (int j = last + 1; first >= 0 && j < i; ++j)
        if (big[j] != 1)
          return false;
      if (first < 0)
        first = i;
      last = i;
    }
  bSize = 1;
  inner = 1;
  if (first >= 0) {
    for (int i = first; i <= last; ++i)
      bSize *= small[i];
    for (int i = last + 1; i < (int)big.size(); ++i)
      inner *= big[i];
  }
  return true;
}

namespace {

std::vector<int64_t> perSampleDims(const std::vector<int64_t> &d) {
  return std::vector<int64_t>(d.begin() + (d.empty() ? 0 : 1), d.end());
}

/// Whether the batch is the outer factor of axis 0 with other rows inside
/// it ([N * heads, T, d]): each sample's elements are then contiguous, an
/// array of [heads, T, d].
bool rowsPerSample(const Value &v) {
  return v.batched && v.batchAxis == 0 && v.batchOuter == 1 && v.batchInner > 1;
}

/// The axes broadcasting works on: a batched value's per-sample ones
/// ([heads, T, d] for [N * heads, T, d]), all of a value computed from
/// weights (or a weight).
std::vector<int64_t> broadcastDims(const Value &v) {
  if (rowsPerSample(v)) {
    std::vector<int64_t> d = v.dims;
    d[0] = v.batchInner;
    return d;
  }
  return v.batched ? perSampleDims(v.dims) : v.dims;
}

/// Two activations: the same shape, or the second broadcast into the first
/// along one contiguous run of its per-sample axes (a squeeze-and-excitation
/// scale [N, C, 1, 1] over [N, C, H, W]).
llvm::Error importActivations(OnnxNode &node, OpKind kind) {
  ValueId x = *node.activation(0), y = *node.activation(1);
  std::vector<int64_t> xd = dimsOfValue(node, x), yd = dimsOfValue(node, y);
  if (xd == yd)
    return node.emit(kind, {x, y}, {{node.outputName(0), xd}}).takeError();
  int64_t bSize, inner;
  auto fits = [&](const std::vector<int64_t> &big,
                  const std::vector<int64_t> &small) {
    return big.size() == small.size() &&
           broadcastRun(perSampleDims(big), perSampleDims(small), bSize, inner);
  };
  if (fits(xd, yd))
    return node.emit(kind, {x, y}, {{node.outputName(0), xd}}).takeError();
  if (fits(yd, xd))
    return node.emit(kind, {x, y}, {{node.outputName(0), yd}}).takeError();
  return node.fail("combines activations of shapes " + dimsStr(xd) + " and " +
                   dimsStr(yd) +
                   "; memfit supports activations of the same shape, or one "
                   "broadcast along one contiguous run of the other's axes");
}

/// `small` (x's rank, 1 on the batch's axis) varying along separate runs
/// of x's axes, made to vary along one: `tiled` holds x's extents on the
/// axes between its first and last varying ones. False when it varies
/// nowhere or does not broadcast into x.
bool tiledRun(const std::vector<int64_t> &small, const std::vector<int64_t> &xd,
              std::vector<int64_t> &tiled) {
  tiled = small;
  int first = -1, last = -1;
  for (int i = 1; i < (int)small.size(); ++i)
    if (small[i] != 1) {
      first = first < 0 ? i : first;
      last = i;
    }
  bool fits = first > 0;
  for (int i = 1; i < (int)small.size(); ++i) {
    fits = fits && (small[i] == 1 || small[i] == xd[i]);
    if (i > first && i < last)
      tiled[i] = xd[i];
  }
  return fits;
}

llvm::Error importBinary(OnnxNode &node) {
  if (node.numInputs() != 2)
    return node.fail("must have two operands");
  bool act0 = node.isActivation(node.inputName(0)),
       act1 = node.isActivation(node.inputName(1));
  OpKind kind = binaryKind(node.opType());
  const Graph &g = node.graph();
  auto batched = [&](int i) {
    return node.isActivation(node.inputName(i)) && node.activation(i) &&
           g.values[*node.activation(i)].batched;
  };
  bool batched0 = act0 && batched(0), batched1 = act1 && batched(1);
  if (batched0 && batched1) {
    auto x = node.activation(0), y = node.activation(1);
    if (llvm::Error e = firstError(x, y))
      return e;
    return importActivations(node, kind);
  }
  if (!act0 && !act1)
    return node.activation(0).takeError();
  // x: the operand of the output's shape, batched where one is; the other
  // broadcasts. A value computed from weights (unbatched) broadcasts like
  // a weight over a batched operand, and over one of its kind is either.
  int xi = batched0 ? 0 : batched1 ? 1 : act0 ? 0 : 1;
  if (!batched0 && !batched1 && act0 && act1) {
    auto a = node.activation(0), b = node.activation(1);
    if (llvm::Error e = firstError(a, b))
      return e;
    xi = g.values[*a].elementsPerSample() >= g.values[*b].elementsPerSample()
             ? 0
             : 1;
  }
  auto x = node.activation(xi);
  if (!x)
    return x.takeError();
  WeightInit init = kind == OpKind::Mul || kind == OpKind::Div
                        ? WeightInit::Ones
                        : WeightInit::Zeros;
  auto w = node.isActivation(node.inputName(1 - xi))
               ? node.activation(1 - xi)
               : node.weight(1 - xi, init, true);
  if (!w)
    return w.takeError();
  std::vector<int64_t> xd = dimsOfValue(node, *x), wd = dimsOfValue(node, *w);
  const bool xBatched = g.values[*x].batched;
  // Each sample's rows of [N * heads, T, T] are its own [heads, T, T].
  const bool rows = rowsPerSample(g.values[*x]);
  // numpy broadcasting that leaves the batch alone: the weight varies along
  // one contiguous run of the per-sample axes (a bias, a per-channel scale,
  // a position table). Without a batch every axis is the value's own.
  int64_t bSize, inner;
  std::vector<int64_t> padded = wd;
  while (padded.size() > xd.size() && padded.front() == 1)
    padded.erase(padded.begin());
  const std::vector<int64_t> xs = broadcastDims(g.values[*x]);
  bool ok = padded.size() <= xd.size() &&
            (!xBatched ? broadcastRun(xd, padded, bSize, inner)
             : rows    ? broadcastRun(xs, padded, bSize, inner)
                       : (padded.size() < xd.size() || padded[0] == 1) &&
                          broadcastRun(xs,
                                       padded.size() == xd.size()
                                           ? perSampleDims(padded)
                                           : padded,
                                       bSize, inner));
  if (!ok && padded.size() == xd.size())
    if (auto one = node.oneSampleConstant(*w, rows)) {
      // A fixed-batch graph's mask, the same for every sample: one
      // sample's broadcasts over the batch (or into a value without one,
      // T5's position bias plus its mask).
      w = *one;
      wd = dimsOfValue(node, *w);
      padded = wd;
      ok = !xBatched ? broadcastRun(xd, padded, bSize, inner)
           : rows    ? broadcastRun(xs, padded, bSize, inner)
                     : broadcastRun(xs, perSampleDims(padded), bSize, inner);
    }
  if (!ok && !xBatched)
    return node.fail("combines values of shapes " + dimsStr(xd) + " and " +
                     dimsStr(wd) +
                     " computed from weights; memfit supports one that "
                     "broadcasts into the other along one contiguous run of "
                     "its axes, the larger one computed (not a weight "
                     "itself)");
  const Value &wv = node.graph().values[*w];
  // The broadcast operand's dims aligned to x's rank, numpy style (ALiBi's
  // [heads, 1, T] over [N, heads, T, T]).
  if (!ok && padded.size() < xd.size())
    padded.insert(padded.begin(), xd.size() - padded.size(), 1);
  if (!ok && rows && !wv.trainable && !wv.data.empty() &&
      padded.size() == xs.size()) {
    // One sample's constant over rows per sample (BLOOM's ALiBi, [heads, 1,
    // T] over [N * heads, T, T]): repeated over the axes between.
    std::vector<int64_t> small = padded, big = xs, tiled;
    small.insert(small.begin(), 1);
    big.insert(big.begin(), 1);
    if (tiledRun(small, big, tiled)) {
      tiled.erase(tiled.begin());
      w = node.expandedConstant(*w, tiled);
      wd = tiled;
      ok = true;
    }
  } else if (!ok && !wv.trainable && !wv.data.empty() &&
             padded.size() == xd.size() && padded[0] == 1) {
    // A constant varying along separate runs of axes (Swin's window mask
    // [1, windows, 1, T, T] over [N, windows, heads, T, T]): repeated over
    // the axes between, it varies along one run.
    std::vector<int64_t> tiled;
    bool fits = tiledRun(padded, xd, tiled);
    if (fits) {
      w = node.expandedConstant(*w, tiled);
      wd = tiled;
      ok = true;
    }
  } else if (!ok && wv.kind == ValueKind::Activation && !wv.batched &&
             padded.size() == xd.size() && padded[0] == 1) {
    // A value computed from weights that way (DeBERTa's query bias
    // [1, heads, 1, d] over [N, heads, T, d]): expanded over the axes
    // between (its gradient sums them back), it varies along one run.
    std::vector<int64_t> tiled;
    bool fits = tiledRun(padded, xd, tiled);
    if (fits && wd.size() == tiled.size()) {
      std::string name = node.outputName(0) + "#tiled";
      std::string opName = node.name().empty() ? "" : node.name() + "#tiled";
      auto e =
          node.emit(OpKind::Expand, {*w}, {{name, tiled}}, {}, false, opName);
      if (!e)
        return e.takeError();
      w = node.graph().ops[*e].outputs[0];
      wd = tiled;
      ok = true;
    }
  }
  if (!ok && node.isDeclaredInput(node.inputName(1 - xi)))
    return node.extraDataInput(node.inputName(1 - xi));
  if (!ok)
    return node.fail("weight " + quoteName(node.graph().values[*w].name) +
                     " of shape " + dimsStr(wd) +
                     " does not broadcast over the activation of shape " +
                     dimsStr(xd) +
                     "; memfit supports weights that vary along one "
                     "contiguous run of the per-sample axes");
  std::vector<ValueId> inputs =
      xi == 0 ? std::vector<ValueId>{*x, *w} : std::vector<ValueId>{*w, *x};
  return node.emit(kind, inputs, {{node.outputName(0), xd}}).takeError();
}

/// d(a*b)/da = b: each gradient reads the other operands.
void mulDataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  for (size_t i = 0; i < o.op.inputs.size(); ++i) {
    bool onlyGradOfSelf = o.gradInputs.size() == 1 && o.gradInputs[0] == i;
    if (!onlyGradOfSelf)
      reads.push_back(o.inputs[i]);
  }
}

/// Mul by a weight: the data operands, and with two weight operands,
/// d(w1*w2)/dw1 = w2.
void mulWeightReads(const GradOperands &o, std::vector<BlockId> &reads) {
  dataOperandReads(o, reads);
  if (o.gradWeights.size() > 1)
    reads.insert(reads.end(), o.gradWeightBlocks.begin(),
                 o.gradWeightBlocks.end());
}

OpWork addWork(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {kind == TaskKind::Forward
              ? double(std::max<size_t>(op.inputs.size(), 2) - 1) * out
              : out};
}

OpWork mulWork(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 1 : 2) * out};
}

/// The runtime kind of `kind`, with the broadcast operand first when
/// `reversed` (b - a, b / a).
RtBinary runtimeBinary(OpKind kind, bool reversed) {
  switch (kind) {
  case OpKind::Add:
    return RtBinary::Add;
  case OpKind::Sub:
    return reversed ? RtBinary::RSub : RtBinary::Sub;
  case OpKind::Mul:
    return RtBinary::Mul;
  case OpKind::Div:
    return reversed ? RtBinary::RDiv : RtBinary::Div;
  default:
    llvm_unreachable("not a binary definition's kind");
  }
}

/// The operand with the output's shape (the kernel's a) comes first in the
/// kernel's terms; the other is broadcast (b). Sub and Div with the
/// broadcast operand first run reversed (RSub, RDiv).
size_t primaryOperand(const Graph &g, const Op &op) {
  const Value &v0 = g.value(op.inputs[0]), &y = g.value(op.outputs[0]);
  return v0.batched == y.batched && v0.dims == y.dims ? 0 : 1;
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  if (op.inputs.size() != 2)
    return unsupportedByRuntime(op, "expects two operands");
  size_t pa = primaryOperand(g, op);
  const Value &va = g.value(op.inputs[pa]);
  const Value &vb = g.value(op.inputs[1 - pa]);
  if (va.batched != g.value(op.outputs[0]).batched ||
      va.kind == ValueKind::Weight)
    return unsupportedByRuntime(op, "one operand must be an activation of the "
                                    "output's shape");
  const char *k = runtimeKind(runtimeBinary(op.kind, pa == 1)).name;
  int64_t per = va.elementsPerSample();
  if (!va.canonical() && !rowsPerSample(va) &&
      !(vb.batched && vb.dims == va.dims)) {
    // The batch is not outermost: only a weight varying along the axes
    // after the batch's broadcasts the same at every position.
    std::vector<int64_t> tail(va.dims.begin() + va.batchAxis + 1,
                              va.dims.end());
    std::vector<int64_t> bd = vb.dims;
    while (!bd.empty() && bd.front() == 1)
      bd.erase(bd.begin());
    int64_t bSize, inner;
    if (vb.batched || bd.size() > tail.size() ||
        !broadcastRun(tail, bd, bSize, inner))
      return unsupportedByRuntime(op, "a value whose batch is not on axis 0 "
                                      "broadcasts only weights along its "
                                      "last axes");
    return OpParamsText{
        "BinaryParams",
        llvm::formatv("{{.kind = BinaryKind::{0}, .perSample = {1}, "
                      ".bBatched = false, .bSize = {2}, .inner = {3}}",
                      k, per, bSize, inner)
            .str()};
  }
  if (vb.batched && vb.dims == va.dims)
    return OpParamsText{
        "BinaryParams",
        llvm::formatv("{{.kind = BinaryKind::{0}, .perSample = {1}, "
                      ".bBatched = true, .bSize = {1}, .inner = 1}",
                      k, per)
            .str()};
  int64_t bSize, inner;
  if (!broadcastRun(broadcastDims(va), broadcastDims(vb), bSize, inner))
    return unsupportedByRuntime(op, "the operand shapes do not broadcast "
                                    "along one contiguous run of axes");
  return OpParamsText{
      "BinaryParams",
      llvm::formatv("{{.kind = BinaryKind::{0}, .perSample = {1}, "
                    ".bBatched = {2}, .bSize = {3}, "
                    ".inner = {4}}",
                    k, per, vb.batched ? "true" : "false", bSize, inner)
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  size_t pa = primaryOperand(x.graph, op);
  ValueId a = op.inputs[pa], b = op.inputs[1 - pa], y = op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.binaryForward({0}, {1}, {2}, {3})", x.params,
                               x.value(a), x.value(b), x.value(y))
                           .str()};
  case TaskKind::BackwardData: {
    bool bData = x.graph.value(b).kind != ValueKind::Weight;
    std::string accB = bData ? x.accumulates(b) : "false";
    if (b == a)
      accB = "true"; // both operands are one value: the second adds
    return EmittedCall{formatv("x.binaryBackward({0}, {1}, {2}, {3}, {4}, "
                               "{5}, {6}, {7})",
                               x.params, x.valueIfRead(a), x.valueIfRead(b),
                               x.grad(y), x.gradIfWritten(a),
                               bData ? x.gradIfWritten(b) : "nullptr",
                               x.accumulates(a), accB)
                           .str()};
  }
  default:
    return EmittedCall{formatv("x.binaryBackward({0}, {1}, {2}, {3}, nullptr, "
                               "{4}, false, {5})",
                               x.params, x.valueIfRead(a), x.valueIfRead(b),
                               x.grad(y), x.gradIfWritten(b), x.accumulates(b))
                           .str()};
  }
}

OpDef binary(OpKind kind, std::string_view name, std::string_view forms,
             std::string_view gradient) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .importOnnx = importBinary,
          .batchLayout = OpDef::BatchLayout::Any,
          .work = addWork,
          .params = params,
          .emit = emit,
          .forms = forms,
          .gradient = gradient};
}

/// OpDef::forms of all four: importBinary takes the same for each.
constexpr std::string_view kForms =
    "An activation and an activation, weight or float32 constant, either "
    "order (a bias, a per-channel scale, 1 - x): of one shape, or one "
    "broadcast into the other along one contiguous run of its per-sample axes "
    "(two computed from the data input: of one rank); a constant varying "
    "along separate runs is repeated into one. Where the batch is not alone "
    "on axis 0 the other operand must match it or vary only after the batch's "
    "axis. Of constants it folds.";

} // namespace

void registerBinary(std::vector<OpDef> &defs) {
  defs.push_back(binary(OpKind::Add, "Add", kForms,
                        "both operands but a constant (a broadcast one sums "
                        "dY over its repeats)"));
  defs.push_back(binary(OpKind::Sub, "Sub", kForms,
                        "both operands but a constant (a broadcast one sums "
                        "dY over its repeats)"));
  OpDef mul = binary(OpKind::Mul, "Mul", kForms,
                     "both operands but a constant (each reads the other)");
  mul.dataGradReads = mulDataReads;
  mul.weightGradReads = mulWeightReads;
  mul.work = mulWork;
  defs.push_back(std::move(mul));
  OpDef div = binary(OpKind::Div, "Div", kForms,
                     "both operands but a constant (each reads both)");
  // d(a/b)/da = 1/b and d(a/b)/db = -a/b^2: both read both operands.
  div.dataGradReads = [](const GradOperands &o, std::vector<BlockId> &reads) {
    reads.insert(reads.end(), o.inputs.begin(), o.inputs.end());
  };
  div.weightGradReads = [](const GradOperands &o, std::vector<BlockId> &reads) {
    reads.insert(reads.end(), o.inputs.begin(), o.inputs.end());
  };
  div.work = mulWork;
  defs.push_back(std::move(div));
}

} // namespace memfit::ops
