//===- SubBatch.cpp - Sub-batch size selection (moDNN Eq. 3) --------------===//
#include "passes/search/SubBatch.h"
#include "passes/schedule/Schedule.h"

#include <algorithm>
#include <set>

namespace memfit {

int64_t maxTaskNeed(const TaskGraph &tg, const CostTable &costs) {
  int64_t worst = 0;
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t)
    worst = std::max(worst, tg.taskFootprint(t, costs.subBatch) +
                                costs.fastest(t).workspace);
  return worst;
}

int64_t selectSubBatch(const TaskGraph &tg, const CostTableFn &tableAt,
                       int64_t batch, int64_t budget) {
  int64_t room = arenaBytes(tg, budget);
  if (room <= 0)
    return 1;
  int64_t subBatch = batch;
  std::set<int64_t> seen;
  for (int iter = 0; iter < 32; ++iter) {
    seen.insert(subBatch);
    int64_t need = maxTaskNeed(tg, tableAt(subBatch));
    int64_t next = need > 0
                       ? static_cast<int64_t>((__int128)room * subBatch / need)
                       : batch;
    next = std::clamp<int64_t>(next, 1, batch);
    if (next == subBatch)
      return subBatch;
    if (seen.count(next))
      return std::min(subBatch, next); // a cycle: take its smaller end
    subBatch = next;
  }
  return subBatch;
}

bool statisticsOverBatch(const TaskGraph &tg) {
  for (const Block &b : tg.blocks)
    if (b.kind == BlockKind::Stats)
      return true;
  return false;
}

std::vector<int64_t> subBatchCandidates(int64_t eq3, int64_t batch) {
  // Eq. 3 prices every task with its fastest algorithm's workspace, so
  // larger sub-batches may still fit with leaner algorithms: the halvings
  // of the batch down to Eq. 3's b are candidates too, and a few below it.
  // Between the batch and half of Eq. 3's b, every count of sub-batches K
  // with its most even split, ceil(B / K): a larger b with the same K runs
  // as many rounds with a bigger peak, so it never wins.
  std::set<int64_t> c{eq3};
  for (int64_t k = 1; k <= batch; ++k) {
    int64_t s = (batch + k - 1) / k;
    if (s < eq3 / 2)
      break;
    c.insert(s);
  }
  for (int64_t s = batch; s >= 1 && s >= eq3 / 8; s /= 2)
    c.insert(s);
  for (int64_t s = eq3 / 2; s >= 1 && s >= eq3 / 8; s /= 2)
    c.insert(s);
  return {c.begin(), c.end()};
}

} // namespace memfit
