//===- Buckets.cpp - Gradient buckets of data-parallel training -----------===//
#include "compiler/ir/Buckets.h"

#include <algorithm>
#include <map>

namespace memfit {

std::vector<GradientBucket> gradientBuckets(const TaskGraph &tg,
                                            const Plan &plan) {
  if (!tg.dp.active())
    return {};
  // The gradient each update reads, and the weight it belongs to.
  std::map<BlockId, BlockId> weightOfGrad;
  for (const Task &t : tg.tasks) {
    if (t.kind != TaskKind::Update)
      continue;
    BlockId w = -1, g = -1;
    for (BlockId b : t.reads) {
      if (tg.blocks[b].kind == BlockKind::Weight)
        w = b;
      if (tg.blocks[b].kind == BlockKind::WeightGrad)
        g = b;
    }
    if (w >= 0 && g >= 0)
      weightOfGrad[g] = w;
  }
  std::map<BlockId, int32_t> lastWrite;
  for (int32_t i = 0; i < (int32_t)plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::Run)
      continue;
    for (BlockId b : tg.tasks[in.task].writes)
      if (weightOfGrad.count(b))
        lastWrite[b] = i;
  }
  std::vector<std::pair<int32_t, BlockId>> ready; // (instruction, gradient)
  for (auto [g, w] : weightOfGrad) {
    auto it = lastWrite.find(g);
    ready.push_back({it == lastWrite.end() ? -1 : it->second, g});
  }
  std::sort(ready.begin(), ready.end());
  std::vector<GradientBucket> out;
  for (auto [at, g] : ready) {
    BlockId w = weightOfGrad.at(g);
    int64_t bytes = tg.blocks[w].bytesAt(1);
    if (out.empty() ||
        (out.back().bytes > 0 && out.back().bytes + bytes > tg.dp.bucketBytes))
      out.emplace_back();
    GradientBucket &b = out.back();
    b.weights.push_back(w);
    b.bytes += bytes;
    b.readyAfter = std::max(b.readyAfter, at);
  }
  return out;
}

} // namespace memfit
