//===- Optimal.cpp - Keep, recompute or offload: an integral program ------===//
#include "passes/solve/Optimal.h"

#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Liveness.h"

#include "passes/solve/LinearProgram.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <memory>

namespace memfit {
namespace {

constexpr double kInf = 1e30;

/// A mixed-integer program in rows of (column, coefficient) terms; times in
/// milliseconds so the solver's tolerances are well above them.
using Program = LinearProgram;

struct Solution {
  std::vector<double> x;
  double objective = 0;
  bool proven = false;
  int64_t nodes = 0;
};

/// Branch and bound on `p` from the integral start `start`; none when no
/// integral solution was found.
std::optional<Solution> solve(const Program &p,
                              const std::vector<double> &start, int maxNodes) {
  int ncols = static_cast<int>(p.lo.size());
  CbcModel m = loadProgram(p);
  Cbc_setMaximumNodes(m.get(), maxNodes);
  std::vector<int> idx(ncols);
  for (int c = 0; c < ncols; ++c)
    idx[c] = c;
  Cbc_setMIPStartI(m.get(), ncols, idx.data(), start.data());
  Cbc_solve(m.get());
  if (Cbc_isProvenInfeasible(m.get()) || !Cbc_bestSolution(m.get()))
    return std::nullopt;
  Solution s;
  const double *x = Cbc_bestSolution(m.get());
  s.x.assign(x, x + ncols);
  s.objective = Cbc_getObjValue(m.get());
  s.proven = Cbc_isProvenOptimal(m.get()) != 0;
  s.nodes = Cbc_getNodeCount(m.get());
  return s;
}

} // namespace

llvm::Expected<OptimalDecisions> solveOptimal(const TaskGraph &tg,
                                              const std::vector<TaskId> &order,
                                              const CostTable &costs,
                                              int64_t arenaBytes,
                                              const OptimalOptions &opts) {
  const size_t n = order.size();
  if (n > opts.maxTasks)
    return makeInfeasibleF("--policy optimal solves rounds of up to {0} tasks; "
                           "this one has {1}",
                           opts.maxTasks, n);
  const int64_t b = costs.subBatch;
  Liveness lv = computeLiveness(tg, order, b, opts.inPlace);
  const size_t nb = tg.blocks.size();

  std::vector<double> before(n + 1, 0); // ms before each step can start
  int32_t firstBackward = static_cast<int32_t>(n);
  for (size_t t = 0; t < n; ++t) {
    before[t + 1] = before[t] + costs.fastest(order[t]).seconds * 1e3;
    if (tg.tasks[order[t]].kind != TaskKind::Forward &&
        firstBackward == int32_t(n))
      firstBackward = static_cast<int32_t>(t);
  }
  const double total = before[n];

  // Per storage block, its uses; a block may be absent over any gap
  // between two of them (offloaded), and over the one from its last
  // forward use to its first backward use (lastFwd, firstBwd: it
  // crosses) also recomputed.
  std::vector<std::vector<int32_t>> uses(nb);
  for (size_t t = 0; t < n; ++t) {
    const Task &task = tg.tasks[order[t]];
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId x : *list) {
        BlockId sb = storageOf(tg, x);
        if (isWeightSide(tg.blocks[sb].kind))
          continue;
        if (uses[sb].empty() || uses[sb].back() != int32_t(t))
          uses[sb].push_back(static_cast<int32_t>(t));
      }
  }
  std::vector<int32_t> lastFwd(nb, -1), firstBwd(nb, -1);
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk) {
    const std::vector<int32_t> &u = uses[blk];
    for (size_t k = 0; k + 1 < u.size(); ++k)
      if (u[k] < firstBackward && u[k + 1] >= firstBackward) {
        lastFwd[blk] = u[k];
        firstBwd[blk] = u[k + 1];
      }
  }
  std::vector<bool> recomputable = recomputableBlocks(tg);
  auto hostBacked = [&](BlockId blk) {
    return blk == tg.inputBlock || blk == tg.labelBlock;
  };

  Program p;
  const int T = p.col(total, kInf, 1.0);
  struct Gap {
    BlockId blk;
    int32_t from, to; // uses; absent strictly between
    bool crosses;
    int off;
    int32_t offFrom = 0, offTo = -1; // absent when offloaded
  };
  std::vector<Gap> gaps;
  std::vector<int> rec(nb, -1);
  int candidates = 0;
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk) {
    const Block &k = tg.blocks[blk];
    // Saved statistics are small and a re-run reads them: they stay.
    if (isWeightSide(k.kind) || k.viewOf >= 0 || k.kind == BlockKind::Stats ||
        k.bytesAt(b) <= 0)
      continue;
    const std::vector<int32_t> &u = uses[blk];
    bool any = false;
    for (size_t i = 0; i + 1 < u.size(); ++i) {
      if (u[i + 1] - u[i] < 2)
        continue;
      bool cross = u[i] == lastFwd[blk] && u[i + 1] == firstBwd[blk];
      gaps.push_back({blk, u[i], u[i + 1], cross, p.binary()});
      any = true;
      if (cross && recomputable[blk]) {
        rec[blk] = p.binary();
        p.row({{gaps.back().off, 1}, {rec[blk], 1}}, -kInf, 1);
      }
    }
    candidates += any;
  }

  // Re-runs: a recomputed block's producer runs again at the block's first
  // backward use, and needs its inputs then.
  std::map<TaskId, int> run;
  std::vector<TaskId> work;
  auto runOf = [&](TaskId f) {
    auto [it, fresh] = run.try_emplace(f, -1);
    if (fresh) {
      it->second = p.binary();
      work.push_back(f);
    }
    return it->second;
  };
  // When a re-run of f happens (the earliest first backward use of the
  // blocks it is re-run for; chained re-runs inherit it).
  std::map<TaskId, int32_t> when;
  for (BlockId blk = 0; blk < (BlockId)nb; ++blk)
    if (rec[blk] >= 0) {
      TaskId f = tg.blocks[blk].writers[0];
      p.row({{runOf(f), 1}, {rec[blk], -1}}, 0, kInf);
      auto [it, fresh] = when.try_emplace(f, firstBwd[blk]);
      if (!fresh)
        it->second = std::min(it->second, firstBwd[blk]);
    }
  std::vector<std::pair<int, double>> redo;
  while (!work.empty()) {
    TaskId f = work.back();
    work.pop_back();
    int rf = run.at(f);
    redo.push_back({rf, -costs.fastest(f).seconds * 1e3});
    int32_t s = when.count(f) ? when.at(f) : firstBackward;
    for (BlockId x : tg.tasks[f].reads) {
      BlockId g = storageOf(tg, x);
      const Block &gb = tg.blocks[g];
      if (isWeightSide(gb.kind) || hostBacked(g))
        continue;
      bool dead = lv.end[g] >= 0 && lv.end[g] < s;
      if (dead && !recomputable[g]) {
        // Nothing brings it back: f may not run again.
        p.row({{rf, 1}}, -kInf, 0);
        continue;
      }
      if (dead) {
        TaskId pf = gb.writers[0];
        int rp = runOf(pf);
        auto [it, fresh] = when.try_emplace(pf, s);
        if (!fresh)
          it->second = std::min(it->second, s);
        p.row({{rp, 1}, {rf, -1}}, 0, kInf);
      } else if (rec[g] >= 0 && lastFwd[g] < s && s < firstBwd[g]) {
        // Absent then and recomputed: made again first.
        int rp = runOf(gb.writers[0]);
        p.row({{rp, 1}, {rf, -1}, {rec[g], -1}}, -1, kInf);
      }
    }
  }

  // An offloaded block is absent only once its copy out is done (it starts
  // when the block is made) and until its copy back starts (early enough to
  // end before the block's first backward use, at the tasks' pace); a
  // recomputed one over its whole gap.
  const double msOut = 1e3 / costs.d2hBytesPerSecond;
  const double msIn = 1e3 / costs.h2dBytesPerSecond;
  for (Gap &g : gaps) {
    double bytes = static_cast<double>(tg.blocks[g.blk].bytesAt(b));
    // Copied out as soon as it is made where it crosses into the backward
    // pass, else when its gap opens.
    int32_t made = g.crosses ? std::max(lv.start[g.blk], 0) : g.from;
    double outDone = before[made + 1] + (hostBacked(g.blk) ? 0 : bytes * msOut);
    int32_t from = g.from + 1;
    while (from < g.to && before[from] < outDone)
      ++from;
    int32_t to = g.to - 1;
    while (to >= from && before[to + 1] + bytes * msIn > before[g.to])
      --to;
    g.offFrom = from;
    g.offTo = to;
  }

  // The compute stream's timeline: step t starts at S[t], after the step
  // before it (at its fastest algorithm, or its zero-workspace one where
  // `slow`) and the re-runs made for t (they run just before it).
  std::vector<int> S(n), slow(n, -1);
  for (size_t t = 0; t < n; ++t) {
    S[t] = p.col(before[t], kInf);
    const AlgoCost &fast = costs.fastest(order[t]);
    const AlgoCost &base = costs.baseline(order[t]);
    if (fast.workspace > base.workspace &&
        lv.liveBytes[t] + fast.workspace > arenaBytes)
      slow[t] = p.binary();
  }
  auto slowTerm = [&](size_t t, std::vector<std::pair<int, double>> &row) {
    if (slow[t] >= 0)
      row.push_back({slow[t], -(costs.baseline(order[t]).seconds -
                                costs.fastest(order[t]).seconds) *
                                  1e3});
  };
  std::vector<std::vector<std::pair<int, double>>> rerunsAt(n);
  for (auto [f, col] : run) {
    int32_t at = when.count(f) ? when.at(f) : firstBackward;
    rerunsAt[std::min<size_t>(at, n - 1)].push_back(
        {col, -costs.fastest(f).seconds * 1e3});
  }
  for (size_t t = 0; t + 1 < n; ++t) {
    std::vector<std::pair<int, double>> chain = rerunsAt[t + 1];
    chain.push_back({S[t + 1], 1});
    chain.push_back({S[t], -1});
    slowTerm(t, chain);
    p.row(chain, before[t + 1] - before[t], kInf);
  }
  if (n > 0) {
    std::vector<std::pair<int, double>> last;
    last.push_back({T, 1});
    last.push_back({S[n - 1], -1});
    slowTerm(n - 1, last);
    p.row(last, total - before[n - 1], kInf);
  }

  // Per step: memory, and the copies out of the blocks absent then, which
  // finished before it starts.
  for (size_t t = 0; t < n; ++t) {
    std::vector<std::pair<int, double>> memory, out;
    double can = 0; // the most that can leave
    for (const Gap &g : gaps) {
      if (!(g.from < int32_t(t) && int32_t(t) < g.to))
        continue;
      double bytes = static_cast<double>(tg.blocks[g.blk].bytesAt(b));
      bool recomputed = g.crosses && rec[g.blk] >= 0;
      bool copied = g.offFrom <= int32_t(t) && int32_t(t) <= g.offTo;
      can += recomputed || copied ? bytes : 0;
      if (recomputed)
        memory.push_back({rec[g.blk], bytes});
      if (copied) {
        memory.push_back({g.off, bytes});
        if (!hostBacked(g.blk))
          out.push_back({g.off, -bytes * msOut});
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
      p.row(memory, std::min(excess, can), kInf);
    }
    if (!out.empty()) {
      out.push_back({S[t], 1});
      p.row(out, 0, kInf);
    }
  }
  // Copies back, one stream, from the backward pass's start: the blocks
  // first used by step u are all back before u starts.
  std::map<int32_t, std::vector<BlockId>> backBy;
  for (const Gap &g : gaps)
    backBy[g.to].push_back(g.blk);
  // (Before the backward pass, and where it starts, each step waits for its
  // own blocks only.)
  for (const auto &entry : backBy) {
    int32_t u = entry.first;
    bool own = u <= firstBackward;
    int32_t r = own ? u - 1 : firstBackward;
    std::vector<std::pair<int, double>> in;
    for (const Gap &g : gaps)
      if ((own ? g.to == u : g.to <= u) && g.from < r)
        in.push_back({g.off, -double(tg.blocks[g.blk].bytesAt(b)) * msIn});
    if (in.empty() || r < 0)
      continue;
    in.push_back({S[u], 1});
    in.push_back({S[r], -1});
    p.row(in, 0, kInf);
  }
  if (redo.empty() && gaps.empty()) {
    OptimalDecisions d;
    d.drop.assign(nb, false);
    d.offload.assign(nb, false);
    d.leaveAfter.assign(nb, {});
    d.objectiveSeconds = total / 1e3;
    d.proven = true;
    return d;
  }

  // A start: every candidate copied out, no re-runs, every step at its
  // zero-workspace algorithm (CBC fixes the integral columns and solves
  // for the rest, and ignores a start that is not feasible).
  std::vector<double> start(p.lo.size(), 0);
  for (const Gap &g : gaps)
    start[g.off] = 1;
  for (int c : slow)
    if (c >= 0)
      start[c] = 1;
  auto sol = solve(p, start, opts.maxNodes);
  if (!sol)
    return makeInfeasibleF("--policy optimal: no keep, recompute or offload "
                           "choice per block fits the {0}-byte arena at "
                           "sub-batch {1}",
                           arenaBytes, b);
  OptimalDecisions d;
  d.drop.assign(nb, false);
  d.offload.assign(nb, false);
  d.leaveAfter.assign(nb, {});
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
  d.rows = static_cast<int>(p.rowLo.size());
  d.columns = static_cast<int>(p.lo.size());
  return d;
}

} // namespace memfit
