//===- Transformer.cpp - LayerNorm, masks, embeddings ---------------------===//
//
// The operators transformers add beside their products (BatchMatMul.cpp):
// layer normalization over the last axes, a masked fill with a constant mask
// (Where), and embedding lookups (Gather of a weight table by token ids or
// by constant positions). LayerNorm's backward recomputes the row statistics
// from X instead of saving them.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

#include <optional>

namespace memfit::ops {

namespace {

// --- LayerNorm ---

llvm::Error importLayerNorm(OnnxNode &node) {
  auto x = node.activation(0);
  auto scale = node.weight(1, WeightInit::Ones, true);
  auto axisAttr = node.attrInt("axis", -1);
  auto eps = node.attrFloat("epsilon", 1e-5f);
  if (llvm::Error e = firstError(x, scale, axisAttr, eps))
    return e;
  for (int i = 1; i < node.numOutputs(); ++i)
    if (node.outputUsed(i))
      return node.fail("uses the saved mean or inverse standard deviation; "
                       "memfit supports only the normalized output");
  std::vector<ValueId> inputs = {*x, *scale};
  if (node.hasInput(2)) {
    auto bias = node.weight(2, WeightInit::Zeros, true);
    if (!bias)
      return bias.takeError();
    inputs.push_back(*bias);
  }
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis <= node.graph().values[*x].batchAxis || axis >= rank)
    return node.fail(llvm::formatv("axis {0} on shape {1} would normalize "
                                   "across the batch or nothing",
                                   *axisAttr, dimsStr(xd)));
  int64_t d = product(xd, axis, xd.size());
  for (size_t i = 1; i < inputs.size(); ++i)
    if (node.graph().values[inputs[i]].elementsPerSample() != d)
      return node.fail("scale and bias must have the " + std::to_string(d) +
                       " elements of the normalized axes");
  OpAttrs a;
  a.axis = axis;
  a.epsilon = *eps;
  return node.emit(OpKind::LayerNorm, inputs, {{node.outputName(0), xd}}, a)
      .takeError();
}

void lnDataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
  reads.push_back(o.inputs[1]);
}

void lnWeightReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
}

OpWork lnWork(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 8 : 12) * out};
}

llvm::Expected<OpParamsText> lnParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  int64_t d = product(x.dims, op.attrs.axis, x.dims.size());
  return OpParamsText{"LayerNormParams",
                      llvm::formatv("{{.rows = {0}, .d = {1}, .epsilon = {2}}",
                                    x.elementsPerSample() / d, d,
                                    f32(op.attrs.epsilon))
                          .str()};
}

llvm::Expected<EmittedCall> lnEmit(EmitContext &x) {
  const Op &op = x.op;
  ValueId in = op.inputs[0], scale = op.inputs[1], y = op.outputs[0];
  ValueId bias = op.inputs.size() > 2 ? op.inputs[2] : kNoId;
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.layerNormForward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.value(in), x.value(scale),
                               bias == kNoId ? "nullptr" : x.value(bias),
                               x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{
        formatv("x.layerNormBackwardData({0}, {1}, {2}, {3}, {4}, {5})",
                x.params, x.value(in), x.value(scale), x.grad(y),
                x.gradIfWritten(in), x.accumulates(in))
            .str()};
  default: {
    ValueId w = x.writesGrad(scale) ? scale : bias;
    return EmittedCall{
        formatv("x.layerNormBackwardWeight({0}, {1}, {2}, {3}, {4}, {5})",
                x.params, x.value(in), x.grad(y), x.gradIfWritten(scale),
                bias == kNoId ? "nullptr" : x.gradIfWritten(bias),
                x.accumulates(w))
            .str()};
  }
  }
}

// --- Where: a masked fill ---

/// Where(cond, c, x) or Where(cond, x, c) with a constant condition and a
/// scalar constant c: torch's masked_fill with a registered mask.
namespace {

/// Where's condition as the mask operand of a fill of `x`, checked to
/// broadcast over it; `mask` may become one sample's.
llvm::Error whereMask(OnnxNode &node, ValueId x, ValueId &mask,
                      bool perSample) {
  std::vector<int64_t> xd = dimsOfValue(node, x), md = dimsOfValue(node, mask);
  if (perSample &&
      (!node.graph().values[mask].batched || md.size() != xd.size()))
    return node.fail("the condition " + quoteName(node.inputName(0)) +
                     " of shape " + dimsStr(md) +
                     " is computed, but not per sample of " + dimsStr(xd) +
                     "; memfit supports a computed condition with the "
                     "batch's axis and the activation's rank");
  int64_t bSize, inner;
  // A value computed from weights (T5's position bias chosen by a mask)
  // has no batch: every axis is its own.
  const bool xBatched = node.graph().values[x].batched;
  std::vector<int64_t> per(xd.begin() + (xBatched ? 1 : 0), xd.end());
  std::vector<int64_t> mper = md;
  if (!xBatched) {
    while (mper.size() > per.size() && mper.front() == 1)
      mper.erase(mper.begin());
  } else if (perSample) {
    mper.erase(mper.begin());
  } else if (mper.size() == xd.size()) {
    // A fixed-batch graph's mask written for each sample alike: one
    // sample's (BLOOM's causal mask in transformers 4, read at the planned
    // batch).
    if (mper[0] != 1)
      if (auto one = node.oneSampleConstant(mask)) {
        mask = *one;
        md = mper = dimsOfValue(node, mask);
      }
    if (mper[0] != 1)
      return node.fail("the condition varies along the batch; memfit supports "
                       "a mask shared by all samples");
    mper.erase(mper.begin());
  }
  if (!broadcastRun(per, mper, bSize, inner))
    return node.fail("condition of shape " + dimsStr(md) +
                     " does not broadcast over the activation of shape " +
                     dimsStr(xd) + " along one contiguous run of axes");
  return llvm::Error::success();
}

} // namespace

llvm::Error importWhere(OnnxNode &node) {
  bool act1 = node.isActivation(node.inputName(1)),
       act2 = node.isActivation(node.inputName(2));
  // The condition is a constant, or a mask per sample computed from the
  // token ids (masked_fill(ids == pad, ...): an integer program's value).
  bool perSample = node.isActivation(node.inputName(0));
  if (!act1 && !act2)
    return node.fail("memfit supports Where only as a masked fill or a "
                     "choice between two activations: a condition (a "
                     "constant, or computed from the token ids) choosing "
                     "between an activation and a scalar constant or "
                     "another activation of its shape");
  auto mask = perSample ? node.activation(0) : node.constantWeight(0);
  if (!mask)
    return mask.takeError();
  if (act1 && act2) {
    // A choice between two activations (Funnel's token-type scores): each
    // kept where chosen and 0 elsewhere, then added; exact, since the other
    // side adds a 0 (and a fill, not a product, so nothing else of it
    // reaches the sum). Each side's gradient is the output's where chosen.
    auto a = node.activation(1), b = node.activation(2);
    if (llvm::Error e = firstError(a, b))
      return e;
    std::vector<int64_t> ad = dimsOfValue(node, *a), bd = dimsOfValue(node, *b);
    if (ad != bd ||
        node.graph().values[*a].batched != node.graph().values[*b].batched)
      return node.fail("chooses between activations of shapes " + dimsStr(ad) +
                       " and " + dimsStr(bd) +
                       "; memfit supports a choice between two of one shape");
    if (llvm::Error e = whereMask(node, *a, *mask, perSample))
      return e;
    const std::string out = node.outputName(0);
    std::vector<ValueId> kept;
    for (int side : {1, 2}) {
      OpAttrs keep;
      keep.fillWhere = side == 2; // fill 0 where the other side is chosen
      keep.padValue = 0.0f;
      auto op = node.emit(
          OpKind::Where, {side == 1 ? *a : *b, *mask},
          {{out + (side == 1 ? " (where true)" : " (where false)"), ad}}, keep,
          false, node.name() + (side == 1 ? " (true)" : " (false)"));
      if (!op)
        return op.takeError();
      kept.push_back(node.graph().ops[*op].outputs[0]);
    }
    return node.emit(OpKind::Add, kept, {{out, ad}}).takeError();
  }
  int xi = act1 ? 1 : 2;
  auto x = node.activation(xi);
  auto value = node.scalarFloat(xi == 1 ? 2 : 1);
  if (llvm::Error e = firstError(x, value))
    return e;
  if (llvm::Error e = whereMask(node, *x, *mask, perSample))
    return e;
  OpAttrs a;
  a.fillWhere = xi == 2;
  a.padValue = *value;
  return node
      .emit(OpKind::Where, {*x, *mask},
            {{node.outputName(0), dimsOfValue(node, *x)}}, a)
      .takeError();
}

void whereReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[1]);
}

OpWork oneFlop(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {elems(g.value(op.outputs[0]), b)};
}

llvm::Expected<OpParamsText> whereParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  std::vector<int64_t> per(x.dims.begin() + 1, x.dims.end());
  const Value &m = g.value(op.inputs[1]);
  std::vector<int64_t> md = m.dims;
  if (md.size() == x.dims.size())
    md.erase(md.begin());
  int64_t bSize, inner;
  if (!broadcastRun(per, md, bSize, inner))
    return unsupportedByRuntime(op, "the mask does not broadcast");
  return OpParamsText{
      "WhereParams",
      llvm::formatv("{{.perSample = {0}, .maskSize = {1}, .inner = {2}, "
                    ".value = {3}, .fillWhere = {4}{5}}",
                    x.elementsPerSample(), bSize, inner, f32(op.attrs.padValue),
                    op.attrs.fillWhere ? "true" : "false",
                    m.batched ? ", .maskBatched = true" : "")
          .str()};
}

llvm::Expected<EmittedCall> whereEmit(EmitContext &x) {
  ValueId in = x.op.inputs[0], mask = x.op.inputs[1], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.whereForward({0}, {1}, {2}, {3})", x.params,
                               x.value(mask), x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.whereBackward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.value(mask), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

// --- Embedding: Gather of a weight table ---

/// Rows of a value without a batch looked up at constant indices (Swin
/// V2's position-bias table, computed by an MLP, gathered by the relative
/// position index): a lookup in that value, whose gradient adds the rows
/// back (BP-data).
llvm::Error importGatherOfValue(OnnxNode &node, ValueId table) {
  auto axis = node.attrInt("axis", 0);
  if (!axis)
    return axis.takeError();
  std::vector<int64_t> td = dimsOfValue(node, table);
  if (*axis != 0 || td.size() != 2)
    return node.fail("memfit supports Gather of a value computed from "
                     "weights as a lookup of rows (axis 0) of a 2-D value");
  auto idx = node.constantWeight(1);
  if (!idx)
    return idx.takeError();
  if (auto one = node.oneSampleConstant(*idx))
    idx = *one;
  std::vector<int64_t> out = dimsOfValue(node, *idx);
  out.push_back(td[1]);
  OutSpec o{node.outputName(0), out};
  o.unbatched = true;
  return node.emit(OpKind::Embedding, {table, *idx}, {o}).takeError();
}

/// Columns of a 2-D weight at constant indices, table[:, idx] (LeViT's and
/// EfficientFormer's attention biases: one offset table per head, looked up
/// by each query-key pair's offset): the rows of the table's transpose,
/// their last axis then moved first. A value computed from the weight
/// (read as a value: Transpose has no weight gradient), without a batch;
/// the lookup's gradient adds the columns back.
llvm::Error importColumnGather(OnnxNode &node, const std::vector<int64_t> &td) {
  auto table = node.weightValue(0);
  auto idx = node.constantWeight(1);
  if (llvm::Error e = firstError(table, idx))
    return e;
  if (auto one = node.oneSampleConstant(*idx))
    idx = *one;
  const std::string &name = node.outputName(0);
  OpAttrs flip;
  flip.perm = {1, 0};
  OutSpec t{name + "#columns", {td[1], td[0]}};
  t.unbatched = true;
  auto tOp = node.emit(OpKind::Transpose, {*table}, {t}, flip);
  if (!tOp)
    return tOp.takeError();
  std::vector<int64_t> rows = dimsOfValue(node, *idx);
  const auto r = static_cast<int64_t>(rows.size());
  rows.push_back(td[0]);
  OutSpec e{name + "#rows", rows};
  e.unbatched = true;
  auto eOp = node.emit(OpKind::Embedding,
                       {node.graph().ops[*tOp].outputs[0], *idx}, {e});
  if (!eOp)
    return eOp.takeError();
  OpAttrs last;
  last.perm.push_back(r);
  for (int64_t i = 0; i < r; ++i)
    last.perm.push_back(i);
  std::vector<int64_t> out{td[0]};
  out.insert(out.end(), rows.begin(), rows.end() - 1);
  OutSpec o{name, out};
  o.unbatched = true;
  return node
      .emit(OpKind::Transpose, {node.graph().ops[*eOp].outputs[0]}, {o}, last)
      .takeError();
}

llvm::Error importGather(OnnxNode &node) {
  if (node.isActivation(node.inputName(0))) {
    auto x = node.activation(0);
    if (!x)
      return x.takeError();
    if (!node.graph().values[*x].batched && !node.isIndices(1) &&
        !node.isActivation(node.inputName(1)))
      return importGatherOfValue(node, *x);
    return importIndexSelect(node);
  }
  auto table = node.weight(0, WeightInit::HeNormal, true);
  auto axis = node.attrInt("axis", 0);
  if (llvm::Error e = firstError(table, axis))
    return e;
  std::vector<int64_t> td = dimsOfValue(node, *table);
  bool ids = node.isIndices(1);
  if (*axis == 1 && td.size() == 2 && !ids)
    return importColumnGather(node, td);
  if (*axis != 0 || td.size() != 2)
    return node.fail("memfit supports Gather of a weight only as an embedding "
                     "lookup (rows, axis 0, of a 2-D table) or at constant "
                     "indices along axis 1 of one");
  auto idx = ids ? node.indices(1) : node.constantWeight(1);
  if (!idx)
    return idx.takeError();
  // Positions a fixed-batch graph wrote for each sample alike ([B, T]
  // rows of one arange) are one sample's: the lookup broadcasts.
  if (!ids)
    if (auto one = node.oneSampleConstant(*idx))
      idx = *one;
  // Fixed positions (a position table, a relative position bias gathered
  // by a constant index) are a value computed from the weight, without a
  // batch: the rows once, whatever the sub-batch.
  std::vector<int64_t> out = dimsOfValue(node, *idx);
  out.push_back(td[1]);
  OutSpec o{node.outputName(0), out};
  o.unbatched = !ids;
  return node.emit(OpKind::Embedding, {*table, *idx}, {o}).takeError();
}

void embeddingReads(const GradOperands &o, std::vector<BlockId> &reads) {
  if (o.inputs.size() > 1)
    reads.push_back(o.inputs[1]);
}

OpWork embeddingWork(const Graph &g, const Op &op, TaskKind kind, int,
                     int64_t b) {
  return {kind == TaskKind::Forward ? 0 : elems(g.value(op.outputs[0]), b)};
}

llvm::Expected<OpParamsText> embeddingParams(const Graph &g, const Op &op) {
  const Value &t = g.value(op.inputs[0]), &y = g.value(op.outputs[0]);
  if (!y.batched && op.inputs.size() == 1) // a weight read as a value
    return OpParamsText{"EmbeddingParams",
                        llvm::formatv("{{.rows = 1, .d = {0}, .vocab = 1}",
                                      t.elementsPerSample())
                            .str()};
  int64_t d = t.elementsPerSample() / t.dims[0];
  std::string frozen =
      op.attrs.frozenRow >= 0
          ? llvm::formatv(", .frozenRow = {0}", op.attrs.frozenRow).str()
          : "";
  return OpParamsText{"EmbeddingParams",
                      llvm::formatv("{{.rows = {0}, .d = {1}, .vocab = {2}{3}}",
                                    y.elementsPerSample() / d, d, t.dims[0],
                                    frozen)
                          .str()};
}

llvm::Expected<EmittedCall> embeddingEmit(EmitContext &x) {
  ValueId table = x.op.inputs[0], y = x.op.outputs[0];
  ValueId idx = x.op.inputs.size() > 1 ? x.op.inputs[1] : kNoId;
  bool fixed = idx != kNoId && x.graph.value(idx).kind == ValueKind::Weight;
  // Neither: every row is the table's first (a broadcast over the batch).
  std::string ids = idx == kNoId || fixed ? "nullptr" : x.value(idx);
  std::string fixedIds = fixed ? x.value(idx) : "nullptr";
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.embeddingForward({0}, {1}, {2}, {3}, {4})",
                               x.params, ids, fixedIds, x.value(table),
                               x.value(y))
                           .str()};
  case TaskKind::BackwardWeight:
    return EmittedCall{
        formatv("x.embeddingBackward({0}, {1}, {2}, {3}, {4}, {5})", x.params,
                ids, fixedIds, x.grad(y), x.gradIfWritten(table),
                x.accumulates(table))
            .str()};
  case TaskKind::BackwardData: // a lookup in a value (importGatherOfValue)
    return EmittedCall{
        formatv("x.embeddingBackward({0}, {1}, {2}, {3}, {4}, {5})", x.params,
                ids, fixedIds, x.grad(y), x.gradIfWritten(table),
                x.accumulates(table))
            .str()};
  default:
    return unsupportedByRuntime(x.op, "token ids have no gradient");
  }
}

} // namespace

/// A weight broadcast over the batch (ViT's class token expanded to
/// [N, 1, D]): a lookup of its one row for every sample.
llvm::Error importExpandWeight(OnnxNode &node) {
  auto w = node.weight(0, WeightInit::Zeros, true);
  auto shape = node.intConstant(1);
  if (llvm::Error e = firstError(w, shape))
    return e;
  std::vector<int64_t> wd = dimsOfValue(node, *w);
  const IntConstant &s = *shape;
  // A target that broadcasts into the weight's own shape leaves it as it
  // is (torch's x.repeat writes Expand(w, ones) before its Tile).
  bool same = !s.isFloat && s.numel() <= static_cast<int64_t>(wd.size());
  for (int64_t i = 0; same && i < s.numel(); ++i) {
    int64_t have = wd[wd.size() - s.numel() + i];
    same = !s.isBatch(i) && (s.ints[i] == 1 || s.ints[i] == have);
  }
  if (same) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  bool ok = !s.isFloat && s.numel() >= 1 && s.isBatch(0) &&
            s.ints[0] == node.graph().batch &&
            wd.size() <= static_cast<size_t>(s.numel());
  std::vector<int64_t> out{node.graph().batch};
  for (int64_t i = 1; ok && i < s.numel(); ++i) {
    int64_t wi = i - (s.numel() - static_cast<int64_t>(wd.size()));
    int64_t have = wi >= 0 ? wd[wi] : 1;
    ok = !s.isBatch(i) && (s.ints[i] == have || s.ints[i] == 1);
    out.push_back(have);
  }
  ok = ok && (wd.size() < static_cast<size_t>(s.numel()) || wd[0] == 1);
  if (!ok)
    return node.fail("expands the weight of shape " + dimsStr(wd) + " to " +
                     s.str() +
                     "; memfit supports Expand of a weight only over the "
                     "batch, to [N, ...its shape]");
  return node.emit(OpKind::Embedding, {*w}, {{node.outputName(0), out}})
      .takeError();
}

void registerTransformer(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::LayerNorm,
       .name = "LayerNormalization",
       .onnxTypes = {"LayerNormalization"},
       .importOnnx = importLayerNorm,
       .batchLayout = OpDef::BatchLayout::Any,
       .dataGradReads = lnDataReads,
       .weightGradReads = lnWeightReads,
       .costClass = CostClass::Normalization,
       .work = lnWork,
       .params = lnParams,
       .emit = lnEmit,
       .forms = "X an activation; `axis` (default -1) after the batch's axis; "
                "`epsilon`; Scale and optional B weights (initializers, graph "
                "inputs without data, or float constants, then not trained) "
                "with as many elements as the normalized axes; the Mean and "
                "InvStdDev outputs must be unused. ReduceMean, Sub, Pow, "
                "ReduceMean, Add, Sqrt, Div, Mul, Add over the last axis with "
                "weights as scale and bias (torch's export before opset 17) is "
                "also recognized as this op.",
       .gradient = "X, Scale and B (the statistics recomputed from X)"});
  defs.push_back(
      {.kind = OpKind::Where,
       .name = "Where",
       .onnxTypes = {"Where"},
       .importOnnx = importWhere,
       .mayRunInPlace = true,
       .dataGradReads = whereReads,
       .work = oneFlop,
       .params = whereParams,
       .emit = whereEmit,
       .forms = "A masked fill: one of X and Y an activation with the batch "
                "alone on axis 0, the other a float32 scalar constant; the "
                "condition a constant of any type shared by all samples "
                "(extent 1 on the batch's axis), or a mask computed from the "
                "token ids of the activation's rank (`masked_fill(ids == pad, "
                "...)`), broadcast along one contiguous run of axes. A choice "
                "between two activations of one shape (Funnel's token-type "
                "scores) is two fills with 0 added; on constants alone it "
                "folds.",
       .gradient = "the activation (zero where the fill is taken); none for "
                   "the condition"});
  defs.push_back(
      {.kind = OpKind::Embedding,
       .name = "Gather",
       .onnxTypes = {"Gather"},
       .importOnnx = importGather,
       // Gather of an activation, on any layout, is a Slice; the
       // embedding's own operands (a table, ids) have no batch
       // axis to move.
       .batchLayout = OpDef::BatchLayout::Any,
       .dataGradReads = embeddingReads,
       .weightGradReads = embeddingReads,
       .costClass = CostClass::Copy,
       .work = embeddingWork,
       .params = embeddingParams,
       .emit = embeddingEmit,
       .forms =
           "A float32 2-D weight table, `axis` 0, indexed by token ids (or "
           "integer programs on them, such as position ids): an embedding; or "
           "by constant indices (a position table): rows looked up once, a "
           "value without a batch; at constant indices along `axis` 1 "
           "(LeViT's attention biases, `table[:, idx]`): the rows of its "
           "transpose, their last axis moved first. An activation at a "
           "scalar or one-element constant index on an axis other than the "
           "batch's (`x[:, i]`): a Slice. An activation at every index of an "
           "axis in order (the flatten torch.export writes for "
           "`as_strided`): a Reshape. A 2-D value computed from weights at "
           "constant indices on axis 0: a lookup. Constants fold.",
       .gradient =
           "the table (a scatter-add of the rows read; `--freeze-rows` keeps a "
           "row's gradient zero) or the value computed from weights; an index "
           "selection: its input; never the indices"});
}

} // namespace memfit::ops
