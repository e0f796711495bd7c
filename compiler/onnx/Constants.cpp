//===- Constants.cpp - Constant and weight operands -----------------------===//
//
// Operands whose contents are known at import time: float constants that
// become weights (a constant table, a scalar, a constant expanded over the
// batch or reduced to one sample), integer index lists and shapes, and the
// materialization of any of them as a value. Each misuse is an error
// naming the node and the operand (Operands.cpp has the slots' rules).
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/ops/OpDef.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstring>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

Expected<ValueId> Importer::constantWeight(const pb::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  if (!isConstant(n.input(i)))
    return fail(n, operandLabel(n, i) +
                       " must be a constant known at import time");
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

std::optional<ValueId> Importer::oneSampleConstant(ValueId w,
                                                   bool rowsPerSample) {
  const Value &src = g.values[w];
  if (src.trainable || src.data.empty() || modelBatch <= 1 ||
      src.dims.size() < 2 || src.dims[0] % modelBatch != 0 ||
      (!rowsPerSample && src.dims[0] != modelBatch))
    return std::nullopt;
  const size_t per = src.data.size() / static_cast<size_t>(modelBatch);
  for (size_t k = per; k < src.data.size(); ++k)
    if (std::memcmp(&src.data[k], &src.data[k % per], sizeof(float)) != 0)
      return std::nullopt;
  std::string name = src.name + " (one sample)";
  if (auto it = weights.find(name); it != weights.end())
    return it->second;
  std::vector<int64_t> dims = src.dims;
  dims[0] /= modelBatch;
  return addConstant(
      name, std::move(dims),
      std::vector<float>(src.data.begin(), src.data.begin() + per));
}

Expected<ValueId> Importer::indices(const pb::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return fail(n, llvm::formatv("operand {0} is missing", i));
  auto it = values.find(n.input(i));
  if (it == values.end() || g.values[it->second].dtype == DType::F32)
    return fail(n, operandLabel(n, i) +
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
    return fail(n, operandLabel(n, i) +
                       " must be a constant; it is a graph input without "
                       "data");
  if (auto v = values.find(name);
      v != values.end() && !g.values[v->second].batched)
    return fail(n, operandLabel(n, i) +
                       " must be a constant known at import time; it is "
                       "computed from trainable weights (a parameter such "
                       "as torch.clamp(x, max=self.p)), which memfit would "
                       "not train through this operand; if they are "
                       "buffers, say so with --constants");
  return fail(n, operandLabel(n, i) +
                     " must be a constant known at import time; it is "
                     "computed from the data input");
}

Expected<float> Importer::scalarFloat(const pb::NodeProto &n, int i) {
  auto c = constant(n, i);
  if (!c)
    return c.takeError();
  if (!(*c)->isFloat() || (*c)->numel() != 1)
    return fail(n, operandLabel(n, i) + " must be a float32 scalar");
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
    return fail(n, operandLabel(n, i) + " must be a 1-D integer tensor");
  for (int64_t k = 0; k < t.numel(); ++k)
    if (t.isBatch(k))
      return fail(n, operandLabel(n, i) +
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

} // namespace memfit::onnximport
