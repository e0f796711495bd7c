//===- Translate.cpp - One ONNX node into ops -----------------------------===//
//
// Importer::translate, the dispatch of one live node: aliases, integer
// programs on the token ids (IntPrograms.cpp), computations on weights read
// as values (lifts), folds of constants, Cast, and every other op type
// through its definition in compiler/ops (NodeAdapter.cpp); and the
// fusions' translation (Fusions.cpp finds them).
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/ops/OpDef.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

Error Importer::translate(const pb::NodeProto &n) {
  const std::string &op = n.op_type();
  if (op == "Identity") {
    alias(n.output(0), n.input(0));
    return Error::success();
  }
  if (rewritesGatherND(n))
    return translateGatherND(n);
  if (rewritesGatherElements(n))
    return translateGatherElements(n);
  if (op == "RandomUniformLike")
    return fail(n, "draws random numbers other than as drop path (x / keep "
                   "* floor(keep + rand), stochastic depth) or an in-place "
                   "dropout (x * ((rand < keep) / keep)); memfit draws them "
                   "only for Dropout and those");
  // Index arithmetic on the token ids is an integer program; a node that
  // reads one reads its op's value.
  if (countsSamples(n))
    return bindSampleIndex(n);
  if (auto shaped = translateProgramShape(n); !shaped || *shaped)
    return shaped ? Error::success() : shaped.takeError();
  if (picksRowPerSample(n))
    return translateRowPick(n);
  if (pairsSampleIndex(n))
    return bindIndexTuple(n);
  if (gathersTuples(n))
    return translateTupleGather(n);
  if (computesOnIds(n))
    return translateOnIds(n);
  if (op != "Shape") {
    auto done = translateReadingIds(n);
    if (!done)
      return done.takeError();
    if (*done)
      return Error::success();
  }
  auto weightForm = translateWeightForms(n);
  if (!weightForm)
    return weightForm.takeError();
  if (*weightForm)
    return Error::success();
  for (int i = 0; i < n.input_size(); ++i)
    if (hasInput(n, i) && isActivation(n.input(i)) &&
        !g.values[values.at(n.input(i))].batched && !computesOnWeights(op) &&
        op != "Shape")
      return weightValueError(n, i);
  if (op == "GatherElements" && hasInput(n, 1) && isActivation(n.input(1)) &&
      isConstant(n.input(0)) && !isParameter(n.input(0)))
    return translateUniformLookup(n);
  if (isFoldOnlyOp(op) && op != "Shape" && op != "Constant")
    for (int i = 0; i < n.input_size(); ++i)
      if (hasInput(n, i) && isActivation(n.input(i)))
        return fail(
            n, llvm::formatv("memfit evaluates {0} only on constants (shape "
                             "arithmetic, folded at import), but operand {1} "
                             "({2}) is computed from the data input",
                             escapeName(op), i, quoteName(n.input(i))));
  bool allConstant = n.input_size() > 0;
  // CastLike reads only the type of operand 1.
  for (int i = 0; i < (op == "CastLike" ? 1 : n.input_size()); ++i)
    if (hasInput(n, i) && !isConstant(n.input(i)))
      allConstant = false;
  bool fold = isFoldOnlyOp(op) || (allConstant && isFoldableOp(op));
  if (fold) {
    // A float initializer is a parameter: folding it would freeze it,
    // unless all it computes ends in a mask (a registered buffer). Shape
    // reads only its dims. An op that also computes on data (Gather of an
    // embedding table) translates instead. CastLike reads only operand
    // 1's type.
    const int read = op == "Shape" ? 0 : op == "CastLike" ? 1 : n.input_size();
    for (int i = 0; i < read; ++i) {
      auto src = sources.find(n.input(i));
      if (!hasInput(n, i) || src == sources.end() || !src->second.init ||
          src->second.init->data_type() != pb::TensorProto::FLOAT ||
          buffers.count(n.input(i)) || feedsOnlyMasks(nodeIndex.at(&n)))
        continue;
      // A lookup in an embedding table (or a class token's over the
      // batch) translates as one; any other computation on a parameter is
      // a value that trains it.
      if ((op != "Gather" && op != "Expand" && op != "Tile") || i != 0)
        return translateOnWeights(n);
      fold = false;
    }
  }
  if (fold)
    return foldNode(*this, n);
  if (readsDeclaredWeightAsValue(n))
    return translateOnWeights(n);
  if (op == "Cast")
    return translateCast(n);
  if (op == "CastLike")
    return translateCastLike(n);
  if (op == "BatchNormalization" && opts.notes) {
    int64_t trainingMode = 0;
    for (const pb::AttributeProto &a : n.attribute())
      if (a.name() == "training_mode")
        trainingMode = a.i();
    // Before opset 14 the training form is the one with the statistics'
    // outputs; from 14 on, training_mode says.
    if (trainingMode == 0 && n.output_size() == 1)
      opts.notes->inferenceBatchNorms.push_back(n.name().empty() ? n.output(0)
                                                                 : n.name());
  }
  bool found = false;
  if (Error err = translateThroughRegistry(*this, n, found))
    return err;
  if (!found && op == "ArgMax")
    return fail(n, "finds the largest of a value that is not computed from "
                   "the token ids alone; memfit runs ArgMax only on integers "
                   "computed from them (it has no gradient to train through)");
  if (!found)
    return fail(n, "operates only on constants here, which memfit does not "
                   "fold for this operator");
  return Error::success();
}

Expected<bool> Importer::translateWeightForms(const pb::NodeProto &n) {
  const std::string &op = n.op_type();
  // Translated, or the error of translating.
  auto done = [](Error e) -> Expected<bool> {
    if (e)
      return std::move(e);
    return true;
  };
  if (op == "Transpose" && n.input_size() == 1 && isWeightSource(n.input(0)) &&
      !isActivation(n.input(0))) {
    // x @ W^T as PyTorch exports Linear on 3-D inputs in training mode:
    // MatMul reads the weight transposed (Gemm's transB), no copy.
    auto perm = attrInts(n, "perm");
    if (!perm)
      return perm.takeError();
    // A graph input without data (export_params=False) is a weight like an
    // initializer: its declared shape stands in for the stored dims.
    auto it = sources.find(n.input(0));
    WeightSource src = it != sources.end() ? it->second : WeightSource{};
    int rank = src.init ? src.init->dims_size()
               : src.declared
                   ? src.declared->type().tensor_type().shape().dim_size()
                   : -1;
    bool swap2d = rank == 2 && (!*perm || **perm == std::vector<int64_t>{1, 0});
    // Any other permutation (a relative position table moved to heads
    // first) computes on the weight as a value.
    if (swap2d) {
      transposedWeights[n.output(0)] = n.input(0);
      return true;
    }
    if (src.declared)
      return done(translateOnWeights(n));
  }
  // An activation function of a parameter (Swin V2's
  // clamp(logit_scale).exp()) computes on its value.
  static const llvm::StringSet<> kUnaryOnWeights = {
      "Clip", "Max",  "Min", "Exp", "Relu",    "Sigmoid",
      "Tanh", "Sqrt", "Pow", "Neg", "Softmax", "Dropout"};
  // So does a Concat of parameters (MobileBERT's output table, the
  // embedding transposed beside a dense weight), and an Einsum with one
  // (Funnel's relative attention: the queries with a weight per head).
  bool anyOperand = op == "Concat" || op == "Einsum";
  for (int i = 0; i < (anyOperand ? n.input_size() : 1); ++i) {
    if (!(kUnaryOnWeights.contains(op) || anyOperand) || !hasInput(n, i) ||
        isActivation(n.input(i)) || buffers.count(n.input(i)))
      continue;
    auto src = sources.find(n.input(i));
    if (src != sources.end() &&
        (src->second.declared ||
         (src->second.init &&
          src->second.init->data_type() == pb::TensorProto::FLOAT)))
      return done(translateOnWeights(n));
  }
  // A constant table through a layer (Swin V2's relative coordinates
  // through its position-bias MLP): the table is a value without a batch.
  // torch.export keeps the table as a buffer, the TorchScript exporter
  // computes it in the graph.
  auto floatTable = [&](const std::string &x) {
    if (isActivation(x))
      return false;
    if (auto c = consts.find(x); c != consts.end() && !sources.count(x))
      return c->second->isFloat();
    auto src = sources.find(x);
    return buffers.count(x) && src != sources.end() && src->second.init &&
           src->second.init->data_type() == pb::TensorProto::FLOAT;
  };
  if ((op == "MatMul" || op == "Gemm") && n.input_size() >= 2 &&
      floatTable(n.input(0)) &&
      (isWeightSource(n.input(1)) || transposedWeights.count(n.input(1)))) {
    auto v = liftWeight(n, n.input(0));
    if (!v)
      return v.takeError();
    pb::NodeProto &copy = liftedNodes.emplace_back(n);
    nodeIndex[&copy] = nodeIndex.at(&n);
    copy.set_input(0, g.values[*v].name);
    return done(translate(copy));
  }
  if (op == "Expand" && isActivation(n.input(0)) &&
      !g.values[values.at(n.input(0))].batched && expandsOverBatch(n))
    return true;
  return false;
}

bool Importer::expandsOverBatch(const pb::NodeProto &n) {
  // A value computed from weights expanded over the batch alone
  // (MPNet's relative position bias, bias.expand(N, -1, T, T)): the ops
  // that read it broadcast it, so the name is the value itself.
  const Value &v = g.values[values.at(n.input(0))];
  auto it = consts.find(n.input(1));
  if (it == consts.end() || it->second->isFloat())
    return false;
  const ConstTensor &t = *it->second;
  if (t.numel() != static_cast<int64_t>(v.dims.size()) || v.dims.empty() ||
      v.dims[0] != 1 || !t.isBatch(0))
    return false;
  for (int64_t i = 1; i < t.numel(); ++i)
    if (t.isBatch(i) ||
        (t.ints[i] != v.dims[i] && t.ints[i] != -1 && t.ints[i] != 1))
      return false;
  alias(n.output(0), n.input(0));
  return true;
}

bool Importer::readsDeclaredWeightAsValue(const pb::NodeProto &n) const {
  // A weight declared without data (export_params=False) is no constant:
  // an op that has no weight operand of its own, or one of Add, Sub, Mul
  // and Div that reads no activation (1 + w), computes on it.
  llvm::StringRef op = n.op_type();
  // Gather, MatMul and Gemm read a weight in their weight slots, and Tile
  // decides itself (a class token over the batch is a lookup).
  if (!computesOnWeights(op) || op == "Gather" || op == "MatMul" ||
      op == "Gemm" || op == "Tile")
    return false;
  bool declared = false, activations = false;
  for (int i = 0; i < n.input_size(); ++i) {
    declared = declared || (hasInput(n, i) && isDeclaredInput(n.input(i)));
    activations = activations || (hasInput(n, i) && isActivation(n.input(i)));
  }
  bool binary = op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
  return declared && (!binary || !activations);
}

Error Importer::translateOnWeights(const pb::NodeProto &n) {
  const std::string &op = n.op_type();
  if (!computesOnWeights(op))
    return fail(n, "computes on a weight; memfit computes on weights with " +
                       weightValueOps() +
                       " (a table sliced to the sequence length, 1 + w, a "
                       "table transposed or reshaped); if it is a buffer, not "
                       "a parameter, --constants makes it a constant");
  // The node, reading each float parameter through its lifted value.
  pb::NodeProto &copy = liftedNodes.emplace_back(n);
  nodeIndex[&copy] = nodeIndex.at(&n);
  for (int i = 0; i < copy.input_size(); ++i) {
    if (!hasInput(n, i) || buffers.count(n.input(i)))
      continue;
    auto src = sources.find(n.input(i));
    bool param = src != sources.end() &&
                 (src->second.declared ||
                  (src->second.init &&
                   src->second.init->data_type() == pb::TensorProto::FLOAT));
    if (!param)
      continue;
    auto v = liftWeight(n, n.input(i));
    if (!v)
      return v.takeError();
    copy.set_input(i, g.values[*v].name);
  }
  if (op == "Cast")
    return translateCast(copy);
  if (op == "CastLike")
    return translateCastLike(copy);
  bool found = false;
  if (Error err = translateThroughRegistry(*this, copy, found))
    return err;
  assert(found && "every op that computes on weights has a definition");
  return Error::success();
}

Error Importer::translateFusion(const pb::NodeProto &n, const Fusion &f) {
  auto x = values.find(f.x);
  if (x == values.end())
    return fail(n, "the input " + quoteName(f.x) +
                       " of the operator it completes is not computed from "
                       "the data input");
  std::vector<int64_t> dims = g.values[x->second].dims;
  OpAttrs a;
  std::string name = !n.name().empty() ? n.name()
                     : f.kind == OpKind::LayerNorm
                         ? std::string("LayerNorm")
                         : std::string(opKindName(f.kind));
  if (f.kind != OpKind::LayerNorm) { // one operand, the attributes below
    a.alpha = f.kind == OpKind::NanTo ? f.epsilon : a.alpha;
    a.tanhApprox = f.tanhApprox;
    a.ratio = f.ratio;
    if (f.kind == OpKind::Dropout) {
      bool batched = false;
      auto like = dimsOf(n, f.like, batched);
      if (!like)
        return like.takeError();
      // A constant filled over the batch stores extent 1 there.
      if (int32_t axis = constBatchAxis(f.like); axis >= 0)
        (*like)[axis] = g.batch;
      int64_t per = 1;
      for (size_t i = 1; i < like->size(); ++i)
        per *= (*like)[i];
      a.wholeSample = per == 1 && like->size() == dims.size();
      if (!a.wholeSample && *like != dims)
        return fail(n, "multiplies " + quoteName(f.x) + " of shape " +
                           dimsStr(dims) + " by random numbers of shape " +
                           dimsStr(*like) +
                           "; memfit supports them as dropout (x's shape) "
                           "or drop path (one per sample)");
    }
    return emit(n, f.kind, {x->second}, {{n.output(0), dims}}, a, false, name)
        .takeError();
  }
  auto w = materialize(n, f.scale, WeightInit::Ones, true);
  auto b = materialize(n, f.bias, WeightInit::Zeros, true);
  if (!w || !b)
    return llvm::joinErrors(w.takeError(), b.takeError());
  int64_t d = dims.back();
  if (g.values[*w].elementsPerSample() != d ||
      g.values[*b].elementsPerSample() != d)
    return fail(n, "completes a layer normalization whose scale and bias do "
                   "not have the " +
                       std::to_string(d) + " elements of the last axis");
  a.axis = static_cast<int64_t>(dims.size()) - 1;
  a.epsilon = f.epsilon;
  return emit(n, OpKind::LayerNorm, {x->second, *w, *b}, {{n.output(0), dims}},
              a, false, name)
      .takeError();
}

bool Importer::feedsOnlyMasks(int k, int depth) const {
  const pb::NodeProto &n = model.graph().node(k);
  const std::string &op = n.op_type();
  if (op == "Equal" || op == "Not" || op == "Shape")
    return true;
  if (op == "Cast") {
    auto to = attrInt(n, "to", 0);
    if (!to) {
      llvm::consumeError(to.takeError());
      return false;
    }
    if (*to != pb::TensorProto::FLOAT)
      return true;
  }
  if (depth > 16 || !isFoldableOp(op))
    return false;
  bool any = false;
  for (const std::string &out : n.output()) {
    auto it = readers.find(out);
    if (it == readers.end())
      continue;
    for (int r : it->second) {
      if (!feedsOnlyMasks(r, depth + 1))
        return false;
      any = true;
    }
  }
  return any;
}

Error Importer::translateUniformLookup(const pb::NodeProto &n) {
  // torch.gather of a buffer of one value by indices computed from the
  // ids (transformers 5's token type ids, a zero buffer gathered at the
  // position ids) is that value at every index: a constant filled over the
  // batch, stored once.
  auto data = constant(n, 0);
  if (!data)
    return data.takeError();
  const ConstTensor &d = **data;
  bool uniform = d.numel() > 0 && d.batch.empty();
  for (int64_t k = 1; uniform && k < d.numel(); ++k)
    uniform = d.isFloat() ? d.floats[k] == d.floats[0] : d.ints[k] == d.ints[0];
  if (!uniform)
    return fail(n, "gathers from a constant whose elements differ at indices "
                   "computed from the data input; memfit looks up constants "
                   "by computed indices only where every element is the "
                   "same (a buffer of zeros)");
  bool batched = false;
  auto dims = dimsOf(n, n.input(1), batched);
  if (!dims)
    return dims.takeError();
  if (!batched || dims->empty() || batchAxisOf(n.input(1)) != 0)
    return fail(n, "gathers by indices that are not per sample on axis 0");
  ConstTensor out;
  out.type = d.type;
  out.dims = *dims;
  out.dims[0] = 1;
  out.batchAxis = 0;
  int64_t count = 1;
  for (int64_t x : out.dims)
    count *= x;
  if (d.isFloat())
    out.floats.assign(count, d.floats[0]);
  else
    out.ints.assign(count, d.ints[0]);
  bindConstant(n.output(0), std::move(out));
  return Error::success();
}

} // namespace memfit::onnximport
