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

static std::string operand(const pb::NodeProto &n, int i) {
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
      return fail(n, operand(n, i) + " of shape " + dimsStr(v.dims) +
                         llvm::formatv(" has its batch on axis {0} (mixed "
                                       "with other axes); memfit supports "
                                       "this operator only on values with "
                                       "the batch alone on axis 0",
                                       v.batchAxis)
                             .str());
    if (g.values[it->second].dtype != DType::F32)
      return fail(n, operand(n, i) +
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
    return fail(n, operand(n, i) +
                       " is an empty tensor (a slice to nothing); memfit "
                       "leaves one out where Concat joins it, and supports "
                       "no other reader of it");
  if (isConstant(name) || weights.count(name))
    return fail(n, operand(n, i) +
                       " must be computed from the data input; it is a "
                       "constant or an initializer");
  return fail(n, operand(n, i) + " is not defined");
}

static constexpr llvm::StringRef kWeightValueOps[] = {
    "Slice",  "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Add",  "Sub",
    "Mul",    "Div",       "Neg",     "Cast",    "Gather",    "Clip", "Max",
    "Min",    "Exp",       "Relu",    "Sigmoid", "Tanh",      "Sqrt", "Pow",
    "MatMul", "Gemm",      "Softmax", "Concat",  "CastLike",  "Where"};

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
      n, operand(n, i) + " is computed from " + from + "; memfit computes on " +
             "weights with " + weightValueOps() +
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
    return fail(n, operand(n, i) +
                       " is a transposed weight; memfit supports that only "
                       "as the second operand of MatMul");
  return materialize(n, n.input(i), declaredInit, trainable);
}

Expected<ValueId> Importer::constantWeight(const pb::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  if (!isConstant(n.input(i)))
    return fail(n, operand(n, i) + " must be a constant known at import time");
  if (!consts.count(n.input(i))) {
    // An initializer: read it as a constant first (any element type).
    auto c = constant(n, i);
    if (!c)
      return c.takeError();
  }
  return materialize(n, n.input(i), WeightInit::Zeros, false, true);
}

ValueId Importer::scalarConstant(float v) {
  std::string name = llvm::formatv("constant {0:e}", v).str();
  if (auto it = weights.find(name); it != weights.end())
    return it->second;
  return addConstant(name, {1}, {v});
}

ValueId Importer::addConstant(const std::string &name,
                              std::vector<int64_t> dims,
                              std::vector<float> data) {
  Value c;
  c.name = name;
  c.kind = ValueKind::Weight;
  c.trainable = false;
  c.dims = std::move(dims);
  c.data = std::move(data);
  ValueId id = g.addValue(std::move(c));
  inferenceDiverged.push_back(false);
  weights[name] = id;
  return id;
}

ValueId Importer::expandedConstant(ValueId w,
                                   const std::vector<int64_t> &dims) {
  const Value &src = g.values[w];
  assert(!src.trainable && !src.data.empty() && "expands only a constant");
  // The source's dims aligned to the result's rank (leading 1s added or
  // dropped).
  std::vector<int64_t> sd = src.dims;
  while (sd.size() > dims.size() && sd.front() == 1)
    sd.erase(sd.begin());
  sd.insert(sd.begin(), dims.size() - sd.size(), 1);
  std::string name = src.name + " expanded to " + dimsStr(dims);
  if (auto it = weights.find(name); it != weights.end())
    return it->second;
  const size_t rank = dims.size();
  std::vector<int64_t> at(rank, 0);
  int64_t numel = 1;
  for (int64_t d : dims)
    numel *= d;
  std::vector<float> data;
  data.reserve(numel);
  for (int64_t e = 0; e < numel; ++e) {
    int64_t k = 0;
    for (size_t i = 0; i < rank; ++i)
      k = k * sd[i] + (sd[i] == 1 ? 0 : at[i]);
    data.push_back(src.data[k]);
    for (size_t i = rank; i-- > 0;) {
      if (++at[i] < dims[i])
        break;
      at[i] = 0;
    }
  }
  return addConstant(name, dims, std::move(data));
}

std::optional<ValueId> Importer::oneSampleConstant(ValueId w) {
  const Value &src = g.values[w];
  if (src.trainable || src.data.empty() || modelBatch <= 1 ||
      src.dims.size() < 2 || src.dims[0] != modelBatch)
    return std::nullopt;
  const size_t per = src.data.size() / static_cast<size_t>(modelBatch);
  for (size_t k = per; k < src.data.size(); ++k)
    if (std::memcmp(&src.data[k], &src.data[k % per], sizeof(float)) != 0)
      return std::nullopt;
  std::string name = src.name + " (one sample)";
  if (auto it = weights.find(name); it != weights.end())
    return it->second;
  std::vector<int64_t> dims = src.dims;
  dims[0] = 1;
  return addConstant(
      name, std::move(dims),
      std::vector<float>(src.data.begin(), src.data.begin() + per));
}

Expected<ValueId> Importer::indices(const pb::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  auto it = values.find(n.input(i));
  if (it == values.end() || g.values[it->second].dtype == DType::F32)
    return fail(n, operand(n, i) +
                       " must be integer indices computed from the data "
                       "input (token ids) or a constant");
  return it->second;
}

Expected<ValueId> Importer::materialize(const pb::NodeProto &n,
                                        const std::string &name,
                                        WeightInit declaredInit, bool trainable,
                                        bool intsAsFloats) {
  std::string qname = quoteName(name);
  auto done = weights.find(name);
  if (done != weights.end()) {
    const Value &v = g.values[done->second];
    if (v.trainable != trainable && !floatConstWeights.count(name) &&
        !buffers.count(name))
      return fail(n, "uses " + qname +
                         (trainable ? " as a trainable weight; it is "
                                      "BatchNorm running statistics elsewhere"
                                    : " as BatchNorm running statistics; it "
                                      "is a trainable weight elsewhere"));
    return done->second;
  }
  if (auto it = values.find(name);
      it != values.end() && !g.values[it->second].batched)
    for (int i = 0; i < n.input_size(); ++i)
      if (n.input(i) == name)
        return weightValueError(n, i);
  if (auto it = values.find(name); it != values.end())
    return fail(n, qname +
                       " must be a weight (an initializer); it is computed "
                       "from " +
                       (g.values[it->second].batched
                            ? "the data input, which memfit does not support "
                              "in this operand"
                            : "weights, which memfit reads as an operand of "
                              "Add, Sub, Mul or Div only"));
  if (int32_t a = constBatchAxis(name); a > 0)
    return fail(n, "reads " + qname +
                       llvm::formatv(", a constant filled over the batch on "
                                     "its axis {0}; memfit reads such a "
                                     "constant with the batch on axis 0",
                                     a)
                           .str());
  Value v;
  v.name = name;
  v.kind = ValueKind::Weight;
  // A buffer torch marks as such is a constant, whatever the operand.
  v.trainable = trainable && !buffers.count(name);
  auto src = sources.find(name);
  auto constant = consts.find(name);
  if (intsAsFloats && constant != consts.end() &&
      !constant->second->isFloat()) {
    // A mask or fixed indices, held as floats (exact below 2^24).
    const ConstTensor &c = *constant->second;
    v.dims = c.dims;
    for (int64_t k = 0; k < c.numel(); ++k) {
      if (c.isBatch(k) || c.ints[k] >= (int64_t(1) << 24) ||
          c.ints[k] <= -(int64_t(1) << 24))
        return fail(n, "constant " + qname +
                           " holds integers memfit cannot keep exactly");
      v.data.push_back(static_cast<float>(c.ints[k]));
    }
    v.trainable = false;
    floatConstWeights.insert(name);
    if (v.dims.empty())
      v.dims = {1};
  } else if (src != sources.end() && src->second.init) {
    const pb::TensorProto &t = *src->second.init;
    if (t.name() != name)
      v.dataName = t.name();
    v.dims.assign(t.dims().begin(), t.dims().end());
    if (t.data_type() != pb::TensorProto::FLOAT)
      return fail(n, llvm::formatv("weight {0} has element type {1}; memfit "
                                   "expects float32",
                                   qname, dataTypeName(t.data_type())));
    // Reading validates the data even when it is not kept.
    auto data = readFloats(t, ext, file);
    if (!data)
      return data.takeError();
    if (opts.notes && v.trainable && data->size() > 1) {
      // FNV-1a over the sorted values: a copy hashes alike even when
      // folding transposed or reshaped it (a tied output projection).
      // Tensors of one repeated value (zero biases, unit norm scales) are
      // alike by initialization, not by copying, and are left out.
      std::vector<float> sorted(*data);
      std::sort(sorted.begin(), sorted.end());
      if (sorted.front() != sorted.back()) {
        uint64_t h = 1469598103934665603ull;
        const auto *bytes =
            reinterpret_cast<const unsigned char *>(sorted.data());
        for (size_t k = 0; k < sorted.size() * sizeof(float); ++k) {
          h ^= bytes[k];
          h *= 1099511628211ull;
        }
        auto &group = weightsByContent[h];
        if (group.empty())
          contentOrder.push_back(h);
        group.push_back(name);
      }
    }
    if (opts.keepWeightData)
      v.data = std::move(*data);
  } else if (src != sources.end() && src->second.declared) {
    const pb::ValueInfoProto &vi = *src->second.declared;
    const auto &tt = vi.type().tensor_type();
    if (!vi.type().has_tensor_type() ||
        tt.elem_type() != pb::TensorProto::FLOAT)
      return fail(n, llvm::formatv("weight {0} (a graph input without data) "
                                   "has element type {1}; memfit expects "
                                   "float32",
                                   qname, dataTypeName(tt.elem_type())));
    if (!tt.has_shape())
      return fail(n, "weight " + qname +
                         " (a graph input without data) has no shape");
    for (const auto &d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() <= 0)
        return fail(n, "weight " + qname +
                           " (a graph input without data) has a dimension "
                           "that is not a fixed positive number");
      v.dims.push_back(d.dim_value());
    }
    v.init = declaredInit;
    usedDeclared.insert(&vi);
  } else if (auto c = consts.find(name); c != consts.end()) {
    if (!c->second->isFloat())
      return fail(n, llvm::formatv("weight {0} is a constant of type {1}; "
                                   "memfit expects float32",
                                   qname, dataTypeName(c->second->type)));
    v.dims = c->second->dims;
    v.data = c->second->floats;
    v.trainable = false;
    floatConstWeights.insert(name);
  } else {
    return fail(n, qname + " is not defined");
  }
  for (int64_t d : v.dims)
    if (d <= 0)
      return fail(n, "weight " + qname + " has the empty or invalid shape " +
                         dimsStr(v.dims));
  if (!checkedProduct(v.dims))
    return fail(n, "weight " + qname + " is too large");
  // A constant never changes, so equal ones can share one value.
  bool shareable = floatConstWeights.count(name) && !v.data.empty();
  uint64_t hash = 0;
  if (shareable) {
    hash = llvm::hash_combine(
        llvm::hash_combine_range(v.dims.begin(), v.dims.end()),
        llvm::hash_combine_range(
            reinterpret_cast<const char *>(v.data.data()),
            reinterpret_cast<const char *>(v.data.data() + v.data.size())));
    for (ValueId same : constantsByContent[hash]) {
      const Value &u = g.values[same];
      if (u.dims == v.dims && u.data.size() == v.data.size() &&
          std::memcmp(u.data.data(), v.data.data(),
                      v.data.size() * sizeof(float)) == 0) {
        weights[name] = same;
        return same;
      }
    }
  }
  ValueId id = g.addValue(std::move(v));
  inferenceDiverged.push_back(false);
  weights[name] = id;
  if (shareable)
    constantsByContent[hash].push_back(id);
  return id;
}

Expected<const ConstTensor *> Importer::constant(const pb::NodeProto &n,
                                                 int i) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  const std::string &name = n.input(i);
  auto c = consts.find(name);
  if (c != consts.end())
    return c->second.get();
  auto src = sources.find(name);
  if (src != sources.end() && src->second.init) {
    auto t = readConstant(*src->second.init, ext, file);
    if (!t)
      return t.takeError();
    auto ptr = std::make_shared<const ConstTensor>(std::move(*t));
    consts[name] = ptr;
    return ptr.get();
  }
  if (src != sources.end() && src->second.declared)
    return fail(n, operand(n, i) +
                       " must be a constant; it is a graph input without "
                       "data");
  if (auto v = values.find(name);
      v != values.end() && !g.values[v->second].batched)
    return fail(n, operand(n, i) +
                       " must be a constant known at import time; it is "
                       "computed from trainable weights (a parameter such "
                       "as torch.clamp(x, max=self.p)), which memfit would "
                       "not train through this operand; if they are "
                       "buffers, say so with --constants");
  return fail(n, operand(n, i) +
                     " must be a constant known at import time; it is "
                     "computed from the data input");
}

Expected<float> Importer::scalarFloat(const pb::NodeProto &n, int i) {
  auto c = constant(n, i);
  if (!c)
    return c.takeError();
  if (!(*c)->isFloat() || (*c)->numel() != 1)
    return fail(n, operand(n, i) + " must be a float32 scalar");
  // An initializer is a parameter unless marked a buffer: read as a fixed
  // value here, it will not train, so say so.
  const std::string &name = n.input(i);
  auto src = sources.find(name);
  if (opts.notes && src != sources.end() && src->second.init &&
      src->second.init->data_type() == pb::TensorProto::FLOAT &&
      !buffers.count(name) &&
      std::find(opts.notes->scalarInitializers.begin(),
                opts.notes->scalarInitializers.end(),
                name) == opts.notes->scalarInitializers.end())
    opts.notes->scalarInitializers.push_back(name);
  return (*c)->floats[0];
}

Expected<std::vector<int64_t>> Importer::intVector(const pb::NodeProto &n,
                                                   int i) {
  auto c = constant(n, i);
  if (!c)
    return c.takeError();
  const ConstTensor &t = **c;
  if (t.isFloat() || t.dims.size() > 1)
    return fail(n, operand(n, i) + " must be a 1-D integer tensor");
  for (int64_t k = 0; k < t.numel(); ++k)
    if (t.isBatch(k))
      return fail(n, operand(n, i) +
                         " depends on the batch size, which is not supported "
                         "here");
  return t.ints;
}

Expected<std::vector<int64_t>> Importer::dimsOf(const pb::NodeProto &n,
                                                const std::string &name,
                                                bool &batched) {
  batched = false;
  if (auto it = values.find(name); it != values.end()) {
    batched = g.values[it->second].batched;
    return g.values[it->second].dims;
  }
  if (auto it = weights.find(name); it != weights.end())
    return g.values[it->second].dims;
  if (auto it = intExprs.find(name); it != intExprs.end()) {
    batched = true;
    return it->second.dims;
  }
  if (auto it = consts.find(name); it != consts.end())
    return it->second->dims;
  if (auto it = sources.find(name); it != sources.end()) {
    if (it->second.init)
      return std::vector<int64_t>(it->second.init->dims().begin(),
                                  it->second.init->dims().end());
    std::vector<int64_t> dims;
    const auto &tt = it->second.declared->type().tensor_type();
    for (const auto &d : tt.shape().dim()) {
      if (!d.has_dim_value())
        return fail(n, "the shape of graph input " + quoteName(name) +
                           " is not fully known");
      dims.push_back(d.dim_value());
    }
    return dims;
  }
  return fail(n, quoteName(name) + " is not defined");
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
