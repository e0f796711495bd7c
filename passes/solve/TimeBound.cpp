//===- Bound.cpp - A proven lower bound on a plan's iteration time --------===//
#include "passes/solve/TimeBound.h"

#include "passes/analysis/Liveness.h"

#include "passes/solve/LinearProgram.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <memory>

namespace memfit {
namespace {

/// A linear program in rows of (column, coefficient) terms; times in
/// milliseconds so the solver's tolerances are well above them.
using Program = LinearProgram;

constexpr double kInf = 1e30;

/// Solves the linear program `p` (minimizing): its optimum, or none;
/// `values`, when given, gets the optimal point.
std::optional<double> solve(const Program &p,
                            std::vector<double> *values = nullptr) {
  CbcModel m = loadProgram(p);
  Cbc_solve(m.get());
  if (Cbc_isProvenInfeasible(m.get()) || Cbc_isAbandoned(m.get()) ||
      !Cbc_isProvenOptimal(m.get()))
    return std::nullopt;
  double best = Cbc_getObjValue(m.get());
  if (!(best > -kInf && best < kInf))
    return std::nullopt;
  if (values) {
    const double *v = Cbc_getColSolution(m.get());
    values->assign(v, v + p.lo.size());
  }
  return best;
}

/// The round's bound in seconds, or none.
/// `first`: the iteration's first round, which cannot start before its
/// input and labels are on the device (later rounds may load theirs while
/// an earlier one runs).
std::optional<double> roundBound(const TaskGraph &tg,
                                 const std::vector<TaskId> &order,
                                 const CostTable &costs, int64_t arenaBudget,
                                 bool first, const BoundOptions &opts,
                                 std::string *why, BoundHints *hints) {
  const int64_t b = costs.subBatch;
  Liveness lv = computeLiveness(tg, order, b, /*inPlace=*/true);
  size_t n = order.size();
  // The first round's batch data (inputs and labels, per chunk) starts on
  // the host and comes in on the one copy-in stream: a step cannot start
  // before every batch block used by then is in (later rounds may load
  // theirs while an earlier one runs).
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
  // Per step, in ms: the tasks before it after the first load (`before`,
  // a serial compute stream), the earliest it can start (`earliest`, also
  // waiting for its loads), and the tasks from it on.
  std::vector<double> before(n + 1, loadBy[0]), earliest(n + 1, loadBy[0]);
  for (size_t t = 0; t < n; ++t) {
    double secs = costs.fastest(order[t]).seconds * 1e3;
    before[t + 1] = before[t] + secs;
    earliest[t + 1] = std::max(earliest[t] + secs, loadBy[t + 1]);
  }
  auto tasksFrom = [&](size_t t) { return before[n] - before[t]; };
  const double total = earliest[n];
  // What a step needs at its fastest: the live bytes and the fastest
  // algorithm's workspace. A plan runs a step either with some algorithm's
  // workspace in the arena or at that algorithm's slower time.
  std::vector<int64_t> need(n);
  for (size_t t = 0; t < n; ++t)
    need[t] = lv.liveBytes[t] + costs.fastest(order[t]).workspace;
  if (std::all_of(need.begin(), need.end(),
                  [&](int64_t x) { return x <= arenaBudget; }))
    return total / 1e3; // nothing need leave: the tasks alone

  // Which storage blocks each step touches.
  std::vector<std::vector<BlockId>> touched(n);
  for (size_t t = 0; t < n; ++t) {
    const Task &task = tg.tasks[order[t]];
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId blk : *list)
        touched[t].push_back(storageOf(tg, blk));
    std::sort(touched[t].begin(), touched[t].end());
  }
  auto touches = [&](size_t t, BlockId blk) {
    return std::binary_search(touched[t].begin(), touched[t].end(), blk);
  };
  // A block may come back by recompute when forward tasks alone write it.
  auto recomputable = [&](BlockId blk) {
    const Block &k = tg.blocks[blk];
    if (k.writers.empty() ||
        (k.kind != BlockKind::Activation && k.kind != BlockKind::Stats))
      return false;
    return std::all_of(k.writers.begin(), k.writers.end(), [&](TaskId w) {
      return tg.tasks[w].kind == TaskKind::Forward;
    });
  };

  // The steps over the budget, most over first: where the program grows
  // too large, the steps left out are the least constraining ones.
  std::vector<size_t> steps;
  for (size_t t = 0; t < n; ++t)
    if (need[t] > arenaBudget)
      steps.push_back(t);
  std::stable_sort(steps.begin(), steps.end(),
                   [&](size_t x, size_t y) { return need[x] > need[y]; });
  if (steps.size() > opts.maxSteps)
    steps.resize(opts.maxSteps);
  const double msOut = 1e3 / costs.d2hBytesPerSecond;
  const double msIn = 1e3 / costs.h2dBytesPerSecond;
  Program p;
  const int T = p.col(total, kInf, 1.0);
  // The share columns of each block, for the hints: (block, column, by
  // recompute), in the order the steps were added (most over first).
  struct Share {
    BlockId block;
    int col;
    bool recompute;
  };
  std::vector<Share> shares;
  int firstStepColumnsEnd = 0; // the step most over the budget: its columns
  size_t kept = 0;
  // Per step kept: its start column, its re-runs, and the time its
  // algorithm choice adds over the fastest (terms in that step's choice
  // columns); their rows are written once every step is in.
  struct Kept {
    size_t t;
    int S;
    std::vector<std::pair<int, double>> redo, slower;
  };
  std::vector<Kept> keptSteps;
  for (size_t t : steps) {
    // Where this step would make the program too large, it and the steps
    // after it (less over the budget) are left out.
    size_t cols0 = p.lo.size(), rows0 = p.rowLo.size(), terms0 = p.terms.size();
    int64_t columns = 0;
    std::vector<std::pair<int, double>> memory, out, in, redo;
    std::map<TaskId, int> rerun; // per forward task: run again after t
    for (BlockId blk = 0; blk < (BlockId)tg.blocks.size(); ++blk) {
      const Block &k = tg.blocks[blk];
      if (isWeightSide(k.kind) || k.viewOf >= 0 || lv.start[blk] < 0 ||
          lv.start[blk] >= (int32_t)t || lv.end[blk] <= (int32_t)t ||
          touches(t, blk))
        continue;
      double bytes = static_cast<double>(k.bytesAt(b));
      if (bytes <= 0)
        continue;
      int off = p.col(0, 1);
      shares.push_back({blk, off, false});
      memory.push_back({off, bytes});
      out.push_back({off, -bytes * msOut});
      in.push_back({off, -bytes * msIn});
      columns += 1;
      if (recomputable(blk)) {
        int rec = p.col(0, 1);
        shares.push_back({blk, rec, true});
        memory.push_back({rec, bytes});
        p.row({{off, 1}, {rec, 1}}, -kInf, 1);
        for (TaskId w : k.writers) {
          auto [it, fresh] = rerun.try_emplace(w, -1);
          if (fresh) {
            it->second = p.col(0, 1);
            redo.push_back({it->second, -costs.fastest(w).seconds * 1e3});
          }
          p.row({{it->second, 1}, {rec, -1}}, 0, kInf);
        }
        columns += 1;
      }
    }
    // A forward task runs again only with its inputs on the device. An
    // input already past its last use at t was kept on the device (its
    // bytes count at t), or is copied back (it was copied out), or is made
    // again by its own forward task, which then needs its inputs too.
    std::vector<TaskId> work;
    for (const auto &entry : rerun)
      work.push_back(entry.first);
    std::map<BlockId, std::pair<int, int>> past; // kept, copied back
    while (!work.empty()) {
      TaskId w = work.back();
      work.pop_back();
      int rw = rerun.at(w);
      for (BlockId read : tg.tasks[w].reads) {
        BlockId g = storageOf(tg, read);
        const Block &gb = tg.blocks[g];
        if (isWeightSide(gb.kind) || lv.start[g] < 0 || lv.end[g] >= (int32_t)t)
          continue; // resident, or live at t (present or modelled above)
        double bytes = static_cast<double>(gb.bytesAt(b));
        auto [pit, freshPast] = past.try_emplace(g, std::pair<int, int>{});
        if (freshPast) {
          pit->second = {p.col(0, 1), p.col(0, 1)};
          memory.push_back({pit->second.first, -bytes});
          out.push_back({pit->second.second, -bytes * msOut});
          in.push_back({pit->second.second, -bytes * msIn});
          columns += 2;
        }
        std::vector<std::pair<int, double>> need = {
            {pit->second.first, 1}, {pit->second.second, 1}, {rw, -1}};
        if (recomputable(g))
          for (TaskId pw : gb.writers) {
            auto [it, fresh] = rerun.try_emplace(pw, -1);
            if (fresh) {
              it->second = p.col(0, 1);
              redo.push_back({it->second, -costs.fastest(pw).seconds * 1e3});
              work.push_back(pw);
            }
            need.push_back({it->second, 1});
          }
        p.row(need, 0, kInf);
      }
    }
    // The algorithm the step runs, as a convex combination of the task's
    // algorithms: their workspace takes arena, their time above the
    // fastest delays this step's successors.
    const std::vector<AlgoCost> &algos = costs.tasks[order[t]];
    std::vector<std::pair<int, double>> slower, pick;
    if (algos.size() > 1 && algos.front().workspace > 0) {
      const double fast = algos.front().seconds * 1e3;
      for (const AlgoCost &a : algos) {
        int x = p.col(0, 1);
        pick.push_back({x, 1});
        memory.push_back({x, -static_cast<double>(a.workspace)});
        if (a.seconds * 1e3 > fast)
          slower.push_back({x, a.seconds * 1e3 - fast});
      }
      p.row(pick, 1, 1);
      columns += static_cast<int64_t>(algos.size());
    }
    columns += static_cast<int64_t>(rerun.size()) + 1;
    if (int64_t(cols0) + columns > opts.maxColumns) {
      while (!shares.empty() && shares.back().col >= (int)cols0)
        shares.pop_back();
      p.lo.resize(cols0);
      p.hi.resize(cols0);
      p.obj.resize(cols0);
      p.integral.resize(cols0);
      p.rowLo.resize(rows0);
      p.rowHi.resize(rows0);
      p.terms.resize(terms0);
      break;
    }
    ++kept;
    if (kept == 1)
      firstStepColumnsEnd = static_cast<int>(p.lo.size());
    double excess = static_cast<double>(lv.liveBytes[t] - arenaBudget);
    p.row(memory, excess, kInf);
    int S = p.col(earliest[t], kInf);
    out.push_back({S, 1});
    p.row(out, 0, kInf); // copied out before t starts
    in.push_back({T, 1});
    in.push_back({S, -1});
    p.row(in, 0, kInf); // copied back after it starts
    keptSteps.push_back({t, S, std::move(redo), std::move(slower)});
  }
  // The compute stream is serial: a step starts after every earlier step's
  // slower algorithm, and the round ends after the rest of the tasks, the
  // re-runs and every later step's slower algorithm.
  std::vector<std::pair<int, double>> allSlower = {{T, 1}};
  for (const Kept &k : keptSteps) {
    std::vector<std::pair<int, double>> start = {{k.S, 1}};
    std::vector<std::pair<int, double>> end = k.redo;
    end.push_back({T, 1});
    end.push_back({k.S, -1});
    for (const Kept &o : keptSteps)
      for (auto [col, ms] : o.slower) {
        if (o.t < k.t)
          start.push_back({col, -ms});
        else
          end.push_back({col, -ms});
      }
    if (start.size() > 1)
      p.row(start, before[k.t], kInf);
    p.row(end, tasksFrom(k.t), kInf); // the rest, and the re-runs
    for (auto [col, ms] : k.slower)
      allSlower.push_back({col, -ms});
  }
  if (allSlower.size() > 1)
    p.row(allSlower, before[n], kInf);
  if (kept == 0) {
    if (why)
      *why = llvm::formatv("one step alone would pass {0} columns",
                           opts.maxColumns);
    return std::nullopt;
  }
  std::vector<double> values;
  auto best = solve(p, hints ? &values : nullptr);
  if (!best) {
    if (why)
      *why = "the solver found no bound";
    return std::nullopt;
  }
  if (hints) {
    // Per block: its share at the step most over the budget (the first
    // added), and its mean share over the steps it has columns at.
    hints->peak.offload.assign(tg.blocks.size(), 0);
    hints->peak.recompute.assign(tg.blocks.size(), 0);
    hints->mean.offload.assign(tg.blocks.size(), 0);
    hints->mean.recompute.assign(tg.blocks.size(), 0);
    std::vector<int> count[2] = {std::vector<int>(tg.blocks.size(), 0),
                                 std::vector<int>(tg.blocks.size(), 0)};
    for (const Share &sh : shares) {
      double v = values[sh.col];
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
  }
  return std::max(*best, total) / 1e3;
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
  }
  double update = 0;
  for (const Instr &in : plan.update)
    if (in.kind == InstrKind::Run)
      update += full.fastest(in.task).seconds;
  out.seconds = rounds + update;
  return out;
}

} // namespace memfit
