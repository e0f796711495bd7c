//===- GraphRebuild.h - A fresh graph from another's kept ops --*- C++ -*-===//
//
// What the graph-to-graph forms (AttentionFusion, EpilogueFusion) share:
// the ops they keep or replace copied into a fresh graph, values
// renumbered densely in first-use order (the input first), producers and
// consumers rebuilt by Graph::addOp.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_ONNX_GRAPHREBUILD_H
#define MEMFIT_COMPILER_ONNX_GRAPHREBUILD_H

#include "compiler/ir/Graph.h"

#include <utility>
#include <vector>

namespace memfit {

class GraphRebuild {
public:
  explicit GraphRebuild(const Graph &in)
      : in(in), remap(in.values.size(), kNoId) {
    out.name = in.name;
    out.batch = in.batch;
    out.input = use(in.input);
  }

  /// `v` of the old graph in the new one, copied at its first use.
  ValueId use(ValueId v) {
    if (remap[v] == kNoId) {
      Value copy = in.values[v];
      copy.producer = kNoId;
      copy.consumers.clear();
      remap[v] = out.addValue(std::move(copy));
    }
    return remap[v];
  }

  /// `op`, written in the old graph's value ids, in the new graph's.
  Op remapped(Op op) {
    for (ValueId &v : op.inputs)
      v = use(v);
    for (ValueId &v : op.outputs)
      v = use(v);
    return op;
  }

  /// The new graph under construction (values added beside the old ones').
  Graph &graph() { return out; }

  /// The new graph, its output the old one's.
  Graph finish() && {
    out.output = use(in.output);
    return std::move(out);
  }

private:
  const Graph &in;
  Graph out;
  std::vector<ValueId> remap;
};

} // namespace memfit

#endif
