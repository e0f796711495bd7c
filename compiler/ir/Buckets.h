//===- Buckets.h - Gradient buckets of data-parallel training ---*- C++ -*-===//
//
// Which weight gradients travel together in one collective, and after which
// instruction of the round they are all final: the weights in the order
// their gradients become final in the round, packed into buckets of up to
// DataParallel::bucketBytes (a larger gradient gets a bucket of its own),
// as PyTorch DDP groups them. Derived from the plan alone, so the
// simulation, codegen and reports agree without passing it around.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_BUCKETS_H
#define MEMFIT_COMPILER_IR_BUCKETS_H

#include "compiler/ir/Plan.h"

#include <cstdint>
#include <vector>

namespace memfit {

struct GradientBucket {
  /// The trainable weights (their W blocks), in the order their gradients
  /// become final.
  std::vector<BlockId> weights;
  int64_t bytes = 0; // whole gradients
  /// The round instruction after which every gradient of the bucket is
  /// final (the last Run writing one of them).
  int32_t readyAfter = -1;
};

/// Empty unless the graph is data-parallel.
std::vector<GradientBucket> gradientBuckets(const TaskGraph &tg,
                                            const Plan &plan);

} // namespace memfit

#endif
