//===- PipelineTest.cpp - What planTraining promises, end to end ----------===//
//
// Exact by default: a model with BatchNorm is planned in whole batches
// unless the request allows sub-batch statistics; a model without it keeps
// free sub-batching, which is exact.
//
//===----------------------------------------------------------------------===//
#include "passes/Pipeline.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/cost/CostModel.h"
#include "compiler/onnx/OnnxImport.h"
#include "models/Zoo.h"

#include <catch2/catch.hpp>

#include <map>

using namespace memfit;

namespace {

/// A zoo model at a batch, with the analytic K40m tables.
struct Planned {
  TaskGraph tg;
  std::unique_ptr<CostModel> model;
  std::map<int64_t, CostTable> tables;
  Planned(const std::string &name, int64_t batch) {
    auto bytes = buildZooModel(name, {});
    REQUIRE(static_cast<bool>(bytes));
    ImportOptions io;
    io.batch = batch;
    io.keepWeightData = false;
    auto g = importOnnxBytes(*bytes, name + ".onnx", io);
    REQUIRE(static_cast<bool>(g));
    graph = std::move(*g);
    auto t = buildTaskGraph(graph);
    REQUIRE(static_cast<bool>(t));
    tg = std::move(*t);
    auto m = makeCostModel("k40m", "");
    REQUIRE(static_cast<bool>(m));
    model = std::move(*m);
  }
  llvm::Expected<PlanOutcome> plan(double fraction, bool statistics,
                                   int64_t forced = 0) {
    PlanRequest req;
    req.batch = graph.batch;
    req.budgetFraction = fraction;
    req.subBatchStatistics = statistics;
    req.forcedSubBatch = forced;
    return planTraining(
        tg,
        [&](int64_t b) -> const CostTable & {
          auto it = tables.find(b);
          if (it == tables.end())
            it = tables.emplace(b, buildCostTable(*model, tg, b)).first;
          return it->second;
        },
        req);
  }
  Graph graph;
};

} // namespace

TEST_CASE("a model with BatchNorm is planned in whole batches unless asked",
          "[pipeline][exact]") {
  Planned m("tiny-bn", 16);
  REQUIRE(statisticsOverBatch(m.tg));
  // At 70% of the ideal peak the search splits the batch when allowed; the
  // exact plan cannot go below its floor at the whole batch, and says how
  // to go lower.
  auto split = m.plan(0.7, true);
  REQUIRE(static_cast<bool>(split));
  REQUIRE(split->plan.numSubBatches > 1);
  CHECK_FALSE(split->exact);
  CHECK(split->lowerBound.subBatch == 1);
  auto refused = m.plan(0.7, false);
  REQUIRE_FALSE(static_cast<bool>(refused));
  std::string why = llvm::toString(refused.takeError());
  CHECK(why.find("at sub-batch 16") != std::string::npos);
  CHECK(why.find("--sub-batch-statistics") != std::string::npos);
  auto exact = m.plan(0.9, false);
  REQUIRE(static_cast<bool>(exact));
  CHECK(exact->plan.numSubBatches == 1);
  CHECK(exact->exact);
  CHECK(exact->lowerBound.subBatch == 16);
  CHECK(exact->lowerBound.bytes > split->lowerBound.bytes);
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
