//===- CollectivesTest.cpp - Data-parallel sizes, buckets, collectives ----===//
#include "compiler/autodiff/Autodiff.h"
#include "compiler/cost/CostModel.h"
#include "compiler/ir/Buckets.h"
#include "compiler/onnx/OnnxImport.h"
#include "models/Zoo.h"
#include "passes/analysis/Simulate.h"
#include "passes/search/Pipeline.h"

#include <catch2/catch.hpp>

#include <map>

using namespace memfit;

namespace {
/// The zoo's mlp (Gemm 16x32, ReLU, Gemm 32x10) at batch 8, one rank's
/// graph under `dp`, planned ideally on the H100 model.
struct DpModel {
  Graph graph;
  TaskGraph tg;
  std::unique_ptr<CostModel> model;
  std::map<int64_t, CostTable> tables;
  explicit DpModel(DataParallel dp) {
    auto bytes = buildZooModel("mlp", {});
    REQUIRE(static_cast<bool>(bytes));
    ImportOptions io;
    io.batch = 8;
    auto g = importOnnxBytes(*bytes, "mlp.onnx", io);
    REQUIRE(static_cast<bool>(g));
    graph = std::move(*g);
    TrainingConfig tc;
    tc.dp = dp;
    auto t = buildTaskGraph(graph, tc);
    REQUIRE(static_cast<bool>(t));
    tg = std::move(*t);
    auto m = makeCostModel("h100-sxm", "");
    REQUIRE(static_cast<bool>(m));
    model = std::move(*m);
  }
  const CostTable &table(int64_t b) {
    auto it = tables.find(b);
    if (it == tables.end())
      it = tables.emplace(b, buildCostTable(*model, tg, b)).first;
    return it->second;
  }
  PlanOutcome plan() {
    PlanRequest req;
    req.policy = Policy::Ideal;
    req.batch = 8;
    auto out = planTraining(
        tg, [&](int64_t b) -> const CostTable & { return table(b); }, req);
    REQUIRE(static_cast<bool>(out));
    return std::move(*out);
  }
  int64_t bytesOf(BlockKind k) const {
    int64_t total = 0;
    for (const Block &b : tg.blocks)
      if (b.kind == k)
        total += b.bytesAt(1);
    return total;
  }
};
} // namespace

TEST_CASE("ring collectives cost what NCCL's ring algorithm moves",
          "[collectives]") {
  CollectiveCost c{4, 100e9, 5e-6, "nvlink"};
  // Each of the 2 phases: 3 steps of 5 us, and 3/4 of 1 GB at 100 GB/s.
  CHECK(c.allReduceSeconds(1000000000) == Approx(2 * (15e-6 + 7.5e-3)));
  CHECK(c.reduceScatterSeconds(1000000000) == Approx(15e-6 + 7.5e-3));
  CHECK(CollectiveCost{1, 100e9, 5e-6, "nvlink"}.allReduceSeconds(1000) == 0);
}

TEST_CASE("sharding sizes the weight side per rank", "[collectives]") {
  // mlp's trainable weights: 16x32 + 32 + 32x10 + 10 = 874 floats.
  DpModel one({});
  DpModel s1({.ranks = 4, .shard = 1});
  DpModel s2({.ranks = 4, .shard = 2});
  CHECK(one.bytesOf(BlockKind::Momentum) == 874 * 4);
  // Each tensor in 4 slices of ceil(n / 4): 128 + 8 + 80 + 3 floats.
  CHECK(s1.bytesOf(BlockKind::Momentum) == (128 + 8 + 80 + 3) * 4);
  CHECK(s1.bytesOf(BlockKind::WeightGrad) == 874 * 4);
  CHECK(s2.bytesOf(BlockKind::WeightGrad) == (128 + 8 + 80 + 3) * 4);
  CHECK(s1.tg.collectiveBufferBytes == 0);
  // Two buckets the size of the largest gradient (16x32 floats).
  CHECK(s2.tg.collectiveBufferBytes == 2 * 512 * 4);
  CHECK(s2.tg.replicatedWeightSideBytes == one.tg.weightSideBytes());
  // Weights whole; gradient and momentum slices; the buckets; the loss.
  CHECK(s2.tg.weightSideBytes() ==
        874 * 4 + 2 * (128 + 8 + 80 + 3) * 4 + 2 * 512 * 4 + 4);
}

TEST_CASE("buckets follow the gradients' readiness and overlap the backward",
          "[collectives]") {
  DataParallel dp{.ranks = 2};
  dp.bucketBytes = 1; // every gradient a bucket of its own
  DpModel m(dp);
  PlanOutcome out = m.plan();
  std::vector<GradientBucket> bs = gradientBuckets(m.tg, out.plan);
  REQUIRE(bs.size() == 4);
  for (size_t k = 0; k < bs.size(); ++k) {
    REQUIRE(bs[k].weights.size() == 1);
    if (k)
      CHECK(bs[k - 1].readyAfter <= bs[k].readyAfter);
    // Nothing in the round writes the gradient after the bucket is ready.
    BlockId grad = m.tg.gradBlock[m.tg.blocks[bs[k].weights[0]].value];
    for (size_t i = bs[k].readyAfter + 1; i < out.plan.round.size(); ++i) {
      const Instr &in = out.plan.round[i];
      if (in.kind != InstrKind::Run)
        continue;
      for (BlockId b : m.tg.tasks[in.task].writes)
        CHECK(b != grad);
    }
  }
  // The second layer's gradients are final first (the backward runs in
  // reverse).
  CHECK(m.tg.blocks[bs[0].weights[0]].bytesAt(1) <= 32 * 10 * 4);

  const Simulation &sim = out.sim;
  REQUIRE(sim.collectives.size() == bs.size());
  double stream = 0;
  for (const Simulation::Collective &c : sim.collectives) {
    CHECK(c.start >= sim.end[bs[c.bucket].readyAfter] - 1e-15);
    CHECK(c.start >= stream - 1e-15);
    stream = c.end;
  }
  // Without the collectives, the same plan is no slower.
  TaskGraph alone = m.tg;
  alone.dp = {};
  Simulation plain = simulate(alone, out.plan, m.table(8));
  CHECK(sim.iterationSeconds >= plain.iterationSeconds);
  CHECK(sim.exposedCollectiveSeconds ==
        Approx(sim.iterationSeconds - plain.iterationSeconds));
}
