//===- RecomputeTest.cpp - cut values, Chen's segments, recompute plans ---===//
#include "passes/schedule/Recompute.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Order.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/Schedule.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <set>

using namespace memfit;
using memfit::test::GraphLiteral;

namespace {

// x[N,64] -> 100 x Sigmoid -> fc(10): a uniform chain.
Graph sigmoidChain(int n) {
  GraphLiteral L(4);
  ValueId x = L.input("x", {64});
  for (int i = 0; i < n; ++i)
    x = L.op(OpKind::Sigmoid, "s" + std::to_string(i), {x}, {64});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {x, L.weight("W", {10, 64})}, {10}, gemm);
  return std::move(L.g);
}

// stem conv, then 3 residual blocks (conv-relu-conv-add-relu), gap, fc.
Graph residual() {
  GraphLiteral L(2);
  OpAttrs conv;
  conv.kernel = {3, 3};
  conv.pads = {1, 1, 1, 1};
  ValueId x = L.input("x", {4, 8, 8});
  x = L.op(OpKind::Conv, "stem", {x, L.weight("ks", {4, 4, 3, 3})}, {4, 8, 8},
           conv);
  for (int i = 0; i < 3; ++i) {
    std::string n = "b" + std::to_string(i) + ".";
    ValueId y = L.op(OpKind::Conv, n + "conv1",
                     {x, L.weight(n + "k1", {4, 4, 3, 3})}, {4, 8, 8}, conv);
    y = L.op(OpKind::Relu, n + "relu1", {y}, {4, 8, 8});
    y = L.op(OpKind::Conv, n + "conv2", {y, L.weight(n + "k2", {4, 4, 3, 3})},
             {4, 8, 8}, conv);
    y = L.op(OpKind::Add, n + "add", {y, x}, {4, 8, 8});
    x = L.op(OpKind::Relu, n + "relu2", {y}, {4, 8, 8});
  }
  L.head4(x);
  return std::move(L.g);
}

CostTable unitCosts(const TaskGraph &tg, int64_t b) {
  CostTable c;
  c.subBatch = b;
  c.d2hBytesPerSecond = c.h2dBytesPerSecond = 1e6; // slow: recompute wins
  for (size_t t = 0; t < tg.tasks.size(); ++t)
    c.tasks.push_back({{0, "default", 1e-3, 0, true}});
  return c;
}

} // namespace

TEST_CASE("cut values of a residual network are the block outputs",
          "[recompute]") {
  Graph g = residual();
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  std::set<std::string> cuts;
  for (BlockId b : cutBlocks(*tg, joinAwareOrder(*tg)))
    cuts.insert(tg->blocks[b].name);
  // Nothing inside a block before its add: the block's input stays live
  // until the add. (The model output has no forward reader: no cut.)
  CHECK(cuts == std::set<std::string>{"stem_out", "b0.add_out", "b0.relu2_out",
                                      "b1.add_out", "b1.relu2_out",
                                      "b2.add_out", "b2.relu2_out", "gap_out"});
}

TEST_CASE("Chen's Alg. 3 on a uniform chain keeps about sqrt(n) values",
          "[recompute]") {
  Graph g = sigmoidChain(100);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  std::vector<TaskId> order = joinAwareOrder(*tg);
  int64_t s = 64 * 4; // one sigmoid output per sample
  // Segment budget 10 s: a checkpoint closes every 11th layer, 9 in all.
  ChenSegments seg = chenSegments(*tg, order, 1, 10 * s);
  int kept = 0, dropped = 0;
  for (BlockId b = 0; b < (BlockId)tg->blocks.size(); ++b)
    if (tg->blocks[b].kind == BlockKind::Activation)
      (seg.drop[b] ? dropped : kept)++;
  CHECK(kept == 9);
  CHECK(dropped == 101 - 9);
  CHECK(seg.checkpointBytes == 9 * s);
  CHECK(seg.segmentPeak == 11 * s);
  // The appendix's search centres on sqrt(x y) = sqrt(101 s * s) ~ 10 s.
  auto cands = chenCandidates(*tg, order, 1);
  REQUIRE(cands.size() >= 3);
  for (size_t k = 1; k < cands.size(); ++k) {
    int keptK = 0;
    for (BlockId b = 0; b < (BlockId)tg->blocks.size(); ++b)
      keptK += tg->blocks[b].kind == BlockKind::Activation && !cands[k][b];
    CHECK(keptK >= 6);
    CHECK(keptK <= 14);
  }
}

TEST_CASE("recompute plans verify, move no bytes, and fit budgets offload "
          "alone cannot",
          "[recompute]") {
  Graph g = residual();
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  std::vector<TaskId> order = joinAwareOrder(*tg);
  CostTable c = unitCosts(*tg, 2);
  auto ideal = schedule(*tg, c, order,
                        {.policy = Policy::Ideal, .budget = 0, .batch = 2});
  REQUIRE(static_cast<bool>(ideal));
  // 60% of the ideal arena: at 55% Chen's plan fitted by recompute alone
  // until re-runs wrote over their dead inputs (recomputeInPlace); the arena
  // of 2 KiB blocks then fragments at one backward task, and the
  // defragmentation copies two gradients out.
  int64_t budget = ideal->residentBytes + ideal->arenaBytes * 60 / 100;
  for (Policy p : {Policy::ChenSqrt, Policy::SuperNeurons}) {
    INFO(policyName(p));
    std::vector<bool> drop = p == Policy::ChenSqrt
                                 ? chenCandidates(*tg, order, 2).front()
                                 : superNeuronsDropSet(*tg);
    auto plan = schedule(*tg, c, order, {p, budget, 2, drop});
    if (!plan)
      FAIL(llvm::toString(plan.takeError()));
    llvm::Error err = verifyPlan(*tg, *plan);
    std::string msg = err ? llvm::toString(std::move(err)) : std::string();
    CHECK(msg.empty());
    CHECK(plan->summary.recomputes > 0);
    if (p == Policy::ChenSqrt)
      CHECK(plan->summary.bytesToHost == 0);

    // Each recompute is one more forward run in the round.
    int runs = 0;
    for (const Instr &in : plan->round)
      runs += in.kind == InstrKind::Run && in.recompute;
    CHECK(runs == plan->summary.recomputes);
  }
}

TEST_CASE("the verifier rejects a recompute whose input is gone",
          "[recompute][verify]") {
  Graph g = residual();
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  std::vector<TaskId> order = joinAwareOrder(*tg);
  CostTable c = unitCosts(*tg, 2);
  auto ideal = schedule(*tg, c, order,
                        {.policy = Policy::Ideal, .budget = 0, .batch = 2});
  REQUIRE(static_cast<bool>(ideal));
  // 60% of the ideal arena: at 55% Chen's plan fitted by recompute alone
  // until re-runs wrote over their dead inputs (recomputeInPlace); the arena
  // of 2 KiB blocks then fragments at one backward task, and the
  // defragmentation copies two gradients out.
  int64_t budget = ideal->residentBytes + ideal->arenaBytes * 60 / 100;
  auto plan = schedule(
      *tg, c, order,
      {Policy::ChenSqrt, budget, 2, chenCandidates(*tg, order, 2).front()});
  REQUIRE(static_cast<bool>(plan));
  REQUIRE(plan->summary.recomputes > 0);
  llvm::Error good = verifyPlan(*tg, *plan);
  REQUIRE_FALSE(static_cast<bool>(good));
  // Turn the first recompute into a plain forward run: the block's version
  // moves on and the backward reads of the earlier residency fail.
  Plan bad = *plan;
  for (Instr &in : bad.round)
    if (in.kind == InstrKind::Run && in.recompute) {
      in.recompute = false;
      break;
    }
  llvm::Error err = verifyPlan(*tg, bad);
  REQUIRE(static_cast<bool>(err));
  CHECK(llvm::toString(std::move(err)).find("[structure]") !=
        std::string::npos);
}

TEST_CASE("memfit's cheapest drop set: cheap per byte first, short chains",
          "[recompute]") {
  Graph g = residual();
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  // Convolutions take 10 ms, everything else 1 ms; every map is 2 KiB.
  CostTable c = unitCosts(*tg, 2);
  for (size_t t = 0; t < tg->tasks.size(); ++t)
    if (tg->tasks[t].op >= 0 && g.ops[tg->tasks[t].op].kind == OpKind::Conv)
      c.tasks[t][0].seconds = 10e-3;
  auto names = [&](const std::vector<bool> &drop) {
    std::set<std::string> out;
    for (BlockId b = 0; b < (BlockId)drop.size(); ++b)
      if (drop[b])
        out.insert(tg->blocks[b].name);
    return out;
  };
  CHECK(names(cheapestDropSet(*tg, c, 0)).empty());
  // Three maps' worth. The relu outputs are the cheapest (1 ms, needed by
  // the backward pass; the conv and add outputs they overwrite in place are
  // gone by then). b0.relu1_out regenerates in 2 runs (conv1 and relu1).
  // b0.relu2_out would take 5 (relu2, add, conv2, then relu1 and conv1
  // again): over 4, skipped; the same for the others' relu2.
  CHECK(names(cheapestDropSet(*tg, c, 3 * 2048)) ==
        std::set<std::string>{"b0.relu1_out", "b1.relu1_out", "b2.relu1_out"});
  // Asking for everything still keeps chains short enough to schedule.
  std::vector<bool> all = cheapestDropSet(*tg, c, int64_t(1) << 40);
  ScheduleOptions o{Policy::Memfit, int64_t(1) << 40, 2, all};
  auto p = schedule(*tg, c, builtOrder(*tg), o);
  REQUIRE(static_cast<bool>(p));
  llvm::Error err = verifyPlan(*tg, *p);
  CHECK_FALSE(static_cast<bool>(err));
  llvm::consumeError(std::move(err));
  CHECK(p->summary.recomputes > 0);
}
