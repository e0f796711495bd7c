//===- TimeBound.cpp - A proven lower bound on a plan's iteration time ----===//
#include "passes/solve/TimeBound.h"

#include "passes/analysis/Liveness.h"

#include "passes/solve/RoundProgram.h"
#include "passes/solve/Solver.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace memfit {
namespace {

using Terms = RoundProgram::Terms;

/// Per step of the round, in ms: the tasks before it after the first load
/// (`before`, a serial compute stream) and the earliest it can start
/// (`earliest`, also waiting for its loads).
struct StepTimes {
  std::vector<double> before, earliest;
  double total = 0; // the round at its fastest, loads waited for
  double tasksFrom(size_t t) const { return before.back() - before[t]; }
};

/// `first`: the iteration's first round, whose batch data (inputs and
/// labels, per chunk) starts on the host and comes in on the one copy-in
/// stream: a step cannot start before every batch block used by then is in
/// (later rounds may load theirs while an earlier one runs).
StepTimes stepTimes(const TaskGraph &tg, const std::vector<TaskId> &order,
                    const CostTable &costs, bool first) {
  const int64_t b = costs.subBatch;
  size_t n = order.size();
  std::vector<double> loadBy(n + 1, 0); // ms of loads needed by each step
  if (first) {
    std::vector<bool> seen(tg.blocks.size(), false);
    for (size_t t = 0; t < n; ++t)
      for (BlockId read : tg.tasks[order[t]].reads) {
        BlockId blk = storageOf(tg, read);
        if (!isBatchData(tg.blocks[blk].kind) || seen[blk])
          continue;
        seen[blk] = true;
        loadBy[t] +=
            double(tg.blocks[blk].bytesAt(b)) * 1e3 / costs.h2dBytesPerSecond;
      }
    for (size_t t = 1; t <= n; ++t)
      loadBy[t] += loadBy[t - 1];
  }
  StepTimes st;
  st.before = stepStartsMs(order, costs, loadBy[0]);
  st.earliest.assign(n + 1, loadBy[0]);
  for (size_t t = 0; t < n; ++t)
    st.earliest[t + 1] = std::max(
        st.earliest[t] + costs.fastest(order[t]).seconds * 1e3, loadBy[t + 1]);
  st.total = st.earliest[n];
  return st;
}

/// The steps over the budget (live bytes and the fastest algorithm's
/// workspace), most over first, at most `maxSteps`: where the program grows
/// too large, the steps left out are the least constraining ones.
std::vector<size_t> stepsOverBudget(const std::vector<int64_t> &need,
                                    int64_t arenaBudget, size_t maxSteps) {
  std::vector<size_t> steps;
  for (size_t t = 0; t < need.size(); ++t)
    if (need[t] > arenaBudget)
      steps.push_back(t);
  std::stable_sort(steps.begin(), steps.end(),
                   [&](size_t x, size_t y) { return need[x] > need[y]; });
  if (steps.size() > maxSteps)
    steps.resize(maxSteps);
  return steps;
}

/// The relaxation of one round (RoundProgram.h, its decisions shares), a
/// step at a time: per step its shares, re-runs and their inputs, its
/// algorithm, memory and copies; then the compute stream over the steps
/// kept.
class Relaxation {
public:
  Relaxation(const TaskGraph &tg, const std::vector<TaskId> &order,
             const CostTable &costs, int64_t arenaBudget, const Liveness &lv,
             const StepTimes &times)
      : tg(tg), order(order), costs(costs), arenaBudget(arenaBudget), lv(lv),
        times(times), rp(costs, /*integral=*/false), b(costs.subBatch) {
    touched.resize(order.size());
    for (size_t t = 0; t < order.size(); ++t) {
      const Task &task = tg.tasks[order[t]];
      for (const auto *list : {&task.reads, &task.writes})
        for (BlockId blk : *list)
          touched[t].push_back(storageOf(tg, blk));
      std::sort(touched[t].begin(), touched[t].end());
    }
    T = rp.roundEnd(times.total);
  }

  /// Adds step `t`'s columns and rows; false, and the program as it was,
  /// where they would pass `maxColumns`.
  bool addStep(size_t t, int64_t maxColumns);
  /// The compute stream's rows over the steps added.
  void addComputeStream();
  size_t stepsKept() const { return kept.size(); }
  /// The relaxation's optimum in ms, or none; `hints`, when given, get its
  /// point.
  std::optional<double> solve(BoundHints *hints) const;

private:
  /// What one step adds, gathered until its rows are written.
  struct Step {
    Terms memory, out, in, redo, slower;
    std::map<TaskId, int> rerun; // per forward task: run again after t
    int64_t columns = 0;
  };
  /// Per step kept: its start column, its re-runs, and the time its
  /// algorithm choice adds over the fastest (terms in that step's choice
  /// columns); their rows are written once every step is in.
  struct Kept {
    size_t t;
    int S;
    Terms redo, slower;
  };
  /// The share columns of each block, for the hints: (block, column, by
  /// recompute), in the order the steps were added (most over first).
  struct Share {
    BlockId block;
    int col;
    bool recompute;
  };

  bool touches(size_t t, BlockId blk) const {
    return std::binary_search(touched[t].begin(), touched[t].end(), blk);
  }
  bool recomputable(BlockId blk) const;
  int rerunOf(Step &s, TaskId w, std::vector<TaskId> *work);
  void blockShares(size_t t, Step &s);
  void rerunInputs(size_t t, Step &s);
  void algorithmChoice(size_t t, Step &s);

  const TaskGraph &tg;
  const std::vector<TaskId> &order;
  const CostTable &costs;
  const int64_t arenaBudget;
  const Liveness &lv;
  const StepTimes &times;
  RoundProgram rp;
  const int64_t b;
  std::vector<std::vector<BlockId>> touched; // storage blocks, per step
  int T = -1;
  std::vector<Share> shares;
  int firstStepColumnsEnd = 0; // the step most over the budget: its columns
  std::vector<Kept> kept;
};

// A block may come back by recompute when forward tasks alone write it (a
// wider set than the scheduler's: the bound may only be loosened).
bool Relaxation::recomputable(BlockId blk) const {
  const Block &k = tg.blocks[blk];
  if (k.writers.empty() ||
      (k.kind != BlockKind::Activation && k.kind != BlockKind::Stats))
    return false;
  return std::all_of(k.writers.begin(), k.writers.end(), [&](TaskId w) {
    return tg.tasks[w].kind == TaskKind::Forward;
  });
}

/// The re-run column of `w` at this step, added (with its time in `redo`,
/// and onto `work` when given) the first time.
int Relaxation::rerunOf(Step &s, TaskId w, std::vector<TaskId> *work) {
  auto [it, fresh] = s.rerun.try_emplace(w, -1);
  if (fresh) {
    it->second = rp.rerun();
    s.redo.push_back({it->second, -rp.rerunMs(w)});
    if (work)
      work->push_back(w);
  }
  return it->second;
}

// Per block live but not used at t: its share away by copy and, where it
// may be recomputed, by re-running its writers.
void Relaxation::blockShares(size_t t, Step &s) {
  for (BlockId blk = 0; blk < (BlockId)tg.blocks.size(); ++blk) {
    const Block &k = tg.blocks[blk];
    if (isWeightSide(k.kind) || k.viewOf >= 0 || lv.start[blk] < 0 ||
        lv.start[blk] >= (int32_t)t || lv.end[blk] <= (int32_t)t ||
        touches(t, blk))
      continue;
    double bytes = static_cast<double>(k.bytesAt(b));
    if (bytes <= 0)
      continue;
    int off = rp.offload();
    shares.push_back({blk, off, false});
    s.memory.push_back({off, bytes});
    s.out.push_back({off, -rp.copyOutMs(bytes)});
    s.in.push_back({off, -rp.copyInMs(bytes)});
    s.columns += 1;
    if (recomputable(blk)) {
      int rec = rp.recompute(off);
      shares.push_back({blk, rec, true});
      s.memory.push_back({rec, bytes});
      for (TaskId w : k.writers)
        rp.rerunFor(rerunOf(s, w, nullptr), rec);
      s.columns += 1;
    }
  }
}

// A forward task runs again only with its inputs on the device. An input
// already past its last use at t was kept on the device (its bytes count
// at t), or is copied back (it was copied out), or is made again by its
// own forward task, which then needs its inputs too.
void Relaxation::rerunInputs(size_t t, Step &s) {
  std::vector<TaskId> work;
  for (const auto &entry : s.rerun)
    work.push_back(entry.first);
  std::map<BlockId, std::pair<int, int>> past; // kept, copied back
  while (!work.empty()) {
    TaskId w = work.back();
    work.pop_back();
    int rw = s.rerun.at(w);
    for (BlockId read : tg.tasks[w].reads) {
      BlockId g = storageOf(tg, read);
      const Block &gb = tg.blocks[g];
      if (isWeightSide(gb.kind) || lv.start[g] < 0 || lv.end[g] >= (int32_t)t)
        continue; // resident, or live at t (present or modelled above)
      double bytes = static_cast<double>(gb.bytesAt(b));
      auto [pit, freshPast] = past.try_emplace(g, std::pair<int, int>{});
      if (freshPast) {
        int keptCol = rp.keptInput();
        pit->second = {keptCol, rp.copiedBack()};
        s.memory.push_back({pit->second.first, -bytes});
        s.out.push_back({pit->second.second, -rp.copyOutMs(bytes)});
        s.in.push_back({pit->second.second, -rp.copyInMs(bytes)});
        s.columns += 2;
      }
      Terms producers;
      if (recomputable(g))
        for (TaskId pw : gb.writers)
          producers.push_back({rerunOf(s, pw, &work), 1});
      rp.rerunInput(pit->second.first, pit->second.second, rw, producers);
    }
  }
}

// The algorithm the step runs, as a convex combination of the task's
// algorithms: their workspace takes arena, their time above the fastest
// delays this step's successors.
void Relaxation::algorithmChoice(size_t t, Step &s) {
  const std::vector<AlgoCost> &algos = costs.tasks[order[t]];
  if (algos.size() <= 1 || algos.front().workspace <= 0)
    return;
  Terms pick;
  const double fast = algos.front().seconds * 1e3;
  for (const AlgoCost &a : algos) {
    int x = rp.algorithm();
    pick.push_back({x, 1});
    s.memory.push_back({x, -static_cast<double>(a.workspace)});
    if (a.seconds * 1e3 > fast)
      s.slower.push_back({x, a.seconds * 1e3 - fast});
  }
  rp.algorithmPick(pick);
  s.columns += static_cast<int64_t>(algos.size());
}

bool Relaxation::addStep(size_t t, int64_t maxColumns) {
  LinearProgram::Mark before = rp.program().mark();
  Step s;
  blockShares(t, s);
  rerunInputs(t, s);
  algorithmChoice(t, s);
  s.columns += static_cast<int64_t>(s.rerun.size()) + 1;
  if (int64_t(before.columns) + s.columns > maxColumns) {
    while (!shares.empty() && shares.back().col >= (int)before.columns)
      shares.pop_back();
    rp.program().rollback(before);
    return false;
  }
  if (kept.empty())
    firstStepColumnsEnd = rp.program().numColumns();
  rp.memory(s.memory, static_cast<double>(lv.liveBytes[t] - arenaBudget));
  int S = rp.start(times.earliest[t]);
  rp.copiedOutBefore(std::move(s.out), S);     // copied out before t starts
  rp.copiedBackBetween(std::move(s.in), T, S); // copied back after it starts
  kept.push_back({t, S, std::move(s.redo), std::move(s.slower)});
  return true;
}

// The compute stream is serial: a step starts after every earlier step's
// slower algorithm, and the round ends after the rest of the tasks, the
// re-runs and every later step's slower algorithm.
void Relaxation::addComputeStream() {
  Terms allSlower = {{T, 1}};
  for (const Kept &k : kept) {
    Terms start = {{k.S, 1}};
    Terms end = k.redo;
    end.push_back({T, 1});
    end.push_back({k.S, -1});
    for (const Kept &o : kept)
      for (auto [col, ms] : o.slower) {
        if (o.t < k.t)
          start.push_back({col, -ms});
        else
          end.push_back({col, -ms});
      }
    if (start.size() > 1)
      rp.computeStream(start, times.before[k.t]);
    rp.computeStream(end, times.tasksFrom(k.t)); // the rest, and the re-runs
    for (auto [col, ms] : k.slower)
      allSlower.push_back({col, -ms});
  }
  if (allSlower.size() > 1)
    rp.computeStream(allSlower, times.before.back());
}

std::optional<double> Relaxation::solve(BoundHints *hints) const {
  std::optional<Solution> sol = solveLinear(rp.program());
  if (!sol)
    return std::nullopt;
  if (!hints)
    return sol->objective;
  // Per block: its share at the step most over the budget (the first
  // added), and its mean share over the steps it has columns at.
  size_t nb = tg.blocks.size();
  hints->peak.offload.assign(nb, 0);
  hints->peak.recompute.assign(nb, 0);
  hints->mean.offload.assign(nb, 0);
  hints->mean.recompute.assign(nb, 0);
  std::vector<int> count[2] = {std::vector<int>(nb, 0),
                               std::vector<int>(nb, 0)};
  for (const Share &sh : shares) {
    double v = sol->x[sh.col];
    auto &mean = sh.recompute ? hints->mean.recompute : hints->mean.offload;
    auto &peak = sh.recompute ? hints->peak.recompute : hints->peak.offload;
    mean[sh.block] += v;
    ++count[sh.recompute][sh.block];
    if (sh.col < firstStepColumnsEnd)
      peak[sh.block] = v;
  }
  for (int r = 0; r < 2; ++r) {
    auto &mean = r ? hints->mean.recompute : hints->mean.offload;
    for (size_t blk = 0; blk < mean.size(); ++blk)
      if (count[r][blk])
        mean[blk] /= count[r][blk];
  }
  return sol->objective;
}

/// A weight-side block homed off the device leaves for free after each use
/// (its home keeps it), so the relaxation, which cannot move weight-side
/// blocks, counts its bytes only at the steps that read or write it:
/// counted from first to last use, a weight read in the forward and again
/// in the backward would fill the arena in between and leave no program.
void onlyWhereUsed(const TaskGraph &tg, int64_t subBatch, Liveness &lv) {
  if (tg.homes.empty())
    return;
  const size_t steps = lv.order.size();
  std::vector<int64_t> unused(steps + 1, 0);
  std::vector<std::vector<int32_t>> usedAt(tg.blocks.size());
  for (int32_t s = 0; s < (int32_t)steps; ++s) {
    const Task &t = tg.tasks[lv.order[s]];
    for (const auto *list : {&t.reads, &t.writes})
      for (BlockId b : *list)
        usedAt[storageOf(tg, b)].push_back(s);
  }
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const Block &blk = tg.blocks[b];
    if (tg.homeOf(b) == Tier::Gpu || !isWeightSide(blk.kind) ||
        blk.viewOf >= 0 || lv.start[b] < 0)
      continue;
    // Every step of [start, end] but those that touch it.
    const int64_t bytes = blk.bytesAt(subBatch);
    unused[lv.start[b]] += bytes;
    unused[lv.end[b] + 1] -= bytes;
    std::vector<int32_t> &at = usedAt[b];
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (int32_t s : at) {
      unused[s] -= bytes;
      unused[s + 1] += bytes;
    }
  }
  int64_t off = 0;
  for (size_t s = 0; s < steps; ++s) {
    off += unused[s];
    lv.liveBytes[s] -= off;
  }
}

/// The round's bound in seconds, or none.
/// `first`: the iteration's first round, which cannot start before its
/// input and labels are on the device.
std::optional<double> roundBound(const TaskGraph &tg,
                                 const std::vector<TaskId> &order,
                                 const CostTable &costs, int64_t arenaBudget,
                                 bool first, const BoundOptions &opts,
                                 std::string *why, BoundHints *hints) {
  Liveness lv = computeLiveness(tg, order, costs.subBatch, /*inPlace=*/true);
  onlyWhereUsed(tg, costs.subBatch, lv);
  StepTimes times = stepTimes(tg, order, costs, first);
  // What a step needs at its fastest: the live bytes and the fastest
  // algorithm's workspace. A plan runs a step either with some algorithm's
  // workspace in the arena or at that algorithm's slower time.
  std::vector<int64_t> need(order.size());
  for (size_t t = 0; t < order.size(); ++t)
    need[t] = lv.liveBytes[t] + costs.fastest(order[t]).workspace;
  if (std::all_of(need.begin(), need.end(),
                  [&](int64_t x) { return x <= arenaBudget; }))
    return times.total / 1e3; // nothing need leave: the tasks alone

  Relaxation relax(tg, order, costs, arenaBudget, lv, times);
  // Where a step would make the program too large, it and the steps after
  // it (less over the budget) are left out.
  for (size_t t : stepsOverBudget(need, arenaBudget, opts.maxSteps))
    if (!relax.addStep(t, opts.maxColumns))
      break;
  relax.addComputeStream();
  if (relax.stepsKept() == 0) {
    if (why)
      *why = llvm::formatv("one step alone would pass {0} columns",
                           opts.maxColumns);
    return std::nullopt;
  }
  auto best = relax.solve(hints);
  if (!best) {
    if (why)
      *why = "the solver found no bound";
    return std::nullopt;
  }
  return std::max(*best, times.total) / 1e3;
}

/// The round's order (its tasks without recomputation, so that what is
/// derived from it holds for every plan of this order, sub-batch and arena:
/// KnownBound) split at its loss, and the homed blocks on either side.
struct LossSplit {
  bool hasLoss = false;
  TaskId loss = -1;
  std::vector<TaskId> before, after; // the tasks before the loss, after it
  /// Per storage block homed off the GPU: read up to the loss (the loss
  /// included); read so before the round writes it (so copied in before the
  /// loss); read after the loss; written after the loss.
  std::vector<char> readBefore, inBefore, readAfter, writtenAfter;
};

LossSplit splitAtLoss(const TaskGraph &tg, const Plan &plan) {
  const size_t nb = tg.blocks.size();
  LossSplit s;
  s.readBefore.assign(nb, 0);
  s.inBefore.assign(nb, 0);
  s.readAfter.assign(nb, 0);
  s.writtenAfter.assign(nb, 0);
  std::vector<char> seen(nb, 0);
  auto homed = [&](BlockId b) { return tg.homeOf(b) != Tier::Gpu; };
  for (const Instr &in : plan.round) {
    if (in.kind != InstrKind::Run || in.recompute)
      continue;
    const Task &t = tg.tasks[in.task];
    if (s.hasLoss) {
      s.after.push_back(in.task);
      for (BlockId r : t.reads)
        s.readAfter[storageOf(tg, r)] |= homed(storageOf(tg, r));
      for (BlockId w : t.writes)
        s.writtenAfter[storageOf(tg, w)] |= homed(storageOf(tg, w));
      continue;
    }
    for (BlockId r : t.reads) {
      const BlockId b = storageOf(tg, r);
      s.readBefore[b] |= homed(b);
      // A block the round writes before it reads it needs no copy in.
      s.inBefore[b] |= !seen[b] && homed(b);
      seen[b] = 1;
    }
    for (BlockId w : t.writes)
      seen[storageOf(tg, w)] = 1;
    if (t.kind == TaskKind::Loss) {
      s.loss = in.task;
      s.hasLoss = true;
    } else {
      s.before.push_back(in.task);
    }
  }
  return s;
}

/// The least extra copy-in time (seconds) and drive time a round spends
/// copying homed blocks in a second time. A homed block the round reads
/// both before its loss and after it (a weight read by the forward and the
/// backward pass) is either in the arena all through the loss or copied in
/// twice; those in the arena then are live together, so at most `arena`
/// bytes of them escape the second copy. Which ones escape is the plan's
/// choice: the fewest seconds come from keeping the dearest per byte, so
/// the rest, fractionally, is a lower bound (for each resource on its own).
std::pair<double, double> recopyBound(const TaskGraph &tg,
                                      const LossSplit &split,
                                      const CostTable &full, int64_t arena) {
  struct Item {
    int64_t bytes;
    double in, drive;
  };
  std::vector<Item> items;
  int64_t both = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (split.readBefore[b] && split.readAfter[b]) {
      const int64_t bytes = tg.blocks[b].bytesAt(full.subBatch);
      items.push_back({bytes, full.copyInSeconds(tg, b, bytes),
                       full.nvmeCopyReadSeconds(tg, b)});
      both += bytes;
    }
  const int64_t excess = both - std::max<int64_t>(arena, 0);
  if (excess <= 0)
    return {0, 0};
  // The cheapest `excess` bytes by `cost` per byte, fractionally.
  auto cheapest = [&](double Item::*cost) {
    std::sort(items.begin(), items.end(), [&](const Item &a, const Item &b) {
      return a.*cost * double(b.bytes) < b.*cost * double(a.bytes);
    });
    double seconds = 0;
    int64_t left = excess;
    for (const Item &it : items) {
      if (left <= 0)
        break;
      const int64_t take = std::min(left, it.bytes);
      seconds +=
          it.*cost * double(take) / double(std::max<int64_t>(it.bytes, 1));
      left -= take;
    }
    return seconds;
  };
  return {cheapest(&Item::in), cheapest(&Item::drive)};
}

/// A round's floor where blocks are homed off the GPU, split at its loss.
/// The loss starts once every homed block read up to it has come in, one
/// after another on the one copy-in stream, and once the tasks before it
/// have run, one after another on the compute stream. From then on the
/// loss and the backward tasks run; the second copies in (`recopyIn`) come
/// in, since what is not in the arena through the loss is copied in after
/// it starts; and every homed block written after the loss goes home on
/// the one copy-out stream, each after its writer, so after the loss ends.
/// 0 for a round without a loss.
double lossSplitFloor(const TaskGraph &tg, const LossSplit &split,
                      const CostTable &c, double recopyIn) {
  if (!split.hasLoss)
    return 0;
  double before = 0, after = 0;
  for (TaskId t : split.before)
    before += c.fastest(t).seconds;
  for (TaskId t : split.after)
    after += c.fastest(t).seconds;
  const double loss = c.fastest(split.loss).seconds;
  double in = 0, out = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const int64_t bytes = tg.blocks[b].bytesAt(c.subBatch);
    if (split.inBefore[b])
      in += c.copyInSeconds(tg, b, bytes);
    if (split.writtenAfter[b])
      out += c.copyOutSeconds(bytes);
  }
  return std::max(in, before) + std::max({loss + after, loss + out, recopyIn});
}

} // namespace

std::optional<IterationBound>
iterationBound(const TaskGraph &tg, const Plan &plan, const CostTable &full,
               const CostTable *last, const BoundOptions &opts,
               std::string *why) {
  std::vector<TaskId> order;
  for (const Instr &in : plan.round)
    if (in.kind == InstrKind::Run && !in.recompute)
      order.push_back(in.task);
  int64_t arena = plan.planBudget() - plan.residentBytes;
  // The first round (which loads its input before it starts), the full
  // rounds after it, and a smaller last one.
  int64_t k = plan.numSubBatches;
  const CostTable &lastTable = last ? *last : full;
  IterationBound out;
  auto one = [&](const CostTable &costs, bool first,
                 BoundHints *hints = nullptr) -> std::optional<double> {
    return roundBound(tg, order, costs, arena, first, opts, why, hints);
  };
  auto firstRound = one(k == 1 ? lastTable : full, true, &out.hints);
  if (!firstRound)
    return std::nullopt;
  double rounds = *firstRound;
  // The rounds before the last: the host's updates start no earlier.
  double beforeLast = k > 1 ? *firstRound : 0;
  if (k > 1) {
    auto lastRound = one(lastTable, false);
    if (!lastRound)
      return std::nullopt;
    rounds += *lastRound;
  }
  if (k > 2) {
    auto middle = last ? one(full, false) : one(lastTable, false);
    if (!middle)
      return std::nullopt;
    rounds += double(k - 2) * *middle;
    beforeLast += double(k - 2) * *middle;
  }
  // The relaxation leaves the blocks homed on the host out (as it does the
  // resident ones: neither their bytes nor their copies), which only
  // weakens it; each round copies in every such block it uses and copies
  // out every one it writes at least once, so a round takes no less than
  // either copy stream's share of them.
  double homeIn = 0, homeOut = 0, driveIn = 0, forwardIn = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const Block &blk = tg.blocks[b];
    if (tg.homeOf(b) == Tier::Gpu)
      continue;
    bool read = false, written = false, readForward = false;
    for (TaskId t : blk.readers) {
      const TaskKind kind = tg.tasks[t].kind;
      read |= kind != TaskKind::Update;
      readForward |= kind == TaskKind::Forward || kind == TaskKind::Loss;
    }
    for (TaskId t : blk.writers)
      written |= tg.tasks[t].kind != TaskKind::Update;
    int64_t bytes = blk.bytesAt(1);
    if (read || (written && k > 1)) {
      homeIn += full.copyInSeconds(tg, b, bytes);
      driveIn += full.nvmeCopyReadSeconds(tg, b);
    }
    if (readForward)
      forwardIn += full.copyInSeconds(tg, b, bytes);
    if (written)
      homeOut += full.copyOutSeconds(bytes);
  }
  const LossSplit split = splitAtLoss(tg, plan);
  const auto [recopyIn, recopyDrive] = recopyBound(tg, split, full, arena);
  homeIn += recopyIn;
  driveIn += recopyDrive;
  rounds = std::max(rounds, double(k) * std::max(homeIn, homeOut));
  beforeLast = std::max(beforeLast, double(k - 1) * std::max(homeIn, homeOut));
  if (!tg.homes.empty()) {
    const double floor = lossSplitFloor(tg, split, full, recopyIn);
    const double lastFloor =
        last ? lossSplitFloor(tg, split, lastTable, recopyIn) : floor;
    rounds = std::max(rounds, double(k - 1) * floor + lastFloor);
    beforeLast = std::max(beforeLast, double(k - 1) * floor);
  }
  // The host's updates run beside the GPU's, and may start inside the last
  // round (HostOverlap.h).
  double update = 0, hostUpdate = 0, upload = 0, drive = double(k) * driveIn;
  for (const Instr &in : plan.update)
    if (in.kind == InstrKind::Run && in.onHost) {
      const int64_t nvme = nvmeUpdateBytes(tg, tg.tasks[in.task]);
      hostUpdate +=
          full.hostUpdateSeconds(updatedParams(tg, tg.tasks[in.task]), nvme);
      if (driveIn > 0)
        drive += full.nvmeUpdateSeconds(nvme);
      if (int64_t bytes = hostUploadBytes(tg, tg.tasks[in.task]))
        upload += full.copyInSeconds(bytes);
    } else if (in.kind == InstrKind::Run)
      update += full.fastest(in.task).seconds;
  // No gradient is final before the last round's forward pass and loss
  // have run (every gradient depends on the loss), one task after another
  // on the compute stream, each homed block they read copied in before
  // (one after another on the copy-in stream; a round keeps nothing from
  // the one before): the host's first update starts no earlier.
  double forward = 0;
  if (hostUpdate > 0) {
    for (TaskId t : order)
      if (tg.tasks[t].kind == TaskKind::Forward ||
          tg.tasks[t].kind == TaskKind::Loss)
        forward += lastTable.fastest(t).seconds;
    forward = std::max(forward, forwardIn);
  }
  out.seconds = std::max(rounds + update, beforeLast + forward + hostUpdate);
  // Clipping reads every gradient once they are all final, and every
  // update waits for the norm (HostOverlap.h leaves such programs alone).
  if (const double clip = full.gradientClipSeconds(tg); clip > 0)
    out.seconds = rounds + clip + std::max(update, hostUpdate);
  // An fp16 program's loss scale decides only after the last round whether
  // any update runs, so no host update starts before the rounds end
  // (HostOverlap.h leaves such programs alone).
  if (tg.precision == Precision::FP16)
    out.seconds = std::max(out.seconds, rounds + hostUpdate);
  // Working copies kept on the GPU are uploaded after the rounds, one
  // after another on the host-to-device link.
  out.seconds = std::max(out.seconds, rounds + upload);
  // One drive serves the copies in that read masters from NVMe and the
  // host updates that stream state through it.
  out.seconds = std::max(out.seconds, drive);
  return out;
}

} // namespace memfit
