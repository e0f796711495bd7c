//===- OrderTest.cpp - join-aware execution order -------------------------===//
#include "passes/analysis/Order.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Liveness.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <set>

using namespace memfit;
using memfit::test::GraphLiteral;

namespace {
// Two branches from x joined by Concat, listed breadth-first by the model:
//   a1 = relu(x)  b1 = relu(x)  a2 = conv(a1) [16 ch]  b2 = conv(b1) [2 ch]
//   y = concat(a2, b2) -> gap -> flatten -> fc
Graph branches() {
  GraphLiteral L(1);
  ValueId x = L.input("x", {2, 4, 4});
  OpAttrs conv;
  conv.kernel = {1, 1};
  ValueId a1 = L.op(OpKind::Conv, "a1", {x, L.weight("ka1", {2, 2, 1, 1})},
                    {2, 4, 4}, conv);
  ValueId b1 = L.op(OpKind::Conv, "b1", {x, L.weight("kb1", {2, 2, 1, 1})},
                    {2, 4, 4}, conv);
  ValueId b2 = L.op(OpKind::Conv, "b2", {b1, L.weight("kb2", {2, 2, 1, 1})},
                    {2, 4, 4}, conv);
  ValueId a2 = L.op(OpKind::Conv, "a2", {a1, L.weight("ka2", {16, 2, 1, 1})},
                    {16, 4, 4}, conv);
  OpAttrs cat;
  cat.axis = 1;
  ValueId y = L.op(OpKind::Concat, "cat", {b2, a2}, {18, 4, 4}, cat);
  ValueId p = L.op(OpKind::GlobalAveragePool, "gap", {y}, {18, 1, 1});
  ValueId f = L.op(OpKind::Flatten, "flat", {p}, {18});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {f, L.weight("W", {3, 18})}, {3}, gemm);
  return std::move(L.g);
}
} // namespace

TEST_CASE("join-aware order finishes the heavier branch first", "[order]") {
  Graph g = branches();
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  std::vector<TaskId> order = joinAwareOrder(*tg);
  REQUIRE(order.size() == tg->tasks.size());
  CHECK(std::set<TaskId>(order.begin(), order.end()).size() == order.size());
  std::vector<std::string> fwd;
  for (TaskId t : order)
    if (tg->tasks[t].kind == TaskKind::Forward)
      fwd.push_back(tg->tasks[t].name);
  // Branch a (16 channels) is heavier: a1, a2, then b1, b2, then the join.
  std::vector<std::string> expected{"FP(a1)",  "FP(a2)",  "FP(b1)",   "FP(b2)",
                                    "FP(cat)", "FP(gap)", "FP(flat)", "FP(fc)"};
  CHECK(fwd == expected);
  // A topological order: every block is written before it is read.
  std::vector<bool> written(tg->blocks.size(), false);
  written[tg->inputBlock] = written[tg->labelBlock] = true;
  for (const Block &b : tg->blocks)
    if (isWeightSide(b.kind))
      written[&b - tg->blocks.data()] = true;
  for (TaskId t : order) {
    for (BlockId b : tg->tasks[t].reads)
      CHECK(written[b]);
    for (BlockId b : tg->tasks[t].writes)
      written[b] = true;
  }
  // The backward pass mirrors the forward order.
  std::vector<std::string> bwd;
  for (TaskId t : order)
    if (tg->tasks[t].kind == TaskKind::BackwardData)
      bwd.push_back(tg->tasks[t].name);
  std::vector<std::string> expectedBwd{"BP-data(fc)",  "BP-data(flat)",
                                       "BP-data(gap)", "BP-data(cat)",
                                       "BP-data(b2)",  "BP-data(a2)"};
  CHECK(bwd == expectedBwd);
}
