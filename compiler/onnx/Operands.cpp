//===- Operands.cpp - Operand, result and attribute access ----------------===//
//
// The helpers every translator uses. They enforce the roles of operands: an
// activation slot takes only values computed from the data input, a weight
// slot only initializers, declared weights or float constants, a constant
// slot only contents known at import time; each misuse is an error naming
// the node and the operand.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/ops/OpDef.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>

#include "llvm/Support/FormatVariadic.h"

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

std::string nodeLabel(const pb::NodeProto &n, int64_t index) {
  std::string name =
      n.name().empty() ? "#" + std::to_string(index) : quoteName(n.name());
  return "node " + name + " (" + escapeName(n.op_type()) + ")";
}

std::string Importer::label(const pb::NodeProto &n) const {
  auto it = nodeIndex.find(&n);
  return nodeLabel(n, it == nodeIndex.end() ? -1 : it->second);
}

Error Importer::fail(const pb::NodeProto &n, const llvm::Twine &msg) const {
  return makeError("'" + llvm::Twine(file) + "': " + label(n) + ": " + msg);
}

Error Importer::failFile(const llvm::Twine &msg) const {
  return makeError("'" + llvm::Twine(file) + "': " + msg);
}

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

bool Importer::hasInput(const pb::NodeProto &n, int i) const {
  return i >= 0 && i < n.input_size() && !n.input(i).empty();
}

bool Importer::isActivation(const std::string &name) const {
  return values.count(name) != 0;
}

bool Importer::isWeightSource(const std::string &name) const {
  return sources.count(name) != 0 || weights.count(name) != 0;
}

bool Importer::isDeclaredInput(const std::string &name) const {
  auto it = sources.find(name);
  return it != sources.end() && it->second.declared;
}

Error Importer::extraDataInput(const pb::NodeProto &n,
                               const std::string &name) const {
  // export_params=False declares buffers too (a causal mask, a rotary
  // table): what is computed from them at import needs their values.
  return fail(n, llvm::formatv("uses graph input {0} as data; memfit takes "
                               "exactly one data input ({1}, the first graph "
                               "input without an initializer); labels are not "
                               "part of the model; a weight declared without "
                               "data is read only as the weight operand of "
                               "its operator, and a buffer such as a mask or "
                               "a table needs its values in the file (export "
                               "it as an initializer or compute it in the "
                               "graph)",
                               quoteName(name), quoteName(dataInputName)));
}

bool Importer::isConstant(const std::string &name) const {
  if (consts.count(name))
    return true;
  auto it = sources.find(name);
  return it != sources.end() && it->second.init;
}

std::string operandLabel(const pb::NodeProto &n, int i) {
  return llvm::formatv("operand {0} ({1})", i, quoteName(n.input(i))).str();
}

Expected<ValueId> Importer::activation(const pb::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  const std::string &name = n.input(i);
  auto it = values.find(name);
  if (it != values.end()) {
    // Where the batch may lie is the definition's (OpDef::batchLayout): of
    // the one that imports the op type here, before its translation reads
    // the dims, and of the kind it becomes in emit(). An op type without a
    // definition (Cast) needs the batch alone on axis 0.
    const Value &v = g.values[it->second];
    const OpDef *def = opDefForOnnx(n.op_type());
    if (!(def ? def->acceptsLayout(v) : v.canonical()))
      return fail(n, operandLabel(n, i) + " of shape " + dimsStr(v.dims) +
                         llvm::formatv(" has its batch on axis {0} (mixed "
                                       "with other axes); memfit supports "
                                       "this operator only on values with "
                                       "the batch alone on axis 0",
                                       v.batchAxis)
                             .str());
    if (g.values[it->second].dtype != DType::F32)
      return fail(n, operandLabel(n, i) +
                         " holds integer token ids; memfit reads them only "
                         "as the indices of an embedding (Gather)");
    if (v.kind == ValueKind::Activation && !v.batched &&
        !computesOnWeights(n.op_type()))
      return weightValueError(n, i);
    return it->second;
  }
  if (auto t = transposedWeights.find(name); t != transposedWeights.end()) {
    // W^T read other than as MatMul's weight (MobileBERT's output layer
    // joins it with another table): the transposed value of W.
    auto w = liftWeight(n, t->second);
    if (!w)
      return w.takeError();
    std::vector<int64_t> dims = g.values[*w].dims;
    std::swap(dims[0], dims[1]);
    OpAttrs a;
    a.perm = {1, 0};
    auto op = emit(n, OpKind::Transpose, {*w}, {{name, dims}}, a, true,
                   "transpose(" + t->second + ")");
    if (!op)
      return op.takeError();
    return g.ops[*op].outputs[0];
  }
  if (isDeclaredInput(name))
    return extraDataInput(n, name);
  if (emptyValues.count(name))
    return fail(n, operandLabel(n, i) +
                       " is an empty tensor (a slice to nothing); memfit "
                       "leaves one out where Concat joins it, and supports "
                       "no other reader of it");
  if (constBatchAxis(name) == 0)
    return constantOverBatch(n, i);
  if (isConstant(name) || weights.count(name))
    return fail(n, operandLabel(n, i) +
                       " must be computed from the data input; it is a "
                       "constant or an initializer");
  return fail(n, operandLabel(n, i) + " is not defined");
}

Expected<ValueId> Importer::constantOverBatch(const pb::NodeProto &n, int i) {
  // Every sample's copy is the same, so it is a constant weight with the
  // batch's axis stored as extent 1, broadcast over the batch as ViT's
  // class token is.
  const std::string &name = n.input(i);
  const std::string over = name + " (over the batch)";
  if (auto it = values.find(over); it != values.end())
    return it->second;
  if (!consts.at(name)->isFloat())
    return fail(n, operandLabel(n, i) +
                       " is an integer constant filled over the batch; "
                       "memfit reads such a constant as data only when it "
                       "holds floats");
  auto w = materialize(n, name, WeightInit::Zeros, false);
  if (!w)
    return w.takeError();
  std::vector<int64_t> dims = g.values[*w].dims;
  dims[0] = g.batch;
  auto op = emit(n, OpKind::Embedding, {*w}, {{over, dims}}, {}, false,
                 "broadcast(" + name + ")");
  if (!op)
    return op.takeError();
  return g.ops[*op].outputs[0];
}

static constexpr llvm::StringRef kWeightValueOps[] = {
    "Slice",  "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Add",
    "Sub",    "Mul",       "Div",     "Neg",     "Cast",      "Gather",
    "Clip",   "Max",       "Min",     "Exp",     "Relu",      "Sigmoid",
    "Tanh",   "Sqrt",      "Pow",     "MatMul",  "Gemm",      "Softmax",
    "Concat", "CastLike",  "Where",   "Resize",  "Dropout",   "Split",
    "Einsum", "Tile"};

bool computesOnWeights(llvm::StringRef opType) {
  return llvm::is_contained(kWeightValueOps, opType);
}

std::string weightValueOps() {
  std::string s;
  for (llvm::StringRef op : kWeightValueOps)
    s += (s.empty() ? "" : ", ") + op.str();
  return s;
}

Error Importer::weightValueError(const pb::NodeProto &n, int i) const {
  // The weights the value is computed from: the lifts' operands upstream.
  std::vector<std::string> roots;
  bool declared = false;
  std::vector<ValueId> work{values.at(n.input(i))};
  std::vector<bool> seen(g.values.size(), false);
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    if (seen[v])
      continue;
    seen[v] = true;
    const Value &val = g.values[v];
    if (val.kind == ValueKind::Weight) {
      if (val.trainable) {
        roots.push_back(quoteName(val.name));
        declared = declared || isDeclaredInput(val.name);
      }
      continue;
    }
    if (val.producer != kNoId)
      for (ValueId in : g.ops[val.producer].inputs)
        work.push_back(in);
  }
  std::sort(roots.begin(), roots.end());
  std::string from = roots.size() == 1
                         ? "the weight " + roots[0]
                         : "the weights " + llvm::join(roots, ", ");
  return fail(
      n, operandLabel(n, i) + " is computed from " + from +
             "; memfit computes on " + "weights with " + weightValueOps() +
             " and reads the result as the data operand of an op (not in a "
             "weight slot: a Conv's or Gemm's weight, an embedding table)" +
             (declared ? "; a buffer such as a mask or a table needs its "
                         "values in the file (export it as an initializer)"
                       : "; if it is a buffer, not a parameter, --constants "
                         "makes it a constant"));
}

Expected<ValueId> Importer::liftWeight(const pb::NodeProto &n,
                                       const std::string &name) {
  std::string lifted = name + " (as a value)";
  if (auto it = values.find(lifted); it != values.end())
    return it->second;
  auto w = materialize(n, name, WeightInit::HeNormal, true);
  if (!w)
    return w.takeError();
  OutSpec o{lifted, g.values[*w].dims};
  o.unbatched = true;
  auto op =
      emit(n, OpKind::Embedding, {*w}, {o}, {}, true, "value(" + name + ")");
  if (!op)
    return op.takeError();
  return g.ops[*op].outputs[0];
}

Expected<ValueId> Importer::weight(const pb::NodeProto &n, int i,
                                   WeightInit declaredInit, bool trainable) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  if (transposedWeights.count(n.input(i)))
    return fail(n, operandLabel(n, i) +
                       " is a transposed weight; memfit supports that only "
                       "as the second operand of MatMul");
  return materialize(n, n.input(i), declaredInit, trainable);
}

bool Importer::outputUsed(const pb::NodeProto &n, int i) const {
  return i < n.output_size() && !n.output(i).empty() &&
         needed.count(n.output(i));
}

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

Expected<OpId> Importer::emit(const pb::NodeProto &n, OpKind kind,
                              std::vector<ValueId> inputs,
                              std::vector<OutSpec> outputs, OpAttrs attrs,
                              bool inferenceDiffers, std::string opName) {
  bool diverged = inferenceDiffers;
  for (ValueId in : inputs)
    diverged = diverged || inferenceDiverged[in];
  Op op;
  op.kind = kind;
  if (!opName.empty())
    op.name = std::move(opName);
  else if (!n.name().empty())
    op.name = n.name();
  else
    op.name = n.op_type() + "#" + std::to_string(nodeIndex.at(&n));
  op.onnxOp = n.op_type();
  op.inputs = std::move(inputs);
  op.attrs = std::move(attrs);
  // The definition says where its operands' batch may lie
  // (OpDef::batchLayout); any other layout is refused here, naming the
  // value.
  for (ValueId in : op.inputs) {
    const Value &v = g.values[in];
    if (!opDef(kind).acceptsLayout(v))
      return fail(n, "reads " + quoteName(v.name) + " of shape " +
                         dimsStr(v.dims) +
                         llvm::formatv(", whose batch is on axis {0} (mixed "
                                       "with other axes); memfit supports "
                                       "this operator only on values with "
                                       "the batch alone on axis 0",
                                       v.batchAxis)
                             .str());
  }
  // Values read together elementwise must agree on where the batch is.
  const Value *layout = nullptr;
  for (ValueId in : op.inputs) {
    const Value &v = g.values[in];
    if (!v.batched)
      continue;
    if (layout && (!layout->canonical() || !v.canonical()) &&
        (v.batchAxis != layout->batchAxis ||
         v.batchOuter != layout->batchOuter ||
         v.batchInner != layout->batchInner))
      return fail(n, "combines " + quoteName(layout->name) + " and " +
                         quoteName(v.name) +
                         ", whose batches lie on different axes; memfit "
                         "supports that only with the batch alone on axis 0");
    layout = layout ? layout : &v;
  }
  const Value *first = layout;
  // Computations on weights (a sliced position table, 1 + w) have no batch:
  // an op reading a weight-derived value and nothing batched computes one.
  bool derived = false;
  for (ValueId in : op.inputs)
    derived = derived || (g.values[in].kind == ValueKind::Activation &&
                          !g.values[in].batched);
  for (OutSpec &o : outputs) {
    bool batched = !o.unbatched && !(derived && !layout);
    if (!batched) {
      o.batchAxis = 0;
      o.batchOuter = o.batchInner = 1;
    } else if (o.batchAxis < 0) {
      // As the first batched operand where its batch axis survives, else
      // axis 0.
      o.batchAxis = 0;
      o.batchOuter = o.batchInner = 1;
      if (first && first->batched && first->dims.size() == o.dims.size() &&
          o.dims[first->batchAxis] == first->dims[first->batchAxis]) {
        o.batchAxis = first->batchAxis;
        o.batchOuter = first->batchOuter;
        o.batchInner = first->batchInner;
      }
    }
    if (batched &&
        (o.batchAxis >= (int32_t)o.dims.size() ||
         o.dims[o.batchAxis] != o.batchOuter * g.batch * o.batchInner))
      return fail(n, "output " + quoteName(o.name) + " of shape " +
                         dimsStr(o.dims) +
                         " would not keep the batch on axis 0");
    for (int64_t d : o.dims)
      if (d <= 0)
        return fail(n, "output " + quoteName(o.name) + " would have shape " +
                           dimsStr(o.dims) +
                           "; every dimension must be "
                           "positive");
    if (!checkedProduct(o.dims))
      return fail(n, "output " + quoteName(o.name) + " is too large");
    if (values.count(o.name) || isWeightSource(o.name) || consts.count(o.name))
      return fail(n, "output " + quoteName(o.name) + " is defined twice");
    Value v;
    v.name = o.name;
    v.kind = ValueKind::Activation;
    v.dims = std::move(o.dims);
    v.batched = batched;
    v.batchAxis = o.batchAxis;
    v.batchOuter = o.batchOuter;
    v.batchInner = o.batchInner;
    ValueId id = g.addValue(std::move(v));
    values[o.name] = id;
    inferenceDiverged.push_back(diverged);
    op.outputs.push_back(id);
  }
  return g.addOp(std::move(op));
}

void Importer::alias(const std::string &out, const std::string &in) {
  if (auto it = intExprs.find(in); it != intExprs.end())
    intExprs[out] = it->second;
  if (auto it = values.find(in); it != values.end())
    values[out] = it->second;
  if (auto it = sources.find(in); it != sources.end())
    sources[out] = it->second;
  // A materialized weight stays one value under both names (it trains
  // once).
  if (auto it = weights.find(in); it != weights.end())
    weights[out] = it->second;
  if (auto it = consts.find(in); it != consts.end())
    consts[out] = it->second;
  // torch.export clones a lifted constant before use.
  if (buffers.count(in))
    buffers.insert(out);
}

void Importer::bindConstant(const std::string &name, ConstTensor t) {
  consts[name] = std::make_shared<const ConstTensor>(std::move(t));
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const pb::AttributeProto *Importer::attr(const pb::NodeProto &n,
                                         llvm::StringRef name) const {
  for (const pb::AttributeProto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

static Error wrongType(const Importer &im, const pb::NodeProto &n,
                       llvm::StringRef name, const char *want) {
  return im.fail(n, "attribute '" + name + "' must be " + want);
}

Expected<int64_t> Importer::attrInt(const pb::NodeProto &n,
                                    llvm::StringRef name, int64_t dflt) const {
  const pb::AttributeProto *a = attr(n, name);
  if (!a)
    return dflt;
  if (a->type() != pb::AttributeProto::INT)
    return wrongType(*this, n, name, "an integer");
  return a->i();
}

Expected<float> Importer::attrFloat(const pb::NodeProto &n,
                                    llvm::StringRef name, float dflt) const {
  const pb::AttributeProto *a = attr(n, name);
  if (!a)
    return dflt;
  if (a->type() != pb::AttributeProto::FLOAT)
    return wrongType(*this, n, name, "a float");
  return a->f();
}

Expected<std::string> Importer::attrString(const pb::NodeProto &n,
                                           llvm::StringRef name,
                                           const std::string &dflt) const {
  const pb::AttributeProto *a = attr(n, name);
  if (!a)
    return dflt;
  if (a->type() != pb::AttributeProto::STRING)
    return wrongType(*this, n, name, "a string");
  return a->s();
}

Expected<std::optional<std::vector<int64_t>>>
Importer::attrInts(const pb::NodeProto &n, llvm::StringRef name) const {
  const pb::AttributeProto *a = attr(n, name);
  if (!a)
    return std::optional<std::vector<int64_t>>();
  if (a->type() != pb::AttributeProto::INTS)
    return wrongType(*this, n, name, "a list of integers");
  return std::optional<std::vector<int64_t>>(
      std::vector<int64_t>(a->ints().begin(), a->ints().end()));
}

bool Importer::isIntegerActivation(const std::string &name) const {
  auto it = values.find(name);
  return it != values.end() && g.values[it->second].dtype != DType::F32;
}

} // namespace memfit::onnximport
