//===- ScheduleWhy.cpp - Why each block moved, in words -------------------===//
#include "compiler/support/Units.h"
#include "passes/schedule/Scheduler.h"

namespace memfit::sched {

void Scheduler::explainDecisions() {
  plan.decisionWhy.assign(tg.blocks.size(), std::string());
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    if (plan.decisions[b] == BlockDecision::Offload) {
      plan.decisionWhy[b] = describe(offloadCause[b]);
    } else if (plan.decisions[b] == BlockDecision::Recompute) {
      std::string why = describe(dropCause[b]);
      plan.decisionWhy[b] =
          (why.empty() ? std::string("dropped") : "dropped: " + why) +
          "; recomputed by running " +
          quoteName(tg.tasks[tg.blocks[b].writers[0]].name) + " again";
    }
  }
}

std::string Scheduler::describe(const LeaveCause &c) const {
  auto task = [&](int32_t s) {
    return s >= 0 && s < (int32_t)order.size()
               ? quoteName(tg.tasks[order[s]].name)
               : std::string("?");
  };
  auto block = [&](BlockId b) {
    return b >= 0 ? quoteName(tg.blocks[b].name) : std::string("?");
  };
  switch (c.kind) {
  case LeaveCause::None:
    break;
  case LeaveCause::ArenaFull:
    return llvm::formatv("the arena was full when task {0} needed {1} for {2}",
                         task(c.step), formatBytes(c.bytes), block(c.need));
  case LeaveCause::Workspace:
    return llvm::formatv("the arena was full when task {0} needed {1} of "
                         "workspace",
                         task(c.step), formatBytes(c.bytes));
  case LeaveCause::Defragment:
    return llvm::formatv("the arena was too fragmented for task {0}: "
                         "defragmentation moved out what it did not need",
                         task(c.step));
  case LeaveCause::Prefetch:
    return llvm::formatv("made room after task {0} to prefetch {1} for task "
                         "{2}",
                         task(c.step), block(c.need), task(c.nextStep));
  case LeaveCause::Early:
    return llvm::formatv("offloaded early, after task {0}: long reuse "
                         "distance, next used by task {1} about {2:F3} ms "
                         "later",
                         task(c.step), task(c.nextStep), c.gapSeconds * 1e3);
  case LeaveCause::Solver:
    return llvm::formatv("the integral program chose to offload it: copied "
                         "out after task {0}, next used by task {1}",
                         task(c.step), task(c.nextStep));
  case LeaveCause::Vdnn:
    return llvm::formatv("{0} offloads a layer's input while the layer runs: "
                         "the input of task {1}",
                         policyName(opts.policy), task(c.step));
  case LeaveCause::DropSet:
    return llvm::formatv("in the drop set of policy {0}, it left after its "
                         "last forward use (task {1})",
                         policyName(opts.policy), task(c.step));
  case LeaveCause::Released:
    return llvm::formatv("it left after its last direct use (task {0}) and "
                         "was needed again as the input of a recompute",
                         task(c.step));
  }
  return "";
}

} // namespace memfit::sched
