//===- MemoryLimit.h - Refusing what will not fit in memory -----*- C++ -*-===//
//-*-===//
//
// A model too large to plan on this machine is refused with a message, never
// killed by the system: before planning, the planner's memory is estimated
// from the task graph's size and compared with what the machine offers
// (MemAvailable, and the address-space limit of `ulimit -v`); should an
// allocation fail anyway, the handlers installed here turn it into the same
// kind of message and exit code 1 instead of an abort.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_SUPPORT_MEMORYLIMIT_H
#define MEMFIT_COMPILER_SUPPORT_MEMORYLIMIT_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace memfit {

struct AvailableMemory {
  uint64_t bytes = UINT64_MAX; // UINT64_MAX: no limit could be read
  std::string source;          // what sets it, for messages
};

/// The memory this process may still allocate: the smaller of the system's
/// MemAvailable and the room left under RLIMIT_AS.
AvailableMemory availableMemory();

/// The planner's memory for a task graph of this size: measured at about
/// 3 KiB a task on ResNets of 2,000 to 35,000 tasks (docs/testing.md), with
/// a safety factor of three.
uint64_t planningMemoryEstimate(uint64_t tasks);

/// An error naming the estimate and the available memory when planning
/// `tasks` tasks would not fit.
llvm::Error checkPlanningMemory(uint64_t tasks, const std::string &model);

/// Makes failed allocations (std::bad_alloc, LLVM's allocation failures, a
/// thread the system cannot create) print "`tool`: error: out of memory ..."
/// and exit with code 1.
void installOutOfMemoryHandlers(const char *tool);

} // namespace memfit

#endif
