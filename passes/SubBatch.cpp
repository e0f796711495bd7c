//===- SubBatch.cpp - Sub-batch size selection (moDNN Eq. 3) --------------===//
#include "passes/SubBatch.h"

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
  int64_t room = budget - tg.weightSideBytes();
  if (room <= 0)
    return 1;
  int64_t b = batch;
  std::set<int64_t> seen;
  for (int iter = 0; iter < 32; ++iter) {
    seen.insert(b);
    int64_t need = maxTaskNeed(tg, tableAt(b));
    int64_t next =
        need > 0 ? static_cast<int64_t>((__int128)room * b / need) : batch;
    next = std::clamp<int64_t>(next, 1, batch);
    if (next == b)
      return b;
    if (seen.count(next))
      return std::min(b, next); // a cycle: take its smaller end
    b = next;
  }
  return b;
}

std::vector<int64_t> subBatchCandidates(int64_t eq3, int64_t batch) {
  // Eq. 3 prices every task with its fastest algorithm's workspace, so
  // larger sub-batches may still fit with leaner algorithms: the halvings
  // of the batch down to Eq. 3's b are candidates too, and a few below it.
  std::set<int64_t> c{eq3};
  for (int64_t b = batch; b >= 1 && b >= eq3 / 8; b /= 2)
    c.insert(b);
  for (int64_t b = eq3 / 2; b >= 1 && b >= eq3 / 8; b /= 2)
    c.insert(b);
  return {c.begin(), c.end()};
}

} // namespace memfit
