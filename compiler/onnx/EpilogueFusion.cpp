//===- EpilogueFusion.cpp - A ReLU after a BatchNorm run inside it --------===//
//
// Guarantees: each BatchNorm whose output feeds one Relu or Clip (ReLU6)
// and nothing else (not the model's output) becomes one BatchNorm with
// that activation fused (OpAttrs::fusedAct): it writes the activation's
// output value, and its backward masks dY where the activation's backward
// did, so the function and its gradient are unchanged bit for bit. The
// BatchNorm's own output, which only the ReLU read, no longer exists. The
// result is a fresh graph: values renumbered densely, producers and
// consumers rebuilt.
//
// The backward recomputes the ReLU's mask from X, which the BatchNorm's
// backward reads anyway, so the fused form keeps nothing the plain pair
// did not, and the ReLU's output is released as soon as its other readers
// are done; what goes is the ReLU's two passes over memory (forward over
// Y, backward over Y and dY) and the BatchNorm output's bytes. The planner
// still plans the model as written beside it where it must (`--fuse`).
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/GraphRebuild.h"
#include "compiler/onnx/OnnxImport.h"

namespace memfit {
namespace {

/// For each op, the Relu or Clip fused into it (kNoId for none).
std::vector<OpId> findReluAfterNorm(const Graph &g) {
  std::vector<OpId> relu(g.ops.size(), kNoId);
  for (OpId i = 0; i < (OpId)g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    if (op.kind != OpKind::BatchNorm || op.attrs.fusedAct.has_value() ||
        op.outputs.size() != 1)
      continue;
    ValueId y = op.outputs[0];
    const Value &v = g.value(y);
    if (y == g.output || v.consumers.size() != 1 || v.dtype != DType::F32)
      continue;
    const Op &next = g.ops[v.consumers[0]];
    if ((next.kind != OpKind::Relu && next.kind != OpKind::Clip) ||
        next.inputs.size() != 1 || next.outputs.size() != 1)
      continue;
    relu[i] = v.consumers[0];
  }
  return relu;
}

} // namespace

int64_t countEpilogues(const Graph &g) {
  int64_t n = 0;
  for (OpId r : findReluAfterNorm(g))
    n += r != kNoId;
  return n;
}

Graph fuseEpilogues(const Graph &in) {
  const std::vector<OpId> relu = findReluAfterNorm(in);
  std::vector<bool> gone(in.ops.size(), false);
  bool any = false;
  for (OpId r : relu)
    if (r != kNoId)
      gone[r] = any = true;
  if (!any)
    return in;

  GraphRebuild rebuild(in);
  for (OpId i = 0; i < (OpId)in.ops.size(); ++i) {
    if (gone[i])
      continue;
    Op op = in.ops[i];
    if (relu[i] != kNoId) {
      // The activation's output in place of the BatchNorm's: what every
      // later op reads.
      const Op &act = in.ops[relu[i]];
      op.outputs[0] = act.outputs[0];
      op.attrs.fusedAct = act.kind;
      op.attrs.minValue = act.attrs.minValue;
      op.attrs.maxValue = act.attrs.maxValue;
    }
    rebuild.graph().addOp(rebuild.remapped(std::move(op)));
  }
  return std::move(rebuild).finish();
}

} // namespace memfit
