//===- PipelineTest.cpp - What planTraining promises, end to end ----------===//
//
// Exact by default: a model with BatchNorm is planned in whole batches, or
// with the batch split into chunks inside one round, unless the request
// allows sub-batch statistics; a model without it keeps free sub-batching,
// which is exact.
//
//===----------------------------------------------------------------------===//
#include "passes/search/Pipeline.h"
#include "tests/PlanTestUtil.h"

#include <catch2/catch.hpp>

using namespace memfit;
using memfit::test::Planned;

TEST_CASE("a model with BatchNorm is planned in whole batches unless asked",
          "[pipeline][exact]") {
  Planned m("tiny-bn", 16);
  REQUIRE(statisticsOverBatch(m.tg));
  // At 70% of the ideal peak the search splits the batch when allowed
  // (chunks, exact, left out here); the exact plan cannot go below its
  // floor at the whole batch, and says how to go lower.
  auto split = m.plan(0.7, true, 0, /*chunking=*/false);
  REQUIRE(static_cast<bool>(split));
  REQUIRE(split->plan.numSubBatches > 1);
  CHECK_FALSE(split->exact);
  CHECK(split->lowerBound.subBatch == 1);
  // With chunks allowed too, the exact plan in chunks is one more
  // candidate: the search keeps whichever is faster.
  auto either = m.plan(0.7, true);
  REQUIRE(static_cast<bool>(either));
  CHECK(either->plan.summary.plannedSeconds <=
        split->plan.summary.plannedSeconds * (1 + 1e-9));
  CHECK(either->exact == (either->plan.numSubBatches == 1));
  auto refused = m.plan(0.7, false, 0, /*chunking=*/false);
  REQUIRE_FALSE(static_cast<bool>(refused));
  std::string why = llvm::toString(refused.takeError());
  CHECK(why.find("at sub-batch 16") != std::string::npos);
  CHECK(why.find("--sub-batch-statistics") != std::string::npos);
  auto exact = m.plan(0.9, false, 0, /*chunking=*/false);
  REQUIRE(static_cast<bool>(exact));
  CHECK(exact->plan.numSubBatches == 1);
  CHECK(exact->exact);
  CHECK(exact->lowerBound.subBatch == 16);
  CHECK(exact->lowerBound.bytes > split->lowerBound.bytes);
  // memfit's own search splits the batch into chunks inside the round
  // instead, which keeps the statistics over the whole batch: the same
  // 70% now has an exact plan, and the floor is at the smallest chunk.
  auto chunked = m.plan(0.7, false);
  REQUIRE(static_cast<bool>(chunked));
  CHECK(chunked->exact);
  REQUIRE(chunked->chunked);
  CHECK(chunked->plan.numSubBatches == 1);
  CHECK(chunked->plan.chunks == chunked->chunked->tg.chunks);
  CHECK(chunked->plan.chunks * chunked->plan.subBatch == 16);
  CHECK(chunked->lowerBound.subBatch == 1);
  CHECK(chunked->lowerBound.bytes < exact->lowerBound.bytes);
  CHECK(chunked->plan.totalBytes() <= chunked->budget);
  // Asking for a smaller sub-batch without allowing its statistics is an
  // error that says how to allow it.
  auto forced = m.plan(1.0, false, 4);
  REQUIRE_FALSE(static_cast<bool>(forced));
  CHECK(llvm::toString(forced.takeError()).find("--sub-batch-statistics") !=
        std::string::npos);
}

TEST_CASE("a model without batch statistics keeps free sub-batching, exactly",
          "[pipeline][exact]") {
  Planned m("tiny-cnn", 16);
  REQUIRE_FALSE(statisticsOverBatch(m.tg));
  auto out = m.plan(0.45, false);
  REQUIRE(static_cast<bool>(out));
  CHECK(out->plan.numSubBatches > 1);
  CHECK(out->exact);
}
