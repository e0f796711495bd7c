//===- FusedHead.h - The language-model head fused with its loss -*- C++
//-*-===//
//
// Where a model ends in a matrix product over a weight (the classifier or
// language-model head, possibly tied to the token embedding) whose output
// cross-entropy reads along its last axis, the loss task can compute the
// product itself, a chunk of rows at a time: each chunk's logits are
// computed into a scratch block, turned into their loss and gradient in
// place, and multiplied back into the gradients of the head's input and
// weight, so that the N x T x V logits and their gradient are never stored
// (Liger Kernel's fused linear cross-entropy; Cut Cross-Entropy's goal).
// The arithmetic is the unfused head's, the same products on the same
// 16-bit operands; only the order in which the weight gradient's rows are
// summed differs.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_AUTODIFF_FUSEDHEAD_H
#define MEMFIT_COMPILER_AUTODIFF_FUSEDHEAD_H

#include "compiler/ir/TaskGraph.h"

#include <cstdint>
#include <string>

namespace memfit {

/// Bytes the scratch block of one chunk of logits may take: Liger Kernel's
/// and torchtune's chunked losses keep a chunk in tens of MiB.
constexpr int64_t kHeadChunkBytes = int64_t(32) << 20;

struct HeadFusion {
  /// The head's product (MatMul, or Gemm without bias), or kNoId.
  OpId op = kNoId;
  /// Why the model's head cannot be fused, when `op` is kNoId.
  std::string why;
};

/// Whether `g`'s output is a head the loss can compute chunk by chunk
/// under `loss` with the classes on `classAxis` (lossClassAxis): a MatMul
/// or bias-free Gemm of a canonical activation [N, ..., K] by a weight
/// ([K, V], or [V, K] read transposed), possibly followed by the Softmax
/// or LogSoftmax the loss folds, its output read by nothing else.
HeadFusion fusableHead(const Graph &g, LossKind loss, size_t classAxis);

/// Rows of logits per chunk: as many as kHeadChunkBytes holds in the
/// activations' element type, at least one, at most the rows of a batch.
int64_t headChunkRows(int64_t classes, int64_t elementBytes, int64_t batchRows);

} // namespace memfit

#endif
