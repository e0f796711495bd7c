//===- ReportFixture.h - A small planned model for report tests -*- C++ -*-===//
//
// One tiny plan with offloads, prefetches and stalls: six conv+relu layers
// on 4x16x16 images, batch 4, planned by the memfit policy at 60% of the
// ideal arena, with copies slow enough (16 KB per ms) that some do not hide
// behind compute.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_REPORTFIXTURE_H
#define MEMFIT_TESTS_REPORTFIXTURE_H

#include "codegen/PlanReport.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/Schedule.h"
#include "tests/GraphLiteral.h"

#include <memory>
#include <stdexcept>

namespace memfit::test {

struct ReportFixture {
  Graph g;
  TaskGraph tg;
  CostTable costs;
  Plan plan;
  Simulation sim;
  PlanContext ctx;
  PlanReport report;

  ReportFixture() {
    GraphLiteral L(4);
    ValueId x = L.input("x", {4, 16, 16});
    OpAttrs conv;
    conv.kernel = {3, 3};
    conv.pads = {1, 1, 1, 1};
    conv.strides = {1, 1};
    conv.dilations = {1, 1};
    for (int i = 0; i < 6; ++i) {
      std::string n = std::to_string(i);
      x = L.op(OpKind::Conv, "conv" + n, {x, L.weight("k" + n, {4, 4, 3, 3})},
               {4, 16, 16}, conv);
      x = L.op(OpKind::Relu, "relu" + n, {x}, {4, 16, 16});
    }
    L.head4(x);
    g = std::move(L.g);
    auto built = buildTaskGraph(g);
    if (!built)
      throw std::runtime_error(llvm::toString(built.takeError()));
    tg = std::move(*built);
    tg.graph = &g;

    // 1 ms per sample per task; forward convolutions also have a 2x faster
    // algorithm whose workspace is the size of their output.
    costs.subBatch = 4;
    costs.d2hBytesPerSecond = costs.h2dBytesPerSecond = 16e6;
    costs.copyLatencySeconds = 0;
    for (const Task &t : tg.tasks) {
      std::vector<AlgoCost> algos;
      double secs = 1e-3 * 4;
      if (t.kind == TaskKind::Forward && t.op >= 0 &&
          g.ops[t.op].kind == OpKind::Conv)
        algos.push_back(
            {1, "fast", secs / 2, tg.blocks[t.writes[0]].bytesAt(4), false});
      algos.push_back({0, "baseline", secs, 0, true});
      costs.tasks.push_back(algos);
    }
    auto ideal = schedule(tg, costs, builtOrder(tg),
                          {.policy = Policy::Ideal, .budget = 0, .batch = 4});
    if (!ideal)
      throw std::runtime_error(llvm::toString(ideal.takeError()));
    int64_t budget = ideal->residentBytes + ideal->arenaBytes * 6 / 10;
    auto p = schedule(tg, costs, builtOrder(tg),
                      {.policy = Policy::Memfit, .budget = budget, .batch = 4});
    if (!p)
      throw std::runtime_error(llvm::toString(p.takeError()));
    plan = std::move(*p);
    if (auto err = verifyPlan(tg, plan))
      throw std::runtime_error(llvm::toString(std::move(err)));
    sim = simulate(tg, plan, costs);
    Simulation idealSim = simulate(tg, *ideal, costs);
    summarize(plan, sim, idealSim.iterationSeconds);

    ctx.modelFile = "chain.onnx";
    ctx.device = "test-device";
    ctx.idealSeconds = idealSim.iterationSeconds;
    ctx.idealPeakBytes = ideal->totalBytes();
    ctx.lowerBoundBytes = 1234;
    ctx.lowerBoundTask = "BP-data(conv0)";
    ctx.attention = "a note";
    ctx.costs = &costs;
    report = buildPlanReport(tg, plan, sim, ctx);
  }
};

/// Built once: the tests only read it.
inline const ReportFixture &reportFixture() {
  static const ReportFixture f;
  return f;
}

} // namespace memfit::test

#endif
