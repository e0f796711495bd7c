//===- Tiers.cpp - Where each weight lives: GPU or host memory ------------===//
//
// planAcrossTiers (Tiers.h): the budget in bytes, then a handful of homes,
// each moving more weights to the host, each planned in full; the fastest
// feasible plan wins.
//
//===----------------------------------------------------------------------===//
#include "passes/search/Tiers.h"

#include "compiler/ir/OffloadSlots.h"
#include "compiler/ir/WorkingCopies.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/schedule/GradPool.h"
#include "passes/schedule/PolicyRules.h"

#include <algorithm>
#include <memory>
#include <optional>

namespace memfit {

std::vector<WeightBlocks> homeableWeights(const TaskGraph &tg) {
  std::vector<WeightBlocks> ws;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const Block &blk = tg.blocks[b];
    if (blk.kind != BlockKind::Weight || blk.viewOf >= 0)
      continue;
    WeightBlocks w{.weight = b, .blocks = {b}};
    bool roundWrites = false;
    for (TaskId t : blk.writers) {
      const Task &task = tg.tasks[t];
      if (task.kind != TaskKind::Update) {
        roundWrites = true;
        continue;
      }
      for (const auto *list : {&task.reads, &task.writes})
        for (BlockId x : *list)
          if (isWeightSide(tg.blocks[x].kind) &&
              tg.blocks[x].kind != BlockKind::LossValue)
            w.blocks.push_back(x);
    }
    if (roundWrites)
      continue;
    if (blk.value != kNoId && blk.value < (ValueId)tg.weightCopyBlock.size() &&
        tg.weightCopyBlock[blk.value] >= 0)
      w.blocks.push_back(tg.weightCopyBlock[blk.value]);
    std::sort(w.blocks.begin(), w.blocks.end());
    w.blocks.erase(std::unique(w.blocks.begin(), w.blocks.end()),
                   w.blocks.end());
    for (BlockId x : w.blocks)
      w.bytes += tg.blocks[x].bytesAt(1);
    ws.push_back(std::move(w));
  }
  std::stable_sort(ws.begin(), ws.end(),
                   [](const WeightBlocks &a, const WeightBlocks &b) {
                     return a.bytes > b.bytes;
                   });
  return ws;
}

std::vector<Tier> homesMoving(const TaskGraph &tg,
                              std::span<const WeightBlocks> ws, int64_t bytes) {
  std::vector<Tier> homes(tg.blocks.size(), Tier::Gpu);
  int64_t moved = 0;
  for (const WeightBlocks &w : ws) {
    if (moved >= bytes)
      break;
    for (BlockId b : w.blocks)
      homes[b] = Tier::Host;
    moved += w.bytes;
  }
  return homes;
}

int64_t keepCopiesOnGpu(const TaskGraph &tg, std::vector<Tier> &homes) {
  int64_t kept = 0;
  for (BlockId b = 0; b < (BlockId)homes.size(); ++b)
    if (tg.blocks[b].kind == BlockKind::WeightCopy && homes[b] != Tier::Gpu) {
      homes[b] = Tier::Gpu;
      kept += tg.blocks[b].bytesAt(1);
    }
  return kept;
}

bool keepsCopiesOnGpu(const TaskGraph &tg) {
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.copyStaysOnGpu(b))
      return true;
  return false;
}

int64_t spillStateToNvme(const TaskGraph &tg, std::span<const WeightBlocks> ws,
                         std::vector<Tier> &homes, int64_t bytes) {
  // Optimizer state first, masters only where that is not enough: a host
  // update streams a weight's NVMe bytes while its arithmetic runs, so the
  // drive's time hides behind more updates when the bytes are spread as
  // state over many weights than when they are concentrated, with the
  // masters, on few.
  int64_t moved = 0;
  for (bool masters : {false, true})
    for (const WeightBlocks &w : ws) {
      if (moved >= bytes)
        return moved;
      if (homes[w.weight] == Tier::Gpu)
        continue;
      for (BlockId b : w.blocks)
        if (homes[b] == Tier::Host && tg.nvmeHomeable(b) &&
            (tg.blocks[b].kind == BlockKind::Weight) == masters) {
          homes[b] = Tier::Nvme;
          moved += tg.blocks[b].bytesAt(1);
        }
    }
  return moved;
}

namespace {

/// Why homes taking `host` bytes of pinned memory (TaskGraph::homes and
/// its gradient pool), with `slots` bytes of offload slots and the
/// trainer's pinned batch buffers beside them, break the request's host or
/// NVMe budget (Infeasible); success when they do not.
llvm::Error exceedsBudgets(const TaskGraph &tg, int64_t host, int64_t slots,
                           const PlanRequest &req) {
  const int64_t buffers = batchBufferBytes(tg, req.batch);
  if (host + slots + buffers > req.hostBudget) {
    std::string what = formatBytes(host) + " of weights";
    if (req.nvmeBudget > 0)
      what += " (their optimizer state, and 16-bit plans' fp32 masters, on "
              "NVMe where they can be)";
    if (tg.gradPoolBytes > 0)
      what += " (their gradients through a " + formatBytes(tg.gradPoolBytes) +
              " pool)";
    if (tg.copiesFromNvmeMaster)
      what += " (16-bit working copies not kept: rounded from the masters, "
              "those on NVMe read from the drive)";
    else if (tg.copiesFromMaster)
      what += " (16-bit working copies not kept: rounded from the masters)";
    if (slots > 0)
      what += ", offloading " + formatBytes(slots) + " of activations";
    return makeInfeasibleF("homing {0} and the batch buffers' {1} would "
                           "exceed --host-budget {2}",
                           what, formatBytes(buffers),
                           formatBytes(req.hostBudget));
  }
  if (int64_t nvme = tg.homedBytes(Tier::Nvme); nvme > req.nvmeBudget)
    return makeInfeasibleF("homing {0} of optimizer state and master weights "
                           "on NVMe would exceed --nvme-budget {1}",
                           formatBytes(nvme), formatBytes(req.nvmeBudget));
  return llvm::Error::success();
}

/// Whether `tg` homes off the GPU the working copy of a weight that no
/// update writes (frozen, or a constant read in 16 bits).
bool homesFrozenCopy(const TaskGraph &tg) {
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.blocks[b].kind == BlockKind::WeightCopy &&
        tg.homes[b] != Tier::Gpu &&
        std::none_of(
            tg.blocks[b].writers.begin(), tg.blocks[b].writers.end(),
            [&](TaskId t) { return tg.tasks[t].kind == TaskKind::Update; }))
      return true;
  return false;
}

/// Bytes of the gradients homed on the host, and the largest one's range
/// in the gradient pool.
std::pair<int64_t, int64_t> homedGradients(const TaskGraph &tg) {
  int64_t total = 0, largest = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.homes[b] == Tier::Host &&
        tg.blocks[b].kind == BlockKind::WeightGrad) {
      total += tg.blocks[b].bytesAt(1);
      largest =
          std::max(largest, (tg.blocks[b].bytesAt(1) + kGradPoolAlign - 1) /
                                kGradPoolAlign * kGradPoolAlign);
    }
  return {total, largest};
}

/// Pinned host bytes `tg`'s homes take before planning: a pool in place of
/// the gradients it is for (GradPool.h pools every homed gradient it can).
int64_t hostBytesOf(const TaskGraph &tg) {
  const int64_t host = tg.hostBytes();
  return tg.gradPoolBytes > 0
             ? host - homedGradients(tg).first + tg.gradPoolBytes
             : host;
}

/// Makes `homed` fit the host budget beside `slots` bytes of offload slots
/// and the batch buffers: the optimizer state (then fp32 masters) of its
/// largest homed weights to NVMe where there is an NVMe budget, then, where
/// that is not enough, the homed gradients through a pool of what is left
/// (when every host update can start inside the round: not in fp16
/// programs, nor when clipping), then, in 16-bit programs, the working
/// copies rounded from their masters instead of kept at home (twice the
/// link's bytes a copy in: the last resort), those of masters on NVMe last
/// of all (each copy in reads the master from the drive). Returns whether
/// anything changed.
bool fitHost(const TaskGraph &tg, std::span<const WeightBlocks> ws,
             TaskGraph &homed, int64_t slots, const PlanRequest &req) {
  const int64_t buffers = batchBufferBytes(tg, req.batch);
  bool changed = false;
  auto over = [&] {
    return hostBytesOf(homed) + slots + buffers - req.hostBudget;
  };
  if (over() > 0 && req.nvmeBudget > 0)
    changed = spillStateToNvme(tg, ws, homed.homes, over()) > 0;
  // The pool of what the budget leaves, where it holds the largest
  // gradient (and the batch may run in one round: an earlier sub-batch's
  // sum would have nowhere to stay).
  const bool rounds = req.forcedSubBatch > 0 && req.forcedSubBatch < req.batch;
  auto pool = [&] {
    if (over() <= 0 || tg.precision == Precision::FP16 || tg.clipGradNorm > 0 ||
        rounds)
      return;
    auto [grads, largest] = homedGradients(homed);
    int64_t bytes =
        req.hostBudget - buffers - slots - (homed.hostBytes() - grads);
    bytes = bytes / kGradPoolAlign * kGradPoolAlign;
    if (bytes < largest || bytes == homed.gradPoolBytes)
      return;
    homed.gradPoolBytes = bytes;
    changed = true;
  };
  pool();
  // The working copies not kept, those of masters at home first (each copy
  // in then sends the master), then those of masters on NVMe (each copy in
  // reads it from the drive too); each step reverted where it saves no
  // host bytes.
  auto rounding = [&](bool &flag) {
    if (over() <= 0 || flag)
      return;
    const int64_t before = homed.hostBytes();
    const bool wasRounding = homed.copiesFromMaster;
    flag = true;
    homed.copiesFromMaster = true;
    // (Reading masters from the drive adds pinned staging: where that is
    // more than the copies it drops, nothing is gained.)
    if (homed.hostBytes() >= before) {
      flag = false;
      homed.copiesFromMaster = wasRounding;
      return;
    }
    // The pool again, sized anew; none where the copies' bytes were enough.
    homed.gradPoolBytes = 0;
    pool();
    changed = true;
  };
  rounding(homed.copiesFromMaster);
  if (req.nvmeBudget > 0)
    rounding(homed.copiesFromNvmeMaster);
  return changed;
}

/// What the host tier cannot serve yet; success when it can.
llvm::Error checkServable(const TaskGraph &tg, const CostTableFn &tableAt,
                          const PlanRequest &req) {
  if (tg.dp.active())
    return makeError("--host-budget: weights homed on the host are not "
                     "supported with data parallelism yet");
  if (req.forcedChunks > 1)
    return makeError("--host-budget: weights homed on the host are not "
                     "supported with --chunks yet");
  if (req.policy == Policy::Optimal)
    return makeError("--host-budget: the optimal policy's program does not "
                     "model weights homed on the host yet; use another "
                     "policy");
  if (req.nvmeBudget > 0 && (tableAt(1).nvmeReadBytesPerSecond <= 0 ||
                             tableAt(1).nvmeWriteBytesPerSecond <= 0))
    return makeError("--nvme: the device states no NVMe read and write "
                     "rates (nvme_read_gbps and nvme_write_gbps in its "
                     "file), so no optimizer state there can be priced");
  if (tableAt(1).hostUpdateParamsPerSecond <= 0)
    return makeError("--host-budget: the device states no host optimizer "
                     "rate (host_adam_mparams_per_s or host_memory_gbps in "
                     "its file), so no update on the host can be priced");
  return llvm::Error::success();
}

/// The model with every weight on the GPU and no budget: the yardstick of
/// every homing (its ideal time and peak) and what a percentage of the
/// ideal peak (or the lower bound) is of, so every homing plans under the
/// same bytes.
llvm::Expected<PlanOutcome> yardstick(const TaskGraph &tg,
                                      const CostTableFn &tableAt,
                                      const PlanRequest &req,
                                      const PlanOneGraph &planOne) {
  return planOne(tg, tableAt, idealYardstick(req));
}

/// The bytes to move off the GPU for each homing tried, ascending: none;
/// enough to leave the arena a quarter, a half and three quarters of the
/// plan's share; every homeable weight.
std::vector<int64_t> movesToTry(int64_t resident, int64_t share,
                                int64_t homeable) {
  std::vector<int64_t> moves = {0};
  for (int q = 1; q <= 3; ++q) {
    int64_t arena = share / 4 * q;
    moves.push_back(
        std::clamp<int64_t>(resident - (share - arena), 0, homeable));
  }
  moves.push_back(homeable);
  std::sort(moves.begin(), moves.end());
  moves.erase(std::unique(moves.begin(), moves.end()), moves.end());
  return moves;
}

/// The homings to try in ascending bytes moved: movesToTry's, or, where
/// another graph of the model chose already, its homing first, then the
/// larger ones this graph may need.
std::vector<int64_t> movesFor(const TaskGraph &tg, const PlanRequest &req,
                              int64_t share, int64_t homeable) {
  std::vector<int64_t> moves =
      movesToTry(tg.weightSideBytes(), share, homeable);
  if (req.homeBytesAtLeast < 0)
    return moves;
  std::erase_if(moves, [&](int64_t m) { return m < req.homeBytesAtLeast; });
  moves.insert(moves.begin(), std::min(req.homeBytesAtLeast, homeable));
  // And every weight on the GPU where that may fit, when the other graph's
  // homing won by keeping working copies on the GPU: a trade that says
  // nothing of how much this graph must move.
  if (req.homeKeepsCopies && req.homeBytesAtLeast > 0 &&
      tg.weightSideBytes() < share)
    moves.insert(moves.begin(), 0);
  moves.erase(std::unique(moves.begin(), moves.end()), moves.end());
  return moves;
}

/// One search over homings: each planned in full, the fastest kept, and
/// the reason the last one that did not plan gave.
class HomingSearch {
public:
  HomingSearch(const TaskGraph &tg, const CostTableFn &tableAt,
               const PlanRequest &req, const PlanRequest &bytesReq,
               const PlanOneGraph &planOne, const PlanOutcome &yard)
      : ws(homeableWeights(tg)), tg(tg), tableAt(tableAt), req(req),
        bytesReq(bytesReq), planOne(planOne), yard(yard) {}
  ~HomingSearch() { llvm::consumeError(std::move(lastReason)); }

  /// Plans `homed` (null: every weight on the GPU), kept where it is the
  /// fastest so far; false on an error that ends the search (finish()
  /// returns it). Sets `rounds`: the plan's sub-batches, 0 when it did
  /// not plan.
  bool tryHoming(std::shared_ptr<TaskGraph> homed);
  /// The fastest plan, or why none planned.
  llvm::Expected<PlanOutcome> finish() {
    if (!best)
      return std::move(lastReason);
    return std::move(*best);
  }

  const std::vector<WeightBlocks> ws;
  int64_t rounds = 0;
  std::optional<PlanOutcome> best;

private:
  void because(llvm::Error why) {
    llvm::consumeError(std::move(lastReason));
    lastReason = std::move(why);
  }

  const TaskGraph &tg;
  const CostTableFn &tableAt;
  const PlanRequest &req, &bytesReq;
  const PlanOneGraph &planOne;
  const PlanOutcome &yard;
  llvm::Error lastReason = llvm::Error::success();
};

bool HomingSearch::tryHoming(std::shared_ptr<TaskGraph> homed) {
  rounds = 0;
  PlanRequest r = bytesReq;
  if (homed) {
    // What the host budget cannot hold goes to NVMe, or streams.
    fitHost(tg, ws, *homed, 0, req);
    if (auto why = exceedsBudgets(*homed, hostBytesOf(*homed), 0, req)) {
      because(std::move(why));
      return true;
    }
    // A split batch's graph is built from the model's blocks, which the
    // homes would not follow.
    r.chunking = false;
  }
  auto out = planOne(homed ? *homed : tg, tableAt, r);
  if (!out) {
    because(out.takeError());
    return lastReason.isA<Infeasible>();
  }
  // Offloaded activations' slots are pinned host memory too; where they
  // push the host past its budget, more state goes to NVMe or the gradient
  // pool shrinks, and the homing is planned again (once: the slots hardly
  // change).
  // Every weight on the GPU may plan in chunks, whose graph (not the
  // model's) the plan's residencies are of.
  const TaskGraph *planned = &out->scheduledGraph(homed ? *homed : tg);
  int64_t slots = offloadSlotBytes(*planned, out->plan);
  const int64_t buffers = batchBufferBytes(tg, req.batch);
  if (homed && out->plan.hostMemoryBytes() + slots + buffers > req.hostBudget) {
    auto again = std::make_shared<TaskGraph>(*homed);
    bool moved = fitHost(tg, ws, *again, slots, req);
    llvm::Error over = exceedsBudgets(*again, hostBytesOf(*again), slots, req);
    bool fits = !over;
    llvm::consumeError(std::move(over));
    if (moved && fits) {
      auto replanned = planOne(*again, tableAt, r);
      if (!replanned && !replanned.errorIsA<Infeasible>()) {
        because(replanned.takeError());
        return false;
      }
      if (replanned) {
        homed = again;
        planned = homed.get();
        out = std::move(replanned);
        slots = offloadSlotBytes(*planned, out->plan);
      } else {
        llvm::consumeError(replanned.takeError());
      }
    }
  }
  if (auto why =
          exceedsBudgets(*planned, out->plan.hostMemoryBytes(), slots, req)) {
    because(std::move(why));
    return true;
  }
  rounds = out->plan.numSubBatches;
  out->homed = homed;
  if (homed) {
    // Overhead is over the model's ideal, every weight on the GPU.
    out->idealSeconds = yard.idealSeconds;
    out->idealPeakBytes = yard.idealPeakBytes;
    out->plan.summary.idealSeconds = yard.idealSeconds;
  }
  // The fastest; on a tie, the fewer bytes moved (tried first).
  if (!best ||
      out->plan.summary.plannedSeconds < best->plan.summary.plannedSeconds)
    best = std::move(*out);
  return true;
}

} // namespace

llvm::Expected<PlanOutcome> planAcrossTiers(const TaskGraph &tg,
                                            const CostTableFn &tableAt,
                                            const PlanRequest &req,
                                            const PlanOneGraph &planOne) {
  if (policyDef(req.policy).rules.unbounded)
    return planOne(tg, tableAt, req); // no budget: nothing to move
  if (auto err = checkServable(tg, tableAt, req))
    return std::move(err);
  auto yard = yardstick(tg, tableAt, req, planOne);
  if (!yard)
    return yard.takeError();
  const PlanRequest bytesReq = withBudget(
      req, resolveBudget(req, yard->idealPeakBytes, yard->lowerBound.bytes));
  HomingSearch search(tg, tableAt, req, bytesReq, planOne, *yard);
  int64_t homeable = 0;
  for (const WeightBlocks &w : search.ws)
    homeable += w.bytes;
  const int64_t share = bytesReq.budget - bytesReq.libraryReserve;
  size_t lastCount = ~size_t(0);
  bool keptAll = false; // the kept variant of every weight homed was tried
  // With another graph's homing to start from: stop once one from there
  // up plans.
  bool atLeastPlanned = false;
  auto plannedFrom = [&](int64_t move) {
    atLeastPlanned =
        atLeastPlanned || (req.homeBytesAtLeast >= 0 &&
                           move >= req.homeBytesAtLeast && search.rounds > 0);
  };
  for (int64_t move : movesFor(tg, req, share, homeable)) {
    if (atLeastPlanned)
      break;
    if (move == 0) {
      if (!search.tryHoming(nullptr))
        return search.finish();
      plannedFrom(move);
      continue;
    }
    auto homed = std::make_shared<TaskGraph>(tg);
    homed->homes = homesMoving(tg, search.ws, move);
    // Two targets may round up to the same weights.
    size_t count = static_cast<size_t>(
        std::count(homed->homes.begin(), homed->homes.end(), Tier::Host));
    if (count == lastCount)
      continue;
    lastCount = count;
    if (!search.tryHoming(homed))
      return search.finish();
    plannedFrom(move);
    // The same weights with their 16-bit working copies kept on the GPU
    // (ZeRO-Offload's layout), where they fit: no round copies them in,
    // one upload a step refreshes them, and the arena is smaller. It pays
    // where the rounds copy each working copy in again and again, and for
    // frozen weights, whose copies are never uploaded again (a LoRA base
    // model): tried only where this homing planned in several sub-batches
    // or homes a frozen weight's copy (a one-round plan copies each in
    // once or twice, about what the upload costs, and planning it again
    // doubled the time of 16-bit searches). A graph starting from
    // another's homing tries it only where that one kept copies.
    // In fp32 and tf32 the copies to keep are added here, so a graph that
    // starts from another's homing tries them whatever that one did.
    auto kept = std::make_shared<TaskGraph>(*homed);
    const bool fullCopies = addFullPrecisionCopies(*kept) > 0;
    if ((req.homeBytesAtLeast < 0 || req.homeKeepsCopies || fullCopies) &&
        (search.rounds > 1 || homesFrozenCopy(*homed)) &&
        keepCopiesOnGpu(*kept, kept->homes) > 0 &&
        kept->weightSideBytes() < share) {
      keptAll = keptAll || move >= homeable;
      if (!search.tryHoming(kept))
        return search.finish();
    }
  }
  // A graph that starts from another's homing stops at the first that
  // plans; where that one kept copies, ZeRO-Offload's layout (every weight
  // homed, the working copies kept) is tried too.
  const std::optional<PlanOutcome> &best = search.best;
  if (req.homeBytesAtLeast >= 0 && req.homeKeepsCopies && !keptAll && best &&
      (best->plan.numSubBatches > 1 ||
       (best->homed && homesFrozenCopy(*best->homed)))) {
    auto kept = std::make_shared<TaskGraph>(tg);
    kept->homes = homesMoving(tg, search.ws, homeable);
    addFullPrecisionCopies(*kept);
    if (keepCopiesOnGpu(*kept, kept->homes) > 0 &&
        kept->weightSideBytes() < share && !search.tryHoming(kept))
      return search.finish();
  }
  return search.finish();
}

} // namespace memfit
