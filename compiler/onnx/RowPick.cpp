//===- RowPick.cpp - One row per sample, picked by the token ids ----------===//
//
// A decoder's sequence classification (transformers' GPT-2 and Llama
// *ForSequenceClassification) scores every position, then keeps each
// sample's last token that is not padding: the scores [N, T, C] flattened
// to [N * T, C] and gathered at arange(N) * T + q, q = (argmax(ids == pad)
// - 1) mod T. memfit keeps the batch symbolic, and a sub-batch's samples
// are not the batch's, so the arange is no constant: it becomes each
// sample's index in its sub-batch (a program step, RtIntOp::Sample), read
// only here. The Gather becomes what it computes, proven from the program:
// a one-hot over T of q (an integer program, no gradient) times the scores,
// summed over T, so the pick's gradient is the Mul's and ReduceSum's.
// transformers 5 writes the same pick as x[arange(N), q], which torch.export
// turns into GatherND at [N, 2] index pairs (a Concat of two programs,
// after broadcasting them against each other); where the graph is read
// again at the planned batch, arange(N) is a constant that stands for the
// sample's index in the same places.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/ops/RuntimeKinds.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace memfit::onnximport {

using llvm::Error;
using ops::RtIntOp;

namespace {

using Interval = std::pair<int64_t, int64_t>;

/// Bounds of step `k`'s value over every row of `row` positions, where the
/// steps say them (an ArgMax or a position lies in the row, a Mod by a
/// positive constant below it, a comparison is 0 or 1); nullopt elsewhere.
std::optional<Interval> boundsOf(const std::vector<IntStep> &s, int k,
                                 int64_t row) {
  const IntStep &st = s[k];
  auto sub = [&](int o) { return o >= 0 ? boundsOf(s, o, row) : std::nullopt; };
  auto big = [](const Interval &i) {
    return std::max(std::abs(i.first), std::abs(i.second)) > (int64_t(1) << 40);
  };
  switch (static_cast<RtIntOp>(st.kind)) {
  case RtIntOp::Imm:
    return Interval{st.imm, st.imm};
  case RtIntOp::Pos:
  case RtIntOp::ArgMax:
    return Interval{0, row - 1};
  case RtIntOp::Mod:
    if (st.b >= 0 && s[st.b].kind == uint8_t(RtIntOp::Imm) && s[st.b].imm > 0)
      return Interval{0, s[st.b].imm - 1};
    return std::nullopt;
  case RtIntOp::Equal:
  case RtIntOp::Less:
  case RtIntOp::Greater:
  case RtIntOp::LessOrEqual:
  case RtIntOp::GreaterOrEqual:
  case RtIntOp::And:
  case RtIntOp::Or:
  case RtIntOp::Xor:
  case RtIntOp::Not:
  case RtIntOp::Bool:
    return Interval{0, 1};
  case RtIntOp::Add:
  case RtIntOp::Sub:
  case RtIntOp::Min:
  case RtIntOp::Max: {
    auto a = sub(st.a), b = sub(st.b);
    if (!a || !b || big(*a) || big(*b))
      return std::nullopt;
    switch (static_cast<RtIntOp>(st.kind)) {
    case RtIntOp::Add:
      return Interval{a->first + b->first, a->second + b->second};
    case RtIntOp::Sub:
      return Interval{a->first - b->second, a->second - b->first};
    case RtIntOp::Min:
      return Interval{std::min(a->first, b->first),
                      std::min(a->second, b->second)};
    default:
      return Interval{std::max(a->first, b->first),
                      std::max(a->second, b->second)};
    }
  }
  case RtIntOp::Where: {
    auto b = sub(st.b), c = sub(st.c);
    if (!b || !c)
      return std::nullopt;
    return Interval{std::min(b->first, c->first),
                    std::max(b->second, c->second)};
  }
  default:
    return std::nullopt;
  }
}

/// Whether step `k`'s value is proven to lie in [0, rows): a row of the
/// sample's own.
bool withinRows(const std::vector<IntStep> &s, int k, int64_t rows) {
  auto b = boundsOf(s, k, rows);
  return b && b->first >= 0 && b->second < rows;
}

/// What a refused pick gathers from, for its message.
std::string gathered(const Value *v, const std::string &name) {
  return v ? quoteName(name)
           : std::string("a value not computed from the data");
}

/// Each sample's index in its sub-batch, of shape `dims` (the batch's axis
/// first), one per row of `row` token ids.
IntProgramExpr sampleIndex(std::vector<int64_t> dims, int64_t row) {
  IntProgramExpr e;
  e.steps.push_back({.kind = uint8_t(RtIntOp::Sample)});
  e.dims = std::move(dims);
  e.row = row;
  e.perRow = true;
  return e;
}

/// Whether step `k` is the sample's index times `rows`.
bool isSampleTimes(const std::vector<IntStep> &s, int k, int64_t rows) {
  const IntStep &m = s[k];
  if (m.kind != uint8_t(RtIntOp::Mul))
    return false;
  auto is = [&](int o, RtIntOp kind) {
    return o >= 0 && s[o].kind == uint8_t(kind);
  };
  return (is(m.a, RtIntOp::Sample) && is(m.b, RtIntOp::Imm) &&
          s[m.b].imm == rows) ||
         (is(m.b, RtIntOp::Sample) && is(m.a, RtIntOp::Imm) &&
          s[m.a].imm == rows);
}

/// The row each sample's index picks: the step q of a program ending in
/// Sample * rows + q with q proven in [0, rows); -1 when it is not one.
int pickedRow(const IntProgramExpr &p, int64_t rows) {
  const std::vector<IntStep> &s = p.steps;
  const IntStep &add = s.back();
  if (add.kind != uint8_t(RtIntOp::Add) || add.a < 0 || add.b < 0)
    return -1;
  for (auto [m, q] : {std::pair{add.a, add.b}, std::pair{add.b, add.a}})
    if (isSampleTimes(s, m, rows) && withinRows(s, q, rows))
      return q;
  return -1;
}

/// The steps step `root` reads, in order, and the index of root among them.
std::pair<IntProgramExpr, int> stepsOf(const std::vector<IntStep> &s,
                                       int root) {
  std::vector<bool> need(root + 1, false);
  need[root] = true;
  for (int k = root; k >= 0; --k)
    if (need[k])
      for (int8_t o : {s[k].a, s[k].b, s[k].c})
        if (o >= 0)
          need[o] = true;
  IntProgramExpr e;
  std::vector<int> at(root + 1, -1);
  for (int k = 0; k <= root; ++k) {
    if (!need[k])
      continue;
    IntStep st = s[k];
    for (int8_t *o : {&st.a, &st.b, &st.c})
      if (*o >= 0)
        *o = static_cast<int8_t>(at[*o]);
    at[k] = pushIntStep(e, st);
  }
  return {std::move(e), at[root]};
}

} // namespace

bool Importer::countsSamples(const pb::NodeProto &n) const {
  const Value &ids = g.values[g.input];
  if (n.op_type() != "Range" || n.input_size() != 3 ||
      ids.dtype == DType::F32 || ids.dims.size() != 2)
    return false;
  const ConstTensor *t[3];
  for (int i = 0; i < 3; ++i) {
    auto c = consts.find(n.input(i));
    if (c == consts.end() || c->second->isFloat() || c->second->numel() != 1)
      return false;
    t[i] = c->second.get();
  }
  return !t[0]->isBatch(0) && t[0]->ints[0] == 0 && t[1]->isBatch(0) &&
         !t[2]->isBatch(0) && t[2]->ints[0] == 1;
}

Error Importer::bindSampleIndex(const pb::NodeProto &n) {
  // Where the graph fails to read with the index symbolic (transformers
  // 5's masks broadcast it against positions), it is read again at the
  // planned batch, as before sample indices were programs.
  countedBatch = true;
  return bindIntExpr(n, sampleIndex({g.batch}, g.values[g.input].dims[1]));
}

std::optional<IntProgramExpr>
Importer::sampleIndexConstant(const std::string &name) const {
  // Read at a fixed batch (traceBatch), arange(N) is a constant counting
  // the samples; as an index of each sample's own rows it is the sample's
  // index in its sub-batch, as the symbolic reading has it.
  const Value &ids = g.values[g.input];
  auto c = consts.find(name);
  if (!traceBatch || c == consts.end() || ids.dtype == DType::F32 ||
      ids.dims.size() != 2)
    return std::nullopt;
  const ConstTensor &t = *c->second;
  if (t.isFloat() || t.dims.empty() || t.dims[0] != g.batch ||
      t.numel() != g.batch || t.batchAxis >= 0)
    return std::nullopt;
  for (int64_t k = 0; k < t.numel(); ++k)
    if (t.ints[k] != k || t.isBatch(k))
      return std::nullopt;
  return sampleIndex(t.dims, ids.dims[1]);
}

bool Importer::picksRowPerSample(const pb::NodeProto &n) const {
  if (n.op_type() != "Gather" || n.input_size() != 2)
    return false;
  auto p = intExprs.find(n.input(1));
  return p != intExprs.end() && countSteps(p->second.steps, RtIntOp::Sample);
}

Error Importer::translateRowPick(const pb::NodeProto &n) {
  const IntProgramExpr &p = intExprs.at(n.input(1));
  auto axis = attrInt(n, "axis", 0);
  if (!axis)
    return axis.takeError();
  auto it = values.find(n.input(0));
  const Value *v = it == values.end() ? nullptr : &g.values[it->second];
  const Value &ids = g.values[g.input];
  const int64_t rows = ids.dims.back();
  // The scores of each sample's T positions together ([N * T, ...]), T the
  // ids' length, gathered along that axis at one index per sample.
  bool shaped = v && v->batched && v->batchAxis == 0 && v->batchOuter == 1 &&
                v->batchInner == rows && *axis == 0 && p.perRow &&
                p.dims.size() == 1 && p.row == rows;
  int q = shaped ? pickedRow(p, rows) : -1;
  if (q < 0)
    return fail(n, "gathers " + gathered(v, n.input(0)) +
                       " at indices computed from each sample's index (an "
                       "arange over the batch); memfit supports that as one "
                       "row per sample: axis 0 of a value of shape [N * T, "
                       "...] (each sample's T rows together, T the token ids' "
                       "length) at arange(N) * T + q, with q computed from the "
                       "ids and known to lie in [0, T) (an ArgMax over the "
                       "row, a Mod by T)");
  // The scores back to [N, T, ...], each sample's rows on their own axis.
  const std::string &out = n.output(0);
  ConstTensor shape;
  shape.dims = {static_cast<int64_t>(v->dims.size()) + 1};
  shape.ints = {g.batch, rows};
  shape.ints.insert(shape.ints.end(), v->dims.begin() + 1, v->dims.end());
  shape.batch.assign(shape.ints.size(), 0);
  shape.batch[0] = 1;
  bindConstant(out + "#rowsShape", std::move(shape));
  if (Error e =
          translate(liftedNode(n, "Reshape", {n.input(0), out + "#rowsShape"},
                               out + "#rows", "#rows")))
    return e;
  return pickRows(n, out + "#rows", p, q);
}

Error Importer::pickRows(const pb::NodeProto &n, const std::string &rows,
                         const IntProgramExpr &p, int q) {
  const std::string &out = n.output(0);
  const Value &v = g.values[values.at(rows)];
  // onehot[n, t] = (t == q[n]), shaped to broadcast over the rest.
  auto [onehot, qAt] = stepsOf(p.steps, q);
  int pos = pushIntStep(onehot, IntStep{.kind = uint8_t(RtIntOp::Pos)});
  pushIntStep(onehot, IntStep{.kind = uint8_t(RtIntOp::Equal),
                              .a = static_cast<int8_t>(pos),
                              .b = static_cast<int8_t>(qAt)});
  onehot.dims = {g.batch, v.dims[1]};
  onehot.dims.resize(v.dims.size(), 1);
  onehot.row = v.dims[1];
  onehot.reverse = p.reverse;
  onehot.isFloat = true;
  if (onehot.steps.size() > static_cast<size_t>(kMaxIntSteps))
    return fail(n, llvm::formatv("picks its row in {0} steps; memfit runs "
                                 "integer programs of up to {1}",
                                 onehot.steps.size(), kMaxIntSteps));
  intExprs[out + "#onehot"] = std::move(onehot);
  if (Error e = translate(liftedNode(n, "Mul", {rows, out + "#onehot"},
                                     out + "#picked", "#picked")))
    return e;
  ConstTensor axes;
  axes.dims = {1};
  axes.ints = {1};
  pb::NodeProto &sum =
      opset >= 13 ? liftedNode(n, "ReduceSum", {out + "#picked", out + "#axes"},
                               out, "#sum")
                  : liftedNode(n, "ReduceSum", {out + "#picked"}, out, "#sum");
  if (opset >= 13) {
    bindConstant(out + "#axes", std::move(axes));
  } else {
    pb::AttributeProto *a = sum.add_attribute();
    a->set_name("axes");
    a->set_type(pb::AttributeProto::INTS);
    a->add_ints(1);
  }
  pb::AttributeProto *keep = sum.add_attribute();
  keep->set_name("keepdims");
  keep->set_type(pb::AttributeProto::INT);
  keep->set_i(0);
  return translate(sum);
}

bool Importer::pairsSampleIndex(const pb::NodeProto &n) const {
  if (n.op_type() != "Concat")
    return false;
  bool program = false;
  for (const std::string &in : n.input()) {
    auto e = intExprs.find(in);
    auto c = e == intExprs.end() ? sampleIndexConstant(in) : std::nullopt;
    const IntProgramExpr *x = e != intExprs.end() ? &e->second
                              : c                 ? &*c
                                                  : nullptr;
    if (!x || x->dims.size() != 2 || x->dims[1] != 1)
      return false;
    program = program || e != intExprs.end();
  }
  return program && n.input_size() >= 2;
}

Error Importer::bindIndexTuple(const pb::NodeProto &n) {
  auto axis = attrInt(n, "axis", 0);
  if (!axis)
    return axis.takeError();
  if (*axis != 1 && *axis != -1)
    return fail(n, "concatenates integer values computed from the token ids "
                   "along an axis other than the last; memfit reads such a "
                   "concatenation only as GatherND's index tuples");
  std::vector<IntProgramExpr> parts;
  for (const std::string &in : n.input())
    parts.push_back(intExprs.count(in) ? intExprs.at(in)
                                       : *sampleIndexConstant(in));
  indexTuples[n.output(0)] = std::move(parts);
  return Error::success();
}

bool Importer::gathersTuples(const pb::NodeProto &n) const {
  return n.op_type() == "GatherND" && n.input_size() == 2 &&
         indexTuples.count(n.input(1));
}

Error Importer::translateTupleGather(const pb::NodeProto &n) {
  const std::vector<IntProgramExpr> &parts = indexTuples.at(n.input(1));
  auto batchDims = attrInt(n, "batch_dims", 0);
  if (!batchDims)
    return batchDims.takeError();
  auto it = values.find(n.input(0));
  const Value *v = it == values.end() ? nullptr : &g.values[it->second];
  const Value &ids = g.values[g.input];
  // x[arange(N), q]: the first index each sample's own, the second a row
  // of its T known to lie in [0, T).
  int q = -1;
  if (v && v->batched && v->canonical() && v->dims.size() >= 2 &&
      *batchDims == 0 && parts.size() == 2 && parts[0].steps.size() == 1 &&
      parts[0].steps[0].kind == uint8_t(RtIntOp::Sample) &&
      ids.dims.size() == 2 && v->dims[1] == ids.dims[1]) {
    const IntProgramExpr &p = parts[1];
    const int last = static_cast<int>(p.steps.size()) - 1;
    if (p.perRow && withinRows(p.steps, last, v->dims[1]))
      q = last;
  }
  if (q < 0)
    return fail(n, "gathers " + gathered(v, n.input(0)) +
                       " at index tuples computed from the token ids; memfit "
                       "supports x[arange(N), q] (batch_dims 0): x of shape "
                       "[N, T, ...], T the token ids' length, and q computed "
                       "from the ids and known to lie in [0, T)");
  return pickRows(n, n.input(0), parts[1], q);
}

} // namespace memfit::onnximport
