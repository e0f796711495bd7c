//===- EmitRun.cpp - One trainer call per task run ------------------------===//
#include "codegen/Emitter.h"

#include "codegen/Names.h"
#include "compiler/ir/TaskGraph.h"
#include "compiler/support/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>
#include <sstream>

namespace memfit::emit {

std::string Emitter::ptr(BlockId b, const std::map<BlockId, ResidencyId> &res) {
  const Block &blk = tg.blocks[b];
  // A block homed on the host is read and written in the arena, where the
  // plan copied it.
  if (tg.homeOf(b) != Tier::Host)
    switch (blk.kind) {
    case BlockKind::Weight:
      return llvm::formatv("x.weight({0})", weightId[blk.value]).str();
    case BlockKind::WeightGrad:
      return llvm::formatv("x.grad({0})", weightId[blk.value]).str();
    case BlockKind::Momentum:
      return llvm::formatv("x.momentumBuf({0})", weightId[blk.value]).str();
    case BlockKind::SecondMoment:
      return llvm::formatv("x.secondMomentBuf({0})", weightId[blk.value]).str();
    case BlockKind::LossValue:
      return "x.lossValue()";
    case BlockKind::WeightCopy:
      return llvm::formatv("x.weightCopy({0})", weightId[blk.value]).str();
    default:
      break;
    }
  auto it = res.find(storageOf(tg, b));
  if (it == res.end()) {
    // Codegen asked for a block the task does not list: a bug here, not in
    // the plan. The compile fails rather than emit a wrong pointer.
    if (internalError.empty())
      internalError = "codegen needs " + quoteName(blk.name) +
                      ", which is not an operand of task " + quoteName(curTask);
    return "nullptr";
  }
  if (blk.dtype == DType::BF16 || blk.dtype == DType::F16)
    return llvm::formatv("x.arena16({0}, {1})", resName(it->second),
                         plan.residencies[it->second].bytes)
        .str();
  std::string p = "x.arena(" + resName(it->second) + ")";
  bool ints =
      (blk.kind == BlockKind::Label &&
       tg.loss == LossKind::SoftmaxCrossEntropy) ||
      (blk.value >= 0 && tg.graph->values[blk.value].dtype != DType::F32);
  if (ints)
    p = "x.arenaInt(" + resName(it->second) + ")";
  return p;
}

std::string Emitter::homeTensor(BlockId b) {
  switch (tg.blocks[b].kind) {
  case BlockKind::Weight:
    return "HomeTensor::Weight";
  case BlockKind::WeightCopy:
    return "HomeTensor::WorkingCopy";
  case BlockKind::WeightGrad:
    return "HomeTensor::Grad";
  default:
    // The optimizer state is updated at home and never copied.
    if (internalError.empty())
      internalError = "the plan copies " + quoteName(tg.blocks[b].name) +
                      ", which never leaves its host home";
    return "HomeTensor::Weight";
  }
}

std::string Emitter::accFlag(const Task &t, BlockId b, size_t index) const {
  BlockId s = storageOf(tg, b);
  auto it = writtenBefore.find({index, s});
  bool before = it != writtenBefore.end() && it->second;
  if (tg.blocks[s].kind == BlockKind::WeightGrad)
    return before ? "true" : "x.accumulateWeights()";
  return before ? "true" : "false";
}

namespace {

/// The operands of one task run, resolved to the residencies the plan
/// gives them: what an operator's emit rule (compiler/ops) asks for.
class TaskOperands final : public EmitContext {
public:
  TaskOperands(Emitter &e, const Task &t,
               const std::map<BlockId, ResidencyId> &res, size_t index,
               std::string params)
      : EmitContext(e.taskGraph(), t, std::move(params)), e(e), res(res),
        index(index) {}

  std::string value(ValueId v) override { return e.ptr(blockOf(v), res); }
  std::string valueIfRead(ValueId v) override {
    BlockId b = blockOf(v);
    bool read = b >= 0 && (tg.isResident(b) || res.count(storageOf(tg, b)));
    return read ? e.ptr(b, res) : std::string("nullptr");
  }
  std::string grad(ValueId v) override {
    BlockId gb = tg.gradBlockIn(v, task.chunk);
    return gb >= 0 ? e.ptr(gb, res) : "nullptr";
  }
  bool writesGrad(ValueId v) override {
    BlockId gb = tg.gradBlockIn(v, task.chunk);
    return gb >= 0 && std::find(task.writes.begin(), task.writes.end(), gb) !=
                          task.writes.end();
  }
  std::string accumulates(ValueId v) override {
    return writesGrad(v) ? e.accFlag(task, tg.gradBlockIn(v, task.chunk), index)
                         : "false";
  }
  std::string block(BlockId b) override { return e.ptr(b, res); }
  std::string accumulatesBlock(BlockId b) override {
    return e.accFlag(task, b, index);
  }

private:
  /// The block holding value v for this task: a weight's 16-bit working
  /// copy where the task reads that instead of the master.
  BlockId blockOf(ValueId v) const {
    if (!tg.weightCopyBlock.empty() && tg.weightCopyBlock[v] >= 0 &&
        std::find(task.reads.begin(), task.reads.end(),
                  tg.weightCopyBlock[v]) != task.reads.end())
      return tg.weightCopyBlock[v];
    return tg.valueBlockIn(v, task.chunk);
  }

  Emitter &e;
  const std::map<BlockId, ResidencyId> &res;
  size_t index;
};

} // namespace

size_t Emitter::updateRun(const std::vector<Instr> &list, size_t begin) const {
  size_t end = begin;
  while (end < list.size() && list[end].kind == InstrKind::Run &&
         !list[end].onHost && list[end].stream == Stream::Compute &&
         list[end].task >= 0 &&
         tg.tasks[list[end].task].kind == TaskKind::Update)
    ++end;
  return end - begin;
}

std::string Emitter::emitUpdateGroup(const std::vector<Instr> &list,
                                     size_t begin, size_t count) const {
  auto weightOf = [&](size_t i) {
    return weightId[tg.blocks[tg.tasks[list[i].task].reads[0]].value];
  };
  // The task names the group's first and last update and how many.
  const std::string &first = tg.tasks[list[begin].task].name;
  const std::string &last = tg.tasks[list[begin + count - 1].task].name;
  std::string out =
      "  x.setTask(" +
      stringLiteral(
          llvm::formatv("{0} .. {1} ({2} updates)", first, last, count).str()) +
      ");\n";
  out +=
      tg.optimizer == OptimizerKind::SGD ? "  x.sgdGroup({" : "  x.adamGroup({";
  for (size_t k = 0; k < count; ++k) {
    if (k > 0)
      out += k % 16 == 0 ? ",\n              " : ", ";
    out += std::to_string(weightOf(begin + k));
  }
  return out + "});\n";
}

llvm::Expected<std::string> Emitter::emitRun(const Instr &in, size_t index) {
  const Task &t = tg.tasks[in.task];
  curTask = t.name;
  std::map<BlockId, ResidencyId> res;
  size_t k = 0;
  for (const auto *list : {&t.reads, &t.writes})
    for (BlockId b : *list) {
      if (in.operands[k] >= 0)
        res[storageOf(tg, b)] = in.operands[k];
      ++k;
    }
  if (in.onHost)
    // Not a device task: no setTask, so the dumped iteration graph holds
    // what a CUDA graph of the update holds.
    return llvm::formatv("  x.hostUpdate({0}); // {1}\n",
                         weightId[tg.blocks[t.reads[0]].value],
                         commentText(t.name))
        .str();
  std::string out = "  x.setTask(" + stringLiteral(t.name) + ");\n";
  if (t.kind == TaskKind::Update) {
    BlockId w = t.reads[0];
    return out +
           llvm::formatv("  x.{0}({1});\n",
                         tg.optimizer == OptimizerKind::SGD ? "sgd" : "adam",
                         weightId[tg.blocks[w].value])
               .str();
  }
  if (t.kind == TaskKind::Loss && t.op >= 0) {
    // The loss computes the head's product (TaskGraph::fusedHead): its
    // reads are the head's input, weight and the labels, its writes the
    // loss, the scratch chunk of logits and the gradients.
    TaskOperands o(*this, t, res, index, params(t.op));
    ValueId xv = g.ops[t.op].inputs[0], wv = g.ops[t.op].inputs[1];
    std::string head =
        llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}", o.params,
                      tg.headChunkRows, o.value(xv), o.value(wv),
                      ptr(t.reads[2], res), ptr(t.writes[1], res))
            .str();
    if (tg.evaluation)
      return out + "  x.evalHeadLoss(" + head + ");\n";
    return out + llvm::formatv("  x.headLoss({0}, x.lossValue(), {1}, {2}, "
                               "{3}, {4});\n",
                               head, o.gradIfWritten(xv), o.accumulates(xv),
                               o.gradIfWritten(wv), o.accumulates(wv))
                     .str();
  }
  if (t.kind == TaskKind::Loss && tg.evaluation)
    return out + llvm::formatv("  x.evalLoss({0}, {1});\n",
                               ptr(t.reads[0], res), ptr(t.reads[1], res))
                     .str();
  if (t.kind == TaskKind::Loss) {
    std::string d = t.writes.size() > 1 ? ptr(t.writes[1], res) : "nullptr";
    return out + llvm::formatv("  x.loss({0}, {1}, x.lossValue(), {2});\n",
                               ptr(t.reads[0], res), ptr(t.reads[1], res), d)
                     .str();
  }
  TaskOperands operands(*this, t, res, index, params(t.op));
  operands.algo = in.algo;
  operands.workspace =
      llvm::formatv("{0}, {1}", in.workspaceOffset, in.workspaceBytes).str();
  operands.recompute = in.recompute;
  auto call = opDef(g.ops[t.op].kind).emit(operands);
  if (!call)
    return call.takeError();
  if (call->comment)
    return out + "  " + call->code + "\n";
  if (!g.ops[t.op].batched(g))
    return out + "  {\n    OneSample one(x);\n    " + call->code + ";\n  }\n";
  return out + "  " + call->code + ";\n";
}

} // namespace memfit::emit
