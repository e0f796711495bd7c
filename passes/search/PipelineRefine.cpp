//===- PipelineRefine.cpp - Local search over the winner's decisions ------===//
//
// memfit's refinement phase. The programs that decide what to keep,
// recompute and offload (chain-dp, the bound's relaxation, the integral
// program) model the scheduler only roughly: they miss fragmentation,
// copy latencies, the room a prefetch holds while it runs and the inputs a
// re-run brings back. Here the scheduler judges the decisions itself: the
// winner's keep / recompute / offload choice of each block that crosses
// from the forward pass into the backward pass is changed one block at a
// time, largest first, and the round rescheduled; a change is kept when
// the schedule gets strictly faster. At a local optimum (a full cycle of
// moves without a gain) a few random moves kick it out and the climb
// starts again (iterated local search). It stops at the proven bound,
// after a run of fruitless kicks, or when its share of scheduling work is
// spent.
//
// Guarantees: the plan it keeps is one the scheduler made and simulated,
// strictly faster than the one it started from; moves are tried in a fixed
// order, each against the fastest time so far, so the same inputs give the
// same plan whatever the threads.
//
//===----------------------------------------------------------------------===//
#include "passes/search/PipelineSteps.h"

#include "compiler/support/Diagnostics.h"

#include <algorithm>
#include <random>

namespace memfit::pipeline {
namespace {

/// The phase's scheduling work: the moves tried times the tasks of the
/// graph stay under this (about 1,000 moves on ResNet-50's 618 tasks, 400
/// on DenseNet-121's 1,460; a schedule costs about 1 and 3.5 ms there).
constexpr int64_t kRefineWork = 600'000;
/// And at most this many moves on a small graph.
constexpr int64_t kMaxTries = 2000;
/// Graphs with more tasks skip the phase (a move would cost a schedule of
/// the deepest ResNets, tens of milliseconds each).
constexpr size_t kRefineTasks = 4000;
/// Close enough to the proven bound to stop.
constexpr double kNearBound = 0.002;
/// Moves scheduled at once, one thread each; fixed, so that every machine
/// tries the same moves.
constexpr size_t kWave = 2;
/// A kick out of a local optimum: this many moves drawn among the first
/// moves of the cycle (the largest blocks'), from a fixed seed.
constexpr int kKickMoves = 3;
constexpr size_t kKickAmong = 48;
constexpr uint32_t kKickSeed = 1;
/// Kicks stop after this many in a row end no better than the best.
constexpr int kKicksWithoutGain = 8;

enum class Way : uint8_t { Keep, Drop, Offload };

/// One block takes another way, or (block < 0) one task runs its fastest
/// algorithm.
struct Move {
  BlockId block;
  Way to;
  TaskId task = -1;
};

struct Decisions {
  std::vector<Way> way;   // per block; Keep where nothing is forced
  std::vector<bool> fast; // per task: ScheduleOptions::fastestAlgo
  bool lookPastIdle = true;

  bool changedBy(const Move &m) const {
    return m.block >= 0 ? way[m.block] != m.to : !fast[m.task];
  }
  void apply(const Move &m) {
    if (m.block >= 0)
      way[m.block] = m.to;
    else
      fast[m.task] = true;
  }
};

/// The blocks whose way may change: activation storage a forward task
/// makes and the backward pass reads again.
struct Movable {
  std::vector<bool> any, drop;
};

Movable movableBlocks(const TaskGraph &g) {
  std::vector<bool> recomputable = recomputableBlocks(g);
  Movable m{std::vector<bool>(g.blocks.size(), false),
            std::vector<bool>(g.blocks.size(), false)};
  for (BlockId b = 0; b < (BlockId)g.blocks.size(); ++b) {
    const Block &bl = g.blocks[b];
    if (bl.viewOf >= 0 || isWeightSide(bl.kind) || bl.writers.empty() ||
        g.tasks[bl.writers.front()].kind != TaskKind::Forward)
      continue;
    bool backward = false;
    for (TaskId r : bl.readers)
      backward = backward || g.tasks[r].kind == TaskKind::BackwardData ||
                 g.tasks[r].kind == TaskKind::BackwardWeight;
    m.any[b] = backward;
    m.drop[b] = backward && recomputable[b];
  }
  return m;
}

/// What `c` did with each movable block, as forced decisions.
Decisions realized(const Candidate &c, const Movable &m, size_t tasks) {
  Decisions d;
  d.way.assign(m.any.size(), Way::Keep);
  d.fast.assign(tasks, false);
  for (BlockId b = 0; b < (BlockId)m.any.size(); ++b) {
    if (!m.any[b] || b >= (BlockId)c.plan.decisions.size())
      continue;
    BlockDecision x = c.plan.decisions[b];
    if (x == BlockDecision::Recompute && m.drop[b])
      d.way[b] = Way::Drop;
    else if (x == BlockDecision::Offload)
      d.way[b] = Way::Offload;
  }
  return d;
}

class Refiner {
public:
  Refiner(const TaskGraph &g, const Tables &tb,
          const std::vector<TaskId> &order, const PlanRequest &gr)
      : g(g), tb(tb), order(order), req(gr) {}

  /// The decisions scheduled under the optimal policy's rules (memfit's
  /// eviction pricing for what they leave over, no early offload), given
  /// up once slower than `cutoff` (0: never).
  llvm::Expected<Candidate> schedule(const Decisions &d, double cutoff) const {
    ScheduleOptions so{
        .policy = Policy::Optimal, .budget = req.budget, .batch = req.batch};
    so.dropAfterForward.resize(d.way.size());
    so.offloadAfterForward.resize(d.way.size());
    for (size_t b = 0; b < d.way.size(); ++b) {
      so.dropAfterForward[b] = d.way[b] == Way::Drop;
      so.offloadAfterForward[b] = d.way[b] == Way::Offload;
    }
    so.cutoffSeconds = cutoff;
    so.inPlace = req.inPlace;
    so.lookPastIdle = d.lookPastIdle;
    so.fastestAlgo = d.fast;
    return planWith(g, *tb.full, tb.last, order, so);
  }

  /// Its iteration time, or a negative number when it was given up or
  /// failed for the user's reasons (too little room for these decisions);
  /// memfit's own faults are errors.
  llvm::Expected<double> timeOf(const Decisions &d, double cutoff) const {
    auto c = schedule(d, cutoff);
    if (c)
      return c->sim.iterationSeconds;
    if (llvm::Error err = dropInfeasible(c.takeError()))
      return std::move(err);
    return -1.0;
  }

private:
  const TaskGraph &g;
  const Tables &tb;
  const std::vector<TaskId> &order;
  const PlanRequest &req; // its budget, batch and in-place rule
};

/// The moves of the phase: per movable block, largest first, the ways it
/// can take; then the tasks `best` ran at a slower algorithm than their
/// fastest (a workspace Eq. 5 found too dear to make room for), in round
/// order.
std::vector<Move> movesFor(const TaskGraph &g, const Movable &m,
                           const Candidate &best, const CostTable &costs) {
  std::vector<BlockId> byBytes;
  for (BlockId b = 0; b < (BlockId)g.blocks.size(); ++b)
    if (m.any[b])
      byBytes.push_back(b);
  std::stable_sort(byBytes.begin(), byBytes.end(), [&](BlockId a, BlockId b) {
    return g.blocks[a].bytesAt(1) > g.blocks[b].bytesAt(1);
  });
  std::vector<Move> moves;
  for (BlockId b : byBytes)
    for (Way to : {Way::Keep, Way::Drop, Way::Offload})
      if (to != Way::Drop || m.drop[b])
        moves.push_back({b, to});
  std::vector<bool> slow(g.tasks.size(), false);
  for (const Instr &in : best.plan.round)
    if (in.kind == InstrKind::Run && !slow[in.task] &&
        in.algo != costs.fastest(in.task).algo) {
      slow[in.task] = true;
      moves.push_back({-1, Way::Keep, in.task});
    }
  return moves;
}

/// The search proper: hill climbing over a fixed cycle of moves, and
/// kicks out of its local optima, within a number of tries.
class Climber {
public:
  Climber(const Refiner &r, const std::vector<Move> &moves, double floorT,
          int64_t maxTries)
      : r(r), moves(moves), floorT(floorT), maxTries(maxTries) {}

  /// First-gain hill climbing from `cur` over the cycle of moves, until a
  /// full cycle gains nothing, the plan is at the bound or the tries run
  /// out.
  llvm::Error climb(Decisions &cur, double &curT) {
    size_t next = 0, sinceGain = 0;
    while (tries < maxTries && sinceGain < moves.size() && curT > floorT) {
      // The next moves that change something, a wave of them at once, each
      // against the fastest so far; the first gain in move order is kept
      // and the moves after it are tried again from there.
      std::vector<size_t> at;
      size_t scanned = 0;
      while (at.size() < kWave && sinceGain + scanned < moves.size() &&
             tries + (int64_t)at.size() < maxTries) {
        size_t i = (next + scanned++) % moves.size();
        if (cur.changedBy(moves[i]))
          at.push_back(i);
      }
      if (at.empty())
        break;
      std::vector<Decisions> ds(at.size(), cur);
      for (size_t w = 0; w < at.size(); ++w)
        ds[w].apply(moves[at[w]]);
      auto times = timesOf(ds, curT);
      if (!times)
        return times.takeError();
      tries += at.size();
      size_t gained = at.size();
      for (size_t w = 0; w < at.size() && gained == at.size(); ++w)
        if ((*times)[w] > 0 && (*times)[w] < curT)
          gained = w;
      if (gained < at.size()) {
        cur = std::move(ds[gained]);
        curT = (*times)[gained];
        sinceGain = 0;
        next = (at[gained] + 1) % moves.size();
      } else {
        sinceGain += scanned;
        next = (next + scanned) % moves.size();
      }
    }
    return llvm::Error::success();
  }

  /// Iterated local search from the local optimum `best`: a few moves
  /// among the largest blocks' applied at random, the climb again from
  /// there, the best end kept; until kKicksWithoutGain kicks in a row end
  /// no better. The generator's raw output picks the moves, so every
  /// machine draws the same ones.
  llvm::Error kick(Decisions &best, double &bestT) {
    std::mt19937 rng(kKickSeed);
    const size_t among = std::min(kKickAmong, moves.size());
    for (int idle = 0;
         idle < kKicksWithoutGain && tries < maxTries && bestT > floorT;
         ++idle) {
      Decisions cur = best;
      for (int k = 0; k < kKickMoves; ++k)
        cur.apply(moves[rng() % among]);
      auto t = r.timeOf(cur, 0);
      ++tries;
      if (!t)
        return t.takeError();
      if (*t < 0)
        continue;
      double curT = *t;
      if (llvm::Error err = climb(cur, curT))
        return err;
      if (curT < bestT) {
        best = std::move(cur);
        bestT = curT;
        idle = -1;
      }
    }
    return llvm::Error::success();
  }

  int64_t tries = 0;

private:
  /// The times of a wave, on one thread each, against `cutoff`.
  llvm::Expected<std::vector<double>> timesOf(const std::vector<Decisions> &ds,
                                              double cutoff) const {
    std::vector<double> times(ds.size(), -1);
    std::vector<std::string> faults(ds.size());
    auto work = [&](size_t w) {
      auto t = r.timeOf(ds[w], cutoff);
      if (t)
        times[w] = *t;
      else
        faults[w] = llvm::toString(t.takeError());
    };
    forEachSideBySide(ds.size(), work);
    for (const std::string &f : faults)
      if (!f.empty())
        return makeInternalError(f);
    return times;
  }

  const Refiner &r;
  const std::vector<Move> &moves;
  const double floorT;
  const int64_t maxTries;
};

} // namespace

namespace {

/// Where one climb from a start ended: the start's decisions and time, and
/// the end's (no better than the start when nothing was gained).
struct ClimbEnd {
  Decisions start, end;
  double endT = -1;
  int64_t tries = 0; // moves scheduled
};

llvm::Expected<std::optional<ClimbEnd>>
climbFrom(const Refiner &r, const TaskGraph &g, const Tables &tb,
          const Movable &m, const Candidate &from, double floorT,
          int64_t maxTries) {
  std::vector<Move> moves = movesFor(g, m, from, *tb.full);
  // The start: what the plan did, looking past idle tasks or not (its own
  // rules may differ, so this can be slower than the plan).
  Decisions cur = realized(from, m, g.tasks.size());
  Decisions far = cur;
  far.lookPastIdle = false;
  auto nearT = r.timeOf(cur, 0);
  if (!nearT)
    return nearT.takeError();
  auto farT = r.timeOf(far, 0);
  if (!farT)
    return farT.takeError();
  double curT = *nearT;
  if (*farT > 0 && (curT < 0 || *farT < curT)) {
    cur = far;
    curT = *farT;
  }
  if (curT < 0)
    return std::nullopt;
  ClimbEnd e{.start = cur, .end = cur, .endT = curT};
  Climber search(r, moves, floorT, maxTries);
  if (llvm::Error err = search.climb(e.end, e.endT))
    return std::move(err);
  if (llvm::Error err = search.kick(e.end, e.endT))
    return std::move(err);
  e.tries = search.tries;
  return e;
}

} // namespace

llvm::Expected<Refined> refineDecisions(const PlanSpace &sp, const Tables &tb,
                                        const Candidate &best,
                                        const Candidate *other) {
  const TaskGraph &g = sp.g;
  Refined out;
  if (g.tasks.size() > kRefineTasks)
    return out;
  const double startT = best.sim.iterationSeconds;
  double floorT = 0;
  if (best.bound && best.bound->bound && best.bound->holdsFor(best.plan))
    floorT = best.bound->bound->seconds * (1 + kNearBound);
  if (startT <= floorT)
    return out;
  Movable m = movableBlocks(g);
  if (std::none_of(m.any.begin(), m.any.end(), [](bool x) { return x; }))
    return out;

  Refiner r(g, tb, sp.order, sp.r);
  const int64_t maxTries =
      std::clamp<int64_t>(kRefineWork / (int64_t)g.tasks.size(), 1, kMaxTries);
  auto e = climbFrom(r, g, tb, m, best, floorT, maxTries);
  if (!e)
    return e.takeError();
  std::optional<ClimbEnd> won = std::move(*e);
  out.tries += won ? won->tries : 0;
  // A second start, as much work again: the winner's climb ends where it
  // ends either way, so the plan is never slower than with one start.
  if (other) {
    auto o = climbFrom(r, g, tb, m, *other, floorT, maxTries);
    if (!o)
      return o.takeError();
    out.tries += *o ? (*o)->tries : 0;
    if (*o && (*o)->endT > 0 && (!won || (*o)->endT < won->endT))
      won = std::move(*o);
  }
  if (!won || !(won->endT < startT))
    return out;
  const Decisions &cur = won->end, &start = won->start;
  for (size_t b = 0; b < cur.way.size(); ++b)
    out.changed += cur.way[b] != start.way[b];
  for (size_t t = 0; t < cur.fast.size(); ++t)
    out.changed += cur.fast[t] != start.fast[t];
  auto c = r.schedule(cur, 0);
  if (!c)
    return c.takeError();
  c->plan.policy = "memfit (refined)";
  c->plan.batch = best.plan.batch;
  c->plan.chunks = best.plan.chunks;
  c->bound = best.bound && best.bound->holdsFor(c->plan) ? best.bound : nullptr;
  out.faster = std::move(*c);
  return out;
}

} // namespace memfit::pipeline
