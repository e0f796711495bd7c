//===- View.cpp - Flatten and Reshape: the same bytes, another shape ------===//
//
// The output is a view of the input (no copy, no memory), and so is the
// gradient of the output of the input's gradient when the input has no
// other consumer. Only where the gradient views cannot alias does BP-data
// copy.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importFlatten(OnnxNode &node) {
  auto x = node.activation(0);
  auto axisAttr = node.attrInt("axis", 1);
  if (!x || !axisAttr)
    return llvm::joinErrors(x.takeError(), axisAttr.takeError());
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis > rank)
    return node.fail(llvm::formatv("axis {0} is out of range for rank {1}",
                                   *axisAttr, rank));
  int64_t merged = 1, rest = 1;
  for (int64_t i = 1; i < rank; ++i)
    (i < axis ? merged : rest) *= xd[i];
  if (axis == 0)
    return node.fail(llvm::formatv("axis {0} on shape {1} would flatten the "
                                   "batch into every other axis; memfit keeps "
                                   "each sample apart",
                                   *axisAttr, dimsStr(xd)));
  const Value &v = node.graph().values[*x];
  if (merged != 1 || !v.canonical()) {
    // [N, T, C] at axis 2: [N * T, C], each sample's T rows together (a
    // view, as Reshape's, that the ops taking such rows read). A value
    // whose rows are already each sample's ([N * heads * H, W, 2W] at 1,
    // BoTNet's relative logits) keeps them so.
    if (!v.canonical() && !(v.batchAxis == 0 && v.batchOuter == 1))
      return node.fail(llvm::formatv("axis {0} merges the batch of a value "
                                     "whose batch is not alone on axis 0",
                                     *axisAttr));
    OpAttrs a;
    a.shape = {xd[0] * merged, rest};
    OutSpec o{node.outputName(0), a.shape, 0, 1, v.batchInner * merged};
    return node.emit(OpKind::Reshape, {*x}, {o}, a).takeError();
  }
  OpAttrs a;
  a.axis = axis;
  return node
      .emit(OpKind::Flatten, {*x}, {{node.outputName(0), {xd[0], rest}}}, a)
      .takeError();
}

/// Resolves a reshape target for a batched input. Axis 0 of the output must
/// be the batch: the batch symbol (folded from Shape), 0 (copy), -1 when the
/// other axes hold exactly one sample, or a literal equal to the batch the
/// model was written with (fixed-batch exports spell the batch that way).
llvm::Error importReshapeCanonical(OnnxNode &node);

/// A reshape that moves the batch within the layout: the target names the
/// batch (a multiple of it, folded from Shape) on one axis, which the
/// batch's run of elements must fall inside (nn.MultiheadAttention's
/// [T, N, E] to [T, N * heads, d], [T, N, E] to [T * N, E] and back).
llvm::Error importReshapeMoving(OnnxNode &node, ValueId x, const IntConstant &t,
                                bool allowZero) {
  const Value &v = node.graph().values[x];
  const std::vector<int64_t> &xd = v.dims;
  int64_t batch = node.graph().batch;
  int64_t total = 1;
  for (int64_t d : xd)
    total *= d;
  std::vector<int64_t> out(t.ints.size());
  int64_t at = -1, inferAt = -1, known = 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t d = t.ints[i];
    if (t.isBatch(i)) {
      if (at >= 0)
        return node.fail("target shape " + t.str() +
                         " names the batch on two axes");
      at = i;
    } else if (d == 0 && !allowZero) {
      if (i >= static_cast<int64_t>(xd.size()) || i == v.batchAxis)
        return node.fail("target shape " + t.str() +
                         " copies an axis the input lacks or the batch's");
      d = xd[i];
    } else if (d == -1 && inferAt < 0) {
      inferAt = i;
      continue;
    } else if (d <= 0) {
      return node.fail("target shape " + t.str() + " is invalid");
    }
    out[i] = d;
    known *= d;
  }
  // Whether the batch's run of elements of the input falls inside axis
  // `a` of `o`.
  auto holdsBatch = [&](const std::vector<int64_t> &o, int64_t a) {
    int64_t sb = v.batchInner, st = 1;
    for (size_t k = v.batchAxis + 1; k < xd.size(); ++k)
      sb *= xd[k];
    for (size_t k = a + 1; k < o.size(); ++k)
      if (o[k] <= 0 || __builtin_mul_overflow(st, o[k], &st))
        return false;
    return sb % st == 0 && o[a] % (sb / st * batch) == 0;
  };
  // `o` with its inferred axis filled (when it has one); false when the
  // known extents do not divide the input's.
  auto inferred = [&](std::vector<int64_t> &o) {
    if (inferAt < 0)
      return true;
    int64_t rest = 1;
    for (int64_t k = 0; k < static_cast<int64_t>(o.size()); ++k)
      if (k != inferAt &&
          (o[k] <= 0 || __builtin_mul_overflow(rest, o[k], &rest)))
        return false;
    if (total % rest)
      return false;
    o[inferAt] = total / rest;
    return true;
  };
  // Without the batch's symbol, the one inferred axis holds it: exporters
  // that fix every other extent (torch.export's dynamo graphs) leave the
  // batch to the -1. Unless it cannot (a window reshape of Swin's read at
  // a fixed batch, [N * windows, -1, heads, d]): then a literal may.
  if (at < 0 && inferAt >= 0) {
    std::vector<int64_t> o = out;
    o[inferAt] = 1;
    if (inferred(o) && holdsBatch(o, inferAt))
      at = inferAt;
  }
  if (at < 0 && node.modelBatch() > 0) {
    // A fixed-batch export spells the batch as a literal multiple of the
    // batch it was written with ([N * T, C] back to [N, T, C] as [2, 8, C]):
    // the axis whose literal, scaled to this batch, holds the batch's run
    // of elements. Taken only when exactly one axis fits.
    const int64_t b0 = node.modelBatch();
    std::vector<int64_t> found;
    int64_t foundAt = -1, fits = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t d = t.ints[i];
      if (i == inferAt || d <= 0 || d % b0 || out[i] != d)
        continue;
      std::vector<int64_t> cand = out;
      if (__builtin_mul_overflow(d / b0, batch, &cand[i]) || !inferred(cand))
        continue;
      int64_t candTotal = 1;
      bool fitsInt = true;
      for (int64_t c : cand)
        fitsInt = fitsInt && !__builtin_mul_overflow(candTotal, c, &candTotal);
      if (!fitsInt || candTotal != total || !holdsBatch(cand, i))
        continue;
      ++fits;
      found = std::move(cand);
      foundAt = i;
    }
    if (fits == 1) {
      out = std::move(found);
      at = foundAt;
      inferAt = -1; // filled
    }
  }
  // Nothing fits better: the inferred axis, for the error below.
  if (at < 0 && inferAt >= 0)
    at = inferAt;
  if (at < 0)
    return node.fail("target shape " + t.str() + " for input of shape " +
                     dimsStr(xd) +
                     " does not say where the batch goes; memfit follows the "
                     "batch through shapes computed from Shape, an "
                     "inferred (-1) axis, or in a fixed-batch model the one "
                     "axis a multiple of that batch fits");
  if (inferAt >= 0) {
    if (known <= 0 || total % known)
      return node.fail("cannot reshape " + dimsStr(xd) + " to " + t.str());
    out[inferAt] = total / known;
  }
  int64_t outTotal = 1;
  for (int64_t d : out)
    outTotal *= d;
  if (outTotal != total)
    return node.fail("cannot reshape " + dimsStr(xd) + " to " + t.str());
  // Stride of the batch in the input, and of its axis in the output.
  int64_t sb = v.batchInner, st = 1;
  for (size_t i = v.batchAxis + 1; i < xd.size(); ++i)
    sb *= xd[i];
  for (size_t i = at + 1; i < out.size(); ++i)
    st *= out[i];
  if (sb % st || out[at] % (sb / st * batch))
    return node.fail("target shape " + t.str() + " for input of shape " +
                     dimsStr(xd) +
                     " would split the batch across axes; memfit keeps each "
                     "sample's elements together on one axis");
  int64_t inner = sb / st;
  OutSpec o{node.outputName(0), out, static_cast<int32_t>(at),
            out[at] / (inner * batch), inner};
  OpAttrs a;
  a.shape = out;
  return node.emit(OpKind::Reshape, {x}, {o}, a).takeError();
}

/// A value computed from weights has no batch to follow: any target of
/// the same size.
llvm::Error importReshapeUnbatched(OnnxNode &node, ValueId x,
                                   const IntConstant &t, bool allowZero) {
  const std::vector<int64_t> &xd = node.graph().values[x].dims;
  if (t.isFloat || t.dims.size() != 1)
    return node.fail("target shape must be a 1-D integer tensor");
  int64_t total = 1, known = 1, inferAt = -1;
  for (int64_t d : xd)
    total *= d;
  std::vector<int64_t> out(t.ints.size());
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t d = t.ints[i];
    if (t.isBatch(i))
      return node.fail("target shape " + t.str() +
                       " holds the batch; the input " + dimsStr(xd) +
                       " is computed from weights and has none");
    if (d == 0 && !allowZero) {
      if (i >= static_cast<int64_t>(xd.size()))
        return node.fail("target shape " + t.str() +
                         " copies an axis the input lacks");
      d = xd[i];
    } else if (d == -1 && inferAt < 0) {
      inferAt = i;
      continue;
    } else if (d <= 0) {
      return node.fail("target shape " + t.str() + " is invalid");
    }
    out[i] = d;
    if (__builtin_mul_overflow(known, d, &known))
      return node.fail("target shape " + t.str() + " overflows");
  }
  if (inferAt >= 0) {
    if (known <= 0 || total % known)
      return node.fail("cannot reshape " + dimsStr(xd) + " to " + t.str());
    out[inferAt] = total / known;
    known = total;
  }
  if (known != total)
    return node.fail("cannot reshape " + dimsStr(xd) + " to " + t.str());
  OpAttrs a;
  a.shape = out;
  return node.emit(OpKind::Reshape, {x}, {{node.outputName(0), out}}, a)
      .takeError();
}

llvm::Error importReshape(OnnxNode &node) {
  auto x = node.activation(0);
  auto target = node.intConstant(1);
  auto allowZero = node.attrInt("allowzero", 0);
  if (!x || !target || !allowZero)
    return llvm::joinErrors(llvm::joinErrors(x.takeError(), target.takeError()),
                            allowZero.takeError());
  const Value &v = node.graph().values[*x];
  if (!v.batched)
    return importReshapeUnbatched(node, *x, *target, *allowZero != 0);
  bool moving = !v.canonical();
  for (int64_t i = 0; i < target->numel() && !moving; ++i)
    moving =
        target->isBatch(i) && (i != 0 || target->ints[i] != node.graph().batch);
  bool plain = !target->isFloat && target->dims.size() == 1;
  if (moving && plain)
    return importReshapeMoving(node, *x, *target, *allowZero != 0);
  // A fixed target whose -1 merges the batch with other axes ([N, h, T, d]
  // to [-1, T, d] in torch.export graphs) moves it.
  bool inferred =
      plain && target->numel() >= 2 && llvm::is_contained(target->ints, -1);
  llvm::Error canonical = importReshapeCanonical(node);
  // A fixed-batch graph spells a merge of the batch with other axes as a
  // literal multiple of it (BLOOM's [N * heads, T, d] as [4, T, d]).
  bool literal = plain && node.modelBatch() > 0;
  if (!canonical || !(inferred || literal))
    return canonical;
  llvm::Error other = importReshapeMoving(node, *x, *target, *allowZero != 0);
  if (other) {
    llvm::consumeError(std::move(other));
    return canonical;
  }
  llvm::consumeError(std::move(canonical));
  return llvm::Error::success();
}

llvm::Error importReshapeCanonical(OnnxNode &node) {
  auto x = node.activation(0);
  auto target = node.intConstant(1);
  auto allowZero = node.attrInt("allowzero", 0);
  if (!x || !target || !allowZero)
    return llvm::joinErrors(llvm::joinErrors(x.takeError(), target.takeError()),
                            allowZero.takeError());
  const IntConstant &t = *target;
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  if (t.isFloat || t.dims.size() != 1 || t.numel() == 0)
    return node.fail("target shape must be a non-empty 1-D integer tensor");
  auto moves = [&] {
    return node.fail("target shape " + t.str() + " for input of shape " +
                     dimsStr(xd) +
                     " would move the batch off axis 0; memfit keeps "
                     "the batch on axis 0 of every value");
  };
  int64_t perSample = 1;
  for (size_t i = 1; i < xd.size(); ++i)
    perSample *= xd[i];
  std::vector<int64_t> out(t.ints.size(), 0);
  int64_t inferAt = -1;
  bool batchAt0 = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = t.ints[i];
    bool copy = v == 0 && !*allowZero;
    if (t.isBatch(i) || (i == 0 && copy) ||
        (i == 0 && node.modelBatch() > 0 && v == node.modelBatch())) {
      if (i != 0)
        return moves();
      batchAt0 = true;
      out[0] = xd[0];
    } else if (copy) {
      if (i >= static_cast<int64_t>(xd.size()))
        return node.fail("target shape " + t.str() +
                         " copies an axis the input lacks");
      out[i] = xd[i];
    } else if (v == -1 && inferAt < 0) {
      inferAt = i;
    } else if (v <= 0) {
      return node.fail("target shape " + t.str() + " is invalid");
    } else {
      out[i] = v;
    }
  }
  int64_t rest = 1;
  for (int64_t i = 1; i < t.numel(); ++i)
    if (i != inferAt && __builtin_mul_overflow(rest, out[i], &rest))
      return node.fail("target shape " + t.str() + " overflows");
  if (!batchAt0 && inferAt != 0)
    return moves();
  if (inferAt == 0 || inferAt < 0) {
    // Axis 0 holds B * perSample / rest elements; it is the batch only if
    // the other axes take exactly one sample.
    if (rest != perSample)
      return inferAt == 0 ? moves()
                          : node.fail("cannot reshape " + dimsStr(xd) + " to " +
                                      t.str());
    out[0] = xd[0];
  } else {
    if (rest == 0 || perSample % rest != 0)
      return node.fail("cannot reshape " + dimsStr(xd) + " to " + t.str());
    out[inferAt] = perSample / rest;
  }
  OpAttrs a;
  a.shape = out;
  return node.emit(OpKind::Reshape, {*x}, {{node.outputName(0), out}}, a)
      .takeError();
}

/// Squeeze and Unsqueeze on an activation: a reshape that keeps the batch
/// on its axis (axis 0, unless an earlier op moved it).
llvm::Error importSqueeze(OnnxNode &node) {
  bool unsqueeze = node.opType() == "Unsqueeze";
  auto x = node.activation(0);
  if (!x)
    return x.takeError();
  const Value &v = node.graph().values[*x];
  const int64_t batchAt = v.batched ? v.batchAxis : -1;
  std::vector<int64_t> xd = dimsOfValue(node, *x), axes;
  if (node.opset() >= 13) {
    if (node.hasInput(1)) {
      auto v = node.intVector(1);
      if (!v)
        return v.takeError();
      axes = *v;
    }
  } else {
    auto a = node.attrInts("axes");
    if (!a)
      return a.takeError();
    axes = a->value_or(std::vector<int64_t>());
  }
  auto outRank =
      static_cast<int64_t>(xd.size() + (unsqueeze ? axes.size() : 0));
  std::vector<bool> marked(outRank > 0 ? outRank : 0, false);
  for (int64_t a : axes) {
    int64_t r = unsqueeze ? outRank : (int64_t)xd.size();
    int64_t ax = a < 0 ? a + r : a;
    if (ax < 0 || ax >= r || marked[ax])
      return node.fail(
          llvm::formatv("axis {0} is invalid for shape {1}", a, dimsStr(xd)));
    if (ax == 0 && v.batched && v.canonical())
      return node.fail("would move the batch off axis 0; memfit keeps the "
                       "batch on axis 0 of every value");
    if (!unsqueeze && ax == batchAt)
      return node.fail("squeezes the batch's axis");
    marked[ax] = true;
  }
  std::vector<int64_t> out;
  int32_t outBatchAt = -1;
  if (unsqueeze) {
    for (int64_t i = 0, k = 0; i < outRank; ++i) {
      if (!marked[i] && k == batchAt)
        outBatchAt = static_cast<int32_t>(i);
      out.push_back(marked[i] ? 1 : xd[k++]);
    }
  } else {
    for (size_t i = 0; i < xd.size(); ++i) {
      bool drop = axes.empty()
                      ? (static_cast<int64_t>(i) != batchAt && xd[i] == 1)
                      : bool(marked[i]);
      if (drop && xd[i] != 1)
        return node.fail(
            llvm::formatv("squeezes axis {0} of size {1}", i, xd[i]));
      if (static_cast<int64_t>(i) == batchAt)
        outBatchAt = static_cast<int32_t>(out.size());
      if (!drop)
        out.push_back(xd[i]);
    }
  }
  OpAttrs a;
  a.shape = out;
  OutSpec o{node.outputName(0), out, outBatchAt, v.batchOuter, v.batchInner};
  return node.emit(OpKind::Reshape, {*x}, {o}, a).takeError();
}

llvm::Error importReshapeLike(OnnxNode &node) {
  return node.opType() == "Reshape" ? importReshape(node) : importSqueeze(node);
}

OpWork noFlops(const Graph &, const Op &, TaskKind, int, int64_t) {
  return {0};
}

void flattenSignature(llvm::raw_ostream &os, const Op &op) {
  os << " axis=" << op.attrs.axis;
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  ValueId in = x.op.inputs[0], y = x.op.outputs[0];
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{"// a view: the output shares its input's bytes", true};
  case TaskKind::BackwardData: {
    if (storageOf(x.tg, x.tg.gradBlockIn(y, x.task.chunk)) ==
        storageOf(x.tg, x.tg.gradBlockIn(in, x.task.chunk)))
      return EmittedCall{"// a view: the gradient already is the input's",
                         true};
    int64_t perSample = x.graph.value(in).elementsPerSample();
    std::string acc = x.accumulates(in);
    return EmittedCall{llvm::formatv("x.{0}({1}, {2}, {3})",
                                     acc == "false" ? "copy" : "accumulateInto",
                                     perSample, x.grad(y), x.gradIfWritten(in))
                           .str()};
  }
  default:
    return noWeightGrad(x.op);
  }
}

OpDef view(OpKind kind, std::string_view name) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .isView = true,
          .costClass = CostClass::Copy,
          .work = noFlops,
          .emit = emit};
}

} // namespace

llvm::Error importReshapeTo(OnnxNode &node, ValueId x, const IntConstant &t) {
  return node.graph().values[x].batched
             ? importReshapeMoving(node, x, t, false)
             : importReshapeUnbatched(node, x, t, false);
}

void registerView(std::vector<OpDef> &defs) {
  OpDef flatten = view(OpKind::Flatten, "Flatten");
  flatten.batchLayout = OpDef::BatchLayout::SampleMajor;
  flatten.signatureAttrs = flattenSignature;
  flatten.importOnnx = importFlatten;
  flatten.forms =
      "An activation with the batch alone on axis 0; `axis` (default 1, "
      "negative counted from the end) at least 1, with the axes between the "
      "batch and `axis` of size 1, so that the output is [N, the rest]: a view "
      "of the input (no copy). An `axis` after larger axes merges them with "
      "the batch, each sample's rows together ([N, T, C] at 2: [N * T, C], a "
      "Reshape view that row-wise ops and BatchNorm read), as does a value "
      "whose batch is the outer factor of axis 0; `axis` 0 is refused.";
  flatten.gradient =
      "the input (the same bytes where it has no other reader, else a copy)";
  defs.push_back(std::move(flatten));
  OpDef reshape = view(OpKind::Reshape, "Reshape");
  reshape.batchLayout = OpDef::BatchLayout::Any;
  reshape.onnxTypes = {"Reshape", "Squeeze", "Unsqueeze"};
  reshape.importOnnx = importReshapeLike;
  reshape.forms =
      "Views (no copy). Reshape: a 1-D integer constant target (shape "
      "arithmetic folded, the batch kept symbolic), `0` copying unless "
      "`allowzero`, `-1` inferred; axis 0 the batch (its symbol, `0`, the "
      "model's fixed batch, or `-1` with the rest one sample), or the batch "
      "moved to one axis that keeps each sample together ([T, N * heads, d]); "
      "a value computed from weights takes any target. Squeeze, Unsqueeze: "
      "`axes` attribute (before opset 13) or constant input; Squeeze only of "
      "size-1 axes other than the batch's (all of them without `axes`); no "
      "Unsqueeze of a new axis 0 before a batch there.";
  reshape.gradient =
      "the input (the same bytes where it has no other reader, else a copy)";
  defs.push_back(std::move(reshape));
}

} // namespace memfit::ops
