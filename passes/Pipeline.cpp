//===- Pipeline.cpp - From task graph and costs to a verified plan --------===//
#include "passes/Pipeline.h"

#include "compiler/Diagnostics.h"
#include "compiler/Units.h"
#include "passes/Verify.h"

#include "llvm/Support/FormatVariadic.h"

namespace memfit {
namespace {

struct Candidate {
  Plan plan;
  Simulation sim;
};

llvm::Expected<Candidate> planAt(const TaskGraph &tg,
                                 const CostTableFn &tableAt,
                                 const std::vector<TaskId> &order,
                                 const PlanRequest &req, int64_t b) {
  const CostTable &full = tableAt(b);
  auto plan = schedule(tg, full, order, {req.policy, req.budget, req.batch});
  if (!plan)
    return plan.takeError();
  int64_t rest = req.batch % b;
  // The cost table for the smaller last sub-batch (copied: tableAt may
  // reuse its storage).
  std::optional<CostTable> last;
  if (rest != 0 && req.batch > b)
    last = tableAt(rest);
  Candidate c{std::move(*plan), {}};
  c.sim = simulate(tg, c.plan, tableAt(b), last ? &*last : nullptr);
  return std::move(c);
}

} // namespace

bool isVerifierFailure(const std::string &message) {
  return message.find("plan verification failed") != std::string::npos;
}

llvm::Expected<PlanOutcome> planTraining(const TaskGraph &tg,
                                         const CostTableFn &tableAt,
                                         const PlanRequest &req) {
  if (req.batch <= 0)
    return makeError("the batch size must be positive");
  std::vector<TaskId> order = taskOrder(tg, req.order);
  PlanOutcome out;
  out.lowerBound = computeLowerBound(tg, 1);
  const LowerBound &lb = out.lowerBound;

  PlanRequest idealReq = req;
  idealReq.policy = Policy::Ideal;
  auto ideal = planAt(tg, tableAt, order, idealReq, req.batch);
  if (!ideal)
    return ideal.takeError();
  out.idealSeconds = ideal->sim.iterationSeconds;
  out.idealPeakBytes = ideal->plan.totalBytes();

  PlanRequest r = req;
  if (r.budgetFraction > 0)
    r.budget = static_cast<int64_t>(r.budgetFraction *
                                    static_cast<double>(out.idealPeakBytes));
  if (r.policy == Policy::Ideal)
    r.budget = out.idealPeakBytes;
  out.budget = r.budget;
  if (r.budget < lb.bytes)
    return makeErrorF(
        "budget {0} is below the lower bound Mmin = {1} ({2} bytes): "
        "weights, gradients and optimizer state take {3}, and task {4} "
        "needs {5} at sub-batch 1 with no workspace",
        formatBytes(r.budget), formatBytes(lb.bytes), lb.bytes,
        formatBytes(lb.weightSideBytes),
        quoteName(lb.task >= 0 ? tg.tasks[lb.task].name : ""),
        formatBytes(lb.taskBytes));

  std::vector<int64_t> candidates;
  if (req.forcedSubBatch > 0) {
    if (req.forcedSubBatch > req.batch)
      return makeErrorF("--sub-batch {0} is larger than the batch {1}",
                        req.forcedSubBatch, req.batch);
    candidates = {req.forcedSubBatch};
  } else if (req.policy == Policy::Ideal || req.policy == Policy::VdnnAll ||
             req.policy == Policy::VdnnConv) {
    candidates = {req.batch}; // neither the ideal case nor vDNN splits
  } else {
    out.eq3SubBatch = selectSubBatch(tg, tableAt, req.batch, r.budget);
    if (req.policy == Policy::Modnn)
      candidates = {out.eq3SubBatch};
    else
      candidates = subBatchCandidates(out.eq3SubBatch, req.batch);
  }

  std::optional<Candidate> best;
  llvm::Error firstErr = llvm::Error::success();
  for (int64_t b : candidates) {
    auto c = req.policy == Policy::Ideal && b == req.batch
                 ? llvm::Expected<Candidate>(std::move(*ideal))
                 : planAt(tg, tableAt, order, r, b);
    if (!c) {
      if (!firstErr)
        firstErr = c.takeError();
      else
        llvm::consumeError(c.takeError());
      continue;
    }
    out.tried.push_back({b, c->sim.iterationSeconds});
    // Faster wins; on a tie the larger sub-batch (candidates ascend).
    if (!best || c->sim.iterationSeconds <= best->sim.iterationSeconds)
      best = std::move(*c);
  }
  if (!best)
    return std::move(firstErr);
  llvm::consumeError(std::move(firstErr));

  if (auto err = verifyPlan(tg, best->plan))
    return err;
  out.plan = std::move(best->plan);
  out.sim = std::move(best->sim);
  summarize(out.plan, out.sim, out.idealSeconds);
  return std::move(out);
}

} // namespace memfit
