//===- PipelineSearchTest.cpp - Keeping the best candidate plan -----------===//
#include "passes/PipelineSteps.h"

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
  PlanOutcome out;
  CandidateSearch search{tg, tables, order, req, req, out, std::nullopt};

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
  h.fail(8, makeError("no room at sub-batch 8"));
  h.succeed(4, 2.0);
  h.succeed(2, 1.5);
  auto best = h.search.takeBest();
  REQUIRE(static_cast<bool>(best));
  CHECK(best->plan.subBatch == 2);
  CHECK(h.out.tried.size() == 2);
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
  h.fail(8, makeError("first"));
  h.fail(4, makeError("second"));
  auto best = h.search.takeBest();
  REQUIRE(!static_cast<bool>(best));
  CHECK(toString(best.takeError()) == "first");
}
