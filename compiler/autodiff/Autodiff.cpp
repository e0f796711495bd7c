//===- Autodiff.cpp - Forward Graph to training TaskGraph -----------------===//
#include "compiler/autodiff/Autodiff.h"

#include "compiler/autodiff/FusedHead.h"

#include "compiler/ops/OpDef.h"

#include "compiler/support/Diagnostics.h"

#include <cassert>

namespace memfit {

static void shardWeightSide(TaskGraph &tg, const DataParallel &dp);
namespace {

class Builder {
public:
  Builder(const Graph &g, const TrainingConfig &cfg) : g(g), cfg(cfg) {
    tg.graph = &g;
    tg.loss = cfg.loss;
    tg.optimizer = cfg.optimizer;
    tg.useMomentum =
        cfg.optimizer != OptimizerKind::SGD || cfg.momentum != 0.0f;
    tg.precision = cfg.precision;
    tg.clipGradNorm = cfg.evaluation ? 0 : cfg.clipGradNorm;
    tg.ignoreIndex = cfg.ignoreIndex;
    tg.evaluation = cfg.evaluation;
    tg.valueBlock.assign(g.values.size(), -1);
    tg.gradBlock.assign(g.values.size(), -1);
    tg.weightCopyBlock.assign(g.values.size(), -1);
  }

  llvm::Expected<TaskGraph> build();

private:
  BlockId addBlock(std::string name, BlockKind kind, ValueId v,
                   int64_t perSample, int64_t fixed, DType dtype = DType::F32) {
    Block b;
    b.name = std::move(name);
    b.kind = kind;
    b.value = v;
    b.perSampleBytes = perSample;
    b.fixedBytes = fixed;
    b.dtype = dtype;
    tg.blocks.push_back(std::move(b));
    return static_cast<BlockId>(tg.blocks.size() - 1);
  }
  /// A block holding value `v` (or its gradient) in `dtype`.
  BlockId addValueBlock(std::string name, BlockKind kind, ValueId v,
                        DType dtype) {
    const Value &val = g.values[v];
    int64_t bytes = val.elementsPerSample() * dtypeBytes(dtype);
    return addBlock(std::move(name), kind, v, val.batched ? bytes : 0,
                    val.batched ? 0 : bytes, dtype);
  }
  /// Where `val` (or its gradient) is stored: floating-point data in the
  /// precision's activation type, weights and integers as they are.
  DType storageType(const Value &val) const {
    if (val.dtype != DType::F32 || val.kind == ValueKind::Weight)
      return val.dtype;
    return activationType(cfg.precision);
  }
  BlockId valueBlock(ValueId v);
  BlockId gradBlock(ValueId v);
  /// The block operand `v` of op `op` is read from: the 16-bit working
  /// copy of a weight that a lower-precision operator (OpDef::lowerPrecision)
  /// reads under a 16-bit precision, else its Y block.
  BlockId operandBlock(const Op &op, ValueId v);
  TaskId addTask(TaskKind kind, OpId op, std::vector<BlockId> reads,
                 std::vector<BlockId> writes, bool inPlace = false);
  /// A weight that gets a gradient and an update: trainable and not frozen.
  bool trains(ValueId v) const {
    return g.values[v].kind == ValueKind::Weight && g.values[v].trainable &&
           !tg.isFrozen(v);
  }
  void computeGradFlow();
  void emitForward(OpId id);
  void emitBackward(OpId id);
  llvm::Error emitLoss();
  void emitFusedLoss(ValueId logits);

  const Graph &g;
  const TrainingConfig &cfg;
  TaskGraph tg;
  std::vector<bool> needsGrad;  // per value: its gradient must be computed
  std::vector<bool> reachesOut; // per op: its output influences the loss
  OpId headOp = kNoId;    // Softmax/LogSoftmax folded into the loss, if any
  OpId fusedHead = kNoId; // the product the loss computes (FusedHead.h)
  /// Ops that get no task of their own: the folded normalization and a
  /// fused head.
  bool folded(OpId id) const { return id == headOp || id == fusedHead; }
  std::vector<BlockId> gradOf, momentumOf, statsOf;
};

BlockId Builder::valueBlock(ValueId v) {
  if (tg.valueBlock[v] >= 0)
    return tg.valueBlock[v];
  const Value &val = g.values[v];
  BlockKind kind = val.kind == ValueKind::Weight  ? BlockKind::Weight
                   : val.kind == ValueKind::Input ? BlockKind::Input
                                                  : BlockKind::Activation;
  BlockId id = addValueBlock(val.name, kind, v, storageType(val));
  tg.valueBlock[v] = id;
  return id;
}

BlockId Builder::operandBlock(const Op &op, ValueId v) {
  const Value &val = g.values[v];
  DType low = activationType(cfg.precision);
  if (val.kind != ValueKind::Weight || val.dtype != DType::F32 ||
      low == DType::F32 || !opDef(op.kind).lowerPrecision)
    return valueBlock(v);
  // The runtime keeps the fp32 master of every weight it copies (the copy
  // is refreshed from it), read by a task or not: the plan counts it.
  valueBlock(v);
  if (tg.weightCopyBlock[v] < 0)
    tg.weightCopyBlock[v] =
        addValueBlock(std::string(dtypeName(low)) + "(" + val.name + ")",
                      BlockKind::WeightCopy, v, low);
  return tg.weightCopyBlock[v];
}

BlockId Builder::gradBlock(ValueId v) {
  if (tg.gradBlock[v] >= 0)
    return tg.gradBlock[v];
  const Value &val = g.values[v];
  bool weight = val.kind == ValueKind::Weight;
  BlockId id =
      addValueBlock("d(" + val.name + ")",
                    weight ? BlockKind::WeightGrad : BlockKind::Gradient, v,
                    storageType(val));
  tg.gradBlock[v] = id;
  return id;
}

TaskId Builder::addTask(TaskKind kind, OpId op, std::vector<BlockId> reads,
                        std::vector<BlockId> writes, bool inPlace) {
  Task t;
  t.kind = kind;
  t.op = op;
  t.name = std::string(taskKindName(kind)) + "(" +
           (op >= 0 ? g.ops[op].name : std::string("loss")) + ")";
  t.reads = std::move(reads);
  t.writes = std::move(writes);
  t.mayRunInPlace = inPlace;
  auto id = static_cast<TaskId>(tg.tasks.size());
  for (BlockId b : t.reads)
    tg.blocks[b].readers.push_back(id);
  for (BlockId b : t.writes)
    tg.blocks[b].writers.push_back(id);
  tg.tasks.push_back(std::move(t));
  return id;
}

void Builder::computeGradFlow() {
  // A value needs a gradient when a weight that trains lies upstream of it
  // and it influences the loss: with frozen weights, no BP-data runs below
  // the first weight that trains.
  std::vector<bool> fromWeight(g.values.size(), false);
  for (ValueId v = 0; v < (ValueId)g.values.size(); ++v)
    fromWeight[v] = trains(v);
  for (const Op &op : g.ops) {
    bool any = false;
    for (ValueId in : op.inputs)
      any = any || fromWeight[in];
    for (ValueId out : op.outputs)
      fromWeight[out] = any;
  }
  std::vector<bool> toLoss(g.values.size(), false);
  ValueId lossInput = g.output;
  if (headOp != kNoId)
    lossInput = g.ops[headOp].inputs[0];
  if (fusedHead != kNoId)
    lossInput = g.ops[fusedHead].inputs[0];
  toLoss[lossInput] = true;
  reachesOut.assign(g.ops.size(), false);
  for (OpId i = (OpId)g.ops.size() - 1; i >= 0; --i) {
    if (folded(i))
      continue;
    const Op &op = g.ops[i];
    bool any = false;
    for (ValueId out : op.outputs)
      any = any || toLoss[out];
    reachesOut[i] = any;
    if (any)
      for (ValueId in : op.inputs)
        toLoss[in] = true;
  }
  needsGrad.assign(g.values.size(), false);
  if (cfg.evaluation)
    return; // nothing is differentiated
  for (ValueId v = 0; v < (ValueId)g.values.size(); ++v)
    needsGrad[v] =
        g.values[v].kind == ValueKind::Activation && fromWeight[v] && toLoss[v];
}

void Builder::emitForward(OpId id) {
  // A fused head's logits are never stored: neither the product nor a
  // normalization the loss folds runs on its own.
  if (fusedHead != kNoId && folded(id))
    return;
  const Op &op = g.ops[id];
  const OpDef &def = opDef(op.kind);
  std::vector<BlockId> reads, writes;
  for (ValueId in : op.inputs)
    reads.push_back(operandBlock(op, in));
  for (ValueId out : op.outputs)
    writes.push_back(valueBlock(out));
  if (def.isView)
    tg.blocks[writes[0]].viewOf = reads[0];
  // Evaluation normalizes with the running statistics, read only.
  if (def.savesStatistics && !cfg.evaluation) {
    // Training-mode normalization writes the sub-batch statistics its
    // backward needs and updates the running statistics (operands 3 and
    // up) in place.
    const Value &x = g.values[op.inputs[0]];
    int64_t channels = x.dims.size() > 1 ? x.dims[1] : 1;
    BlockId stats = addBlock("stats(" + op.name + ")", BlockKind::Stats, kNoId,
                             0, 2 * channels * 4);
    tg.blocks[stats].op = id;
    statsOf[id] = stats;
    writes.push_back(stats);
    for (size_t i = 3; i < op.inputs.size(); ++i)
      writes.push_back(valueBlock(op.inputs[i]));
  }
  addTask(TaskKind::Forward, id, std::move(reads), std::move(writes),
          def.mayRunInPlace);
}

void Builder::emitBackward(OpId id) {
  const Op &op = g.ops[id];
  if (folded(id) || !reachesOut[id])
    return;
  ValueId y = op.outputs[0];
  if (tg.gradBlock[y] < 0)
    return; // nothing downstream produced a gradient (cannot reach the loss)
  BlockId dY = tg.gradBlock[y];
  const OpDef &def = opDef(op.kind);
  // Every operand has its block: the forward task read it.
  GradOperands operands{g, op};
  for (ValueId in : op.inputs)
    operands.inputs.push_back(operandBlock(op, in));
  operands.output = valueBlock(y);
  for (ValueId out : op.outputs)
    operands.outputs.push_back(valueBlock(out));
  operands.stats = statsOf[id];

  // BP-data: gradients of the data inputs that need one.
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (needsGrad[op.inputs[i]])
      operands.gradInputs.push_back(i);
  if (!operands.gradInputs.empty()) {
    std::vector<BlockId> reads;
    if (def.dataGradReads)
      def.dataGradReads(operands, reads);
    reads.push_back(dY);
    std::vector<BlockId> writes;
    for (size_t i : operands.gradInputs) {
      BlockId d = gradBlock(op.inputs[i]);
      if (std::find(writes.begin(), writes.end(), d) == writes.end())
        writes.push_back(d);
    }
    // A view's gradient is the same bytes as its input's gradient when the
    // input has no other consumer, so the copy disappears.
    if (def.isView && g.values[op.inputs[0]].consumers.size() == 1)
      tg.blocks[dY].viewOf = writes[0];
    // dX = f'(Y) * dY elementwise may overwrite dY, as Caffe's in-place
    // layers do.
    auto dyAt = static_cast<int32_t>(reads.size() - 1);
    TaskId bd = addTask(TaskKind::BackwardData, id, std::move(reads),
                        std::move(writes), def.mayRunInPlace);
    tg.tasks[bd].inPlaceRead = dyAt;
  }

  // BP-weight: gradients of the trainable weights.
  for (ValueId in : op.inputs)
    if (trains(in) &&
        std::find(operands.gradWeights.begin(), operands.gradWeights.end(),
                  in) == operands.gradWeights.end()) {
      operands.gradWeights.push_back(in);
      operands.gradWeightBlocks.push_back(valueBlock(in));
    }
  if (!operands.gradWeights.empty()) {
    std::vector<BlockId> reads;
    if (def.weightGradReads)
      def.weightGradReads(operands, reads);
    reads.push_back(dY);
    std::vector<BlockId> writes;
    for (ValueId w : operands.gradWeights)
      writes.push_back(gradBlock(w));
    addTask(TaskKind::BackwardWeight, id, std::move(reads), std::move(writes));
  }
}

llvm::Error Builder::emitLoss() {
  ValueId out = g.output;
  const Value &outVal = g.values[out];
  ValueId logits = out;
  if (headOp != kNoId)
    logits = g.ops[headOp].inputs[0];
  const Value &lv = g.values[logits];
  if (!outVal.batched)
    return makeErrorF("model output {0} has no batch dimension",
                      quoteName(outVal.name));
  if (cfg.loss == LossKind::SoftmaxCrossEntropy && lv.dims.size() < 2)
    return makeErrorF("cross-entropy loss expects the model output {0} to "
                      "have a class axis, got shape [N]; use --loss=mse",
                      quoteName(lv.name));
  int64_t labelBytes = lv.bytesPerSample();
  if (cfg.loss == LossKind::SoftmaxCrossEntropy) {
    LossGeometry &lg = tg.lossGeometry;
    size_t axis = lossClassAxis(g, cfg.classAxis);
    lg.outer = lg.inner = 1;
    for (size_t i = 1; i < axis; ++i)
      lg.outer *= lv.dims[i];
    for (size_t i = axis + 1; i < lv.dims.size(); ++i)
      lg.inner *= lv.dims[i];
    lg.classes = lv.dims[axis];
    labelBytes = 4 * lg.positions(); // int32 class ids on the device
  }
  // Targets of mse stay fp32: the loss is computed in fp32.
  tg.labelBlock = addBlock(
      "labels", BlockKind::Label, kNoId, labelBytes, 0,
      cfg.loss == LossKind::SoftmaxCrossEntropy ? DType::I32 : DType::F32);
  tg.lossBlock = addBlock("loss", BlockKind::LossValue, kNoId, 0, 4);
  if (fusedHead != kNoId) {
    emitFusedLoss(logits);
    return llvm::Error::success();
  }
  std::vector<BlockId> writes{tg.lossBlock};
  if (needsGrad[logits])
    writes.push_back(gradBlock(logits));
  addTask(TaskKind::Loss, kNoId, {valueBlock(logits), tg.labelBlock},
          std::move(writes));
  return llvm::Error::success();
}

void Builder::emitFusedLoss(ValueId logits) {
  const Op &op = g.ops[fusedHead];
  ValueId x = op.inputs[0], w = op.inputs[1];
  const Value &lv = g.values[logits];
  DType type = activationType(cfg.precision);
  int64_t classes = lv.dims.back();
  tg.fusedHead = fusedHead;
  int64_t batchRows = g.batch * (lv.elementsPerSample() / classes);
  tg.headChunkRows =
      cfg.headChunkRows > 0
          ? std::min(cfg.headChunkRows, std::max<int64_t>(batchRows, 1))
          : headChunkRows(classes, dtypeBytes(type), batchRows);
  BlockId scratch =
      addBlock("logits chunk(" + op.name + ")", BlockKind::Activation, logits,
               0, tg.headChunkRows * classes * dtypeBytes(type), type);
  tg.headScratchBlock = scratch;
  std::vector<BlockId> writes{tg.lossBlock, scratch};
  if (needsGrad[x])
    writes.push_back(gradBlock(x));
  if (!cfg.evaluation && trains(w))
    writes.push_back(gradBlock(w));
  addTask(TaskKind::Loss, fusedHead,
          {valueBlock(x), operandBlock(op, w), tg.labelBlock},
          std::move(writes));
}

llvm::Expected<TaskGraph> Builder::build() {
  if (auto err = verifyGraph(g))
    return makeInternalErrorF("malformed graph: {0}", *err);
  if (g.ops.empty())
    return makeError("model has no operators to train");
  // Cross-entropy on a Softmax/LogSoftmax head is computed from the logits:
  // the fused form is exact and numerically stable.
  const Op &last =
      g.ops[g.values[g.output].producer >= 0 ? g.values[g.output].producer : 0];
  if (cfg.loss == LossKind::SoftmaxCrossEntropy &&
      g.values[g.output].producer >= 0 &&
      (last.kind == OpKind::Softmax || last.kind == OpKind::LogSoftmax)) {
    // Folded only where it normalizes over the classes.
    const Value &in = g.values[last.inputs[0]];
    int64_t axis = last.attrs.axis < 0
                       ? last.attrs.axis + (int64_t)in.dims.size()
                       : last.attrs.axis;
    bool trailingOnes = true;
    for (size_t i = axis + 1; i < in.dims.size(); ++i)
      trailingOnes = trailingOnes && in.dims[i] == 1;
    size_t classAxis = lossClassAxis(g, cfg.classAxis);
    if ((size_t)axis == classAxis && (in.dims.size() == 2 || trailingOnes ||
                                      classAxis + 1 == in.dims.size()))
      headOp = g.values[g.output].producer;
  }
  auto frozen = frozenWeights(g, cfg.freeze);
  if (!frozen)
    return frozen.takeError();
  if (!cfg.freeze.empty())
    tg.frozen = std::move(*frozen);
  if (cfg.fuseHead)
    fusedHead = fusableHead(g, cfg.loss, lossClassAxis(g, cfg.classAxis)).op;
  statsOf.assign(g.ops.size(), -1);
  computeGradFlow();
  tg.inputBlock = valueBlock(g.input);
  for (OpId i = 0; i < (OpId)g.ops.size(); ++i)
    emitForward(i);
  // Every data input has its block now (its forward task reads it).
  tg.outputLayer = g.values[g.output].producer;
  for (const Op &op : g.ops) {
    Layer layer{.kind = op.kind};
    for (ValueId in : op.inputs) {
      // A fused head's logits have no block.
      if (g.values[in].kind != ValueKind::Weight && tg.valueBlock[in] >= 0)
        layer.dataInputs.push_back(tg.valueBlock[in]);
      layer.producers.push_back(g.values[in].producer);
    }
    BlockId y = tg.valueBlock[op.outputs[0]];
    layer.outputBytesPerSample = y >= 0 ? tg.blocks[y].perSampleBytes : 0;
    tg.layers.push_back(std::move(layer));
  }
  if (auto err = emitLoss())
    return err;
  if (cfg.evaluation) {
    setAccumulateFlags(tg);
    tg.dp = cfg.dp;
    tg.replicatedWeightSideBytes = tg.weightSideBytes();
    if (auto err = verifyTaskGraph(tg))
      return makeInternalErrorF("malformed evaluation graph: {0}", *err);
    return std::move(tg);
  }
  for (OpId i = (OpId)g.ops.size() - 1; i >= 0; --i)
    emitBackward(i);
  // One update per trainable weight, after the whole backward pass (with
  // sub-batches it runs once per batch).
  for (ValueId w : g.weights()) {
    const Value &wv = g.values[w];
    if (!trains(w))
      continue;
    if (tg.gradBlock[w] < 0)
      continue; // the weight does not influence the loss
    BlockId W = valueBlock(w), dW = tg.gradBlock[w];
    std::vector<BlockId> reads{W, dW}, writes{W};
    if (tg.useMomentum) {
      BlockId m = addBlock("m(" + wv.name + ")", BlockKind::Momentum, w, 0,
                           wv.bytesAt(1));
      reads.push_back(m);
      writes.push_back(m);
    }
    if (tg.optimizer != OptimizerKind::SGD) {
      BlockId v = addBlock("v(" + wv.name + ")", BlockKind::SecondMoment, w, 0,
                           wv.bytesAt(1));
      reads.push_back(v);
      writes.push_back(v);
    }
    // The update refreshes the working copy from the new master weights.
    if (tg.weightCopyBlock[w] >= 0)
      writes.push_back(tg.weightCopyBlock[w]);
    TaskId t = addTask(TaskKind::Update, wv.consumers.front(), std::move(reads),
                       std::move(writes));
    tg.tasks[t].name = "update(" + wv.name + ")";
  }
  setAccumulateFlags(tg);
  shardWeightSide(tg, cfg.dp);
  if (auto err = verifyTaskGraph(tg))
    return makeInternalErrorF("malformed task graph: {0}", *err);
  return std::move(tg);
}

} // namespace

size_t lossClassAxis(const Graph &g, ClassAxis axis) {
  const Value &out = g.values[g.output];
  size_t rank = out.dims.size();
  if (rank <= 2)
    return 1;
  bool tokens = g.values[g.input].dtype != DType::F32;
  if (axis == ClassAxis::Last || (axis == ClassAxis::Auto && tokens))
    return rank - 1;
  return 1;
}

/// Sizes the weight side for one rank of data-parallel training: its slice
/// of every optimizer state (shard >= 1) and weight gradient (shard 2), and
/// for sharded gradients two buckets of whole gradients.
static void shardWeightSide(TaskGraph &tg, const DataParallel &dp) {
  tg.dp = dp;
  tg.replicatedWeightSideBytes = tg.weightSideBytes();
  if (!dp.active() || dp.shard == 0)
    return;
  auto slice = [&](int64_t bytes) {
    int64_t per = 4 * int64_t(dp.ranks);
    return (bytes + per - 1) / per * 4;
  };
  int64_t grads = 0, largest = 0;
  for (const Task &t : tg.tasks) {
    if (t.kind != TaskKind::Update)
      continue;
    for (BlockId b : t.reads) {
      Block &blk = tg.blocks[b];
      if (blk.kind == BlockKind::Momentum ||
          blk.kind == BlockKind::SecondMoment)
        blk.fixedBytes = slice(blk.fixedBytes);
      if (blk.kind == BlockKind::WeightGrad && dp.shard >= 2) {
        grads += blk.fixedBytes;
        largest = std::max(largest, blk.fixedBytes);
        blk.fixedBytes = slice(blk.fixedBytes);
      }
    }
  }
  // Sharded gradients are for memory: buckets no larger than the largest
  // gradient (which needs one of its own anyway), two of them so that one
  // fills while the other is reduce-scattered.
  if (dp.shard >= 2) {
    tg.dp.bucketBytes =
        std::max<int64_t>(4, std::min({dp.bucketBytes, grads, largest}));
    tg.collectiveBufferBytes = 2 * tg.dp.bucketBytes;
  }
}

llvm::Expected<TaskGraph> buildTaskGraph(const Graph &g,
                                         const TrainingConfig &cfg) {
  return Builder(g, cfg).build();
}

} // namespace memfit
