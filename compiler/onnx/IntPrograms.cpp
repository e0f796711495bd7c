//===- IntPrograms.cpp - Index arithmetic on the token ids ----------------===//
//
// Integer nodes whose operands are the token ids, or values computed from
// them, and scalar constants (RoBERTa's position ids: Equal, Not, Cast,
// CumSum, Mul and Add on the ids) are not ops of their own: each name they
// define is bound to an integer program, the steps from the ids to it. A
// program becomes one op (OpKind::IntProgram) when something else reads
// it: an embedding's ids (int32) or a float op (a float, as the model's
// Cast says). Element-wise steps and CumSum along the last axis evaluate
// position by position in one pass over each row, so the op is one kernel
// whatever the length of the chain; shared sub-chains are one step
// (Eq(ids, pad) read twice is computed once).
//
// Reshape, Unsqueeze and Squeeze that keep the batch on axis 0 change only
// the program's dims: the elements stay in order.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/ops/RuntimeKinds.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;
using ops::RtIntOp;
using ops::runtimeKind;

namespace {

/// The step of an ONNX op type, when one evaluates it.
std::optional<RtIntOp> stepOf(llvm::StringRef op) {
  for (auto k = uint8_t(0); k <= uint8_t(RtIntOp::CumSumExclusive); ++k) {
    auto kind = static_cast<RtIntOp>(k);
    if (op == runtimeKind(kind).onnx)
      return kind;
  }
  return std::nullopt;
}

bool isViewOp(llvm::StringRef op) {
  return op == "Reshape" || op == "Unsqueeze" || op == "Squeeze";
}

bool isFloatType(int64_t t) {
  return t == pb::TensorProto::FLOAT || t == pb::TensorProto::DOUBLE ||
         t == pb::TensorProto::FLOAT16 || t == pb::TensorProto::BFLOAT16;
}

/// Appends `src`'s steps to `dst`; the index of src's result there.
int append(IntProgramExpr &dst, const IntProgramExpr &src) {
  std::vector<int> at(src.steps.size());
  for (size_t k = 0; k < src.steps.size(); ++k) {
    IntStep s = src.steps[k];
    for (int8_t *o : {&s.a, &s.b, &s.c})
      if (*o >= 0)
        *o = static_cast<int8_t>(at[*o]);
    at[k] = pushIntStep(dst, s);
  }
  return at.back();
}

} // namespace

int pushIntStep(IntProgramExpr &e, IntStep s) {
  for (size_t k = 0; k < e.steps.size(); ++k)
    if (e.steps[k] == s)
      return static_cast<int>(k);
  e.steps.push_back(s);
  return static_cast<int>(e.steps.size() - 1);
}

int countSteps(const std::vector<IntStep> &steps, RtIntOp kind) {
  return static_cast<int>(llvm::count_if(
      steps, [&](const IntStep &s) { return s.kind == uint8_t(kind); }));
}

bool Importer::isIdsOperand(const std::string &name) const {
  if (intExprs.count(name))
    return true;
  auto it = values.find(name);
  return it != values.end() && it->second == g.input &&
         g.values[g.input].dtype != DType::F32;
}

IntProgramExpr Importer::idsExpr(const std::string &name) const {
  if (auto it = intExprs.find(name); it != intExprs.end())
    return it->second;
  IntProgramExpr e;
  e.steps.push_back({.kind = uint8_t(RtIntOp::Ids)});
  e.dims = g.values[g.input].dims;
  return e;
}

bool Importer::computesOnIds(const pb::NodeProto &n) const {
  llvm::StringRef op = n.op_type();
  auto step = stepOf(op);
  if (op == "CastLike") // operand 1 gives only the type
    return hasInput(n, 0) && isIdsOperand(n.input(0));
  if (!step && op != "Cast" && !isViewOp(op))
    return false;
  bool ids = false;
  for (int i = 0; i < n.input_size(); ++i) {
    if (!hasInput(n, i))
      continue;
    const std::string &name = n.input(i);
    if (isIdsOperand(name)) {
      ids = true;
      // True division of floats is no integer step: the float op does it.
      if (intExprs.count(name) && intExprs.at(name).isFloat &&
          (op == "Div" || op == "Mod"))
        return false;
    } else if (!isConstant(name)) {
      return false; // a float operand: the program is read by a float op
    } else if (auto c = consts.find(name);
               c != consts.end() && c->second->isFloat()) {
      // A float that is no integer ((1 - mask) * float.min): the float op
      // computes it on the program's value.
      for (float v : c->second->floats)
        if (!(std::nearbyint(v) == v && std::abs(v) < 1e15f))
          return false;
    }
  }
  return ids;
}

Error Importer::translateOnIds(const pb::NodeProto &n) {
  const std::string &op = n.op_type();
  int first = 0;
  while (!hasInput(n, first) || !isIdsOperand(n.input(first)))
    ++first;
  IntProgramExpr e = idsExpr(n.input(first));
  if ((isViewOp(op) || op == "Cast") && first != 0)
    return fail(n, "reshapes a constant to a shape computed from the token "
                   "ids; memfit computes shapes only from constants");
  if (isViewOp(op)) {
    // The dims ONNX shape inference gives are the program's new dims,
    // checked to keep each sample's elements together.
    std::vector<int64_t> dims;
    if (op == "Reshape") {
      auto t = constant(n, 1);
      if (!t)
        return t.takeError();
      int64_t known = 1, free = -1;
      for (int64_t i = 0; i < (*t)->numel() && !(*t)->isFloat(); ++i) {
        int64_t d = (*t)->isBatch(i) ? g.batch : (*t)->ints[i];
        if (d == 0 && i < static_cast<int64_t>(e.dims.size()))
          d = e.dims[i];
        if (d == -1)
          free = i;
        else
          known *= d;
        dims.push_back(d);
      }
      int64_t total = 1;
      for (int64_t d : e.dims)
        total *= d;
      if (free >= 0 && known > 0 && total % known == 0)
        dims[free] = total / known;
    } else {
      std::vector<int64_t> axes;
      if (n.input_size() > 1 && hasInput(n, 1)) {
        auto v = intVector(n, 1);
        if (!v)
          return v.takeError();
        axes = *v;
      } else if (auto a = attrInts(n, "axes"); !a) {
        return a.takeError();
      } else if (*a) {
        axes = **a;
      }
      dims = e.dims;
      int64_t rank =
          static_cast<int64_t>(dims.size()) +
          (op == "Unsqueeze" ? static_cast<int64_t>(axes.size()) : 0);
      for (int64_t &a : axes)
        a = a < 0 ? a + rank : a;
      std::sort(axes.begin(), axes.end());
      if (op == "Unsqueeze")
        for (int64_t a : axes)
          dims.insert(dims.begin() + std::clamp<int64_t>(a, 0, dims.size()), 1);
      else if (axes.empty())
        llvm::erase_if(dims, [](int64_t d) { return d == 1; });
      else
        for (auto it = axes.rbegin(); it != axes.rend(); ++it)
          if (*it >= 0 && *it < static_cast<int64_t>(dims.size()) &&
              dims[*it] == 1)
            dims.erase(dims.begin() + *it);
    }
    int64_t before = 1, after = 1;
    for (size_t i = 1; i < e.dims.size(); ++i)
      before *= e.dims[i];
    for (size_t i = 1; i < dims.size(); ++i)
      after *= dims[i];
    if (dims.empty() || dims[0] != g.batch || before != after)
      return fail(n, "changes the shape of " + quoteName(n.input(0)) +
                         ", computed from the token ids, from " +
                         dimsStr(e.dims) + " to " + dimsStr(dims) +
                         "; memfit supports reshapes of integer values "
                         "computed from the ids that keep the batch alone on "
                         "axis 0");
    e.dims = std::move(dims);
    intExprs[n.output(0)] = std::move(e);
    return Error::success();
  }
  if (op == "CastLike") {
    // torch.export's type_as: the type of operand 1, an integer program, a
    // constant or a float activation.
    bool toFloat = true, toBool = false;
    if (isIdsOperand(n.input(1))) {
      toFloat = idsExpr(n.input(1)).isFloat;
    } else if (isConstant(n.input(1))) {
      auto c = constant(n, 1);
      if (!c)
        return c.takeError();
      toFloat = (*c)->isFloat();
      toBool = (*c)->type == pb::TensorProto::BOOL;
    }
    if (toBool) {
      IntStep s{.kind = uint8_t(RtIntOp::Bool),
                .a = static_cast<int8_t>(e.steps.size() - 1)};
      pushIntStep(e, s);
    }
    e.isFloat = toFloat;
    return bindIntExpr(n, std::move(e));
  }
  if (op == "Cast") {
    auto to = attrInt(n, "to", 0);
    if (!to)
      return to.takeError();
    if (*to == pb::TensorProto::BOOL) {
      IntStep s{.kind = uint8_t(RtIntOp::Bool),
                .a = static_cast<int8_t>(e.steps.size() - 1)};
      pushIntStep(e, s);
    }
    e.isFloat = isFloatType(*to);
    return bindIntExpr(n, std::move(e));
  }
  if (op == "ArgMax")
    return translateArgMaxOnIds(n, std::move(e));
  RtIntOp kind = *stepOf(op);
  int operands = runtimeKind(kind).operands;
  if (n.input_size() < operands)
    return fail(n, llvm::formatv("has {0} operands; {1} takes {2}",
                                 n.input_size(), op, operands));
  IntProgramExpr out;
  out.dims = e.dims;
  out.isFloat = e.isFloat;
  out.perRow = e.perRow;
  int8_t at[3] = {-1, -1, -1};
  for (int i = 0; i < operands; ++i) {
    const std::string &name = n.input(i);
    if (isIdsOperand(name)) {
      IntProgramExpr x = idsExpr(name);
      if (x.dims != out.dims)
        return fail(n, "combines " + quoteName(n.input(0)) + " of shape " +
                           dimsStr(out.dims) + " and " + quoteName(name) +
                           " of shape " + dimsStr(x.dims) +
                           ", both computed from the token ids; memfit "
                           "computes on the ids only element by element");
      if (x.row > 0 && out.row > 0 &&
          (x.row != out.row || x.reverse != out.reverse))
        return fail(n, "combines cumulative sums along different axes or "
                       "directions");
      if (x.row > 0) {
        out.row = x.row;
        out.reverse = x.reverse;
      }
      out.perRow = out.perRow || x.perRow;
      out.isFloat = out.isFloat || x.isFloat;
      at[i] = static_cast<int8_t>(append(out, x));
      continue;
    }
    if (auto sample = sampleIndexConstant(name);
        sample && sample->dims == out.dims && out.perRow &&
        (out.row == 0 || out.row == sample->row)) {
      out.row = sample->row;
      at[i] = static_cast<int8_t>(append(out, *sample));
      continue;
    }
    // A constant the same everywhere: one immediate. One that counts along
    // the last axis (a + b * t: torch.arange(T), transformers 5's token
    // indices) is the position in the row times b plus a.
    auto c = constant(n, i);
    if (!c)
      return c.takeError();
    const ConstTensor &t = **c;
    bool shaped = t.numel() >= 1 && t.dims.size() <= out.dims.size();
    for (size_t d = 0; shaped && d < t.dims.size(); ++d) {
      int64_t have = out.dims[out.dims.size() - t.dims.size() + d];
      shaped = t.dims[d] == 1 || t.dims[d] == have;
    }
    std::vector<int64_t> v;
    for (int64_t k = 0; shaped && k < t.numel(); ++k) {
      double x = t.isFloat() ? double(t.floats[k]) : double(t.ints[k]);
      shaped = !t.isBatch(k) && std::nearbyint(x) == x && std::abs(x) < 1e15;
      v.push_back(int64_t(x));
    }
    bool same = shaped && std::adjacent_find(v.begin(), v.end(),
                                             std::not_equal_to<>()) == v.end();
    // Counting along the last axis alone, the row every CumSum and
    // ArgMax of the program runs along.
    bool counts = shaped && !same && !out.perRow && out.dims.size() >= 2 &&
                  !t.dims.empty() && t.dims.back() == out.dims.back() &&
                  t.numel() == t.dims.back() &&
                  (out.row == 0 || out.row == out.dims.back());
    for (size_t k = 2; counts && k < v.size(); ++k)
      counts = v[k] - v[k - 1] == v[1] - v[0] &&
               std::abs(v[1] - v[0]) < (int64_t(1) << 40);
    if (!same && !counts)
      return fail(n, llvm::formatv("operand {0} ({1})", i, quoteName(name)) +
                         " is a constant of shape " + dimsStr(t.dims) +
                         " that is not one integer everywhere nor counts "
                         "along the last axis; memfit computes on the token "
                         "ids with scalar constants and arange(T)");
    out.isFloat = out.isFloat || t.isFloat();
    auto imm = [&](int64_t x) {
      return pushIntStep(out, IntStep{.kind = uint8_t(RtIntOp::Imm), .imm = x});
    };
    if (same) {
      at[i] = static_cast<int8_t>(imm(v[0]));
      continue;
    }
    out.row = out.dims.back();
    int pos = pushIntStep(out, IntStep{.kind = uint8_t(RtIntOp::Pos)});
    int64_t step = v[1] - v[0];
    if (step != 1)
      pos = pushIntStep(out, IntStep{.kind = uint8_t(RtIntOp::Mul),
                                     .a = static_cast<int8_t>(pos),
                                     .b = static_cast<int8_t>(imm(step))});
    if (v[0] != 0)
      pos = pushIntStep(out, IntStep{.kind = uint8_t(RtIntOp::Add),
                                     .a = static_cast<int8_t>(pos),
                                     .b = static_cast<int8_t>(imm(v[0]))});
    at[i] = static_cast<int8_t>(pos);
  }
  if (op == "CumSum") {
    auto axis = intVector(n, 1);
    auto exclusive = attrInt(n, "exclusive", 0);
    auto reverse = attrInt(n, "reverse", 0);
    if (!axis || !exclusive || !reverse)
      return llvm::joinErrors(
          axis.takeError(),
          llvm::joinErrors(exclusive.takeError(), reverse.takeError()));
    auto rank = static_cast<int64_t>(out.dims.size());
    int64_t a = axis->size() == 1 ? (*axis)[0] : 0;
    a = a < 0 ? a + rank : a;
    if (axis->size() != 1 || a != rank - 1 || rank < 2)
      return fail(n, "sums the token ids along an axis other than the last "
                     "(not the batch's); memfit runs CumSum on them along "
                     "the last axis");
    if (out.perRow)
      return fail(n, "sums a value that is one per row of the token ids "
                     "(an ArgMax's); memfit runs CumSum on values per "
                     "position");
    if ((out.row > 0 && out.row != out.dims.back()) ||
        (out.row > 0 && out.reverse != (*reverse != 0)))
      return fail(n, "combines cumulative sums along different axes or "
                     "directions");
    out.row = out.dims.back();
    out.reverse = *reverse != 0;
    if (*exclusive)
      kind = RtIntOp::CumSumExclusive;
  }
  pushIntStep(
      out, IntStep{.kind = uint8_t(kind), .a = at[0], .b = at[1], .c = at[2]});
  // A comparison's result is a boolean, an integer whatever it compares.
  if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
      op == "GreaterOrEqual" || op == "Not" || op == "And" || op == "Or" ||
      op == "Xor")
    out.isFloat = false;
  return bindIntExpr(n, std::move(out));
}

Error Importer::translateArgMaxOnIds(const pb::NodeProto &n, IntProgramExpr e) {
  auto axis = attrInt(n, "axis", 0);
  auto keep = attrInt(n, "keepdims", 1);
  auto last = attrInt(n, "select_last_index", 0);
  if (!axis || !keep || !last)
    return llvm::joinErrors(
        axis.takeError(), llvm::joinErrors(keep.takeError(), last.takeError()));
  auto rank = static_cast<int64_t>(e.dims.size());
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (rank < 2 || a != rank - 1)
    return fail(n, "finds the largest of the token ids' values along an axis "
                   "other than the last (not the batch's); memfit runs ArgMax "
                   "on them along the last axis");
  if (e.perRow || countSteps(e.steps, RtIntOp::ArgMax) > 0 ||
      (e.row > 0 && e.row != e.dims.back()))
    return fail(n, "finds the largest of a value that is itself a reduction "
                   "of the row of token ids; memfit runs one ArgMax deep");
  e.row = e.dims.back();
  e.perRow = true;
  e.isFloat = false;
  pushIntStep(e, IntStep{.kind = uint8_t(RtIntOp::ArgMax),
                         .a = static_cast<int8_t>(e.steps.size() - 1),
                         .imm = *last != 0 ? 1 : 0});
  if (*keep)
    e.dims.back() = 1;
  else
    e.dims.pop_back();
  return bindIntExpr(n, std::move(e));
}

Expected<bool> Importer::translateProgramShape(const pb::NodeProto &n) {
  const std::string &op = n.op_type();
  if ((op != "Shape" && op != "Expand") || !hasInput(n, 0))
    return false;
  // arange(N) of the fixed-batch reading, broadcast against the pick's
  // other index, is the sample's index too.
  std::optional<IntProgramExpr> sample;
  if (op == "Expand" && !intExprs.count(n.input(0)))
    sample = sampleIndexConstant(n.input(0));
  if (!intExprs.count(n.input(0)) && !sample)
    return false;
  const IntProgramExpr &e = sample ? *sample : intExprs.at(n.input(0));
  auto rank = static_cast<int64_t>(e.dims.size());
  if (op == "Shape") { // its dims, the batch's marked
    auto start = attrInt(n, "start", 0);
    auto end = attrInt(n, "end", rank);
    if (!start || !end)
      return llvm::joinErrors(start.takeError(), end.takeError());
    auto clampAxis = [&](int64_t a) {
      return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank);
    };
    ConstTensor t;
    for (int64_t a = clampAxis(*start); a < clampAxis(*end); ++a) {
      t.ints.push_back(e.dims[a]);
      t.batch.push_back(a == 0);
    }
    t.dims = {static_cast<int64_t>(t.ints.size())};
    bindConstant(n.output(0), std::move(t));
    return true;
  }
  // An Expand to the program's own shape (torch.export's broadcast of
  // index tensors against each other) is the program.
  if (n.input_size() < 2 || !isConstant(n.input(1)))
    return false;
  auto shape = constant(n, 1);
  if (!shape)
    return shape.takeError();
  const ConstTensor &t = **shape;
  if (t.isFloat() || t.numel() > rank)
    return false;
  for (int64_t k = 0; k < t.numel(); ++k) {
    int64_t have = e.dims[rank - t.numel() + k];
    int64_t want = t.isBatch(k) ? g.batch : t.ints[k];
    if (want != 1 && want != have)
      return false;
  }
  intExprs[n.output(0)] = e;
  return true;
}

Error Importer::bindIntExpr(const pb::NodeProto &n, IntProgramExpr e) {
  if (countSteps(e.steps, RtIntOp::ArgMax) > 1)
    return fail(n, "combines two ArgMaxes of values computed from the token "
                   "ids; memfit runs one in a program");
  if (e.steps.size() > static_cast<size_t>(kMaxIntSteps))
    return fail(n, llvm::formatv("computes on the token ids in {0} steps; "
                                 "memfit runs integer programs of up to {1}",
                                 e.steps.size(), kMaxIntSteps));
  intExprs[n.output(0)] = std::move(e);
  return Error::success();
}

Expected<std::string> Importer::idsValue(const pb::NodeProto &n,
                                         const std::string &name, bool asInt) {
  const IntProgramExpr &e = intExprs.at(name);
  // A sample's index inside its sub-batch is not its index in the batch:
  // only a row pick, which reads it within the sub-batch, may use it.
  if (countSteps(e.steps, RtIntOp::Sample) > 0) {
    countedBatch = true;
    return fail(n, "reads " + quoteName(name) +
                       ", which counts up to the batch size (an arange "
                       "over the batch: transformers' masks index each "
                       "sample); memfit keeps the batch symbolic and reads "
                       "each sample's index only to pick one row per "
                       "sample (x[arange(N), q], or a [N * T, ...] value "
                       "at arange(N) * T + q)");
  }
  // Read as indices, the program is int32 under its own name; read by a
  // float op, a float beside it.
  std::string key = asInt ? name : name + "#f32";
  if (values.count(key))
    return key;
  if (asInt && e.steps.size() == 1 && e.dims == g.values[g.input].dims) {
    values[key] = g.input; // the ids themselves, reshaped to their shape
    return key;
  }
  OpAttrs a;
  a.program = e.steps;
  a.programRow = e.row;
  a.programReverse = e.reverse;
  a.programPerRow = e.perRow;
  auto id = emit(n, OpKind::IntProgram, {g.input}, {OutSpec{key, e.dims}}, a,
                 /*inferenceDiffers=*/!asInt, "ids:" + key);
  if (!id)
    return id.takeError();
  g.values[g.ops[*id].outputs[0]].dtype = asInt ? DType::I32 : DType::F32;
  return key;
}

Expected<bool> Importer::translateReadingIds(const pb::NodeProto &n) {
  // Each program the node reads becomes its op's value; where that value
  // has another name (a float reading), the node's copy reads it by that
  // name (as translateOnWeights reads weights through their lifts).
  std::vector<std::pair<int, std::string>> renamed;
  for (int i = 0; i < n.input_size(); ++i) {
    if (!hasInput(n, i) || !intExprs.count(n.input(i)))
      continue;
    bool asInt = n.op_type() == "Gather" && i == 1;
    auto key = idsValue(n, n.input(i), asInt);
    if (!key)
      return key.takeError();
    if (*key != n.input(i))
      renamed.emplace_back(i, *key);
  }
  if (renamed.empty())
    return false;
  pb::NodeProto &copy = liftedNodes.emplace_back(n);
  nodeIndex[&copy] = nodeIndex.at(&n);
  for (auto &[i, key] : renamed)
    copy.set_input(i, key);
  if (Error e = translate(copy))
    return std::move(e);
  return true;
}

} // namespace memfit::onnximport
