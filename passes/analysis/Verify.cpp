//===- Verify.cpp - Independent proof that a plan is right ----------------===//
#include "passes/analysis/Verify.h"

#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Liveness.h"

#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <map>

namespace memfit {
namespace {

using Clock = std::array<int32_t, kNumStreams>;

struct Section {
  const char *name;
  const std::vector<Instr> *instrs;
  bool isRound;
};

class Verifier {
public:
  Verifier(const TaskGraph &tg, const Plan &plan) : tg(tg), plan(plan) {}
  llvm::Error run();

private:
  struct InstrInfo {
    Stream stream;
    int32_t seq; // 1-based position on its stream
    Clock clock; // what is known complete when it starts, per stream
  };
  /// One lifetime of a residency (or a task's workspace) in one section.
  struct Instance {
    int64_t offset = 0, bytes = 0;
    int32_t first = -1; // global index of the first access
    std::array<int32_t, kNumStreams> last{-1, -1, -1};
    BlockId block = -1; // -1 for a workspace
  };

  llvm::Error fail(const char *rule, const llvm::Twine &msg) {
    return makeInternalErrorF("plan verification failed [{0}]: {1}: {2}", rule,
                              where, msg.str());
  }
  bool hb(int32_t a, int32_t b) const {
    if (a < 0)
      return true; // the initial state precedes everything
    const InstrInfo &ia = info[a];
    return a < b && info[b].clock[static_cast<int>(ia.stream)] >= ia.seq;
  }
  std::string blockName(BlockId b) const {
    return quoteName(tg.blocks[b].name);
  }

  llvm::Error checkStatic();
  llvm::Error walkSection(const Section &s, int copy);
  llvm::Error runTask(const Instr &in, int32_t g, int copy);
  llvm::Error runOnHost(const Instr &in, const Task &t);
  void startRound();
  llvm::Error endRound();
  llvm::Expected<int32_t> operandInstance(const Instr &in, size_t i,
                                          BlockId blk, int32_t g, int copy);
  llvm::Error checkContent(int32_t inst, BlockId blk, int32_t g);
  llvm::Error runWrites(const Instr &in, const Task &t, int32_t g, int copy);
  llvm::Error checkOverlap();
  llvm::Error checkPoolStatic();
  llvm::Error poolCopyOut(BlockId b);
  llvm::Error waitHost(const Instr &in, bool isRound);
  void access(int copy, ResidencyId r, int32_t g, Stream s);

  const TaskGraph &tg;
  const Plan &plan;
  std::string where;
  std::vector<InstrInfo> info;
  std::array<Clock, kNumStreams> streamClock{};
  std::vector<Clock> eventClock;
  std::vector<bool> eventRecorded;
  // The last round's events, which a host update may start after.
  std::vector<Clock> roundEventClock;
  std::vector<bool> roundEventRecorded;
  // Per block, this round's last copy of it on each copy stream (global
  // index, -1 for none).
  std::vector<std::array<int32_t, kNumStreams>> lastCopy;

  // Content state, per storage block, reset at each round.
  std::vector<int32_t> version, hostVersion, hostCopy;
  // Per residency instance (copy * nres + r).
  std::vector<int32_t> resVersion, resLastWrite;
  std::vector<Instance> instances;
  // Weight-side blocks: last write and the reads since, per stream.
  std::vector<int32_t> residentWrite;
  std::vector<std::array<int32_t, kNumStreams>> residentReads;
  std::vector<int32_t> runs; // per task, runs in the current section
  std::vector<bool> isInput;
  std::vector<TaskId> taskAt; // per global instruction, the task it runs
  // The gradient pool: per pooled gradient block, the host update that
  // reads it; per round, the pooled gradients copied home so far and the
  // host updates the copy-out stream has waited for.
  std::vector<TaskId> poolUpdate;
  std::vector<bool> poolCopied, hostWaited;
};

void Verifier::access(int copy, ResidencyId r, int32_t g, Stream s) {
  Instance &inst = instances[copy * plan.residencies.size() + r];
  if (inst.first < 0)
    inst.first = g;
  inst.last[static_cast<int>(s)] = g;
}

llvm::Error Verifier::checkStatic() {
  where = "plan";
  // Chunks inside the round cover the batch exactly; sub-batches do with
  // the last one possibly smaller.
  int64_t perRound = plan.subBatch * std::max<int64_t>(plan.chunks, 1);
  if (plan.chunks != tg.chunks ||
      (plan.chunks > 1 && (plan.numSubBatches != 1 || perRound != plan.batch)))
    return fail("structure",
                llvm::formatv("{0} chunks of {1} in {2} rounds do not match "
                              "the task graph's {3} chunks of batch {4}",
                              plan.chunks, plan.subBatch, plan.numSubBatches,
                              tg.chunks, plan.batch)
                    .str());
  if (plan.subBatch <= 0 || plan.numSubBatches <= 0 ||
      perRound * (plan.numSubBatches - 1) >= plan.batch ||
      perRound * plan.numSubBatches < plan.batch)
    return fail("structure",
                llvm::formatv("{0} sub-batches of {1} do not cover batch {2}",
                              plan.numSubBatches, plan.subBatch, plan.batch)
                    .str());
  if (plan.residentBytes != tg.weightSideBytes())
    return fail("budget",
                llvm::formatv("resident bytes {0} differ from the "
                              "weight side {1}",
                              plan.residentBytes, tg.weightSideBytes())
                    .str());
  if (plan.hostHomeBytes != tg.hostBytes())
    return fail("home", llvm::formatv("host home bytes {0} differ from the "
                                      "graph's {1}",
                                      plan.hostHomeBytes, tg.hostBytes())
                            .str());
  if (auto err = checkPoolStatic())
    return err;
  if (plan.nvmeHomeBytes != tg.homedBytes(Tier::Nvme))
    return fail("home",
                llvm::formatv("NVMe home bytes {0} differ from the graph's {1}",
                              plan.nvmeHomeBytes, tg.homedBytes(Tier::Nvme))
                    .str());
  // Only what the host's update alone touches lives on NVMe (optimizer
  // state, a 16-bit plan's fp32 master): no round copies it and the GPU
  // never reads or updates it.
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b) {
    if (tg.homes[b] != Tier::Nvme)
      continue;
    if (!tg.nvmeHomeable(b))
      return fail("home", blockName(b) +
                              " is homed on NVMe, which holds only optimizer "
                              "state and the masters of 16-bit working copies");
    for (TaskId t : tg.blocks[b].readers)
      if (!tg.runsOnHost(tg.tasks[t]))
        return fail("home", blockName(b) + " is homed on NVMe but read by " +
                                "a task the host does not run");
  }
  if (plan.libraryReserve < 0)
    return fail("budget", llvm::formatv("the library reserve {0} bytes is "
                                        "negative",
                                        plan.libraryReserve)
                              .str());
  if (plan.arenaBytes < 0 || plan.deviceBytes() > plan.budget)
    return fail("budget",
                llvm::formatv("library reserve {0} + resident {1} + arena {2} "
                              "bytes exceed the budget of {3} bytes",
                              plan.libraryReserve, plan.residentBytes,
                              plan.arenaBytes, plan.budget)
                    .str());
  for (ResidencyId r = 0; r < (ResidencyId)plan.residencies.size(); ++r) {
    const Residency &res = plan.residencies[r];
    where = llvm::formatv("residency {0}", r).str();
    if (res.block < 0 || res.block >= (BlockId)tg.blocks.size())
      return fail("structure", "block id out of range");
    const Block &b = tg.blocks[res.block];
    if (b.viewOf >= 0 || tg.isResident(res.block))
      return fail("structure", "residency of " + blockName(res.block) +
                                   ", which is a view or resident");
    if (res.bytes < b.bytesAt(plan.subBatch))
      return fail("structure",
                  llvm::formatv("{0} needs {1} bytes, residency has {2}",
                                blockName(res.block), b.bytesAt(plan.subBatch),
                                res.bytes)
                      .str());
    if (res.offset < 0 || res.offset + res.bytes > plan.arenaBytes)
      return fail("budget", "lies outside the arena");
  }
  return llvm::Error::success();
}

llvm::Error Verifier::runTask(const Instr &in, int32_t g, int copy) {
  if (in.task < 0 || in.task >= (TaskId)tg.tasks.size())
    return fail("structure", "task id out of range");
  const Task &t = tg.tasks[in.task];
  where += " " + quoteName(t.name);
  if (in.onHost || tg.runsOnHost(t))
    return runOnHost(in, t);
  if (in.stream != Stream::Compute)
    return fail("structure", "tasks run on the compute stream");
  if (in.recompute && t.kind != TaskKind::Forward)
    return fail("structure", "only forward tasks can be recomputed");
  if (!in.recompute)
    ++runs[in.task];
  size_t nOps = t.reads.size() + t.writes.size();
  if (in.operands.size() != nOps)
    return fail("structure", llvm::formatv("{0} operands for {1} blocks",
                                           in.operands.size(), nOps)
                                 .str());
  if (in.workspaceBytes < 0 || in.workspaceOffset < 0 ||
      in.workspaceOffset + in.workspaceBytes > plan.arenaBytes)
    return fail("budget", "workspace lies outside the arena");
  if (in.workspaceBytes > 0) {
    Instance ws;
    ws.offset = in.workspaceOffset;
    ws.bytes = in.workspaceBytes;
    ws.first = g;
    ws.last[0] = g;
    instances.push_back(ws);
  }
  // Reads.
  for (size_t i = 0; i < t.reads.size(); ++i) {
    BlockId b = t.reads[i];
    if (tg.isResident(b)) {
      if (!hb(residentWrite[b], g))
        return fail("resident", blockName(b) + " is read before its last "
                                               "write is complete");
      residentReads[b][0] = g;
      continue;
    }
    auto inst = operandInstance(in, i, b, g, copy);
    if (!inst)
      return inst.takeError();
    if (auto err = checkContent(*inst, b, g))
      return err;
  }
  return runWrites(in, t, g, copy);
}

/// The residency instance operand `i` of `in` names for `blk`, accessed at
/// `g`.
llvm::Expected<int32_t> Verifier::operandInstance(const Instr &in, size_t i,
                                                  BlockId blk, int32_t g,
                                                  int copy) {
  size_t nres = plan.residencies.size();
  ResidencyId r = in.operands[i];
  if (r < 0 || r >= (ResidencyId)nres)
    return fail("ready", "no residency given for " + blockName(blk));
  if (plan.residencies[r].block != storageOf(tg, blk))
    return fail("ready", llvm::formatv("residency {0} holds {1}, not {2}", r,
                                       blockName(plan.residencies[r].block),
                                       blockName(blk))
                             .str());
  access(copy, r, g, Stream::Compute);
  return static_cast<int32_t>(copy * nres + r);
}

/// `blk` is in instance `inst` with its latest content, put there before
/// `g`.
llvm::Error Verifier::checkContent(int32_t inst, BlockId blk, int32_t g) {
  size_t nres = plan.residencies.size();
  BlockId s = storageOf(tg, blk);
  if (version[s] == 0)
    return fail("ready", blockName(blk) + " is read before any task wrote it");
  if (resVersion[inst] != version[s])
    return fail("ready",
                llvm::formatv("{0} is not resident with its latest content "
                              "(residency {1} has version {2}, latest is {3})",
                              blockName(blk), inst % nres, resVersion[inst],
                              version[s])
                    .str());
  if (!hb(resLastWrite[inst], g))
    return fail("ready", "the write or copy that put " + blockName(blk) +
                             " on the device is not waited for");
  return llvm::Error::success();
}

// Writes: accumulations need the current content; then the new content
// exists only in the residency written.
llvm::Error Verifier::runWrites(const Instr &in, const Task &t, int32_t g,
                                int copy) {
  std::vector<std::pair<BlockId, int32_t>> written;
  for (size_t i = 0; i < t.writes.size(); ++i) {
    BlockId b = t.writes[i];
    bool resident = tg.isResident(b);
    // A recompute leaves resident state alone (BatchNorm's running
    // statistics are updated once) and reads the saved statistics back.
    if (resident && in.recompute)
      continue;
    if (resident) {
      if (!hb(residentWrite[b], g))
        return fail("resident", blockName(b) + " is written before its last "
                                               "write is complete");
      for (int32_t r : residentReads[b])
        if (r >= 0 && r != g && !hb(r, g))
          return fail("resident", blockName(b) + " is written while a read "
                                                 "may still be running");
      residentWrite[b] = g;
      residentReads[b] = {-1, -1, -1};
      continue;
    }
    auto inst = operandInstance(in, t.reads.size() + i, b, g, copy);
    if (!inst)
      return inst.takeError();
    BlockId s = storageOf(tg, b);
    if (in.recompute && tg.blocks[s].kind == BlockKind::Stats) {
      if (auto err = checkContent(*inst, b, g))
        return err;
      continue;
    }
    bool needsContent = (t.accumulates[i] || tg.homeOf(s) != Tier::Gpu) &&
                        version[s] > 0 && !in.recompute;
    if (needsContent)
      if (auto err = checkContent(*inst, b, g))
        return err;
    written.push_back({s, *inst});
  }
  for (auto [s, inst] : written) {
    // A recompute regenerates the same content; it is not a new write.
    if (!in.recompute)
      ++version[s];
    else if (version[s] == 0)
      return fail("ready", blockName(s) + " is recomputed before it was "
                                          "first computed");
    resVersion[inst] = version[s];
    resLastWrite[inst] = g;
  }
  return llvm::Error::success();
}

llvm::Error Verifier::walkSection(const Section &sec, int copy) {
  size_t nres = plan.residencies.size();
  std::fill(eventRecorded.begin(), eventRecorded.end(), false);
  std::fill(runs.begin(), runs.end(), 0);
  if (sec.isRound)
    startRound();
  for (size_t i = 0; i < sec.instrs->size(); ++i) {
    const Instr &in = (*sec.instrs)[i];
    auto g = static_cast<int32_t>(info.size());
    where = llvm::formatv("{0} instruction {1}", sec.name, i).str();
    auto st = static_cast<int>(in.stream);
    if (st < 0 || st >= kNumStreams)
      return fail("structure", "stream out of range");
    Clock &sc = streamClock[st];
    ++sc[st];
    info.push_back({in.stream, sc[st], sc});
    taskAt.push_back(in.kind == InstrKind::Run ? in.task : -1);
    switch (in.kind) {
    case InstrKind::Run:
      if (auto err = runTask(in, g, copy))
        return err;
      break;
    case InstrKind::CopyOut:
    case InstrKind::CopyIn: {
      bool out = in.kind == InstrKind::CopyOut;
      if (in.stream != (out ? Stream::CopyOut : Stream::CopyIn))
        return fail("structure", "copy on the wrong stream");
      if (!sec.isRound)
        return fail("structure", "copies belong in rounds");
      if (in.residency < 0 || in.residency >= (ResidencyId)nres)
        return fail("structure", "residency out of range");
      BlockId b = plan.residencies[in.residency].block;
      int32_t inst = copy * nres + in.residency;
      access(copy, in.residency, g, in.stream);
      lastCopy[b][st] = g;
      if (plan.poolOffsetOf(b) >= 0) {
        if (!out)
          return fail("pool", blockName(b) + " streams through the gradient "
                                             "pool but is copied in");
        if (auto err = poolCopyOut(b))
          return err;
      }
      if (out) {
        if (version[b] == 0 || resVersion[inst] != version[b])
          return fail("copy-out",
                      blockName(b) +
                          " is offloaded without its latest content");
        if (!hb(resLastWrite[inst], g))
          return fail("copy-out",
                      "offload of " + blockName(b) +
                          " does not wait for the task that wrote it");
        hostVersion[b] = version[b];
        hostCopy[b] = g;
      } else {
        if (hostVersion[b] != version[b])
          return fail("copy-in",
                      "no host copy of the latest content of " + blockName(b));
        if (!hb(hostCopy[b], g))
          return fail("copy-in", "prefetch of " + blockName(b) +
                                     " does not wait for its offload");
        resVersion[inst] = version[b];
        resLastWrite[inst] = g;
      }
      break;
    }
    case InstrKind::Record:
      if (in.event < 0 || in.event >= plan.numEvents)
        return fail("structure", "event out of range");
      eventClock[in.event] = sc;
      eventRecorded[in.event] = true;
      break;
    case InstrKind::Wait:
      if (in.event < 0 || in.event >= plan.numEvents)
        return fail("structure", "event out of range");
      if (!eventRecorded[in.event])
        return fail(
            "structure",
            llvm::formatv("waits for event {0} before it is recorded", in.event)
                .str());
      for (int k = 0; k < kNumStreams; ++k)
        sc[k] = std::max(sc[k], eventClock[in.event][k]);
      info.back().clock = sc;
      break;
    case InstrKind::WaitHost:
      if (auto err = waitHost(in, sec.isRound))
        return err;
      break;
    }
  }
  where = sec.name;
  if (sec.isRound) {
    if (auto err = endRound())
      return err;
    roundEventClock = eventClock;
    roundEventRecorded = eventRecorded;
  }
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    bool isUpdate = tg.tasks[t].kind == TaskKind::Update;
    int expected = (isUpdate != sec.isRound) ? 1 : 0;
    if (runs[t] != expected)
      return fail("structure",
                  llvm::formatv("task {0} runs {1} times, expected "
                                "{2}",
                                quoteName(tg.tasks[t].name), runs[t], expected)
                      .str());
  }
  return llvm::Error::success();
}

// Blocks of the device start each round with no content; the batch is on
// the host. A weight's blocks homed on the host keep theirs across rounds
// and iterations (their first round finds them there): a gradient adds to
// its earlier sub-batches' when there are several, else starts anew.
void Verifier::startRound() {
  size_t nb = tg.blocks.size();
  bool first = version.empty();
  bool carries = plan.numSubBatches > 1;
  if (first) {
    version.assign(nb, 0);
    hostVersion.assign(nb, -1);
    hostCopy.assign(nb, -1);
  }
  lastCopy.assign(nb, {-1, -1, -1});
  poolCopied.assign(nb, false);
  hostWaited.assign(tg.tasks.size(), false);
  for (BlockId b = 0; b < (BlockId)nb; ++b) {
    bool home = tg.homeOf(b) != Tier::Gpu;
    bool fresh =
        isInput[b] || (home && first &&
                       (tg.blocks[b].kind != BlockKind::WeightGrad || carries));
    if (fresh) {
      version[b] = 1; // the data loader's batch, or the host home's content
      hostVersion[b] = 1;
      hostCopy[b] = -1;
    } else if (!home ||
               (tg.blocks[b].kind == BlockKind::WeightGrad && !carries)) {
      version[b] = 0;
      hostVersion[b] = -1;
      hostCopy[b] = -1;
    }
  }
}

// What a round wrote of a weight homed on the host has gone home.
llvm::Error Verifier::endRound() {
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.homeOf(b) != Tier::Gpu && version[b] > 0 &&
        hostVersion[b] != version[b])
      return fail("home", blockName(b) + " ends the round without a copy of "
                                         "its latest content at home");
  return llvm::Error::success();
}

// An update of a weight homed on the host: the host's cores run it on host
// memory once the rounds are over (the host joins the copy streams before
// it starts, and the next iteration's copies after it ends).
llvm::Error Verifier::runOnHost(const Instr &in, const Task &t) {
  if (!in.onHost || t.kind != TaskKind::Update)
    return fail("home", "only the update of a weight homed on the host runs "
                        "there, and it does");
  ++runs[in.task];
  // A working copy that stays on the GPU is written by the upload that
  // follows the host's update (hostUploadBytes), never read by it.
  for (const auto *list : {&t.reads, &t.writes})
    for (BlockId b : *list)
      if (tg.homeOf(b) == Tier::Gpu &&
          (list == &t.reads || !tg.copyStaysOnGpu(b)))
        return fail("home", blockName(b) + " is not homed on the host");
  for (BlockId b : t.reads)
    if (version[b] == 0 || hostVersion[b] != version[b])
      return fail("home", blockName(b) + " is not at home with its latest "
                                         "content");
  if (in.event < -1)
    return fail("structure", "a host update's event is out of range");
  if (in.event >= 0 && (tg.clipGradNorm > 0 || tg.precision == Precision::FP16))
    return fail("home", "starts inside the rounds, but every update waits "
                        "for the gradients' " +
                            std::string(tg.clipGradNorm > 0
                                            ? "global norm (clipping)"
                                            : "check for non-finite values "
                                              "(fp16)"));
  if (in.event >= 0) {
    // Started inside the last round: after every copy of the weight's
    // blocks there, the final gradient's copy home among them.
    if (in.event >= (EventId)roundEventRecorded.size() ||
        !roundEventRecorded[in.event])
      return fail("home", llvm::formatv("starts after event {0}, which the "
                                        "round does not record",
                                        in.event)
                              .str());
    const Clock &at = roundEventClock[in.event];
    for (BlockId b : hostUpdateBlocks(tg, t))
      for (int32_t c : lastCopy[b])
        if (c >= 0 && at[static_cast<int>(info[c].stream)] < info[c].seq)
          return fail("home", "starts before the round's copy of " +
                                  blockName(b) + " is complete");
  }
  for (BlockId b : t.writes) {
    hostVersion[b] = ++version[b];
    hostCopy[b] = -1;
  }
  return llvm::Error::success();
}

// Gradients streamed through the host's pool: one-round plans, a range of
// the pool each, read by a host update started inside the round.
llvm::Error Verifier::checkPoolStatic() {
  poolUpdate.assign(tg.blocks.size(), -1);
  if (plan.gradPoolOffset.empty() && plan.gradPoolBytes == 0 &&
      plan.pooledGradBytes == 0)
    return llvm::Error::success();
  if (plan.gradPoolBytes != tg.gradPoolBytes || plan.numSubBatches != 1 ||
      plan.gradPoolOffset.size() != tg.blocks.size())
    return fail("pool", llvm::formatv("a gradient pool of {0} bytes in {1} "
                                      "rounds; the graph's is {2} bytes",
                                      plan.gradPoolBytes, plan.numSubBatches,
                                      tg.gradPoolBytes)
                            .str());
  for (const Instr &u : plan.update)
    if (u.kind == InstrKind::Run && u.onHost && u.event >= 0)
      for (BlockId b : tg.tasks[u.task].reads)
        if (tg.blocks[b].kind == BlockKind::WeightGrad)
          poolUpdate[b] = u.task;
  int64_t pooled = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    int64_t at = plan.gradPoolOffset[b];
    if (at < 0)
      continue;
    int64_t bytes = tg.blocks[b].bytesAt(1);
    if (tg.blocks[b].kind != BlockKind::WeightGrad ||
        tg.homeOf(b) != Tier::Host || at + bytes > plan.gradPoolBytes)
      return fail("pool", blockName(b) + " is not a homed gradient within "
                                         "the pool");
    if (poolUpdate[b] < 0)
      return fail("pool", blockName(b) + " is in the pool, but no host "
                                         "update started in the round reads "
                                         "it");
    pooled += bytes;
  }
  if (pooled != plan.pooledGradBytes)
    return fail("pool", llvm::formatv("pooled gradient bytes {0} differ from "
                                      "the offsets' {1}",
                                      plan.pooledGradBytes, pooled)
                            .str());
  return llvm::Error::success();
}

// A copy-out stream's wait for a host update: submitted when its ready
// event was recorded on this stream, earlier in the round.
llvm::Error Verifier::waitHost(const Instr &in, bool isRound) {
  if (!isRound || in.stream != Stream::CopyOut)
    return fail("pool", "only a round's copy-out stream waits for a host "
                        "update");
  const Instr *up = nullptr;
  for (const Instr &u : plan.update)
    if (u.kind == InstrKind::Run && u.onHost && u.task == in.task)
      up = &u;
  if (!up || up->event < 0 || up->event >= plan.numEvents ||
      !eventRecorded[up->event])
    return fail("pool", "waits for a host update that has not started in "
                        "this round");
  hostWaited[in.task] = true;
  return llvm::Error::success();
}

// A pooled gradient's copy home overwrites only bytes whose earlier
// gradient's update has finished (the copy-out stream waited for it).
llvm::Error Verifier::poolCopyOut(BlockId b) {
  const int64_t lo = plan.gradPoolOffset[b];
  const int64_t hi = lo + tg.blocks[b].bytesAt(1);
  for (BlockId c = 0; c < (BlockId)tg.blocks.size(); ++c) {
    int64_t clo = plan.gradPoolOffset[c];
    if (c == b || clo < 0 || !poolCopied[c])
      continue;
    int64_t chi = clo + tg.blocks[c].bytesAt(1);
    if (clo < hi && lo < chi && !hostWaited[poolUpdate[c]])
      return fail("pool", blockName(b) +
                              " is copied into the gradient pool "
                              "over " +
                              blockName(c) +
                              " before the copy-out stream waits for its "
                              "host update");
  }
  poolCopied[b] = true;
  return llvm::Error::success();
}

llvm::Error Verifier::checkOverlap() {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < (int32_t)instances.size(); ++i)
    if (instances[i].first >= 0 && instances[i].bytes > 0)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return instances[a].first < instances[b].first;
  });
  // Address space as disjoint segments [start, end) -> last instance there.
  std::map<int64_t, std::pair<int64_t, int32_t>> segs;
  for (int32_t id : order) {
    const Instance &cur = instances[id];
    int64_t lo = cur.offset, hi = cur.offset + cur.bytes;
    auto it = segs.upper_bound(lo);
    if (it != segs.begin())
      --it;
    std::vector<int32_t> prev;
    while (it != segs.end() && it->first < hi) {
      if (it->second.first > lo)
        prev.push_back(it->second.second);
      ++it;
    }
    std::sort(prev.begin(), prev.end());
    prev.erase(std::unique(prev.begin(), prev.end()), prev.end());
    for (int32_t p : prev) {
      const Instance &old = instances[p];
      for (int32_t a : old.last) {
        if (a < 0 || hb(a, cur.first))
          continue;
        bool inPlace = false;
        if (a == cur.first && old.block >= 0 && cur.block >= 0 &&
            old.offset == cur.offset && taskAt[a] >= 0) {
          // The one instruction both last reads the input and first writes
          // the output: legal for a task that may run in place.
          const Task &t = tg.tasks[taskAt[a]];
          inPlace = t.mayRunInPlace && !t.reads.empty() && !t.writes.empty() &&
                    storageOf(tg, t.reads[t.inPlaceRead]) == old.block &&
                    storageOf(tg, t.writes[0]) == cur.block;
        }
        if (!inPlace) {
          where = "arena";
          std::string what = [&](const Instance &x) {
            return x.block >= 0 ? blockName(x.block)
                                : std::string("a workspace");
          }(old);
          std::string whatNew = cur.block >= 0 ? blockName(cur.block)
                                               : std::string("a workspace");
          return fail(
              "overlap",
              llvm::formatv("{0} at [{1}, {2}) may still be in use when "
                            "{3} at [{4}, {5}) is first written",
                            what, old.offset, old.offset + old.bytes, whatNew,
                            lo, hi)
                  .str());
        }
      }
    }
    // Replace [lo, hi) with the current instance, splitting the ends.
    auto split = [&](int64_t x) {
      auto it = segs.upper_bound(x);
      if (it == segs.begin())
        return;
      --it;
      if (it->first < x && it->second.first > x) {
        segs[x] = it->second;
        it->second.first = x;
      }
    };
    split(lo);
    split(hi);
    segs.erase(segs.lower_bound(lo), segs.lower_bound(hi));
    segs[lo] = {hi, id};
  }
  return llvm::Error::success();
}

llvm::Error Verifier::run() {
  if (auto err = checkStatic())
    return err;
  size_t nb = tg.blocks.size(), nres = plan.residencies.size();
  isInput.assign(nb, false);
  for (BlockId b = 0; b < (BlockId)nb; ++b)
    isInput[b] = isBatchData(tg.blocks[b].kind);
  eventClock.assign(plan.numEvents, Clock{});
  eventRecorded.assign(plan.numEvents, false);
  runs.assign(tg.tasks.size(), 0);
  residentWrite.assign(nb, -1);
  residentReads.assign(nb, {-1, -1, -1});
  const Section sections[] = {{"round", &plan.round, true},
                              {"second round", &plan.round, true},
                              {"update", &plan.update, false},
                              {"next iteration's round", &plan.round, true}};
  instances.assign(4 * nres, Instance{});
  for (int c = 0; c < 4; ++c)
    for (size_t r = 0; r < nres; ++r) {
      Instance &in = instances[c * nres + r];
      in.offset = plan.residencies[r].offset;
      in.bytes = plan.residencies[r].bytes;
      in.block = plan.residencies[r].block;
    }
  resVersion.assign(4 * nres, 0);
  resLastWrite.assign(4 * nres, -1);
  for (int c = 0; c < 4; ++c)
    if (auto err = walkSection(sections[c], c))
      return err;
  return checkOverlap();
}

} // namespace

llvm::Error verifyPlan(const TaskGraph &tg, const Plan &plan) {
  return Verifier(tg, plan).run();
}

} // namespace memfit
