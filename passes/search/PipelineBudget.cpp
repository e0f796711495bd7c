//===- PipelineBudget.cpp - The budget a request asks for -----------------===//
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/search/PipelineSteps.h"

namespace memfit {

ResolvedBudget resolveBudget(const PlanRequest &req, int64_t idealPeakBytes,
                             int64_t lowerBoundBytes) {
  ResolvedBudget b{.device = req.budget, .reserve = req.libraryReserve};
  if (req.budgetIsLowerBound)
    b.device = lowerBoundBytes + req.libraryReserve;
  else if (req.budgetFraction > 0)
    b.device = static_cast<int64_t>(req.budgetFraction *
                                    static_cast<double>(idealPeakBytes)) +
               req.libraryReserve;
  return b;
}

PlanRequest withBudget(PlanRequest req, const ResolvedBudget &b) {
  req.budget = b.device;
  req.libraryReserve = b.reserve;
  req.budgetFraction = 0;
  req.budgetIsLowerBound = false;
  return req;
}

} // namespace memfit

namespace memfit::pipeline {

llvm::Expected<ResolvedBudget> budgetFor(const TaskGraph &tg,
                                         const PlanRequest &req,
                                         const LowerBound &lb,
                                         int64_t idealPeakBytes) {
  // The ideal policy has no budget: it gets its own peak.
  ResolvedBudget resolved =
      policyDef(req.policy).rules.unbounded
          ? ResolvedBudget{.device = idealPeakBytes + req.libraryReserve,
                           .reserve = req.libraryReserve}
          : resolveBudget(req, idealPeakBytes, lb.bytes);
  const int64_t budget = resolved.device, share = resolved.plan();
  if (share >= lb.bytes)
    return resolved;
  // Say what would help: below sub-batch 1 a smaller batch changes nothing,
  // so only the weight side or the largest task can give.
  std::string help =
      lb.weightSideBytes >= lb.taskBytes
          ? "the weights, their gradients and the optimizer state dominate: "
            "home them in host memory (--host-budget), train without "
            "momentum (--momentum 0; Adam keeps two buffers per weight) or "
            "a smaller model"
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
           "and the optimizer state (--host-budget homes them in host "
           "memory)";
  // When the budget alone would hold Mmin, the reserve is what does not fit.
  std::string what =
      req.libraryReserve > 0 && budget >= lb.bytes
          ? llvm::formatv("budget {0} less the library reserve {1} (cuDNN's "
                          "and cuBLAS's handles and workspace) leaves {2} for "
                          "the plan, below the lower bound Mmin = {3} ({4} "
                          "bytes)",
                          formatBytes(budget), formatBytes(req.libraryReserve),
                          formatBytes(std::max<int64_t>(share, 0)),
                          formatBytes(lb.bytes), lb.bytes)
                .str()
          : llvm::formatv("budget {0} is below the lower bound Mmin = {1} ({2} "
                          "bytes)",
                          formatBytes(budget), formatBytes(lb.bytes), lb.bytes)
                .str();
  return makeInfeasibleF(
      "{0}: weights, gradients and optimizer state take {1}, and task {2} "
      "needs {3} at sub-batch {4} with no workspace; {5}{6}",
      what, formatBytes(lb.weightSideBytes),
      quoteName(lb.task >= 0 ? tg.tasks[lb.task].name : ""),
      formatBytes(lb.taskBytes), lb.subBatch, help,
      req.libraryReserve > 0
          ? llvm::formatv("; or give a budget of at least {0} (the reserve "
                          "included), or state what the libraries take on "
                          "this device with --library-reserve",
                          formatBytes(lb.bytes + req.libraryReserve))
                .str()
          : std::string());
}

} // namespace memfit::pipeline
