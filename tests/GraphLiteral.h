//===- GraphLiteral.h - Forward graphs written as literals ----*- C++ -*-===//
//
// Lets a test state a whole small graph in a few lines, with dims as the
// importer would resolve them at `batch`.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_GRAPHLITERAL_H
#define MEMFIT_TESTS_GRAPHLITERAL_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Graph.h"
#include "compiler/ir/TaskGraph.h"
#include "compiler/ops/OpDef.h"

#include <catch2/catch.hpp>

#include <set>
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
  /// The tiny graphs' classifier: global average pool, flatten, and a
  /// 4 -> 10 fully connected layer `fc` (weight `W`) over a 4-channel x.
  ValueId head4(ValueId x) {
    x = op(OpKind::GlobalAveragePool, "gap", {x}, {4, 1, 1});
    x = op(OpKind::Flatten, "flat", {x}, {4});
    OpAttrs gemm;
    gemm.transB = true;
    return op(OpKind::Gemm, "fc", {x, weight("W", {10, 4})}, {10}, gemm);
  }
};

/// A 3x3 convolution's attributes: stride 1, padding 1 (same size).
inline OpAttrs conv3x3() {
  OpAttrs a;
  a.kernel = {3, 3};
  a.strides = {1, 1};
  a.pads = {1, 1, 1, 1};
  a.dilations = {1, 1};
  return a;
}

/// A cost table literal for `tg` at sub-batch `b`: every task 1 ms per
/// sample on its one algorithm, copies at `bytesPerSecond` both ways
/// without latency.
inline CostTable perSampleTable(const TaskGraph &tg, int64_t b,
                                double bytesPerSecond) {
  CostTable c;
  c.subBatch = b;
  c.d2hBytesPerSecond = c.h2dBytesPerSecond = bytesPerSecond;
  c.copyLatencySeconds = 0;
  for (size_t t = 0; t < tg.tasks.size(); ++t)
    c.tasks.push_back({{0, "baseline", 1e-3 * double(b), 0, true}});
  return c;
}

/// The names of blocks `ids`, for comparing a task's reads or writes with
/// a literal set.
inline std::set<std::string> names(const TaskGraph &tg,
                                   const std::vector<BlockId> &ids) {
  std::set<std::string> out;
  for (BlockId id : ids)
    out.insert(tg.blocks[id].name);
  return out;
}

/// The task named `name` (a test fails when there is none).
inline TaskId findTask(const TaskGraph &tg, const std::string &name) {
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t)
    if (tg.tasks[t].name == name)
      return t;
  FAIL("no task " << name);
  return -1;
}

} // namespace memfit::test

#endif
