//===- PipelineSearchTest.cpp - Keeping the best candidate plan -----------===//
#include "passes/search/PipelineSteps.h"

#include "compiler/support/Diagnostics.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::pipeline;

namespace {

/// A search whose merge is driven by hand: the tables, order and graph are
/// never consulted by merge and takeBest.
struct Harness {
  TaskGraph tg;
  CostTableFn tables = [](int64_t) -> const CostTable & {
    static CostTable none;
    return none;
  };
  std::vector<TaskId> order;
  PlanRequest req;
  CandidateSearch search{{tg, tables, order, req, req}, std::nullopt};

  void succeed(int64_t subBatch, double seconds) {
    Candidate c;
    c.plan.subBatch = subBatch;
    c.sim.iterationSeconds = seconds;
    llvm::Expected<Candidate> e(std::move(c));
    search.merge(Variant{.subBatch = subBatch}, e);
  }
  void fail(int64_t subBatch, llvm::Error err) {
    llvm::Expected<Candidate> e(std::move(err));
    search.merge(Variant{.subBatch = subBatch}, e);
  }
};

} // namespace

TEST_CASE("a candidate that does not fit is dropped when another wins",
          "[pipeline]") {
  Harness h;
  h.fail(8, makeInfeasibleF("no room at sub-batch {0}", 8));
  h.succeed(4, 2.0);
  h.succeed(2, 1.5);
  auto best = h.search.takeBest();
  REQUIRE(static_cast<bool>(best));
  CHECK(best->plan.subBatch == 2);
  CHECK(h.search.record().tried.size() == 2);
}

TEST_CASE("an internal error of one candidate is never dropped", "[pipeline]") {
  Harness h;
  h.succeed(4, 2.0);
  h.fail(2, makeInternalError("residency lost"));
  h.succeed(1, 1.0);
  auto best = h.search.takeBest();
  REQUIRE(!static_cast<bool>(best));
  llvm::Error err = best.takeError();
  llvm::Error internal = takeInternalErrors(err);
  CHECK(toString(std::move(internal)) == "residency lost");
  CHECK(!err);
}

TEST_CASE("when every candidate fails the first user error is returned",
          "[pipeline]") {
  Harness h;
  h.fail(8, makeInfeasibleF("first"));
  h.fail(4, makeInfeasibleF("second"));
  auto best = h.search.takeBest();
  REQUIRE(!static_cast<bool>(best));
  llvm::Error err = best.takeError();
  CHECK(err.isA<Infeasible>());
  CHECK(toString(std::move(err)) == "first");
}

TEST_CASE("only an infeasible candidate is dropped, not another user error",
          "[pipeline]") {
  // A user error that is not Infeasible (a flag that cannot apply) says
  // something about the request, not about one candidate: a winner must
  // not hide it.
  Harness h;
  h.succeed(4, 2.0);
  h.fail(2, makeError("--sub-batch 2 is not allowed here"));
  h.fail(1, makeInfeasibleF("no room at sub-batch 1"));
  auto best = h.search.takeBest();
  REQUIRE(!static_cast<bool>(best));
  llvm::Error err = best.takeError();
  CHECK(!err.isA<Infeasible>());
  CHECK(toString(std::move(err)) == "--sub-batch 2 is not allowed here");
}

TEST_CASE("a cut-off candidate counts as abandoned, not as the reason",
          "[pipeline]") {
  Harness h;
  h.fail(8, llvm::make_error<CutoffError>(3.0));
  h.fail(4, makeInfeasibleF("no room at sub-batch 4"));
  auto best = h.search.takeBest();
  REQUIRE(!static_cast<bool>(best));
  CHECK(h.search.record().abandoned == 1);
  CHECK(toString(best.takeError()) == "no room at sub-batch 4");
}

TEST_CASE("the bound's shares round into drop and offload sets", "[pipeline]") {
  TaskGraph tg;
  tg.blocks.resize(4);
  IterationBound bound;
  // Block 0 mostly recomputed, 1 mostly copied, 2 recomputed more than
  // copied, 3 kept.
  bound.hints.peak = {{0.1, 0.7, 0.4, 0}, {0.9, 0.2, 0.6, 0}};
  bound.hints.mean = bound.hints.peak;
  std::vector<Variant> v = boundPhaseVariants(tg, bound, 16);
  REQUIRE(v.size() == 1); // the mean rounds the same: one variant
  CHECK(v[0].subBatch == 16);
  CHECK(v[0].drop == std::vector<bool>{true, false, true, false});
  CHECK(v[0].offload == std::vector<bool>{false, true, false, false});
  CHECK(v[0].as == Policy::Optimal);
  CHECK(v[0].chain);
  CHECK(v[0].guided);
  // Shares under one half are kept on the device; a different mean gives a
  // second variant.
  bound.hints.mean = {{0.3, 0.3, 0, 0.2}, {0.3, 0, 0.45, 0.6}};
  v = boundPhaseVariants(tg, bound, 16);
  REQUIRE(v.size() == 2);
  CHECK(v[1].drop == std::vector<bool>{false, false, false, true});
  CHECK(v[1].offload == std::vector<bool>{false, false, false, false});
  // Nothing away anywhere: no variant.
  bound.hints.peak = bound.hints.mean = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  CHECK(boundPhaseVariants(tg, bound, 16).empty());
}
