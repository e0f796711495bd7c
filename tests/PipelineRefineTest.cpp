//===- PipelineRefineTest.cpp - memfit's refinement phase -----------------===//
#include "PlanTestUtil.h"
#include "passes/analysis/Verify.h"

using namespace memfit;
using namespace memfit::test;

namespace {

/// Per residency, its block and offset: the placement a plan commits to.
std::vector<std::pair<BlockId, int64_t>> placement(const Plan &p) {
  std::vector<std::pair<BlockId, int64_t>> out;
  for (const Residency &r : p.residencies)
    out.push_back({r.block, r.offset});
  return out;
}

} // namespace

TEST_CASE("the refinement phase makes a plan faster and keeps it valid",
          "[refine][slow]") {
  // ResNet-50 at batch 32 in half its ideal peak on the H100 model: the
  // search's winner (the chain program's decisions) is not a local optimum
  // of single-block changes.
  Planned m("resnet50", 32, "h100-sxm");
  m.refine = false;
  auto before = m.plan(0.5, false);
  REQUIRE(static_cast<bool>(before));
  CHECK(before->refineTries == 0);
  m.refine = true;
  auto after = m.plan(0.5, false);
  REQUIRE(static_cast<bool>(after));
  CHECK(after->plan.policy == "memfit (refined)");
  CHECK(after->refineChanged > 0);
  CHECK(after->refineTries >= after->refineChanged);
  CHECK(after->sim.iterationSeconds < before->sim.iterationSeconds);
  CHECK_FALSE(static_cast<bool>(verifyPlan(m.tg, after->plan)));
  CHECK(after->plan.totalBytes() <= after->budget);
  // Same order, rounds and arena: the bound of the space still holds.
  REQUIRE(after->bound);
  CHECK(after->bound->seconds <= after->sim.iterationSeconds);

  // Waves of two threads, the first gain in move order kept: the same
  // plan every time.
  auto again = m.plan(0.5, false);
  REQUIRE(static_cast<bool>(again));
  CHECK(again->sim.iterationSeconds == after->sim.iterationSeconds);
  CHECK(again->refineTries == after->refineTries);
  CHECK(again->plan.round.size() == after->plan.round.size());
  CHECK(placement(again->plan) == placement(after->plan));
}

TEST_CASE("the refinement phase leaves a plan at its bound alone", "[refine]") {
  // With room for everything the plan is the ideal one, at its bound: no
  // move is tried.
  Planned m("resnet18", 8, "h100-sxm");
  auto out = m.plan(1.0, false);
  REQUIRE(static_cast<bool>(out));
  CHECK(out->refineTries == 0);
  CHECK(out->plan.policy == "memfit");
}

TEST_CASE("the refinement phase climbs from the bound's plan too",
          "[refine][slow]") {
  // ResNet-18 at batch 64 on the H100 model, in 2 chunks of 32: at 45% of
  // its ideal peak the winner before refinement recomputes much and
  // offloads little, and single-block changes from it stopped at 28.0% over
  // the ideal, slower than the 22.4% planned at 40%. The bound-guided
  // phase's plan, offload-heavy, lost to it before refinement; climbed
  // too, it ends at 20.8%. More memory no longer gives a slower plan here.
  Planned m("resnet18", 64, "h100-sxm");
  auto tight = m.plan(0.40, false);
  auto loose = m.plan(0.45, false);
  REQUIRE(static_cast<bool>(tight));
  REQUIRE(static_cast<bool>(loose));
  CHECK(loose->plan.chunks == 2);
  CHECK(loose->plan.policy == "memfit (refined)");
  CHECK(loose->sim.iterationSeconds < loose->idealSeconds * 1.25);
  CHECK(loose->sim.iterationSeconds <= tight->sim.iterationSeconds);
  CHECK_FALSE(
      static_cast<bool>(verifyPlan(loose->scheduledGraph(m.tg), loose->plan)));
}
