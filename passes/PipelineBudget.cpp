//===- PipelineBudget.cpp - The budget a request asks for -----------------===//
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/PipelineSteps.h"

namespace memfit {

int64_t deviceBudget(const PlanRequest &req, int64_t idealPeakBytes,
                     int64_t lowerBoundBytes) {
  if (req.policy == Policy::Ideal)
    return idealPeakBytes + req.libraryReserve;
  if (req.budgetIsLowerBound)
    return lowerBoundBytes + req.libraryReserve;
  if (req.budgetFraction > 0)
    return static_cast<int64_t>(req.budgetFraction *
                                static_cast<double>(idealPeakBytes)) +
           req.libraryReserve;
  return req.budget;
}

} // namespace memfit

namespace memfit::pipeline {

llvm::Expected<int64_t> resolveBudget(const TaskGraph &tg,
                                      const PlanRequest &req,
                                      const LowerBound &lb,
                                      int64_t idealPeakBytes) {
  int64_t budget = deviceBudget(req, idealPeakBytes, lb.bytes);
  int64_t share = planShare(req, budget);
  if (share >= lb.bytes)
    return budget;
  if (req.libraryReserve > 0 && budget >= lb.bytes)
    return makeErrorF(
        "budget {0} less the library reserve {1} (cuDNN's and cuBLAS's "
        "handles and workspace) leaves {2} for the plan, below the lower "
        "bound Mmin = {3} ({4} bytes): give a budget of at least {5}, or "
        "state what the libraries take on this device with "
        "--library-reserve",
        formatBytes(budget), formatBytes(req.libraryReserve),
        formatBytes(std::max<int64_t>(share, 0)), formatBytes(lb.bytes),
        lb.bytes, formatBytes(lb.bytes + req.libraryReserve));
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
  if (share < lb.weightSideBytes)
    help = "the budget does not even hold the weights, their gradients "
           "and the optimizer state";
  return makeErrorF(
      "budget {0} is below the lower bound Mmin = {1} ({2} bytes): "
      "weights, gradients and optimizer state take {3}, and task {4} "
      "needs {5} at sub-batch {6} with no workspace; {7}{8}",
      formatBytes(budget), formatBytes(lb.bytes), lb.bytes,
      formatBytes(lb.weightSideBytes),
      quoteName(lb.task >= 0 ? tg.tasks[lb.task].name : ""),
      formatBytes(lb.taskBytes), lb.subBatch, help,
      req.libraryReserve > 0
          ? llvm::formatv(" (the library reserve {0} comes on top: a "
                          "budget of at least {1})",
                          formatBytes(req.libraryReserve),
                          formatBytes(lb.bytes + req.libraryReserve))
                .str()
          : std::string());
}

} // namespace memfit::pipeline
