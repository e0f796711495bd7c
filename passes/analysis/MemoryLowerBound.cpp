//===- LowerBound.cpp - The smallest budget any plan can meet -------------===//
#include "passes/analysis/MemoryLowerBound.h"
#include "compiler/cost/AnalyticCost.h"

namespace memfit {

LowerBound computeLowerBound(const TaskGraph &tg, int64_t subBatch) {
  LowerBound lb;
  lb.subBatch = subBatch;
  lb.weightSideBytes = tg.weightSideBytes();
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    if (tg.runsOnHost(tg.tasks[t]))
      continue; // no device memory
    // A 16-bit convolution's backward-filter needs its staging room even
    // with the zero-workspace algorithm.
    int64_t fp = tg.taskFootprint(t, subBatch) + convGradStagingBytes(tg, t);
    if (fp > lb.taskBytes) {
      lb.taskBytes = fp;
      lb.task = t;
    }
  }
  lb.bytes = lb.weightSideBytes + lb.taskBytes;
  return lb;
}

} // namespace memfit
