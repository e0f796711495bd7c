//===- Chunk.cpp - The batch split into chunks inside one round -----------===//
#include "passes/search/Chunk.h"

#include "compiler/support/Diagnostics.h"

#include <algorithm>
#include <cassert>
#include <deque>

namespace memfit {
namespace {

// Shares of the unsplit BatchNorm forward's time: its kernel reads x twice
// and writes y once; the statistics pass reads x, the normalization reads x
// and writes y. Finalize touches a few values per channel.
// More chunks than this would make tasks too small to run well on a GPU.
constexpr int64_t kMaxChunks = 256;

constexpr double kStatisticsShare = 1.0 / 3, kNormalizeShare = 2.0 / 3,
                 kFinalizeShare = 0.01;

/// A BatchNorm's stats block holds a float mean and inverse deviation per
/// channel.
int64_t statsChannels(const Block &stats) { return stats.fixedBytes / 8; }

class Splitter {
public:
  Splitter(const TaskGraph &tg, const std::vector<TaskId> &order, int32_t k)
      : in(tg), order(order), k(k) {}
  llvm::Expected<ChunkedGraph> run();

private:
  bool batched(BlockId b) const {
    const Block &blk = in.blocks[b];
    return blk.perSampleBytes > 0 && !isWeightSide(blk.kind);
  }
  BlockId at(BlockId b, int32_t c) const {
    return blockMap[b][batched(b) && c >= 0 ? c : 0];
  }
  void mapBlocks();
  llvm::Error findSplitNorms();
  TaskId add(const Task &from, TaskId origin, double share, int32_t c,
             TaskPart part, std::vector<BlockId> reads,
             std::vector<BlockId> writes, int64_t key);
  std::vector<BlockId> mapped(const std::vector<BlockId> &ids, int32_t c) {
    std::vector<BlockId> out;
    for (BlockId b : ids)
      out.push_back(at(b, c));
    return out;
  }
  bool touchesBatch(const Task &t) const {
    for (const auto *list : {&t.reads, &t.writes})
      for (BlockId b : *list)
        if (batched(b))
          return true;
    return false;
  }
  /// Adds the tasks doing `t`'s work; `base` is t's place in the order,
  /// its parts at base, base + 1 and base + 2.
  void splitTask(TaskId t, int64_t base);
  llvm::Error makeOrder();

  const TaskGraph &in;
  const std::vector<TaskId> &order;
  const int32_t k;
  ChunkedGraph cg;
  std::vector<std::vector<BlockId>> blockMap; // [block][chunk]
  std::vector<BlockId> statsOf;               // per op: its Stats block
  /// Per op whose forward is split: its BP-weight task, if any.
  std::vector<TaskId> normWeightTask;
  std::vector<int64_t> key; // per new task: its place in the order
};

void Splitter::mapBlocks() {
  TaskGraph &out = cg.tg;
  blockMap.assign(in.blocks.size(), {});
  for (BlockId b = 0; b < (BlockId)in.blocks.size(); ++b) {
    int32_t copies = batched(b) ? k : 1;
    for (int32_t c = 0; c < copies; ++c) {
      Block nb = in.blocks[b];
      nb.writers.clear();
      nb.readers.clear();
      if (copies > 1) {
        nb.chunk = c;
        nb.name += "#" + std::to_string(c);
      }
      if (nb.kind == BlockKind::Stats && nb.op >= 0)
        nb.fixedBytes += chunkStatsExtraBytes(statsChannels(nb));
      blockMap[b].push_back(static_cast<BlockId>(out.blocks.size()));
      out.blocks.push_back(std::move(nb));
    }
  }
  for (BlockId b = 0; b < (BlockId)in.blocks.size(); ++b)
    if (in.blocks[b].viewOf >= 0)
      for (int32_t c = 0; c < (int32_t)blockMap[b].size(); ++c)
        out.blocks[blockMap[b][c]].viewOf = at(in.blocks[b].viewOf, c);
}

llvm::Error Splitter::findSplitNorms() {
  statsOf.assign(in.layers.size(), -1);
  normWeightTask.assign(in.layers.size(), -1);
  for (BlockId b = 0; b < (BlockId)in.blocks.size(); ++b)
    if (in.blocks[b].kind == BlockKind::Stats && in.blocks[b].op >= 0)
      statsOf[in.blocks[b].op] = b;
  for (TaskId t = 0; t < (TaskId)in.tasks.size(); ++t) {
    const Task &task = in.tasks[t];
    if (task.op < 0 || statsOf[task.op] < 0)
      continue;
    if (task.kind == TaskKind::BackwardWeight)
      normWeightTask[task.op] = t;
  }
  for (TaskId t = 0; t < (TaskId)in.tasks.size(); ++t) {
    const Task &task = in.tasks[t];
    if (task.kind != TaskKind::BackwardData || task.op < 0 ||
        statsOf[task.op] < 0)
      continue;
    // BP-weight writes dscale and dbias (operand order), the sums every
    // chunk's BP-data needs.
    TaskId w = normWeightTask[task.op];
    if (w < 0 || in.tasks[w].writes.size() != 2)
      return makeInfeasibleF(
          "{0} normalizes over the batch but its scale or bias "
          "is not trained, so its statistics cannot be "
          "gathered across chunks of the batch",
          quoteName(task.name));
  }
  return llvm::Error::success();
}

TaskId Splitter::add(const Task &from, TaskId origin, double share, int32_t c,
                     TaskPart part, std::vector<BlockId> reads,
                     std::vector<BlockId> writes, int64_t orderKey) {
  TaskGraph &out = cg.tg;
  Task t;
  t.kind = from.kind;
  t.op = from.op;
  t.name = from.name;
  if (part == TaskPart::Statistics)
    t.name += " statistics";
  else if (part == TaskPart::Finalize)
    t.name += " finalize";
  if (c >= 0)
    t.name += "#" + std::to_string(c);
  t.chunk = c;
  t.part = part;
  t.reads = std::move(reads);
  t.writes = std::move(writes);
  bool whole = part == TaskPart::Whole;
  t.mayRunInPlace = whole && from.mayRunInPlace;
  t.inPlaceRead = whole ? from.inPlaceRead : 0;
  auto id = static_cast<TaskId>(out.tasks.size());
  for (BlockId b : t.reads)
    out.blocks[b].readers.push_back(id);
  for (BlockId b : t.writes)
    out.blocks[b].writers.push_back(id);
  out.tasks.push_back(std::move(t));
  cg.origin.push_back(origin);
  cg.share.push_back(share);
  key.push_back(orderKey);
  return id;
}

void Splitter::splitTask(TaskId t, int64_t base) {
  const Task &task = in.tasks[t];
  bool norm = task.op >= 0 && statsOf[task.op] >= 0;
  if (!touchesBatch(task)) {
    add(task, t, 1, -1, TaskPart::Whole, mapped(task.reads, -1),
        mapped(task.writes, -1), base);
    return;
  }
  if (norm && task.kind == TaskKind::Forward) {
    // reads x, scale, bias, running mean, running var; writes y, stats,
    // running mean, running var.
    BlockId stats = at(statsOf[task.op], -1);
    BlockId x = task.reads[0];
    for (int32_t c = 0; c < k; ++c)
      add(task, t, kStatisticsShare, c, TaskPart::Statistics, {at(x, c)},
          {stats}, base);
    std::vector<BlockId> running;
    for (size_t i = 3; i < task.reads.size(); ++i)
      running.push_back(at(task.reads[i], -1));
    std::vector<BlockId> reads{stats}, writes{stats};
    reads.insert(reads.end(), running.begin(), running.end());
    writes.insert(writes.end(), running.begin(), running.end());
    add(task, t, kFinalizeShare, -1, TaskPart::Finalize, reads, writes,
        base + 1);
    for (int32_t c = 0; c < k; ++c)
      add(task, t, kNormalizeShare, c, TaskPart::Normalize,
          {at(x, c), at(task.reads[1], c), at(task.reads[2], c), stats},
          {at(task.writes[0], c)}, base + 2);
    return;
  }
  if (norm && task.kind == TaskKind::BackwardData) {
    const Task &sums = in.tasks[normWeightTask[task.op]];
    for (int32_t c = 0; c < k; ++c) {
      std::vector<BlockId> reads = mapped(task.reads, c);
      reads.push_back(at(sums.writes[0], -1));
      reads.push_back(at(sums.writes[1], -1));
      add(task, t, 1, c, TaskPart::Normalize, std::move(reads),
          mapped(task.writes, c), base + 2);
    }
    return;
  }
  for (int32_t c = 0; c < k; ++c)
    add(task, t, 1, c, TaskPart::Whole, mapped(task.reads, c),
        mapped(task.writes, c), base);
}

// Each chunk runs as far as its next task is ready, then the next chunk;
// tasks every chunk shares run as soon as they are ready. Phases (forward;
// loss and backward; updates) run one after the other, so the passes that
// treat the first non-forward step as the start of the backward pass see
// one.
llvm::Error Splitter::makeOrder() {
  const TaskGraph &out = cg.tg;
  size_t n = out.tasks.size();
  // Hazards between tasks of different places in the unsplit order: a
  // reader after the writers before it, a writer after every access before
  // it. Tasks with the same place (the chunks of one task) are independent.
  std::vector<std::vector<TaskId>> succ(n);
  std::vector<int32_t> pending(n, 0);
  std::vector<std::vector<std::pair<TaskId, bool>>> access(out.blocks.size());
  for (TaskId t = 0; t < (TaskId)n; ++t) {
    for (BlockId b : out.tasks[t].reads)
      access[storageOf(out, b)].push_back({t, false});
    for (BlockId b : out.tasks[t].writes)
      access[storageOf(out, b)].push_back({t, true});
  }
  // An edge found through several blocks is counted and released once per
  // block, which is consistent.
  for (auto &list : access) {
    // One entry per task, writing if any of its accesses writes.
    std::sort(list.begin(), list.end());
    size_t m = 0;
    for (size_t i = 0; i < list.size(); ++i)
      if (m > 0 && list[m - 1].first == list[i].first)
        list[m - 1].second = list[m - 1].second || list[i].second;
      else
        list[m++] = list[i];
    list.resize(m);
    for (auto [t, tw] : list)
      for (auto [u, uw] : list)
        if (key[u] < key[t] && (uw || tw)) {
          succ[u].push_back(t);
          ++pending[t];
        }
  }
  auto phase = [&](TaskId t) {
    TaskKind kd = out.tasks[t].kind;
    return kd == TaskKind::Forward ? 0 : kd == TaskKind::Update ? 2 : 1;
  };
  std::vector<TaskId> byKey(n);
  for (TaskId t = 0; t < (TaskId)n; ++t)
    byKey[t] = t;
  std::stable_sort(byKey.begin(), byKey.end(),
                   [&](TaskId a, TaskId b) { return key[a] < key[b]; });
  std::vector<bool> done(n, false);
  for (int ph = 0; ph < 3; ++ph) {
    // Lists per chunk and one shared list (index k), in unsplit order.
    std::vector<std::deque<TaskId>> lists(k + 1);
    size_t left = 0;
    for (TaskId t : byKey)
      if (phase(t) == ph) {
        int32_t c = out.tasks[t].chunk;
        lists[c < 0 ? k : c].push_back(t);
        ++left;
      }
    auto emit = [&](TaskId t) {
      cg.order.push_back(t);
      done[t] = true;
      --left;
      for (TaskId s : succ[t])
        --pending[s];
    };
    auto drain = [&](std::deque<TaskId> &l) {
      bool any = false;
      while (!l.empty() && (done[l.front()] || pending[l.front()] == 0)) {
        if (!done[l.front()]) {
          emit(l.front());
          any = true;
        }
        l.pop_front();
      }
      return any;
    };
    while (left > 0) {
      bool progress = false;
      for (int32_t c = 0; c < k; ++c) {
        progress |= drain(lists[k]);
        progress |= drain(lists[c]);
      }
      progress |= drain(lists[k]);
      if (progress)
        continue;
      // Every list waits at its head: run the first ready task anywhere.
      TaskId pick = -1;
      for (TaskId t : byKey)
        if (phase(t) == ph && !done[t] && pending[t] == 0) {
          pick = t;
          break;
        }
      if (pick < 0)
        return makeInternalError("splitting along the batch: no task of the "
                                 "split graph is ready (a cycle)");
      emit(pick);
    }
  }
  if (cg.order.size() != n)
    return makeInternalError("splitting along the batch: a task was not "
                             "ordered");
  return llvm::Error::success();
}

llvm::Expected<ChunkedGraph> Splitter::run() {
  assert(in.chunks == 1 && "splitting a split graph");
  TaskGraph &out = cg.tg;
  // The model's description (its forward graph, layers, loss, optimizer)
  // carries over; blocks and tasks are made anew.
  out = in;
  out.blocks.clear();
  out.tasks.clear();
  out.chunks = k;
  if (auto err = findSplitNorms())
    return std::move(err);
  mapBlocks();
  for (Layer &l : out.layers)
    for (BlockId &b : l.dataInputs)
      b = at(b, 0);
  auto mapId = [&](BlockId b, int32_t c) { return b < 0 ? b : at(b, c); };
  out.inputBlock = mapId(in.inputBlock, 0);
  out.labelBlock = mapId(in.labelBlock, 0);
  out.lossBlock = mapId(in.lossBlock, 0);
  out.headScratchBlock = mapId(in.headScratchBlock, 0);
  size_t nv = in.valueBlock.size();
  out.valueBlock.assign(nv, -1);
  out.gradBlock.assign(nv, -1);
  out.chunkValueBlock.assign(nv * k, -1);
  out.chunkGradBlock.assign(nv * k, -1);
  for (size_t v = 0; v < nv; ++v) {
    out.valueBlock[v] = mapId(in.valueBlock[v], 0);
    out.gradBlock[v] = mapId(in.gradBlock[v], 0);
    for (int32_t c = 0; c < k; ++c) {
      out.chunkValueBlock[c * nv + v] = mapId(in.valueBlock[v], c);
      out.chunkGradBlock[c * nv + v] = mapId(in.gradBlock[v], c);
    }
  }
  for (BlockId &b : out.weightCopyBlock)
    b = mapId(b, 0);

  // Places in the unsplit order; a split BatchNorm's BP-weight moves just
  // before its BP-data, whose per-chunk tasks read the sums it gathers.
  std::vector<int64_t> pos(in.tasks.size(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    pos[order[i]] = static_cast<int64_t>(i) * 8;
  std::vector<int64_t> place(in.tasks.size()); // in eighths
  for (TaskId t = 0; t < (TaskId)in.tasks.size(); ++t)
    place[t] = pos[t];
  for (TaskId t = 0; t < (TaskId)in.tasks.size(); ++t) {
    const Task &task = in.tasks[t];
    if (task.kind == TaskKind::BackwardData && task.op >= 0 &&
        statsOf[task.op] >= 0 && pos[normWeightTask[task.op]] > pos[t])
      place[normWeightTask[task.op]] = pos[t] - 4;
  }
  // Stored in the unsplit graph's built order, a split BatchNorm's BP-weight
  // again before its BP-data (so every read follows its writers).
  std::vector<bool> stored(in.tasks.size(), false);
  for (TaskId t = 0; t < (TaskId)in.tasks.size(); ++t) {
    if (stored[t])
      continue;
    const Task &task = in.tasks[t];
    if (task.kind == TaskKind::BackwardData && task.op >= 0 &&
        statsOf[task.op] >= 0) {
      TaskId w = normWeightTask[task.op];
      if (!stored[w]) {
        splitTask(w, place[w]);
        stored[w] = true;
      }
    }
    splitTask(t, place[t]);
    stored[t] = true;
  }
  setAccumulateFlags(out);
  if (auto err = verifyTaskGraph(out))
    return makeInternalErrorF("splitting along the batch: {0}", *err);
  if (auto err = makeOrder())
    return std::move(err);
  return std::move(cg);
}

} // namespace

llvm::Expected<ChunkedGraph> splitAlongBatch(const TaskGraph &tg,
                                             const std::vector<TaskId> &order,
                                             int32_t chunks) {
  if (chunks < 2)
    return makeInternalError("splitting along the batch needs two chunks");
  return Splitter(tg, order, chunks).run();
}

CostTable chunkedCosts(const ChunkedGraph &cg, const CostTable &base) {
  CostTable t;
  t.subBatch = base.subBatch;
  t.d2hBytesPerSecond = base.d2hBytesPerSecond;
  t.h2dBytesPerSecond = base.h2dBytesPerSecond;
  t.copyLatencySeconds = base.copyLatencySeconds;
  // Splitting the batch leaves the gradients, and so their collectives,
  // as they were.
  t.collective = base.collective;
  t.tasks.reserve(cg.tg.tasks.size());
  for (size_t i = 0; i < cg.tg.tasks.size(); ++i) {
    std::vector<AlgoCost> algos = base.tasks[cg.origin[i]];
    for (AlgoCost &a : algos)
      a.seconds *= cg.share[i];
    t.tasks.push_back(std::move(algos));
  }
  return t;
}

LowerBound exactLowerBound(const TaskGraph &tg, int64_t batch) {
  std::vector<int32_t> counts = chunkCounts(batch, tg.tasks.size());
  if (counts.empty())
    return computeLowerBound(tg, batch);
  int64_t b = batch / counts.back();
  // The split graph's tasks touch the blocks of the tasks they come from at
  // the chunk size, a split BatchNorm's stats block grown by its
  // combination state; the rest are the same.
  LowerBound lb = computeLowerBound(tg, b);
  lb.taskBytes = 0;
  lb.task = -1;
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    int64_t fp = tg.taskFootprint(t, b), extra = 0;
    for (const auto *list : {&tg.tasks[t].reads, &tg.tasks[t].writes})
      for (BlockId id : *list) {
        const Block &blk = tg.blocks[id];
        if (blk.kind == BlockKind::Stats && blk.op >= 0)
          extra = chunkStatsExtraBytes(statsChannels(blk));
      }
    fp += extra;
    if (fp > lb.taskBytes) {
      lb.taskBytes = fp;
      lb.task = t;
    }
  }
  lb.bytes = lb.weightSideBytes + lb.taskBytes;
  return lb;
}

std::vector<int32_t> chunkCounts(int64_t batch, size_t tasks, size_t maxTasks) {
  std::vector<int32_t> out;
  for (int64_t c = 2; c <= std::min<int64_t>(batch, kMaxChunks); ++c) {
    if (static_cast<size_t>(c) * tasks > maxTasks)
      break;
    if (batch % c == 0)
      out.push_back(static_cast<int32_t>(c));
  }
  return out;
}

} // namespace memfit
