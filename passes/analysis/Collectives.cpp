//===- Collectives.cpp - Data-parallel collectives on their own stream ----===//
#include "passes/analysis/Collectives.h"

#include "compiler/ir/Buckets.h"

#include <algorithm>
#include <map>

namespace memfit {

void simulateCollectives(const TaskGraph &tg, const Plan &plan,
                         const CostTable &costs, const RoundEnds &rounds,
                         Simulation &sim) {
  if (!tg.dp.active())
    return;
  const DataParallel &dp = tg.dp;
  const CollectiveCost &cc = costs.collective;
  std::vector<GradientBucket> buckets = gradientBuckets(tg, plan);
  std::map<BlockId, int32_t> bucketOf;
  for (int32_t k = 0; k < (int32_t)buckets.size(); ++k)
    for (BlockId w : buckets[k].weights)
      bucketOf[w] = k;

  const int64_t rounds_ = plan.numSubBatches;
  double stream = 0; // when the collective stream is free
  std::vector<double> bucketEnd(buckets.size(), 0);
  auto place = [&](int32_t bucket, int32_t round, double ready, double dur) {
    double start = std::max(stream, ready);
    stream = start + dur;
    sim.collectives.push_back({bucket, round, start, stream});
    sim.collectiveSeconds += dur;
    return stream;
  };
  for (int64_t r = 0; r < rounds_; ++r) {
    bool last = r + 1 == rounds_;
    if (!last && dp.shard < 2)
      continue; // gradients accumulate whole; one collective per bucket
    double offset = double(r) * rounds.fullSeconds;
    const std::vector<double> &ends = last ? *rounds.last : *rounds.full;
    for (int32_t k = 0; k < (int32_t)buckets.size(); ++k) {
      const GradientBucket &b = buckets[k];
      double ready = offset + (b.readyAfter >= 0 ? ends[b.readyAfter] : 0.0);
      double dur = dp.shard == 0 ? cc.allReduceSeconds(b.bytes)
                                 : cc.reduceScatterSeconds(b.bytes);
      bucketEnd[k] = place(k, int32_t(r), ready, dur);
    }
  }

  // Updates in plan order, each after its bucket's collective; sharded,
  // a rank updates its slice of each weight.
  double t = double(rounds_ - 1) * rounds.fullSeconds + rounds.lastSeconds;
  double share = dp.shard >= 1 ? 1.0 / dp.ranks : 1.0;
  int64_t weightBytes = 0;
  for (size_t i = 0; i < plan.update.size(); ++i) {
    const Instr &in = plan.update[i];
    if (in.kind != InstrKind::Run)
      continue;
    double dur = (sim.updateEnd[i] - sim.updateStart[i]) * share;
    for (BlockId b : tg.tasks[in.task].reads)
      if (auto it = bucketOf.find(b); it != bucketOf.end()) {
        t = std::max(t, bucketEnd[it->second]);
        weightBytes += tg.blocks[b].bytesAt(1);
      }
    t += dur;
  }
  if (dp.shard >= 1)
    t = place(-1, int32_t(rounds_ - 1), t, cc.allGatherSeconds(weightBytes));
  double before = sim.iterationSeconds;
  sim.iterationSeconds = std::max({before, t, stream});
  sim.exposedCollectiveSeconds = sim.iterationSeconds - before;
}

} // namespace memfit
