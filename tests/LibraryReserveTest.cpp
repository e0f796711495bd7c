//===- LibraryReserveTest.cpp - The budget covers the libraries -----------===//
//
// The budget is everything the trainer allocates once the CUDA context
// exists: the library reserve is taken off before planning, a percentage
// budget is of the plan's own ideal peak with the reserve on top, and the
// verifier checks reserve + weight side + arena against the budget.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/DeviceSpec.h"
#include "compiler/support/Units.h"
#include "passes/analysis/Verify.h"
#include "passes/search/Pipeline.h"
#include "tests/PlanTestUtil.h"

#include <catch2/catch.hpp>

using namespace memfit;
using memfit::test::Planned;

namespace {

llvm::Expected<PlanOutcome> planBytes(Planned &m, int64_t budget,
                                      int64_t reserve) {
  PlanRequest req;
  req.batch = m.graph.batch;
  req.budget = budget;
  req.libraryReserve = reserve;
  return planTraining(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); }, req);
}

/// The ideal plan's peak and the lower bound, with no reserve.
std::pair<int64_t, int64_t> idealAndFloor(Planned &m) {
  PlanRequest req;
  req.batch = m.graph.batch;
  req.policy = Policy::Ideal;
  auto o = planTraining(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); }, req);
  REQUIRE(static_cast<bool>(o));
  return {o->idealPeakBytes, o->lowerBound.bytes};
}

} // namespace

TEST_CASE("the library reserve is taken off a budget in bytes",
          "[pipeline][reserve]") {
  Planned m("tiny-cnn", 16);
  auto [peak, floor] = idealAndFloor(m);
  REQUIRE(floor < peak);
  const int64_t reserve = (peak - floor) / 2;
  REQUIRE(reserve > 0);

  // The whole ideal peak, no reserve: the plan may use all of it.
  auto loose = planBytes(m, peak, 0);
  REQUIRE(static_cast<bool>(loose));
  CHECK(loose->plan.budget == peak);
  CHECK(loose->plan.libraryReserve == 0);
  CHECK(loose->plan.totalBytes() <= peak);

  // The same budget with a reserve: the plan gets exactly what is left,
  // the same plan as the smaller budget without a reserve.
  auto reserved = planBytes(m, peak, reserve);
  REQUIRE(static_cast<bool>(reserved));
  CHECK(reserved->budget == peak);
  CHECK(reserved->plan.budget == peak);
  CHECK(reserved->plan.libraryReserve == reserve);
  CHECK(reserved->plan.planBudget() == peak - reserve);
  CHECK(reserved->plan.totalBytes() <= peak - reserve);
  CHECK(reserved->plan.deviceBytes() <= peak);
  auto same = planBytes(m, peak - reserve, 0);
  REQUIRE(static_cast<bool>(same));
  CHECK(reserved->plan.arenaBytes == same->plan.arenaBytes);
  CHECK(reserved->plan.subBatch == same->plan.subBatch);
  CHECK(reserved->plan.summary.plannedSeconds ==
        same->plan.summary.plannedSeconds);
  CHECK_FALSE(static_cast<bool>(verifyPlan(m.tg, reserved->plan)));

  // The boundary: reserve + Mmin fits, a byte less is refused with both
  // numbers named.
  auto atFloor = planBytes(m, floor + reserve, reserve);
  REQUIRE(static_cast<bool>(atFloor));
  CHECK(atFloor->plan.deviceBytes() <= floor + reserve);
  auto under = planBytes(m, floor + reserve - 1, reserve);
  REQUIRE_FALSE(static_cast<bool>(under));
  std::string why = llvm::toString(under.takeError());
  CHECK(why.find("less the library reserve " + formatBytes(reserve)) !=
        std::string::npos);
  CHECK(why.find("Mmin = " + formatBytes(floor)) != std::string::npos);
  CHECK(why.find("at least " + formatBytes(floor + reserve)) !=
        std::string::npos);

  // In a table of plans (memfit compare) the refusal is the cell's reason,
  // not an error.
  PlanRequest underReq;
  underReq.batch = m.graph.batch;
  underReq.budget = floor + reserve - 1;
  underReq.libraryReserve = reserve;
  auto cell = planOrReason(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); },
      underReq);
  REQUIRE(static_cast<bool>(cell));
  CHECK_FALSE(cell->outcome);
  CHECK(cell->reason == why);
  underReq.budget = floor + reserve;
  cell = planOrReason(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); },
      underReq);
  REQUIRE(static_cast<bool>(cell));
  REQUIRE(cell->outcome);
  CHECK(cell->reason.empty());
  CHECK(cell->outcome->plan.arenaBytes == atFloor->plan.arenaBytes);

  // A reserve the budget cannot even hold is refused as well.
  auto all = planBytes(m, peak, peak + 1);
  REQUIRE_FALSE(static_cast<bool>(all));
  llvm::consumeError(all.takeError());
  auto negative = planBytes(m, peak, -1);
  REQUIRE_FALSE(static_cast<bool>(negative));
  CHECK(llvm::toString(negative.takeError()).find("must not be negative") !=
        std::string::npos);
}

TEST_CASE("a percentage budget is of the plan's ideal peak, the reserve on top",
          "[pipeline][reserve]") {
  Planned m("tiny-cnn", 16);
  auto [peak, floor] = idealAndFloor(m);
  (void)floor;
  const int64_t reserve = int64_t(144) << 20;
  PlanRequest req;
  req.batch = m.graph.batch;
  req.budgetFraction = 0.8;
  auto plain = m.plan(0.8, false);
  REQUIRE(static_cast<bool>(plain));
  req.libraryReserve = reserve;
  auto o = planTraining(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); }, req);
  REQUIRE(static_cast<bool>(o));
  CHECK(o->idealPeakBytes == peak);
  CHECK(o->budget == static_cast<int64_t>(0.8 * double(peak)) + reserve);
  CHECK(o->plan.libraryReserve == reserve);
  CHECK(o->plan.arenaBytes == plain->plan.arenaBytes);
  CHECK(o->plan.totalBytes() <= static_cast<int64_t>(0.8 * double(peak)));
  ResolvedBudget resolved = resolveBudget(req, peak, 0);
  CHECK(resolved.device == o->budget);
  CHECK(resolved.reserve == reserve);
  CHECK(resolved.plan() == static_cast<int64_t>(0.8 * double(peak)));

  // The ideal policy's budget is its peak plus the reserve.
  req.policy = Policy::Ideal;
  auto ideal = planTraining(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); }, req);
  REQUIRE(static_cast<bool>(ideal));
  CHECK(ideal->budget == peak + reserve);
  CHECK(ideal->plan.deviceBytes() == peak + reserve);
}

TEST_CASE("the verifier counts the library reserve against the budget",
          "[verify][reserve]") {
  Planned m("tiny-cnn", 16);
  auto [peak, floor] = idealAndFloor(m);
  (void)floor;
  auto o = planBytes(m, peak, 0);
  REQUIRE(static_cast<bool>(o));
  Plan p = o->plan;
  REQUIRE(p.totalBytes() <= p.budget);
  // One byte more reserve than the budget leaves room for.
  const int64_t over = p.budget - p.totalBytes() + 1;
  p.libraryReserve = over;
  llvm::Error err = verifyPlan(m.tg, p);
  REQUIRE(static_cast<bool>(err));
  std::string why = llvm::toString(std::move(err));
  CHECK(why.find("budget") != std::string::npos);
  CHECK(why.find("library reserve " + std::to_string(over) + " ") !=
        std::string::npos);
  p.budget += 1; // room for it
  CHECK_FALSE(static_cast<bool>(verifyPlan(m.tg, p)));
  p.libraryReserve = -1;
  llvm::Error neg = verifyPlan(m.tg, p);
  REQUIRE(static_cast<bool>(neg));
  CHECK(llvm::toString(std::move(neg)).find("negative") != std::string::npos);
}

TEST_CASE("a device states its library reserve", "[device][reserve]") {
  auto h200 = builtinDevice("h200");
  REQUIRE(static_cast<bool>(h200));
  CHECK(h200->libraryReserveBytes == kDefaultLibraryReserveBytes);
  CHECK(kDefaultLibraryReserveBytes == int64_t(144) << 20);
  const char *base = R"({"name": "lab", "fp32_tflops": 10, "memory_gbps": 900,
    "memory_gib": 16, "h2d_gbps": 16, "d2h_gbps": 16, "sm_count": 80)";
  auto dflt = parseDeviceJson(std::string(base) + "}", "lab.json");
  REQUIRE(static_cast<bool>(dflt));
  CHECK(dflt->libraryReserveBytes == kDefaultLibraryReserveBytes);
  auto own = parseDeviceJson(
      std::string(base) + R"(, "library_reserve_mib": 96})", "lab.json");
  REQUIRE(static_cast<bool>(own));
  CHECK(own->libraryReserveBytes == int64_t(96) << 20);
  auto back = parseDeviceJson(deviceToJson(*own), "again.json");
  REQUIRE(static_cast<bool>(back));
  CHECK(back->libraryReserveBytes == own->libraryReserveBytes);
  auto bad = parseDeviceJson(
      std::string(base) + R"(, "library_reserve_mib": -1})", "lab.json");
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK(llvm::toString(bad.takeError())
            .find("'library_reserve_mib' must be non-negative") !=
        std::string::npos);
}

TEST_CASE("cuBLAS's workspace comes out of the reserve", "[reserve]") {
  Plan p;
  p.libraryReserve = int64_t(144) << 20;
  CHECK(p.blasWorkspaceBytes() == kBlasWorkspaceBytes);
  p.libraryReserve = int64_t(8) << 20;
  CHECK(p.blasWorkspaceBytes() == p.libraryReserve);
  p.libraryReserve = 0;
  CHECK(p.blasWorkspaceBytes() == 0);
}
