//===- GraphLiteral.h - Forward graphs written as literals ----*- C++ -*-===//
//
// Lets a test state a whole small graph in a few lines, with dims as the
// importer would resolve them at `batch`.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_GRAPHLITERAL_H
#define MEMFIT_TESTS_GRAPHLITERAL_H

#include "compiler/ir/Graph.h"
#include "compiler/ops/OpDef.h"

#include <string>
#include <vector>

namespace memfit::test {

struct GraphLiteral {
  Graph g;
  explicit GraphLiteral(int64_t batch) { g.batch = batch; }

  /// The data input; `dims` without the batch.
  ValueId input(const std::string &name, std::vector<int64_t> dims) {
    Value v;
    v.name = name;
    v.kind = ValueKind::Input;
    v.batched = true;
    v.dims = std::move(dims);
    v.dims.insert(v.dims.begin(), g.batch);
    g.input = g.addValue(std::move(v));
    return g.input;
  }
  ValueId weight(const std::string &name, std::vector<int64_t> dims,
                 bool trainable = true) {
    Value v;
    v.name = name;
    v.kind = ValueKind::Weight;
    v.dims = std::move(dims);
    v.trainable = trainable;
    return g.addValue(std::move(v));
  }
  /// An op with one batched output of per-sample dims `out`.
  ValueId op(OpKind kind, const std::string &name, std::vector<ValueId> ins,
             std::vector<int64_t> out, OpAttrs attrs = {}) {
    Value v;
    v.name = name + "_out";
    v.batched = true;
    v.dims = std::move(out);
    v.dims.insert(v.dims.begin(), g.batch);
    ValueId y = g.addValue(std::move(v));
    Op o;
    o.kind = kind;
    o.name = name;
    o.onnxOp = std::string(opKindName(kind));
    o.inputs = std::move(ins);
    o.outputs = {y};
    o.attrs = std::move(attrs);
    g.addOp(std::move(o));
    g.output = y;
    return y;
  }
};

} // namespace memfit::test

#endif
