//===- Sequences.cpp - Tensor sequences that are only a split -------------===//
//
// torch.export graphs split a tensor with SplitToSequence and take the parts
// with SequenceAt (q, k, v = x.split(C, dim=2)). memfit has no sequence
// values; each SequenceAt of a constant position becomes the Slice it is,
// before anything else reads the graph, and the SplitToSequence is left
// dead. Anything else about a sequence stays as it is, to be refused as an
// unsupported operator.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include <unordered_map>
#include <unordered_set>

namespace memfit::onnximport {
namespace {

/// The int64 contents of a Constant node's output or an initializer.
std::optional<std::vector<int64_t>>
intsOf(const pb::GraphProto &g,
       const std::unordered_map<std::string, int> &producer,
       const std::string &name) {
  const pb::TensorProto *t = nullptr;
  for (const auto &init : g.initializer())
    if (init.name() == name)
      t = &init;
  if (auto p = producer.find(name); !t && p != producer.end()) {
    const pb::NodeProto &n = g.node(p->second);
    if (n.op_type() == "Constant")
      for (const auto &a : n.attribute())
        if (a.name() == "value" && a.has_t())
          t = &a.t();
  }
  if (!t || t->data_location() == pb::TensorProto::EXTERNAL)
    return std::nullopt;
  ExternalData none;
  auto c = readConstant(*t, none, "");
  if (!c) {
    llvm::consumeError(c.takeError());
    return std::nullopt;
  }
  if (c->isFloat() || c->dims.size() > 1)
    return std::nullopt;
  return c->ints;
}

pb::TensorProto int64s(const std::string &name, const std::vector<int64_t> &v) {
  pb::TensorProto t;
  t.set_name(name);
  t.set_data_type(pb::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v)
    t.add_int64_data(x);
  return t;
}

} // namespace

void rewriteSplitSequences(pb::GraphProto &g) {
  std::unordered_map<std::string, int> producer;
  std::unordered_set<std::string> names;
  for (const auto &in : g.input())
    names.insert(in.name());
  for (const auto &t : g.initializer())
    names.insert(t.name());
  for (int k = 0; k < g.node_size(); ++k)
    for (const std::string &o : g.node(k).output()) {
      producer[o] = k;
      names.insert(o);
    }
  auto fresh = [&](const std::string &base) {
    std::string name = base;
    for (int i = 0; names.count(name); ++i)
      name = base + "#" + std::to_string(i);
    names.insert(name);
    return name;
  };
  for (int k = 0; k < g.node_size(); ++k) {
    pb::NodeProto &at = *g.mutable_node(k);
    if (at.op_type() != "SequenceAt" || !at.domain().empty() ||
        at.input_size() != 2 || at.output_size() != 1)
      continue;
    auto p = producer.find(at.input(0));
    if (p == producer.end())
      continue;
    const pb::NodeProto &split = g.node(p->second);
    if (split.op_type() != "SplitToSequence" || split.input_size() < 2 ||
        split.input(1).empty())
      continue; // without split sizes the parts may be squeezed (keepdims)
    int64_t axis = 0;
    for (const auto &a : split.attribute())
      if (a.name() == "axis")
        axis = a.i();
    auto sizes = intsOf(g, producer, split.input(1));
    auto index = intsOf(g, producer, at.input(1));
    if (!sizes || !index || index->size() != 1 || sizes->empty())
      continue;
    int64_t i = (*index)[0], start = 0, end = 0;
    if (sizes->size() == 1 && i >= 0) { // chunks of one size, the last less
      if (__builtin_mul_overflow(i, (*sizes)[0], &start) ||
          __builtin_add_overflow(start, (*sizes)[0], &end))
        continue;
    } else {
      auto n = static_cast<int64_t>(sizes->size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        continue;
      for (int64_t j = 0; j < i; ++j)
        start += (*sizes)[j];
      end = start + (*sizes)[i];
    }
    std::string x = split.input(0), out = at.output(0);
    std::string starts = fresh(out + "#starts"), ends = fresh(out + "#ends"),
                axes = fresh(out + "#axes");
    *g.add_initializer() = int64s(starts, {start});
    *g.add_initializer() = int64s(ends, {end});
    *g.add_initializer() = int64s(axes, {axis});
    pb::NodeProto slice;
    slice.set_name(at.name());
    slice.set_op_type("Slice");
    for (const std::string &in : {x, starts, ends, axes})
      slice.add_input(in);
    slice.add_output(out);
    at = std::move(slice);
  }
}

} // namespace memfit::onnximport
