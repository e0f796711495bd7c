//===- GraphVariantsTest.cpp - Choosing among a model's graphs ------------===//
#include "passes/search/GraphVariants.h"

#include "compiler/support/Diagnostics.h"

#include <catch2/catch.hpp>

#include <map>

using namespace memfit;

namespace {

/// Graph variants whose plans are given by fused count: a time, or no plan
/// (Infeasible), or another error; every request is recorded.
struct Fake {
  std::map<int64_t, double> seconds; // absent: Infeasible
  std::map<int64_t, std::string> broken;
  std::vector<std::pair<int64_t, PlanRequest>> asked;
  AttentionVariants variants(int64_t n) {
    return {.subgraphs = n,
            .plan = [this](int64_t k, const PlanRequest &r)
                -> llvm::Expected<PlanOutcome> {
              asked.push_back({k, r});
              if (broken.count(k))
                return makeInternalError(broken[k]);
              if (r.policy == Policy::Ideal) {
                PlanOutcome o;
                o.idealPeakBytes = 1000;
                return o;
              }
              if (!seconds.count(k))
                return makeInfeasibleF("no room with {0} fused", k);
              PlanOutcome o;
              o.plan.summary.plannedSeconds = seconds[k];
              return o;
            }};
  }
};

} // namespace

TEST_CASE("fusion counts are none, all and the quarters between",
          "[pipeline]") {
  CHECK(fusionCounts(1) == std::vector<int64_t>{0, 1});
  CHECK(fusionCounts(8) == std::vector<int64_t>{0, 2, 4, 6, 8});
  CHECK(fusionCounts(3) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("the fastest feasible graph wins, a tie to the more fused",
          "[pipeline]") {
  Fake f;
  f.seconds = {{0, 3.0}, {1, 2.0}, {2, 2.0}}; // 3 and 4 fused do not fit
  PlanRequest req;
  req.budget = 5000;
  auto c = chooseAttention(f.variants(4), req);
  REQUIRE(static_cast<bool>(c));
  REQUIRE(c->tried.size() == 5);
  CHECK(c->tried[c->chosen].fused == 2);
  CHECK(!c->tried[4].outcome);
  CHECK(c->tried[4].outcome.errorIsA<Infeasible>());
  for (VariantOutcome &t : c->tried)
    if (!t.outcome)
      llvm::consumeError(t.outcome.takeError());
}

TEST_CASE("a percentage budget is resolved once, against the graph as "
          "written",
          "[pipeline]") {
  Fake f;
  f.seconds = {{0, 1.0}, {1, 1.0}};
  PlanRequest req;
  req.budgetFraction = 0.5;
  auto c = chooseAttention(f.variants(1), req);
  REQUIRE(static_cast<bool>(c));
  REQUIRE(f.asked.size() == 3);
  CHECK(f.asked[0].first == 0);
  CHECK(f.asked[0].second.policy == Policy::Ideal);
  for (size_t i = 1; i < f.asked.size(); ++i) {
    CHECK(f.asked[i].second.budgetFraction == 0);
    CHECK(f.asked[i].second.budget == 500);
  }
}

TEST_CASE("with no feasible graph the most fused one's reason is returned",
          "[pipeline]") {
  Fake f;
  PlanRequest req;
  req.budget = 5000;
  auto c = chooseAttention(f.variants(2), req);
  REQUIRE(!static_cast<bool>(c));
  CHECK(llvm::toString(c.takeError()) == "no room with 2 fused");
}

TEST_CASE("an error other than Infeasible in any graph ends the search",
          "[pipeline]") {
  Fake f;
  f.seconds = {{0, 1.0}, {2, 0.5}};
  f.broken[1] = "residency lost";
  PlanRequest req;
  req.budget = 5000;
  auto c = chooseAttention(f.variants(2), req);
  REQUIRE(!static_cast<bool>(c));
  llvm::Error err = c.takeError();
  CHECK(err.isA<InternalError>());
  llvm::consumeError(std::move(err));
}

TEST_CASE("with the host tier the most fused graph chooses the homing and "
          "the others start from it",
          "[pipeline][tiers]") {
  Fake f;
  f.seconds = {{0, 3.0}, {1, 2.0}, {2, 2.0}, {4, 2.5}}; // 3 does not fit
  PlanRequest req;
  req.budget = 5000;
  req.hostBudget = 1 << 20;
  auto c = chooseAttention(f.variants(4), req);
  REQUIRE(static_cast<bool>(c));
  // Most fused first: 4 fused plans and homes nothing (no homed graph),
  // so the rest try homings from 0 bytes on.
  REQUIRE(f.asked.size() == 5);
  CHECK(f.asked[0].first == 4);
  CHECK(f.asked[0].second.homeBytesAtLeast == -1);
  for (size_t i = 1; i < f.asked.size(); ++i) {
    CHECK(f.asked[i].first == int64_t(4 - i));
    CHECK(f.asked[i].second.homeBytesAtLeast == 0);
  }
  // The fastest, a tie to the more fused, whatever the order tried.
  CHECK(c->tried[c->chosen].fused == 2);
  for (VariantOutcome &t : c->tried)
    if (!t.outcome)
      llvm::consumeError(t.outcome.takeError());
}
