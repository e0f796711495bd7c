//===- Autodiff.h - Forward Graph to training TaskGraph ---------*- C++ -*-===//
//
// Builds the TDFG of one training iteration from the forward graph and a
// loss: FP(l) for every op, BP-data(l) when some data input of l needs a
// gradient, BP-weight(l) when l has weights, one Loss task and one Update per
// weight (torch.optim.SGD semantics; momentum buffers are resident blocks).
//
// Guarantees: every task reads exactly the blocks its kernel needs (e.g. Relu
// backward reads Y and dY, never X; Conv BP-data reads W and dY); a value with
// several consumers gets one gradient block that all their BP-data tasks
// accumulate into; the data input never gets a gradient; tasks come out in a
// valid execution order. Every block's size follows its element type: under
// a 16-bit precision the data input, activations, their gradients and every
// saved value take 2 bytes per element, weights, their gradients, optimizer
// state, saved statistics, labels and the loss 4, and each weight that a
// lower-precision operator (OpDef::lowerPrecision) reads gets a resident
// 16-bit working copy, read in its place by the forward and BP-data tasks
// and refreshed by its update. A frozen weight (TrainingConfig::freeze) is
// a constant to the backward pass: no gradient block, no optimizer state,
// no BP-weight or update task, and BP-data runs only where a gradient
// reaches a weight that trains (its working copy is made once and never
// refreshed). The evaluation graph of the same model (TrainingConfig::
// evaluation) has the training graph's weight and working-copy blocks
// under the same names, so that one plan's homes carry over to the other.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_AUTODIFF_AUTODIFF_H
#define MEMFIT_COMPILER_AUTODIFF_AUTODIFF_H

#include "compiler/autodiff/Freeze.h"
#include "compiler/ir/TaskGraph.h"

#include "llvm/Support/Error.h"

namespace memfit {

struct TrainingConfig {
  LossKind loss = LossKind::SoftmaxCrossEntropy;
  /// With momentum 0 no momentum buffers are allocated.
  float momentum = 0.9f;
  ClassAxis classAxis = ClassAxis::Auto;
  OptimizerKind optimizer = OptimizerKind::SGD;
  /// The storage and arithmetic of every block (TaskGraph.h).
  Precision precision = Precision::FP32;
  /// Clip gradients to this global norm before every update (0: never).
  double clipGradNorm = 0;
  /// Cross-entropy labels equal to this count for nothing (torch's
  /// ignore_index).
  int32_t ignoreIndex = -100;
  /// Data parallelism: the graph is built for one rank (the model imported
  /// at its slice of the batch); sharding sizes its weight-side blocks.
  DataParallel dp;
  /// The weights kept fixed (--freeze, --train-only); none by default.
  FreezeSpec freeze;
  /// The loss computes the head's product chunk by chunk where the model
  /// allows it (fusableHead): TaskGraph::fusedHead.
  bool fuseHead = false;
  /// Rows of logits per chunk of the fused head; 0: headChunkRows's.
  int64_t headChunkRows = 0;
  /// Build the evaluation graph instead (TaskGraph::evaluation): forward
  /// tasks reading the same blocks, a loss that writes no gradient, no
  /// backward pass, no optimizer state, no update.
  bool evaluation = false;
};

/// The axis of the model output that cross-entropy reads the classes from.
size_t lossClassAxis(const Graph &g, ClassAxis axis);

/// `g` must outlive the result (the TaskGraph points at it).
llvm::Expected<TaskGraph> buildTaskGraph(const Graph &g,
                                         const TrainingConfig &cfg = {});

} // namespace memfit

#endif
