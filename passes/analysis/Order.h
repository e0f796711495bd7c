//===- Order.h - Execution order of one round -------------------*- C++ -*-===//
//
// The order tasks run in is a swappable choice. `builtOrder` (Liveness.h)
// keeps the importer's op order. `joinAwareOrder` is the default: the
// forward ops in a depth-first order from the output that finishes one
// branch before starting the next and takes the heavier branch first
// (SuperNeurons, Dymem), so a join is reached with fewer live blocks; the
// backward tasks mirror it; updates come last.
//
// Guarantees: the result is a topological order of the TDFG listing every
// task exactly once.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_ORDER_H
#define MEMFIT_PASSES_ORDER_H

#include "compiler/ir/TaskGraph.h"

#include <vector>

namespace memfit {

enum class OrderKind : uint8_t { Built, JoinAware };

std::vector<TaskId> joinAwareOrder(const TaskGraph &tg);
std::vector<TaskId> taskOrder(const TaskGraph &tg, OrderKind kind);

} // namespace memfit

#endif
