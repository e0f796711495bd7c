//===- Graph.cpp - Forward graph IR ---------------------------------------===//
#include "compiler/ir/Graph.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>

namespace memfit {

int64_t dtypeBytes(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 4;
}

std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "?";
}

int64_t Value::elementsPerSample() const {
  int64_t n = batched ? batchOuter * batchInner : 1;
  for (size_t i = 0; i < dims.size(); ++i)
    if (!batched || (int32_t)i != batchAxis)
      n *= dims[i];
  return n;
}

int64_t Value::bytesPerSample() const {
  return batched ? elementsPerSample() * dtypeBytes(dtype) : 0;
}

int64_t Value::fixedBytes() const {
  return batched ? 0 : elementsPerSample() * dtypeBytes(dtype);
}

ValueId Graph::addValue(Value v) {
  values.push_back(std::move(v));
  return static_cast<ValueId>(values.size() - 1);
}

OpId Graph::addOp(Op op) {
  OpId id = static_cast<OpId>(ops.size());
  for (ValueId in : op.inputs) {
    assert(in >= 0 && in < (ValueId)values.size() && "op input out of range");
    values[in].consumers.push_back(id);
  }
  for (ValueId out : op.outputs) {
    assert(out >= 0 && out < (ValueId)values.size() &&
           "op output out of range");
    assert(values[out].producer == kNoId && "value produced twice");
    values[out].producer = id;
  }
  ops.push_back(std::move(op));
  return id;
}

std::vector<ValueId> Graph::weights() const {
  std::vector<ValueId> out;
  std::vector<bool> seen(values.size(), false);
  for (const Op &op : ops)
    for (ValueId in : op.inputs)
      if (values[in].kind == ValueKind::Weight && !seen[in]) {
        seen[in] = true;
        out.push_back(in);
      }
  return out;
}

int64_t Graph::weightBytes() const {
  int64_t total = 0;
  for (ValueId w : weights())
    total += values[w].bytesAt(batch);
  return total;
}

std::vector<ValueId> Graph::weightInputs(OpId id) const {
  std::vector<ValueId> out;
  for (ValueId in : ops[id].inputs)
    if (values[in].kind == ValueKind::Weight)
      out.push_back(in);
  return out;
}

std::vector<ValueId> Graph::dataInputs(OpId id) const {
  std::vector<ValueId> out;
  for (ValueId in : ops[id].inputs)
    if (values[in].kind != ValueKind::Weight)
      out.push_back(in);
  return out;
}

bool Op::batched(const Graph &g) const {
  for (ValueId out : outputs)
    if (g.values[out].batched)
      return true;
  return false;
}

std::optional<std::string> verifyGraph(const Graph &g) {
  auto nv = static_cast<ValueId>(g.values.size());
  if (g.input < 0 || g.input >= nv)
    return std::string("graph has no data input");
  if (g.output < 0 || g.output >= nv)
    return std::string("graph has no output");
  for (OpId i = 0; i < (OpId)g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    for (ValueId in : op.inputs) {
      if (in < 0 || in >= nv)
        return llvm::formatv("op {0}: input id {1} out of range", i, in).str();
      const Value &v = g.values[in];
      if (v.kind == ValueKind::Activation &&
          (v.producer < 0 || v.producer >= i))
        return llvm::formatv("op {0}: input '{1}' is not produced before it", i,
                             v.name)
            .str();
    }
    for (ValueId out : op.outputs) {
      if (out < 0 || out >= nv)
        return llvm::formatv("op {0}: output id {1} out of range", i, out)
            .str();
      if (g.values[out].producer != i)
        return llvm::formatv("op {0}: output '{1}' has another producer", i,
                             g.values[out].name)
            .str();
    }
  }
  for (const Value &v : g.values) {
    if (v.batched &&
        (v.batchAxis < 0 || v.batchAxis >= (int32_t)v.dims.size() ||
         v.batchOuter < 1 || v.batchInner < 1 ||
         v.dims[v.batchAxis] != v.batchOuter * g.batch * v.batchInner))
      return llvm::formatv("value '{0}': the batch is not where its layout "
                           "says",
                           v.name)
          .str();
    for (int64_t d : v.dims)
      if (d <= 0)
        return llvm::formatv("value '{0}': non-positive dimension", v.name)
            .str();
  }
  return std::nullopt;
}

FusedActCounts countFusedActs(const Graph &g) {
  FusedActCounts c;
  for (const Op &op : g.ops) {
    c.relu += op.attrs.fusedAct == OpKind::Relu;
    c.clip += op.attrs.fusedAct == OpKind::Clip;
  }
  return c;
}

} // namespace memfit
