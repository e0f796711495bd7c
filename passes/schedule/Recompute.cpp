//===- Recompute.cpp - Which forward blocks to drop and recompute ---------===//
#include "passes/schedule/Recompute.h"

#include "passes/analysis/Liveness.h"
#include "passes/schedule/Schedule.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace memfit {
namespace {

/// cheapestDropSet keeps every recompute within this many forward runs.
constexpr int kMaxChain = 4;

/// Forward tasks in order and, per block, how many forward tasks read it.
std::vector<TaskId> forwardTasks(const TaskGraph &tg,
                                 const std::vector<TaskId> &order) {
  std::vector<TaskId> fwd;
  for (TaskId t : order)
    if (tg.tasks[t].kind == TaskKind::Forward)
      fwd.push_back(t);
  return fwd;
}

} // namespace

std::vector<BlockId> cutBlocks(const TaskGraph &tg,
                               const std::vector<TaskId> &order) {
  std::vector<TaskId> fwd = forwardTasks(tg, order);
  std::vector<int> readersLeft(tg.blocks.size(), 0);
  for (TaskId t : fwd)
    for (BlockId b : tg.tasks[t].reads)
      ++readersLeft[storageOf(tg, b)];
  std::set<BlockId> live;
  std::vector<BlockId> cuts;
  for (TaskId t : fwd) {
    const Task &task = tg.tasks[t];
    for (BlockId b : task.reads) {
      BlockId s = storageOf(tg, b);
      if (--readersLeft[s] == 0)
        live.erase(s);
    }
    BlockId out = -1;
    for (BlockId b : task.writes) {
      BlockId s = storageOf(tg, b);
      if (tg.blocks[s].kind != BlockKind::Activation &&
          tg.blocks[s].kind != BlockKind::Input)
        continue;
      if (readersLeft[s] > 0)
        live.insert(s);
      if (tg.blocks[b].viewOf < 0)
        out = s;
    }
    if (out >= 0 && live.size() == 1 && *live.begin() == out)
      cuts.push_back(out);
  }
  return cuts;
}

ChenSegments chenSegments(const TaskGraph &tg, const std::vector<TaskId> &order,
                          int64_t subBatch, int64_t segmentBudget) {
  std::vector<BlockId> cutList = cutBlocks(tg, order);
  std::set<BlockId> cuts(cutList.begin(), cutList.end());
  std::vector<bool> recomputable = recomputableBlocks(tg);
  ChenSegments seg{std::vector<bool>(tg.blocks.size(), false), 0, 0};
  int64_t temp = 0;
  for (TaskId t : forwardTasks(tg, order))
    for (BlockId v : tg.tasks[t].writes) {
      if (!recomputable[v])
        continue;
      int64_t size = tg.blocks[v].bytesAt(subBatch);
      temp += size;
      if (cuts.count(v) && temp > segmentBudget) {
        seg.checkpointBytes += size;
        seg.segmentPeak = std::max(seg.segmentPeak, temp);
        temp = 0; // m(v) = 0: kept
      } else {
        seg.drop[v] = true; // m(v) = 1: dropped, recomputed
      }
    }
  seg.segmentPeak = std::max(seg.segmentPeak, temp);
  return seg;
}

std::vector<std::vector<bool>> chenCandidates(const TaskGraph &tg,
                                              const std::vector<TaskId> &order,
                                              int64_t subBatch) {
  ChenSegments zero = chenSegments(tg, order, subBatch, 0);
  double center =
      std::sqrt(double(zero.checkpointBytes) * double(zero.segmentPeak));
  std::vector<std::vector<bool>> out{zero.drop};
  for (int k = 0; k < 6; ++k) {
    // Six points from B / sqrt(2) to sqrt(2) B, evenly on a log scale.
    double f = std::pow(2.0, -0.5 + k / 5.0);
    auto budget = static_cast<int64_t>(center * f);
    std::vector<bool> d = chenSegments(tg, order, subBatch, budget).drop;
    bool seen = false;
    for (const auto &o : out)
      seen = seen || o == d;
    if (!seen)
      out.push_back(std::move(d));
  }
  return out;
}

std::vector<bool> superNeuronsDropSet(const TaskGraph &tg) {
  std::vector<bool> drop = recomputableBlocks(tg);
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (drop[b] &&
        isConvolution(tg.layers[tg.tasks[tg.blocks[b].writers[0]].op].kind))
      drop[b] = false;
  return drop;
}

std::vector<bool> cheapestDropSet(const TaskGraph &tg, const CostTable &costs,
                                  int64_t bytes) {
  std::vector<bool> drop(tg.blocks.size(), false);
  if (bytes <= 0)
    return drop;
  std::vector<bool> recomputable = recomputableBlocks(tg);
  std::vector<bool> neededBack(tg.blocks.size(), false);
  for (const Task &t : tg.tasks)
    if (t.kind != TaskKind::Forward)
      for (BlockId b : t.reads)
        neededBack[storageOf(tg, b)] = true;
  std::vector<std::pair<double, BlockId>> byCost;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    int64_t size = tg.blocks[b].bytesAt(costs.subBatch);
    if (!recomputable[b] || !neededBack[b] || size <= 0)
      continue;
    double secs = costs.fastest(tg.blocks[b].writers[0]).seconds;
    byCost.push_back({secs / static_cast<double>(size), b});
  }
  std::sort(byCost.begin(), byCost.end()); // ties: lower block id
  // How many forward runs regenerating b takes: its producer, plus the
  // chain of each input that is dropped or gone by the backward pass
  // (never needed there, or overwritten in place). Stops counting past
  // `limit`.
  std::function<int(BlockId, int)> chain = [&](BlockId b, int limit) {
    if (limit <= 0)
      return 1;
    int longest = 0;
    for (BlockId in : tg.tasks[tg.blocks[b].writers[0]].reads) {
      BlockId x = storageOf(tg, in);
      if (!recomputable[x] || (neededBack[x] && !drop[x]))
        continue; // on hand when the backward pass needs b
      longest = std::max(longest, chain(x, limit - 1));
    }
    return 1 + longest;
  };
  int64_t got = 0;
  for (auto [perByte, b] : byCost) {
    if (got >= bytes)
      break;
    drop[b] = true;
    // Keep every recompute short: b's own chain, and that of each dropped
    // block that b's forward readers produce.
    bool shortChains = chain(b, kMaxChain) <= kMaxChain;
    for (TaskId r : tg.blocks[b].readers)
      if (shortChains && tg.tasks[r].kind == TaskKind::Forward)
        for (BlockId o : tg.tasks[r].writes)
          if (recomputable[o] && (drop[o] || !neededBack[o]))
            shortChains = shortChains && chain(o, kMaxChain) <= kMaxChain;
    if (!shortChains) {
      drop[b] = false;
      continue;
    }
    got += tg.blocks[b].bytesAt(costs.subBatch);
  }
  return drop;
}

} // namespace memfit
