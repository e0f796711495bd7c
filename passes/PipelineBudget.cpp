//===- PipelineBudget.cpp - The budget a request asks for -----------------===//
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/PipelineSteps.h"

namespace memfit::pipeline {

llvm::Expected<int64_t> resolveBudget(const TaskGraph &tg,
                                      const PlanRequest &req,
                                      const LowerBound &lb,
                                      int64_t idealPeakBytes) {
  int64_t budget = req.budget;
  if (req.budgetFraction > 0)
    budget = static_cast<int64_t>(req.budgetFraction *
                                  static_cast<double>(idealPeakBytes));
  if (req.budgetIsLowerBound)
    budget = lb.bytes;
  if (req.policy == Policy::Ideal)
    budget = idealPeakBytes;
  if (budget >= lb.bytes)
    return budget;
  // Say what would help: below sub-batch 1 a smaller batch changes nothing,
  // so only the weight side or the largest task can give.
  std::string help =
      lb.weightSideBytes >= lb.taskBytes
          ? "the weights, their gradients and the optimizer state dominate: "
            "train without momentum (--momentum 0; Adam keeps two buffers "
            "per weight) or a smaller model"
      : lb.subBatch > 1
          ? llvm::formatv(
                "that task dominates, and BatchNorm's statistics over the "
                "batch keep the plan from splitting it {1}: give more "
                "memory, a smaller --batch, or --sub-batch-statistics (each "
                "sub-batch then normalized by its own statistics, which is "
                "not what the model computes; Mmin at sub-batch 1 is {0})",
                formatBytes(computeLowerBound(tg, 1).bytes),
                lb.subBatch < req.batch
                    ? llvm::formatv("further than chunks of {0}", lb.subBatch)
                          .str()
                    : std::string("into smaller pieces"))
                .str()
          : "that task dominates; a smaller batch does not help below "
            "sub-batch 1: give more memory or a model with smaller "
            "activations";
  if (budget < lb.weightSideBytes)
    help = "the budget does not even hold the weights, their gradients "
           "and the optimizer state";
  return makeErrorF(
      "budget {0} is below the lower bound Mmin = {1} ({2} bytes): "
      "weights, gradients and optimizer state take {3}, and task {4} "
      "needs {5} at sub-batch {6} with no workspace; {7}",
      formatBytes(budget), formatBytes(lb.bytes), lb.bytes,
      formatBytes(lb.weightSideBytes),
      quoteName(lb.task >= 0 ? tg.tasks[lb.task].name : ""),
      formatBytes(lb.taskBytes), lb.subBatch, help);
}

} // namespace memfit::pipeline
