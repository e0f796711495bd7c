//===- BoundTest.cpp - The proven lower bound on iteration time -----------===//
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Order.h"
#include "passes/search/Chunk.h"
#include "passes/solve/TimeBound.h"
#include "tests/GraphLiteral.h"
#include "tests/PlanTestUtil.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace memfit;
using memfit::test::findTask;
using memfit::test::GraphLiteral;
using memfit::test::perSampleTable;
using memfit::test::Planned;

namespace {

/// A plan of one round that only runs `order`'s tasks (updates after the
/// round), its budget left to the test: enough for iterationBound, which
/// reads the order, the rounds and the arena.
Plan runsOnly(const TaskGraph &tg, const std::vector<TaskId> &order) {
  Plan plan;
  plan.numSubBatches = 1;
  plan.residentBytes = tg.weightSideBytes();
  for (TaskId t : order) {
    Instr run;
    run.kind = InstrKind::Run;
    run.task = t;
    (tg.tasks[t].kind == TaskKind::Update ? plan.update : plan.round)
        .push_back(run);
  }
  return plan;
}

} // namespace

TEST_CASE("with room for everything the bound is the tasks and the first load",
          "[bound]") {
  Planned m("tiny-cnn", 16);
  auto out = m.plan(1.0, false, 16);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->bound);
  const CostTable &c = m.table(16);
  // Nothing need leave the device: every round task once at its fastest
  // algorithm, after the input is copied in (the labels come in while the
  // forward pass runs), then the update.
  double want =
      double(m.tg.blocks[m.tg.inputBlock].bytesAt(16)) / c.h2dBytesPerSecond;
  for (const Instr &in : out->plan.round)
    if (in.kind == InstrKind::Run && !in.recompute)
      want += c.fastest(in.task).seconds;
  for (const Instr &in : out->plan.update)
    if (in.kind == InstrKind::Run)
      want += c.fastest(in.task).seconds;
  CHECK(out->bound->seconds == Approx(want).epsilon(1e-9));
  CHECK(out->bound->seconds <= out->plan.summary.plannedSeconds);
}

TEST_CASE("memory pressure raises the bound", "[bound][slow]") {
  // The same order and sub-batch with less room: blocks must leave at the
  // peak and come back, which costs copies or forward runs the bound sees.
  // A V100: on sm_80 and later a tight fp32 plan gives up ALGO_1's large
  // workspaces for ALGO_0 at no predicted cost, so room buys no time there.
  Planned m("googlenet", 32, "v100");
  auto roomy = m.plan(1.0, false, 32);
  auto tight = m.plan(0.41, false, 32);
  REQUIRE(static_cast<bool>(roomy));
  REQUIRE(static_cast<bool>(tight));
  REQUIRE(roomy->bound);
  REQUIRE(tight->bound);
  CHECK(tight->bound->seconds > roomy->bound->seconds * 1.02);
  CHECK(tight->bound->seconds <= tight->plan.summary.plannedSeconds);
}

TEST_CASE("no plan is faster than its bound", "[bound][slow]") {
  // Every plan memfit makes lies in its own order-and-sub-batch space, so
  // its predicted time is at least the bound of that space.
  for (const char *name :
       {"tiny-cnn", "tiny-bn", "tiny-residual", "tiny-inception"})
    for (const char *device : {"k40m", "h100-sxm"}) {
      Planned m(name, 16, device);
      for (double fraction : {0.9, 0.7, 0.5, 0.4})
        for (bool statistics : {false, true}) {
          INFO(name << " on " << device << " at " << fraction
                    << (statistics ? " with sub-batch statistics" : ""));
          auto out = m.plan(fraction, statistics);
          if (!out) {
            llvm::consumeError(out.takeError());
            continue;
          }
          REQUIRE(out->bound);
          CHECK(out->bound->seconds <=
                out->plan.summary.plannedSeconds * (1 + 1e-12));
          CHECK(out->bound->seconds > 0);
        }
    }
}

TEST_CASE("the bound is the same every time", "[bound]") {
  Planned m("tiny-inception", 16, "h100-sxm");
  auto a = m.plan(0.5, true);
  auto b = m.plan(0.5, true);
  REQUIRE(static_cast<bool>(a));
  REQUIRE(static_cast<bool>(b));
  REQUIRE(a->bound);
  REQUIRE(b->bound);
  CHECK(a->bound->seconds == b->bound->seconds);
}

TEST_CASE("the bound's hints are its relaxation's point", "[bound][slow]") {
  // At a tight budget blocks must leave at the peak: the hints say how much
  // of each, by copy or by recompute, as fractions, recompute only for
  // what forward tasks alone make.
  Planned m("googlenet", 32, "v100");
  auto tight = m.plan(0.41, false, 32);
  REQUIRE(static_cast<bool>(tight));
  REQUIRE(tight->bound);
  const BoundHints &h = tight->bound->hints;
  const TaskGraph &g = tight->scheduledGraph(m.tg);
  for (const BoundHints::Shares *s : {&h.peak, &h.mean}) {
    REQUIRE(s->offload.size() == g.blocks.size());
    REQUIRE(s->recompute.size() == g.blocks.size());
    double away = 0;
    for (size_t b = 0; b < g.blocks.size(); ++b) {
      INFO("block " << g.blocks[b].name);
      CHECK(s->offload[b] >= -1e-9);
      CHECK(s->recompute[b] >= -1e-9);
      CHECK(s->offload[b] + s->recompute[b] <= 1 + 1e-6);
      if (s->recompute[b] > 1e-9) {
        CHECK((g.blocks[b].kind == BlockKind::Activation ||
               g.blocks[b].kind == BlockKind::Stats));
        for (TaskId w : g.blocks[b].writers)
          CHECK(g.tasks[w].kind == TaskKind::Forward);
      }
      away +=
          double(g.blocks[b].bytesAt(32)) * (s->offload[b] + s->recompute[b]);
    }
    CHECK(away > 0);
  }
}

TEST_CASE("a workspace that cannot fit costs its slower algorithm", "[bound]") {
  // x[4,64] -> fc0 -> relu0 -> fc1 (10). Every task 4 ms (1 ms per
  // sample); fc1's forward also has a 3 ms algorithm with a 1 TB
  // workspace. The arena holds the liveness peak, nothing more: no plan can
  // make room for that workspace (all the blocks together are a few KB),
  // so every plan runs fc1 at 4 ms and the bound is the tasks at their
  // slowest algorithm, to a part in 1e8. With room for the workspace it is
  // 1 ms less.
  GraphLiteral L(4);
  ValueId x = L.input("x", {64});
  OpAttrs gemm;
  gemm.transB = true;
  x = L.op(OpKind::Gemm, "fc0", {x, L.weight("W0", {64, 64})}, {64}, gemm);
  x = L.op(OpKind::Relu, "relu0", {x}, {64});
  L.op(OpKind::Gemm, "fc1", {x, L.weight("W1", {10, 64})}, {10}, gemm);
  auto built = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(built));
  TaskGraph &tg = *built;
  CostTable c = perSampleTable(tg, 4, 1e9);
  const int64_t huge = int64_t(1) << 40;
  c.tasks[findTask(tg, "FP(fc1)")] = {{1, "fast", 3e-3, huge, false},
                                      {0, "baseline", 4e-3, 0, true}};
  Plan plan = runsOnly(tg, taskOrder(tg, OrderKind::JoinAware));
  std::vector<TaskId> order;
  double slowest = 0;
  for (const Instr &in : plan.round) {
    order.push_back(in.task);
    slowest += c.baseline(in.task).seconds;
  }
  for (const Instr &in : plan.update)
    slowest += c.baseline(in.task).seconds;
  Liveness lv = computeLiveness(tg, order, 4, /*inPlace=*/true);
  const int64_t arena =
      *std::max_element(lv.liveBytes.begin(), lv.liveBytes.end());
  const double load =
      double(tg.blocks[tg.inputBlock].bytesAt(4)) / c.h2dBytesPerSecond;
  plan.budget = plan.residentBytes + arena;
  auto tight = iterationBound(tg, plan, c, nullptr, {});
  REQUIRE(tight);
  CHECK(tight->seconds == Approx(slowest + load).epsilon(1e-8));
  plan.budget = plan.residentBytes + arena + huge;
  auto roomy = iterationBound(tg, plan, c, nullptr, {});
  REQUIRE(roomy);
  CHECK(roomy->seconds == Approx(slowest + load - 1e-3).epsilon(1e-12));
}

TEST_CASE("a step waits for the batch data it reads to come in", "[bound]") {
  // tiny-bn at batch 4 split into 2 chunks of 2, every task 2 ms, and each
  // chunk's input taking L = 50 ms to copy in on the one copy-in stream.
  // With room for everything, the second chunk's first task cannot start
  // before both inputs are in: the bound is at least 2 L plus the tasks
  // from there on. (Counting only the first load before the first task,
  // as the bound once did, gives L plus all the tasks: less.)
  Planned m("tiny-bn", 4);
  auto split = splitAlongBatch(m.tg, joinAwareOrder(m.tg), 2);
  REQUIRE(static_cast<bool>(split));
  const TaskGraph &tg = split->tg;
  BlockId in1 = tg.chunkValueBlock[tg.valueBlock.size() + tg.graph->input];
  const double rate = double(tg.blocks[in1].bytesAt(2)) / 0.05;
  CostTable c = perSampleTable(tg, 2, rate);
  Plan plan = runsOnly(tg, split->order);
  plan.budget = plan.residentBytes + (int64_t(1) << 40);
  std::vector<double> secs; // the round's tasks, in order
  size_t second = 0;        // the first step reading the second input
  for (const Instr &in : plan.round) {
    const std::vector<BlockId> &reads = tg.tasks[in.task].reads;
    if (!second && std::find(reads.begin(), reads.end(), in1) != reads.end())
      second = secs.size();
    secs.push_back(c.fastest(in.task).seconds);
  }
  REQUIRE(second > 0);
  double update = 0;
  for (const Instr &in : plan.update)
    update += c.fastest(in.task).seconds;
  double all = 0, fromSecond = 0;
  for (size_t s = 0; s < secs.size(); ++s) {
    all += secs[s];
    if (s >= second)
      fromSecond += secs[s];
  }
  auto bound = iterationBound(tg, plan, c, nullptr, {});
  REQUIRE(bound);
  CHECK(bound->seconds >= 2 * 0.05 + fromSecond + update - 1e-12);
  CHECK(bound->seconds > 0.05 + all + update + 1e-3);
}

TEST_CASE("the bound over every sub-batch is below every forced sub-batch's "
          "plan and the plan's own bound",
          "[bound]") {
  // tiny-residual has no BatchNorm: every sub-batch is allowed, and the
  // search looks at each (otherSubBatches), keeping their bounds.
  Planned m("tiny-residual", 16);
  auto out = m.plan(0.5, false);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->bound);
  const double space = out->spaceBoundSeconds;
  REQUIRE(space > 0);
  CHECK(space <= out->bound->seconds);
  CHECK(space <= out->plan.summary.plannedSeconds);
  int forcedPlans = 0;
  for (int64_t sb : {1, 2, 3, 4, 6, 8, 11, 16}) {
    auto forced = m.plan(0.5, false, sb);
    if (!forced) {
      llvm::consumeError(forced.takeError());
      continue;
    }
    ++forcedPlans;
    INFO("sub-batch " << sb);
    CHECK(forced->plan.summary.plannedSeconds >= space * (1 - 1e-9));
    // memfit's default is never slower than a forced sub-batch.
    CHECK(out->plan.summary.plannedSeconds <=
          forced->plan.summary.plannedSeconds * (1 + 1e-9));
  }
  CHECK(forcedPlans >= 3);
  // A forced sub-batch searches one: its bound covers only that.
  auto one = m.plan(0.5, false, 8);
  REQUIRE(static_cast<bool>(one));
  CHECK(one->spaceBoundSeconds == 0);
}
