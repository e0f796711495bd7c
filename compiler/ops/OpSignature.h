//===- OpSignature.h - What a task's cost depends on ------------*- C++ -*-===//
//
// A signature is canonical text naming everything a task's kernels depend
// on: the op kind, dtypes and per-sample dims of its operands ("N" stands for
// the batch), and the attributes that change the work (kernel, strides,
// pads, dilations, group, ...). Op names never enter it, so the same conv
// shape in two models has the same signature and one measured profile
// serves both. The sub-batch is kept beside the signature, not in it.
//
// profileRequests() lists every distinct (task kind, signature) a model's
// training may run, which is what `memfit profile` measures.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_OPS_OPSIGNATURE_H
#define MEMFIT_COMPILER_OPS_OPSIGNATURE_H

#include "compiler/ir/TaskGraph.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memfit {

/// The spelling of a task kind in profiles: "forward", "backward_data",
/// "backward_weight", "loss", "update".
std::string_view taskKindKey(TaskKind k);
std::optional<TaskKind> parseTaskKindKey(llvm::StringRef s);

/// Signature of forward op `op` (shared by its FP, BP-data and BP-weight
/// tasks; the task kind is kept separately).
std::string opSignature(const Graph &g, OpId op);
/// The value the loss task reads: the graph output, or for cross-entropy
/// the input of a final Softmax/LogSoftmax (folded into the loss).
ValueId lossInput(const Graph &g, LossKind loss);
/// Signature of the loss task on `logits`.
std::string lossSignature(const Value &logits, LossKind loss);
/// Signature of the SGD update of one weight.
std::string updateSignature(const Value &weight, bool momentum);
/// Adam and AdamW: the same element arithmetic.
std::string adamSignature(const Value &weight);
/// Signature of task `t`, whatever its kind.
std::string taskSignature(const TaskGraph &tg, TaskId t);

/// One distinct thing to measure. `op` is a representative op for FP/BP
/// tasks, `weight` the representative weight of an update.
struct ProfileRequest {
  TaskKind kind;
  std::string signature;
  OpId op = kNoId;
  ValueId weight = kNoId;
  LossKind loss = LossKind::SoftmaxCrossEntropy;
  bool momentum = false;
};

/// Every (task kind, signature) that training `g` may run: FP of each op,
/// BP-data where some data input is computed (so may need a gradient),
/// BP-weight where the op has trainable weights, both loss kinds, and the
/// update of each trainable weight with and without momentum. Duplicates are
/// dropped, keeping the first in op order, so the list is deterministic.
std::vector<ProfileRequest> profileRequests(const Graph &g);

} // namespace memfit

#endif
