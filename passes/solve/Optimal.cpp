//===- Optimal.cpp - Keep, recompute or offload: an integral program ------===//
#include "passes/solve/Optimal.h"

#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Liveness.h"

#include "passes/solve/RoundProgram.h"
#include "passes/solve/Solver.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <vector>

namespace memfit {
namespace {

using Terms = RoundProgram::Terms;

/// Per storage block, its steps of use; a block may be absent over any gap
/// between two of them (offloaded), and over the one from its last forward
/// use to its first backward use (lastFwd, firstBwd: it crosses) also
/// recomputed.
struct BlockUses {
  std::vector<std::vector<int32_t>> uses;
  std::vector<int32_t> lastFwd, firstBwd;
  int32_t firstBackward = 0; // the first step not a forward task
};

BlockUses blockUses(const TaskGraph &tg, const std::vector<TaskId> &order) {
  const size_t n = order.size(), nb = tg.blocks.size();
  BlockUses bu;
  bu.firstBackward = static_cast<int32_t>(n);
  for (size_t t = 0; t < n; ++t)
    if (tg.tasks[order[t]].kind != TaskKind::Forward &&
        bu.firstBackward == int32_t(n))
      bu.firstBackward = static_cast<int32_t>(t);
  bu.uses.resize(nb);
  for (size_t t = 0; t < n; ++t) {
    const Task &task = tg.tasks[order[t]];
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId x : *list) {
        BlockId sb = storageOf(tg, x);
        if (isWeightSide(tg.blocks[sb].kind))
          continue;
        std::vector<int32_t> &u = bu.uses[sb];
        if (u.empty() || u.back() != int32_t(t))
          u.push_back(static_cast<int32_t>(t));
      }
  }
  bu.lastFwd.assign(nb, -1);
  bu.firstBwd.assign(nb, -1);
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk) {
    const std::vector<int32_t> &u = bu.uses[blk];
    for (size_t k = 0; k + 1 < u.size(); ++k)
      if (u[k] < bu.firstBackward && u[k + 1] >= bu.firstBackward) {
        bu.lastFwd[blk] = u[k];
        bu.firstBwd[blk] = u[k + 1];
      }
  }
  return bu;
}

/// The integral program of one round (RoundProgram.h) over every step:
/// per gap of a block an offload, per crossing block a recompute, their
/// re-runs, per step its start and, where the fastest workspace may not
/// fit, its slow algorithm. Built in the order of the methods, each one
/// family of constraints.
class OptimalProgram {
public:
  OptimalProgram(const TaskGraph &tg, const std::vector<TaskId> &order,
                 const CostTable &costs, int64_t arenaBytes, bool inPlace)
      : tg(tg), order(order), costs(costs), arenaBytes(arenaBytes),
        n(order.size()), nb(tg.blocks.size()), b(costs.subBatch),
        lv(computeLiveness(tg, order, b, inPlace)), bu(blockUses(tg, order)),
        recomputable(recomputableBlocks(tg)),
        before(stepStartsMs(order, costs, 0)), total(before[n]),
        rp(costs, /*integral=*/true), rec(nb, -1) {
    T = rp.roundEnd(total);
  }

  void gapColumns();
  void reruns();
  void offloadWindows();
  void computeStream();
  void stepRows();
  void copyBackRows();
  /// Nothing to decide: no gap, no re-run.
  bool empty() const { return run.empty() && gaps.empty(); }
  /// Every candidate copied out, no re-runs, every step at its
  /// zero-workspace algorithm.
  std::vector<double> start() const;
  OptimalDecisions decisions(const Solution *sol) const;
  const LinearProgram &program() const { return rp.program(); }

private:
  struct Gap {
    BlockId blk;
    int32_t from, to; // uses; absent strictly between
    bool crosses;
    int off;
    int32_t offFrom = 0, offTo = -1; // absent when offloaded
  };
  bool hostBacked(BlockId blk) const {
    return blk == tg.inputBlock || blk == tg.labelBlock;
  }
  double bytesOf(BlockId blk) const {
    return static_cast<double>(tg.blocks[blk].bytesAt(b));
  }
  int runOf(TaskId f);
  void rerunAt(TaskId f, int32_t s);
  void rerunInputs(TaskId f);
  void slowTerm(size_t t, Terms &row) const;

  const TaskGraph &tg;
  const std::vector<TaskId> &order;
  const CostTable &costs;
  const int64_t arenaBytes;
  const size_t n, nb;
  const int64_t b;
  const Liveness lv;
  const BlockUses bu;
  const std::vector<bool> recomputable;
  const std::vector<double> before; // ms before each step can start
  const double total;
  RoundProgram rp;
  int T = -1;
  std::vector<Gap> gaps;
  std::vector<int> rec; // per block: its recompute column, or -1
  int candidates = 0;
  std::map<TaskId, int> run; // per forward task: its re-run column
  std::vector<TaskId> work;  // re-runs whose inputs are not yet looked at
  // When a re-run of f happens (the earliest first backward use of the
  // blocks it is re-run for; chained re-runs inherit it).
  std::map<TaskId, int32_t> when;
  std::vector<int> S, slow; // per step: its start, its slow algorithm
};

void OptimalProgram::gapColumns() {
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk) {
    const Block &k = tg.blocks[blk];
    // Saved statistics are small and a re-run reads them: they stay.
    if (isWeightSide(k.kind) || k.viewOf >= 0 || k.kind == BlockKind::Stats ||
        k.bytesAt(b) <= 0)
      continue;
    const std::vector<int32_t> &u = bu.uses[blk];
    bool any = false;
    for (size_t i = 0; i + 1 < u.size(); ++i) {
      if (u[i + 1] - u[i] < 2)
        continue;
      bool cross = u[i] == bu.lastFwd[blk] && u[i + 1] == bu.firstBwd[blk];
      gaps.push_back({blk, u[i], u[i + 1], cross, rp.offload()});
      any = true;
      if (cross && recomputable[blk])
        rec[blk] = rp.recompute(gaps.back().off);
    }
    candidates += any;
  }
}

int OptimalProgram::runOf(TaskId f) {
  auto [it, fresh] = run.try_emplace(f, -1);
  if (fresh) {
    it->second = rp.rerun();
    work.push_back(f);
  }
  return it->second;
}

void OptimalProgram::rerunAt(TaskId f, int32_t s) {
  auto [it, fresh] = when.try_emplace(f, s);
  if (!fresh)
    it->second = std::min(it->second, s);
}

// Re-runs: a recomputed block's producer runs again at the block's first
// backward use, and needs its inputs then.
void OptimalProgram::reruns() {
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk)
    if (rec[blk] >= 0) {
      TaskId f = tg.blocks[blk].writers[0];
      rp.rerunFor(runOf(f), rec[blk]);
      rerunAt(f, bu.firstBwd[blk]);
    }
  while (!work.empty()) {
    TaskId f = work.back();
    work.pop_back();
    rerunInputs(f);
  }
}

void OptimalProgram::rerunInputs(TaskId f) {
  int rf = run.at(f);
  int32_t s = when.count(f) ? when.at(f) : bu.firstBackward;
  for (BlockId x : tg.tasks[f].reads) {
    BlockId g = storageOf(tg, x);
    const Block &gb = tg.blocks[g];
    if (isWeightSide(gb.kind) || hostBacked(g))
      continue;
    bool dead = lv.end[g] >= 0 && lv.end[g] < s;
    if (dead && !recomputable[g]) {
      // Nothing brings it back: f may not run again.
      rp.forbidRerun(rf);
      continue;
    }
    if (dead) {
      TaskId pf = gb.writers[0];
      int rpf = runOf(pf);
      rerunAt(pf, s);
      rp.rerunInputRemade(rpf, rf);
    } else if (rec[g] >= 0 && bu.lastFwd[g] < s && s < bu.firstBwd[g]) {
      // Absent then and recomputed: made again first.
      rp.rerunInputRecomputed(runOf(gb.writers[0]), rf, rec[g]);
    }
  }
}

// An offloaded block is absent only once its copy out is done (it starts
// when the block is made) and until its copy back starts (early enough to
// end before the block's first backward use, at the tasks' pace); a
// recomputed one over its whole gap.
void OptimalProgram::offloadWindows() {
  for (Gap &g : gaps) {
    double bytes = bytesOf(g.blk);
    // Copied out as soon as it is made where it crosses into the backward
    // pass, else when its gap opens.
    int32_t made = g.crosses ? std::max(lv.start[g.blk], 0) : g.from;
    double outDone =
        before[made + 1] + (hostBacked(g.blk) ? 0 : rp.copyOutMs(bytes));
    int32_t from = g.from + 1;
    while (from < g.to && before[from] < outDone)
      ++from;
    int32_t to = g.to - 1;
    while (to >= from && before[to + 1] + rp.copyInMs(bytes) > before[g.to])
      --to;
    g.offFrom = from;
    g.offTo = to;
  }
}

void OptimalProgram::slowTerm(size_t t, Terms &row) const {
  if (slow[t] >= 0)
    row.push_back({slow[t], -(costs.baseline(order[t]).seconds -
                              costs.fastest(order[t]).seconds) *
                                1e3});
}

// The compute stream's timeline: step t starts at S[t], after the step
// before it (at its fastest algorithm, or its zero-workspace one where
// `slow`) and the re-runs made for t (they run just before it).
void OptimalProgram::computeStream() {
  S.assign(n, -1);
  slow.assign(n, -1);
  for (size_t t = 0; t < n; ++t) {
    S[t] = rp.start(before[t]);
    const AlgoCost &fast = costs.fastest(order[t]);
    const AlgoCost &base = costs.baseline(order[t]);
    if (fast.workspace > base.workspace &&
        lv.liveBytes[t] + fast.workspace > arenaBytes)
      slow[t] = rp.slowAlgorithm();
  }
  std::vector<Terms> rerunsAt(n);
  for (auto [f, col] : run) {
    int32_t at = when.count(f) ? when.at(f) : bu.firstBackward;
    rerunsAt[std::min<size_t>(at, n - 1)].push_back({col, -rp.rerunMs(f)});
  }
  for (size_t t = 0; t + 1 < n; ++t) {
    Terms chain = rerunsAt[t + 1];
    chain.push_back({S[t + 1], 1});
    chain.push_back({S[t], -1});
    slowTerm(t, chain);
    rp.computeStream(chain, before[t + 1] - before[t]);
  }
  if (n > 0) {
    Terms last = {{T, 1}, {S[n - 1], -1}};
    slowTerm(n - 1, last);
    rp.computeStream(last, total - before[n - 1]);
  }
}

// Per step: memory, and the copies out of the blocks absent then, which
// finished before it starts.
void OptimalProgram::stepRows() {
  for (size_t t = 0; t < n; ++t) {
    Terms memory, out;
    double can = 0; // the most that can leave
    for (const Gap &g : gaps) {
      if (!(g.from < int32_t(t) && int32_t(t) < g.to))
        continue;
      double bytes = bytesOf(g.blk);
      bool recomputed = g.crosses && rec[g.blk] >= 0;
      bool copied = g.offFrom <= int32_t(t) && int32_t(t) <= g.offTo;
      can += recomputed || copied ? bytes : 0;
      if (recomputed)
        memory.push_back({rec[g.blk], bytes});
      if (copied) {
        memory.push_back({g.off, bytes});
        if (!hostBacked(g.blk))
          out.push_back({g.off, -rp.copyOutMs(bytes)});
      }
    }
    int64_t need = lv.liveBytes[t] + costs.baseline(order[t]).workspace;
    if (slow[t] >= 0) {
      // The fastest algorithm's workspace, unless the step runs slow.
      int64_t extra = costs.fastest(order[t]).workspace -
                      costs.baseline(order[t]).workspace;
      memory.push_back({slow[t], double(extra)});
      need += extra;
      can += double(extra);
    }
    if (need > arenaBytes && !memory.empty()) {
      // What liveness counts here may exceed what the blocks that can
      // leave free (blocks used now and next, in-place pairs the liveness
      // sees differently): then all of them leave, and the scheduler's
      // evictions do the rest, or it says why not.
      double excess = static_cast<double>(need - arenaBytes);
      rp.memory(memory, std::min(excess, can));
    }
    if (!out.empty())
      rp.copiedOutBefore(std::move(out), S[t]);
  }
}

// Copies back, one stream, from the backward pass's start: the blocks
// first used by step u are all back before u starts. (Before the backward
// pass, and where it starts, each step waits for its own blocks only.)
void OptimalProgram::copyBackRows() {
  std::map<int32_t, std::vector<BlockId>> backBy;
  for (const Gap &g : gaps)
    backBy[g.to].push_back(g.blk);
  for (const auto &entry : backBy) {
    int32_t u = entry.first;
    bool own = u <= bu.firstBackward;
    int32_t r = own ? u - 1 : bu.firstBackward;
    Terms in;
    for (const Gap &g : gaps)
      if ((own ? g.to == u : g.to <= u) && g.from < r)
        in.push_back({g.off, -rp.copyInMs(bytesOf(g.blk))});
    if (in.empty() || r < 0)
      continue;
    rp.copiedBackBetween(std::move(in), S[u], S[r]);
  }
}

// (CBC fixes the integral columns and solves for the rest, and ignores a
// start that is not feasible.)
std::vector<double> OptimalProgram::start() const {
  std::vector<double> x(rp.program().numColumns(), 0);
  for (const Gap &g : gaps)
    x[g.off] = 1;
  for (int c : slow)
    if (c >= 0)
      x[c] = 1;
  return x;
}

/// The decisions at `sol`, or, with none, every block kept at the tasks'
/// time (nothing to decide).
OptimalDecisions OptimalProgram::decisions(const Solution *sol) const {
  OptimalDecisions d;
  d.drop.assign(nb, false);
  d.offload.assign(nb, false);
  d.leaveAfter.assign(nb, {});
  if (!sol) {
    d.objectiveSeconds = total / 1e3;
    d.proven = true;
    return d;
  }
  for (const Gap &g : gaps)
    if (sol->x[g.off] > 0.5) {
      d.offload[g.blk] = d.offload[g.blk] || g.crosses;
      d.leaveAfter[g.blk].push_back(g.from);
    }
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk)
    d.drop[blk] = rec[blk] >= 0 && sol->x[rec[blk]] > 0.5;
  d.objectiveSeconds = sol->objective / 1e3;
  d.proven = sol->proven;
  d.nodes = sol->nodes;
  d.candidates = candidates;
  d.rows = rp.program().numRows();
  d.columns = rp.program().numColumns();
  return d;
}

} // namespace

llvm::Expected<OptimalDecisions> solveOptimal(const TaskGraph &tg,
                                              const std::vector<TaskId> &order,
                                              const CostTable &costs,
                                              int64_t arenaBytes,
                                              const OptimalOptions &opts) {
  if (order.size() > opts.maxTasks)
    return makeInfeasibleF("--policy optimal solves rounds of up to {0} tasks; "
                           "this one has {1}",
                           opts.maxTasks, order.size());
  OptimalProgram op(tg, order, costs, arenaBytes, opts.inPlace);
  op.gapColumns();
  op.reruns();
  op.offloadWindows();
  op.computeStream();
  op.stepRows();
  op.copyBackRows();
  if (op.empty())
    return op.decisions(nullptr);
  auto sol = solveIntegral(op.program(), op.start(), opts.maxNodes);
  if (!sol)
    return makeInfeasibleF("--policy optimal: no keep, recompute or offload "
                           "choice per block fits the {0}-byte arena at "
                           "sub-batch {1}",
                           arenaBytes, costs.subBatch);
  return op.decisions(&*sol);
}

} // namespace memfit
