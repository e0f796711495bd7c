//===- Recompute.cpp - Which forward blocks to drop and recompute ---------===//
#include "passes/Recompute.h"

#include "passes/Liveness.h"
#include "passes/Schedule.h"

#include <cmath>
#include <set>

namespace memfit {
namespace {

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
                          int64_t b, int64_t segmentBudget) {
  std::vector<BlockId> cutList = cutBlocks(tg, order);
  std::set<BlockId> cuts(cutList.begin(), cutList.end());
  std::vector<bool> recomputable = recomputableBlocks(tg);
  ChenSegments seg{std::vector<bool>(tg.blocks.size(), false), 0, 0};
  int64_t temp = 0;
  for (TaskId t : forwardTasks(tg, order))
    for (BlockId v : tg.tasks[t].writes) {
      if (!recomputable[v])
        continue;
      int64_t size = tg.blocks[v].bytesAt(b);
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
                                              int64_t b) {
  ChenSegments zero = chenSegments(tg, order, b, 0);
  double center =
      std::sqrt(double(zero.checkpointBytes) * double(zero.segmentPeak));
  std::vector<std::vector<bool>> out{zero.drop};
  for (int k = 0; k < 6; ++k) {
    // Six points from B / sqrt(2) to sqrt(2) B, evenly on a log scale.
    double f = std::pow(2.0, -0.5 + k / 5.0);
    auto budget = static_cast<int64_t>(center * f);
    std::vector<bool> d = chenSegments(tg, order, b, budget).drop;
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
    if (drop[b] && tg.graph->ops[tg.tasks[tg.blocks[b].writers[0]].op].kind ==
                       OpKind::Conv)
      drop[b] = false;
  return drop;
}

} // namespace memfit
