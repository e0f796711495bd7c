//===- OpSignature.cpp - What a task's cost depends on --------------------===//
#include "compiler/ops/OpSignature.h"
#include "compiler/ops/OpDef.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <set>

namespace memfit {

std::string_view taskKindKey(TaskKind k) {
  switch (k) {
  case TaskKind::Forward:
    return "forward";
  case TaskKind::BackwardData:
    return "backward_data";
  case TaskKind::BackwardWeight:
    return "backward_weight";
  case TaskKind::Loss:
    return "loss";
  case TaskKind::Update:
    return "update";
  }
  return "?";
}

std::optional<TaskKind> parseTaskKindKey(llvm::StringRef s) {
  for (TaskKind k :
       {TaskKind::Forward, TaskKind::BackwardData, TaskKind::BackwardWeight,
        TaskKind::Loss, TaskKind::Update})
    if (std::string_view(s.data(), s.size()) == taskKindKey(k))
      return k;
  return std::nullopt;
}

static void printValueType(llvm::raw_ostream &os, const Value &v) {
  os << dtypeName(v.dtype) << '[';
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i)
      os << ',';
    if (i == 0 && v.batched)
      os << 'N';
    else
      os << v.dims[i];
  }
  os << ']';
}

std::string opSignature(const Graph &g, OpId id) {
  const Op &op = g.op(id);
  std::string out;
  llvm::raw_string_ostream os(out);
  os << opKindName(op.kind) << '(';
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (i)
      os << ',';
    printValueType(os, g.value(op.inputs[i]));
  }
  os << ")->(";
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (i)
      os << ',';
    printValueType(os, g.value(op.outputs[i]));
  }
  os << ')';
  if (auto attrs = opDef(op.kind).signatureAttrs)
    attrs(os, op);
  os.flush();
  return out;
}

std::string lossSignature(const Value &logits, LossKind loss) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << (loss == LossKind::SoftmaxCrossEntropy ? "SoftmaxCrossEntropy" : "MSE")
     << '(';
  printValueType(os, logits);
  os << ')';
  os.flush();
  return out;
}

ValueId lossInput(const Graph &g, LossKind loss) {
  // Cross-entropy on a Softmax/LogSoftmax head reads the head's input (the
  // autodiff folds the head into the loss).
  if (g.output < 0)
    return kNoId;
  OpId head = g.value(g.output).producer;
  if (loss == LossKind::SoftmaxCrossEntropy && head >= 0 &&
      (g.op(head).kind == OpKind::Softmax ||
       g.op(head).kind == OpKind::LogSoftmax) &&
      !g.op(head).inputs.empty())
    return g.op(head).inputs[0];
  return g.output;
}

std::string updateSignature(const Value &weight, bool momentum) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << (momentum ? "SGDMomentum(" : "SGD(");
  printValueType(os, weight);
  os << ')';
  os.flush();
  return out;
}

std::string adamSignature(const Value &weight) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "Adam(";
  printValueType(os, weight);
  os << ')';
  os.flush();
  return out;
}

namespace {
std::string signatureAtFp32(const TaskGraph &tg, TaskId t) {
  const Task &task = tg.task(t);
  const Graph &g = *tg.graph;
  switch (task.kind) {
  case TaskKind::Forward:
  case TaskKind::BackwardData:
  case TaskKind::BackwardWeight:
    assert(task.op >= 0 && "FP/BP task without an op");
    return opSignature(g, task.op);
  case TaskKind::Loss:
    // The loss that computes the head's product (TaskGraph::fusedHead) is
    // another kernel than the loss over stored logits.
    if (task.op >= 0)
      return "HeadCrossEntropy " + opSignature(g, task.op) +
             " chunk=" + std::to_string(tg.headChunkRows);
    for (BlockId b : task.reads)
      if (tg.block(b).kind == BlockKind::Activation && tg.block(b).value >= 0)
        return lossSignature(g.value(tg.block(b).value), tg.loss);
    assert(false && "loss task reads no model output");
    return "Loss(?)";
  case TaskKind::Update:
    for (BlockId b : task.reads)
      if (tg.block(b).kind == BlockKind::Weight && tg.block(b).value >= 0)
        return tg.optimizer == OptimizerKind::SGD
                   ? updateSignature(g.value(tg.block(b).value), tg.useMomentum)
                   : adamSignature(g.value(tg.block(b).value));
    assert(false && "update task reads no weight");
    return "SGD(?)";
  }
  return "?";
}
} // namespace

std::string taskSignature(const TaskGraph &tg, TaskId t) {
  // Another precision runs other kernels: a profile measured in fp32 must
  // not price them, so its signatures differ.
  std::string sig = signatureAtFp32(tg, t);
  if (tg.precision != Precision::FP32)
    sig += " precision=" + std::string(precisionName(tg.precision));
  return sig;
}

std::vector<ProfileRequest> profileRequests(const Graph &g) {
  std::vector<ProfileRequest> out;
  std::set<std::pair<int, std::string>> seen;
  auto add = [&](ProfileRequest r) {
    if (seen.insert({static_cast<int>(r.kind), r.signature}).second)
      out.push_back(std::move(r));
  };
  for (OpId id = 0; id < static_cast<OpId>(g.ops.size()); ++id) {
    std::string sig = opSignature(g, id);
    add({TaskKind::Forward, sig, id});
    // A superset of what the autodiff emits (it also drops gradients that
    // no trainable weight feeds): an extra entry costs a measurement, a
    // missing one an analytic fallback.
    bool needsDataGrad = false;
    for (ValueId in : g.dataInputs(id))
      needsDataGrad |= g.value(in).kind == ValueKind::Activation;
    if (needsDataGrad)
      add({TaskKind::BackwardData, sig, id});
    bool trainable = false;
    for (ValueId w : g.weightInputs(id))
      trainable |= g.value(w).trainable;
    if (trainable)
      add({TaskKind::BackwardWeight, sig, id});
  }
  for (LossKind loss : {LossKind::SoftmaxCrossEntropy, LossKind::MSE}) {
    ValueId in = lossInput(g, loss);
    if (in < 0)
      continue;
    ProfileRequest r{TaskKind::Loss, lossSignature(g.value(in), loss)};
    r.loss = loss;
    add(std::move(r));
  }
  for (ValueId w : g.weights()) {
    if (!g.value(w).trainable)
      continue;
    for (bool momentum : {true, false}) {
      ProfileRequest r{TaskKind::Update, updateSignature(g.value(w), momentum)};
      r.weight = w;
      r.momentum = momentum;
      add(std::move(r));
    }
  }
  return out;
}

} // namespace memfit
