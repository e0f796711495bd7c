//===- Evaluation.cpp - The evaluation program's plan ---------------------===//
#include "passes/search/Evaluation.h"

#include "compiler/ir/OffloadSlots.h"
#include "compiler/support/Diagnostics.h"

namespace memfit {

namespace {

/// The training graph's homes for the evaluation graph's weight blocks
/// (the only weight-side kinds it has), matched by kind and value.
void carryHomes(TaskGraph &evalTg, const TaskGraph &trained) {
  if (trained.homes.empty())
    return;
  evalTg.homes.assign(evalTg.blocks.size(), Tier::Gpu);
  for (BlockId b = 0; b < (BlockId)evalTg.blocks.size(); ++b) {
    const Block &blk = evalTg.blocks[b];
    BlockId from = -1;
    if (blk.kind == BlockKind::Weight)
      from = trained.valueBlock[blk.value];
    else if (blk.kind == BlockKind::WeightCopy)
      from = trained.weightCopyBlock[blk.value];
    if (from >= 0)
      evalTg.homes[b] = trained.homes[from];
  }
  // Its copies in of working copies are the trainer's: masters rounded on
  // arrival where the training plan keeps no copies at home.
  evalTg.copiesFromMaster = trained.copiesFromMaster;
  evalTg.copiesFromNvmeMaster = trained.copiesFromNvmeMaster;
}

} // namespace

llvm::Expected<PlanOutcome> planEvaluation(TaskGraph &evalTg,
                                           const TaskGraph &trained,
                                           const PlanOutcome &train,
                                           const CostTableFn &tableAt,
                                           PlanRequest req) {
  assert(evalTg.evaluation && !trained.evaluation);
  carryHomes(evalTg, trained);
  const Plan &tp = train.plan;
  // The device holds the training plan's weight side throughout; the
  // evaluation program has the training arena and its own resident
  // blocks (a subset of the training plan's).
  req.policy = Policy::Memfit;
  req.budget = tp.arenaBytes + evalTg.weightSideBytes() + tp.libraryReserve;
  req.budgetFraction = 0;
  req.budgetIsLowerBound = false;
  req.libraryReserve = tp.libraryReserve;
  req.batch = tp.batch;
  req.forcedSubBatch = 0;
  req.accumulate = 1;
  req.subBatchStatistics = true; // running statistics: no batch coupling
  req.chunking = false;
  req.forcedChunks = 0;
  req.bound = false;
  req.refine = false;
  req.hostBudget = 0;
  req.nvmeBudget = 0;
  // Where the search offloads (under pressure a skip connection may wait
  // on the host), smaller sub-batches are planned until none does.
  for (;;) {
    auto out = planTraining(evalTg, tableAt, req);
    if (!out)
      return out.takeError();
    if (out->plan.arenaBytes > tp.arenaBytes)
      return makeErrorF("the evaluation plan's arena ({0} bytes) is larger "
                        "than the training plan's ({1} bytes)",
                        out->plan.arenaBytes, tp.arenaBytes);
    if (offloadSlotBlocks(evalTg, out->plan).empty())
      return out;
    if (out->plan.subBatch <= 1)
      return makeError("every evaluation plan offloads activations to the "
                       "host, which the trainer keeps no room for");
    req.forcedSubBatch = out->plan.subBatch / 2;
  }
}

} // namespace memfit
