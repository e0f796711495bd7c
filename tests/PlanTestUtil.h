//===- PlanTestUtil.h - Zoo models planned end to end in tests --*- C++ -*-===//
#ifndef MEMFIT_TESTS_PLANTESTUTIL_H
#define MEMFIT_TESTS_PLANTESTUTIL_H

#include "compiler/autodiff/Autodiff.h"
#include "compiler/cost/CostModel.h"
#include "compiler/onnx/OnnxImport.h"
#include "models/Zoo.h"
#include "passes/search/Pipeline.h"

#include <catch2/catch.hpp>

#include <map>

namespace memfit::test {

/// A zoo model at a batch, planned with a device's analytic tables (the
/// K40m unless named).
struct Planned {
  TaskGraph tg;
  std::unique_ptr<CostModel> model;
  std::map<int64_t, CostTable> tables;
  Planned(const std::string &name, int64_t batch,
          const std::string &device = "k40m", TrainingConfig cfg = {}) {
    auto bytes = buildZooModel(name, {});
    REQUIRE(static_cast<bool>(bytes));
    ImportOptions io;
    io.batch = batch;
    io.keepWeightData = false;
    auto g = importOnnxBytes(*bytes, name + ".onnx", io);
    REQUIRE(static_cast<bool>(g));
    graph = std::move(*g);
    auto t = buildTaskGraph(graph, cfg);
    REQUIRE(static_cast<bool>(t));
    tg = std::move(*t);
    auto m = makeCostModel(device, "");
    REQUIRE(static_cast<bool>(m));
    model = std::move(*m);
  }
  llvm::Expected<PlanOutcome> plan(double fraction, bool statistics,
                                   int64_t forced = 0, bool chunking = true) {
    PlanRequest req;
    req.chunking = chunking;
    req.batch = graph.batch;
    req.budgetFraction = fraction;
    req.subBatchStatistics = statistics;
    req.forcedSubBatch = forced;
    req.refine = refine;
    return planTraining(
        tg, [&](int64_t b) -> const CostTable & { return table(b); }, req);
  }
  const CostTable &table(int64_t b) {
    auto it = tables.find(b);
    if (it == tables.end())
      it = tables.emplace(b, buildCostTable(*model, tg, b)).first;
    return it->second;
  }
  Graph graph;
  bool refine = true; // PlanRequest::refine
};

} // namespace memfit::test

#endif
