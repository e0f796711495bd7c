//===- GradPoolTest.cpp - Homed gradients through one pinned pool ---------===//
#include "TiersTestUtil.h"

#include "codegen/PlanJson.h"
#include "codegen/PlanReport.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/GradPool.h"
#include "passes/schedule/Schedule.h"

#include <algorithm>

using namespace memfit;
using memfit::test::HostPlanned;

namespace {

/// gpt2-tiny with every weight homed (437.6 KiB of weight side, 109.1 KiB
/// of it gradients) in one round of 4 under 700 KiB of GPU memory.
constexpr int64_t kGpu = 700 << 10;

int64_t waitsFor(const Plan &plan) {
  return std::count_if(
      plan.round.begin(), plan.round.end(),
      [](const Instr &in) { return in.kind == InstrKind::WaitHost; });
}

} // namespace

TEST_CASE("homed gradients stream through a pool smaller than they are "
          "where the host budget needs it",
          "[tiers][pool][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  auto roomy = p.planBytes(kGpu, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(roomy));
  CHECK(roomy->plan.gradPoolBytes == 0);
  CHECK(waitsFor(roomy->plan) == 0);
  const int64_t homes = roomy->plan.hostHomeBytes;
  REQUIRE(homes > 400 << 10);

  // 360 KiB of host for 437.6 KiB of homes: only a pool of the gradients
  // fits (no NVMe budget).
  const int64_t host = 360 << 10;
  auto out = p.planBytes(kGpu, host);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const Plan &plan = out->plan;
  REQUIRE(plan.numSubBatches == 1);
  CHECK(plan.hostHomeBytes == homes);
  CHECK(plan.gradPoolBytes > 0);
  CHECK(plan.gradPoolBytes < plan.pooledGradBytes);
  CHECK(plan.hostMemoryBytes() <= host);
  CHECK(plan.hostMemoryBytes() ==
        plan.hostHomeBytes - plan.pooledGradBytes + plan.gradPoolBytes);
  // Every pooled range is a homed gradient's, aligned, inside the pool.
  int64_t pooled = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    int64_t at = plan.poolOffsetOf(b);
    if (at < 0)
      continue;
    INFO(tg.blocks[b].name);
    CHECK(tg.blocks[b].kind == BlockKind::WeightGrad);
    CHECK(tg.homeOf(b) == Tier::Host);
    CHECK(at % kGradPoolAlign == 0);
    CHECK(at + tg.blocks[b].bytesAt(1) <= plan.gradPoolBytes);
    pooled += tg.blocks[b].bytesAt(1);
  }
  CHECK(pooled == plan.pooledGradBytes);
  REQUIRE(waitsFor(plan) > 0);
  if (auto err = verifyPlan(tg, plan))
    FAIL(llvm::toString(std::move(err)));

  // The simulator holds each wait until its update has finished: the
  // copy-out stream resumes no earlier, and the plan is no faster than
  // the one with a buffer per gradient.
  const Simulation &sim = out->sim;
  const double roundsEnd = sim.roundSeconds;
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::WaitHost)
      continue;
    CHECK(in.stream == Stream::CopyOut);
    size_t u = 0;
    while (u < plan.update.size() && plan.update[u].task != in.task)
      ++u;
    REQUIRE(u < plan.update.size());
    CHECK(plan.update[u].onHost);
    CHECK(plan.update[u].event >= 0);
    CHECK(sim.start[i] >= roundsEnd + sim.updateEnd[u] - 1e-12);
  }
  CHECK(plan.summary.plannedSeconds >=
        roomy->plan.summary.plannedSeconds * (1 - 1e-9));

  // The report says so.
  auto report = buildPlanReport(tg, plan, sim, {});
  CHECK(report.summary.gradPoolBytes == plan.gradPoolBytes);
  CHECK(report.summary.hostMemoryBytes == plan.hostMemoryBytes());
  // plan.json reads back a pool's host memory, below the homes' bytes.
  auto back = parsePlanJson(planToJson(report), "plan.json");
  if (!back)
    FAIL(llvm::toString(back.takeError()));
  CHECK(back->summary.hostMemoryBytes == plan.hostMemoryBytes());
  CHECK(back->summary.hostMemoryBytes < back->summary.hostHomeBytes);

  // A copy home without its wait is caught.
  Plan unwaited = plan;
  auto w = std::find_if(
      unwaited.round.begin(), unwaited.round.end(),
      [](const Instr &in) { return in.kind == InstrKind::WaitHost; });
  unwaited.round.erase(w);
  llvm::Error err = verifyPlan(tg, unwaited);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)),
             Catch::Contains("[pool]") &&
                 Catch::Contains("before the copy-out stream waits"));
  // As is a pool in a plan of several rounds (the earlier sums would be
  // overwritten).
  Plan rounds = plan;
  rounds.numSubBatches = 2;
  rounds.subBatch = 2;
  err = verifyPlan(tg, rounds);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("[pool]"));
}

TEST_CASE("the pool's ring waits only for the updates whose bytes it takes",
          "[tiers][pool][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  auto roomy = p.planBytes(kGpu, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(roomy));
  TaskGraph tg = roomy->scheduledGraph(p.tg);
  int64_t grads = 0, largest = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.homeOf(b) == Tier::Host &&
        tg.blocks[b].kind == BlockKind::WeightGrad) {
      grads += tg.blocks[b].bytesAt(1);
      largest = std::max(largest, tg.blocks[b].bytesAt(1));
    }
  REQUIRE(largest > 0);

  // A pool as large as every gradient: nothing is overwritten, no wait.
  tg.gradPoolBytes = grads + 64 * kGradPoolAlign;
  Plan whole = roomy->plan;
  CHECK(poolGradients(tg, whole) > 0);
  CHECK(waitsFor(whole) == 0);
  CHECK_FALSE(static_cast<bool>(verifyPlan(tg, whole)));

  // A pool of the largest gradient: the ring wraps after nearly every
  // gradient, and the plan stays provably right.
  tg.gradPoolBytes =
      (largest + kGradPoolAlign - 1) / kGradPoolAlign * kGradPoolAlign;
  Plan tight = roomy->plan;
  const int32_t n = poolGradients(tg, tight);
  CHECK(n > 0);
  CHECK(waitsFor(tight) > 0);
  CHECK(waitsFor(tight) < n);
  if (auto err = verifyPlan(tg, tight))
    FAIL(llvm::toString(std::move(err)));
  const CostTable &t = p.table(tight.subBatch);
  Simulation ring = simulate(tg, tight, t, nullptr);
  Simulation free = simulate(tg, whole, t, nullptr);
  CHECK(ring.iterationSeconds >= free.iterationSeconds * (1 - 1e-9));

  // Smaller than any gradient's aligned range: nothing pooled.
  tg.gradPoolBytes = kGradPoolAlign - 4;
  Plan none = roomy->plan;
  CHECK(poolGradients(tg, none) == 0);
  CHECK(none.gradPoolBytes == 0);
  CHECK(waitsFor(none) == 0);
}

TEST_CASE("a gradient pool needs the batch in one round", "[tiers][pool]"
                                                          "[slow]") {
  HostPlanned p("gpt2-tiny", 4);
  auto roomy = p.planBytes(kGpu, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(roomy));
  TaskGraph tg = roomy->scheduledGraph(p.tg);
  tg.gradPoolBytes = 64 << 10;
  // Two sub-batches of 2: the first one's sum would have nowhere to stay.
  auto two = schedule(tg, p.table(2), builtOrder(tg),
                      {.policy = Policy::Memfit, .budget = kGpu, .batch = 4});
  REQUIRE_FALSE(static_cast<bool>(two));
  CHECK_THAT(llvm::toString(two.takeError()),
             Catch::Contains("need the batch in one round"));
  auto one = schedule(tg, p.table(4), builtOrder(tg),
                      {.policy = Policy::Memfit, .budget = kGpu, .batch = 4});
  if (!one)
    FAIL(llvm::toString(one.takeError()));
  CHECK(one->gradPoolBytes == tg.gradPoolBytes);
  CHECK_FALSE(static_cast<bool>(verifyPlan(tg, *one)));
}
