//===- Chunk.h - The batch split into chunks inside one round ---*- C++ -*-===//
//
// Exact splitting along the batch. Sub-batching runs the whole iteration
// once per sub-batch, which is exact only when no operator computes
// statistics over the batch. Here the batch of B samples is split into K
// chunks of B/K inside one round instead: every task of a per-sample
// operator (convolution, pooling, activations, elementwise, GEMM, the loss)
// runs once per chunk on that chunk's blocks, and BatchNorm, which needs
// the whole batch, is split into phases that see every chunk:
//
//   forward   Statistics(c) per chunk, accumulating each channel's mean and
//             sum of squared deviations of the chunk into the stats block
//             (Chan et al.'s pairwise combination, in double); one Finalize
//             (the batch's mean and inverse deviation, the running
//             statistics updated once); Normalize(c) per chunk;
//   backward  BP-weight(c) per chunk, accumulating the batch's sums of dY
//             and dY * xhat into dscale and dbias (which are exactly those
//             sums); then BP-data(c) per chunk, reading them.
//
// Guarantees: the split graph computes what the model computes at batch B,
// up to the order of float sums; blocks of per-sample values exist once per
// chunk (sized at B/K), blocks of weights, statistics and other values
// without a batch axis once; `order` is a topological order that runs the
// forward pass, then loss and backward, then the updates, each chunk as far
// as it can go before the next one starts (so only the blocks that must
// wait for a BatchNorm barrier pile up); it fails only for a BatchNorm
// whose scale or bias is not trained (its sums would have nowhere to go).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_CHUNK_H
#define MEMFIT_PASSES_CHUNK_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/TaskGraph.h"
#include "passes/analysis/MemoryLowerBound.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace memfit {

struct ChunkedGraph {
  TaskGraph tg;
  /// Per task: the task of the unsplit graph whose work it does (part of).
  std::vector<TaskId> origin;
  /// Per task: its share of the origin's time at the chunk size.
  std::vector<double> share;
  /// The order to run the tasks in.
  std::vector<TaskId> order;
};

/// Splits `tg` (not split itself) into `chunks` chunks; `order` is the
/// unsplit graph's execution order, which each chunk follows.
llvm::Expected<ChunkedGraph> splitAlongBatch(const TaskGraph &tg,
                                             const std::vector<TaskId> &order,
                                             int32_t chunks);

/// The split graph's costs from the unsplit graph's table at the chunk
/// size.
CostTable chunkedCosts(const ChunkedGraph &cg, const CostTable &base);

/// The chunk counts worth planning for a batch: divisors of the batch
/// from 2 up, as long as the split graph stays within `maxTasks` tasks
/// (planning time grows with the tasks; 20,000 keeps ResNet-1001-sized
/// graphs at whole batches and their planning in seconds).
std::vector<int32_t> chunkCounts(int64_t batch, size_t tasks,
                                 size_t maxTasks = 20000);

/// The floor of exact plans of `tg` (whose operators compute statistics
/// over the batch) at `batch`: Mmin of the graph split into as many chunks
/// as chunkCounts allows (the whole batch when it allows none). Its task is
/// the unsplit graph's.
LowerBound exactLowerBound(const TaskGraph &tg, int64_t batch);

/// Bytes a split BatchNorm's stats block holds besides the mean and inverse
/// deviation: per channel, the running mean and sum of squared deviations
/// (double) and the sample count combined so far.
inline int64_t chunkStatsExtraBytes(int64_t channels) {
  return 2 * channels * 8 + 8;
}

} // namespace memfit

#endif
