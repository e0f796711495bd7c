//===- TaskGraph.cpp - Task and data flow graph of one iteration ----------===//
#include "compiler/ir/TaskGraph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <numeric>

namespace memfit {

std::string_view taskKindName(TaskKind k) {
  switch (k) {
  case TaskKind::Forward:
    return "FP";
  case TaskKind::BackwardData:
    return "BP-data";
  case TaskKind::BackwardWeight:
    return "BP-weight";
  case TaskKind::Loss:
    return "loss";
  case TaskKind::Update:
    return "update";
  }
  return "?";
}

std::string_view blockKindName(BlockKind k) {
  switch (k) {
  case BlockKind::Input:
    return "input";
  case BlockKind::Label:
    return "label";
  case BlockKind::Activation:
    return "Y";
  case BlockKind::Gradient:
    return "dY";
  case BlockKind::Weight:
    return "W";
  case BlockKind::WeightGrad:
    return "dW";
  case BlockKind::Momentum:
    return "momentum";
  case BlockKind::SecondMoment:
    return "second moment";
  case BlockKind::Stats:
    return "stats";
  case BlockKind::LossValue:
    return "loss";
  case BlockKind::WeightCopy:
    return "W copy";
  }
  return "?";
}

std::string_view precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::TF32:
    return "tf32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "?";
}

DType activationType(Precision p) {
  switch (p) {
  case Precision::BF16:
    return DType::BF16;
  case Precision::FP16:
    return DType::F16;
  default:
    return DType::F32;
  }
}

std::string_view optimizerName(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "?";
}

bool isWeightSide(BlockKind k) {
  return k == BlockKind::Weight || k == BlockKind::WeightGrad ||
         k == BlockKind::Momentum || k == BlockKind::SecondMoment ||
         k == BlockKind::LossValue || k == BlockKind::WeightCopy;
}

std::string_view linkName(DataParallel::Link l) {
  switch (l) {
  case DataParallel::Link::Auto:
    return "auto";
  case DataParallel::Link::NVLink:
    return "nvlink";
  case DataParallel::Link::PCIe:
    return "pcie";
  case DataParallel::Link::InfiniBand:
    return "infiniband";
  }
  return "?";
}

std::string_view tierName(Tier t) {
  switch (t) {
  case Tier::Gpu:
    return "gpu";
  case Tier::Host:
    return "host";
  case Tier::Nvme:
    return "nvme";
  }
  return "?";
}

int64_t TaskGraph::copyStagingBytes() const {
  int64_t largest = 0;
  for (BlockId b = 0; b < (BlockId)homes.size(); ++b)
    if (roundsFromMaster(b))
      largest = std::max(largest, blocks[masterOf(b)].bytesAt(1));
  return std::min(largest, kCopyStagingBytes);
}

int64_t TaskGraph::weightSideBytes() const {
  int64_t total = collectiveBufferBytes + copyStagingBytes();
  for (BlockId b = 0; b < (BlockId)blocks.size(); ++b)
    if (isResident(b))
      total += blocks[b].bytesAt(1);
  return total;
}

int64_t TaskGraph::homedBytes(Tier t) const {
  int64_t total = 0;
  if (t != Tier::Gpu)
    for (BlockId b = 0; b < (BlockId)homes.size(); ++b)
      if (homes[b] == t)
        total += blocks[b].bytesAt(1);
  return total;
}

int64_t TaskGraph::copyStagingHostBytes() const {
  for (BlockId b = 0; b < (BlockId)homes.size(); ++b)
    if (nvmeCopyReadBytes(b) > 0)
      return (copyStagingBytes() + 4095) / 4096 * 4096;
  return 0;
}

int64_t TaskGraph::hostBytes() const {
  int64_t total = homedBytes(Tier::Host) + copyStagingHostBytes();
  for (BlockId b = 0; b < (BlockId)homes.size(); ++b)
    if (copyStaysOnGpu(b) &&
        !(blocks[b].dtype == DType::F32 && homes[masterOf(b)] == Tier::Host))
      total += blocks[b].bytesAt(1);
    else if (roundsFromMaster(b))
      total -= blocks[b].bytesAt(1);
  return total;
}

bool TaskGraph::nvmeHomeable(BlockId b) const {
  const Block &blk = blocks[b];
  if (blk.kind == BlockKind::Momentum || blk.kind == BlockKind::SecondMoment)
    return true;
  if (blk.kind != BlockKind::Weight || blk.viewOf >= 0 || blk.value == kNoId ||
      blk.value >= (ValueId)weightCopyBlock.size() ||
      weightCopyBlock[blk.value] < 0)
    return false;
  // A trained weight's master: read by its update alone, which streams it
  // with the state. A constant's (a mask read as its 16-bit copy) has no
  // update to stream it, so it stays at home. An evaluation graph has no
  // updates: its masters stay where the training plan put them, read by
  // nothing but, where the copies are rounded from them, the copies in.
  return (evaluation || !blk.readers.empty()) &&
         std::all_of(blk.readers.begin(), blk.readers.end(), [&](TaskId t) {
           return tasks[t].kind == TaskKind::Update;
         });
}

int64_t updatedParams(const TaskGraph &tg, const Task &update) {
  int64_t params = 0;
  for (BlockId id : update.reads)
    if (tg.blocks[id].kind == BlockKind::Weight)
      params += tg.blocks[id].bytesAt(1) / dtypeBytes(tg.blocks[id].dtype);
  return params;
}

std::vector<BlockId> hostUpdateBlocks(const TaskGraph &tg, const Task &update) {
  std::vector<BlockId> bs;
  for (const auto *list : {&update.reads, &update.writes})
    bs.insert(bs.end(), list->begin(), list->end());
  if (!update.reads.empty()) {
    ValueId v = tg.blocks[update.reads.front()].value;
    if (v >= 0 && v < (ValueId)tg.weightCopyBlock.size() &&
        tg.weightCopyBlock[v] >= 0)
      bs.push_back(tg.weightCopyBlock[v]);
  }
  std::sort(bs.begin(), bs.end());
  bs.erase(std::unique(bs.begin(), bs.end()), bs.end());
  return bs;
}

int64_t nvmeUpdateBytes(const TaskGraph &tg, const Task &update) {
  int64_t bytes = 0;
  if (update.kind == TaskKind::Update)
    for (BlockId b : update.writes)
      if (tg.homeOf(b) == Tier::Nvme)
        bytes += tg.blocks[b].bytesAt(1);
  return bytes;
}

int64_t hostUploadBytes(const TaskGraph &tg, const Task &update) {
  if (!tg.runsOnHost(update))
    return 0;
  ValueId v = tg.blocks[update.reads.front()].value;
  if (v < 0 || v >= (ValueId)tg.weightCopyBlock.size())
    return 0;
  BlockId c = tg.weightCopyBlock[v];
  return c >= 0 && tg.copyStaysOnGpu(c) ? tg.blocks[c].bytesAt(1) : 0;
}

int64_t TaskGraph::keepAllBytes(int64_t b) const {
  int64_t total = 0;
  for (const Block &blk : blocks)
    if (blk.kind == BlockKind::Activation && blk.viewOf < 0)
      total += blk.bytesAt(b);
  return total;
}

int64_t TaskGraph::taskFootprint(TaskId t, int64_t b) const {
  std::vector<BlockId> ids;
  auto add = [&](BlockId id) {
    while (blocks[id].viewOf >= 0)
      id = blocks[id].viewOf;
    if (!isResident(id))
      ids.push_back(id);
  };
  for (BlockId id : tasks[t].reads)
    add(id);
  for (BlockId id : tasks[t].writes)
    add(id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  int64_t total = 0;
  for (BlockId id : ids)
    total += blocks[id].bytesAt(b);
  return total;
}

std::optional<std::string> verifyTaskGraph(const TaskGraph &tg) {
  auto nb = static_cast<BlockId>(tg.blocks.size());
  if (!tg.homes.empty() && tg.homes.size() != tg.blocks.size())
    return llvm::formatv("{0} homes for {1} blocks", tg.homes.size(), nb).str();
  for (BlockId id = 0; id < (BlockId)tg.homes.size(); ++id)
    if (tg.homes[id] != Tier::Gpu &&
        (!isWeightSide(tg.blocks[id].kind) ||
         tg.blocks[id].kind == BlockKind::LossValue))
      return llvm::formatv("block {0} is homed in {1} but only a weight's "
                           "blocks live off the GPU",
                           tg.blocks[id].name, tierName(tg.homes[id]))
          .str();
  // The GPU's update refreshes a working copy on the GPU; none refreshes
  // one at home while its master stays there.
  for (BlockId id = 0; id < (BlockId)tg.homes.size(); ++id)
    if (tg.blocks[id].kind == BlockKind::WeightCopy &&
        tg.homes[id] != Tier::Gpu && tg.homes[tg.masterOf(id)] == Tier::Gpu)
      return llvm::formatv("working copy {0} is homed in {1} but its master "
                           "is on the GPU",
                           tg.blocks[id].name, tierName(tg.homes[id]))
          .str();
  std::vector<bool> written(tg.blocks.size(), false);
  for (BlockId id = 0; id < nb; ++id) {
    BlockKind k = tg.blocks[id].kind;
    // External inputs and resident state exist before the first task.
    if (k == BlockKind::Input || k == BlockKind::Label ||
        k == BlockKind::Weight || k == BlockKind::Momentum ||
        k == BlockKind::SecondMoment || k == BlockKind::WeightCopy)
      written[id] = true;
  }
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    const Task &task = tg.tasks[t];
    if (task.accumulates.size() != task.writes.size())
      return llvm::formatv("task {0}: accumulate flags do not match writes",
                           task.name)
          .str();
    for (BlockId id : task.reads) {
      if (id < 0 || id >= nb)
        return llvm::formatv("task {0}: read block {1} out of range", task.name,
                             id)
            .str();
      if (!written[id])
        return llvm::formatv("task {0}: reads {1} before any task writes it",
                             task.name, tg.blocks[id].name)
            .str();
      const auto &rd = tg.blocks[id].readers;
      if (std::find(rd.begin(), rd.end(), t) == rd.end())
        return llvm::formatv("task {0}: not listed as a reader of {1}",
                             task.name, tg.blocks[id].name)
            .str();
    }
    for (BlockId id : task.writes) {
      if (id < 0 || id >= nb)
        return llvm::formatv("task {0}: written block {1} out of range",
                             task.name, id)
            .str();
      const auto &wr = tg.blocks[id].writers;
      if (std::find(wr.begin(), wr.end(), t) == wr.end())
        return llvm::formatv("task {0}: not listed as a writer of {1}",
                             task.name, tg.blocks[id].name)
            .str();
    }
    for (BlockId id : task.writes)
      written[id] = true;
  }
  for (const Block &b : tg.blocks) {
    if (b.viewOf >= nb)
      return llvm::formatv("block {0}: view of a missing block", b.name).str();
    if (b.perSampleBytes < 0 || b.fixedBytes < 0)
      return llvm::formatv("block {0}: negative size", b.name).str();
  }
  return std::nullopt;
}

FrozenCount countFrozen(const TaskGraph &tg) {
  FrozenCount c;
  for (const Block &b : tg.blocks) {
    if (b.kind != BlockKind::Weight || !tg.graph->values[b.value].trainable)
      continue;
    bool f = tg.isFrozen(b.value);
    (f ? c.frozen : c.trained) += 1;
    (f ? c.frozenBytes : c.trainedBytes) += b.bytesAt(1);
  }
  return c;
}

std::vector<TaskId> builtOrder(const TaskGraph &tg) {
  std::vector<TaskId> order(tg.tasks.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

BlockId storageOf(const TaskGraph &tg, BlockId b) {
  while (tg.blocks[b].viewOf >= 0)
    b = tg.blocks[b].viewOf;
  return b;
}

std::optional<InPlacePair> inPlacePair(const TaskGraph &tg, const Task &t) {
  if (!t.mayRunInPlace || t.reads.empty() || t.writes.empty() ||
      t.accumulates.empty() || t.accumulates[0])
    return std::nullopt;
  BlockId x = storageOf(tg, t.reads[t.inPlaceRead]), y = t.writes[0];
  const Block &bx = tg.blocks[x], &by = tg.blocks[y];
  if (x == y || storageOf(tg, y) != y || isWeightSide(bx.kind) ||
      isWeightSide(by.kind) || bx.perSampleBytes != by.perSampleBytes ||
      bx.fixedBytes != by.fixedBytes)
    return std::nullopt;
  return InPlacePair{x, y};
}

void setAccumulateFlags(TaskGraph &tg) {
  for (Task &t : tg.tasks) {
    t.accumulates.clear();
    for (BlockId b : t.writes)
      t.accumulates.push_back(tg.blocks[b].kind != BlockKind::Weight &&
                              tg.blocks[b].writers.size() > 1);
  }
}

std::vector<bool> recomputableBlocks(const TaskGraph &tg) {
  std::vector<bool> out(tg.blocks.size(), false);
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const Block &blk = tg.blocks[b];
    out[b] = blk.kind == BlockKind::Activation && blk.viewOf < 0 &&
             blk.writers.size() == 1 &&
             tg.tasks[blk.writers[0]].kind == TaskKind::Forward;
  }
  // A recompute reads its task's operands again. Statistics, and forward
  // values that cannot be recomputed themselves, are there only while a
  // backward task still reads them: in a frozen part of the network, which
  // runs no backward, they are gone after the forward pass. Forward tasks
  // come in topological order, so one pass settles every chain.
  std::vector<bool> backwardReads(tg.blocks.size(), false);
  for (const Task &t : tg.tasks)
    if (t.kind == TaskKind::BackwardData || t.kind == TaskKind::BackwardWeight)
      for (BlockId x : t.reads)
        backwardReads[storageOf(tg, x)] = true;
  for (const Task &t : tg.tasks) {
    if (t.kind != TaskKind::Forward)
      continue;
    bool operandsStay = true;
    for (const auto *list : {&t.reads, &t.writes})
      for (BlockId x : *list) {
        BlockId s = storageOf(tg, x);
        const Block &sb = tg.blocks[s];
        bool own = list == &t.writes && sb.kind == BlockKind::Activation;
        bool rereadable = isWeightSide(sb.kind) || isBatchData(sb.kind) ||
                          (list == &t.reads && out[s]) || backwardReads[s];
        if (!own && !rereadable)
          operandsStay = false;
      }
    if (!operandsStay)
      for (BlockId x : t.writes)
        out[x] = false;
  }
  return out;
}

} // namespace memfit
