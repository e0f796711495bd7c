//===- LowerBound.cpp - The smallest budget any plan can meet -------------===//
#include "passes/LowerBound.h"

namespace memfit {

LowerBound computeLowerBound(const TaskGraph &tg, int64_t subBatch) {
  LowerBound lb;
  lb.subBatch = subBatch;
  lb.weightSideBytes = tg.weightSideBytes();
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    int64_t fp = tg.taskFootprint(t, subBatch);
    if (fp > lb.taskBytes) {
      lb.taskBytes = fp;
      lb.task = t;
    }
  }
  lb.bytes = lb.weightSideBytes + lb.taskBytes;
  return lb;
}

} // namespace memfit
