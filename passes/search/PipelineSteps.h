//===- PipelineSteps.h - The steps of planTraining (internal) ---*- C++ -*-===//
//
// planTraining (Pipeline.h) in four steps, each in its own file: the budget
// resolved against the ideal plan and the lower bound (PipelineBudget.cpp);
// the candidate schedules a policy tries (PipelineCandidates.cpp); the
// search over them, in waves of two threads with a cutoff
// (PipelineSearch.cpp), the batch in chunks (PipelineChunks.cpp) and the
// winner's refinement (PipelineRefine.cpp); and the winner's verification
// and summary (Pipeline.cpp). Not a public interface.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_PIPELINESTEPS_H
#define MEMFIT_PASSES_PIPELINESTEPS_H

#include "passes/schedule/PolicyRules.h"
#include "passes/search/Pipeline.h"
#include "passes/solve/TimeBound.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace memfit::pipeline {

/// A proven bound (Bound.h) with the parts of a plan it was computed for:
/// another plan with the same order, rounds and arena has the same bound.
struct KnownBound {
  std::vector<TaskId> order;
  int64_t numSubBatches = 0, arena = 0;
  std::optional<IterationBound> bound;
  std::string why; // when there is none
  bool holdsFor(const Plan &p) const;
};

struct Candidate {
  Plan plan;
  Simulation sim = {};
  /// Its bound, when the search already proved it (the bound phase).
  std::shared_ptr<const KnownBound> bound = {};
};

/// The cost tables for sub-batch `subBatch` of `batch`: the full rounds'
/// and, when the last round is smaller, its own. tableAt's tables are
/// borrowed, not copied (on a deep network, copying them for every
/// schedule was a good part of planning): CostTableFn keeps them as they
/// are while the planning runs. A chunked graph's tables are owned here.
struct Tables {
  const CostTable *full = nullptr, *last = nullptr;
  std::shared_ptr<const CostTable> owned =
      {}; // what `full` points to, if owned
};
Tables tablesFor(const CostTableFn &tableAt, int64_t batch, int64_t subBatch);

/// One schedule and its simulation on tables the caller owns (so several
/// may run at once).
llvm::Expected<Candidate> planWith(const TaskGraph &tg, const CostTable &full,
                                   const CostTable *last,
                                   const std::vector<TaskId> &order,
                                   const ScheduleOptions &so);

// --- budget resolution (PipelineBudget.cpp) ---

/// The budget `req` asks for in bytes (resolveBudget, Pipeline.h); an
/// error when what it leaves the plan after the library reserve is below
/// the lower bound.
llvm::Expected<ResolvedBudget> budgetFor(const TaskGraph &tg,
                                         const PlanRequest &req,
                                         const LowerBound &lb,
                                         int64_t idealPeakBytes);

// --- candidate generation (PipelineCandidates.cpp) ---

/// A schedule to try: a sub-batch and a drop set, under the request's
/// policy or another's rules.
struct Variant {
  int64_t subBatch;
  std::vector<bool> drop = {};
  bool allowRecompute = true;
  std::optional<Policy> as = {}; // schedule with another policy's rules
  bool inPlace = true;           // and PlanRequest::inPlace
  /// Blocks copied out once the forward pass is done with them
  /// (ScheduleOptions::offloadAfterForward).
  std::vector<bool> offload = {};
  /// The chain program's decisions (ChainDP.h): kept only when strictly
  /// faster than every other candidate.
  bool chain = false;
  /// ScheduleOptions::lookPastIdle, under memfit's own search (memfit and
  /// optimal requests); other policies' requests never look past idle.
  bool lookPastIdle = true;
  /// The bound's relaxation rounded (boundPhaseVariants): as `chain`.
  bool guided = false;
};

/// The first phase's candidates of the request's policy at `budget`; sets
/// eq3SubBatch where the policy consults Eq. 3.
llvm::Expected<std::vector<Variant>>
firstPhaseVariants(const TaskGraph &tg, const CostTableFn &tableAt,
                   const std::vector<TaskId> &order, const PlanRequest &req,
                   int64_t budget, int64_t &eq3SubBatch);

/// Calls work(0), ..., work(n - 1), side by side on threads of their own
/// where the machine has more than one core, in order where it has one.
/// Each call must write only its own results: the search then reads them
/// in index order, so what it decides does not depend on which finished
/// first.
void forEachSideBySide(size_t n, const std::function<void(size_t)> &work);

/// memfit's second phase: Chen et al.'s segment drop sets at the best
/// sub-batch so far and the whole batch, under memfit's rules and Chen's.
std::vector<Variant> chenPhaseVariants(const TaskGraph &tg,
                                       const std::vector<TaskId> &order,
                                       const PlanRequest &req,
                                       int64_t bestSubBatch);

/// memfit's third phase: the chain program's decisions (ChainDP.h) at
/// sub-batch `subBatch`, planned to a few shares of the arena, with and
/// without offload; distinct ones only.
std::vector<Variant> chainPhaseVariants(const TaskGraph &tg,
                                        const CostTableFn &tableAt,
                                        const std::vector<TaskId> &order,
                                        const PlanRequest &req, int64_t budget,
                                        int64_t subBatch);

/// The search's bound phase runs on graphs of up to this many tasks (the
/// deepest ResNets skip it: their bound alone takes a second or more).
constexpr size_t kBoundGuided = 8000;

/// The bound of `plan`'s space on `tg` with `tb`'s tables.
std::shared_ptr<const KnownBound>
proveBound(const TaskGraph &tg, const Plan &plan, const Tables &tb);

/// The variants of memfit's bound phase (guideByBound): `bound`'s
/// fractional shares (at the step most over the budget, and on average)
/// rounded into drop and offload sets, scheduled as the chain program's
/// are. Distinct ones only.
std::vector<Variant> boundPhaseVariants(const TaskGraph &tg,
                                        const IterationBound &bound,
                                        int64_t subBatch);

// --- what a search plans, and what it records ---

/// The graph a search plans and what it plans it with: the model's task
/// graph, or a graph with the batch in chunks (then `tableAt` gives the
/// split graph's one table, whatever size it is asked for). `req` is the
/// request as asked (its policy picks the rules and names the plans), `r`
/// the same resolved (the plan's share of the budget, no reserve).
struct PlanSpace {
  const TaskGraph &g;
  const CostTableFn &tableAt;
  const std::vector<TaskId> &order;
  const PlanRequest &req;
  const PlanRequest &r;
};

/// What a search tried, for the outcome (PlanOutcome's fields of the same
/// names). Each search keeps its own; the phase that ran it merges what the
/// outcome reports into the SearchState's.
struct SearchRecord {
  std::vector<std::pair<int64_t, double>> tried; // sub-batch, seconds
  int abandoned = 0;
  std::vector<std::pair<int32_t, double>> chunksTried; // chunks, seconds
  /// Chunk counts not planned: their proven bound, no faster than a plan
  /// in hand (chunks, bound seconds).
  std::vector<std::pair<int32_t, double>> chunksPruned;
  int64_t refineTries = 0;
  int refineChanged = 0;
  /// Each sub-batch otherSubBatches looked at: its proven bound at the
  /// search's order, or none where the relaxation had none. Empty when the
  /// phase did not run.
  std::map<int64_t, std::optional<double>> subBatchBounds;
};

// --- the search (PipelineSearch.cpp) ---

/// Schedules variants in waves of kWave, on as many threads, each against
/// the best time before its wave, and keeps the fastest.
class CandidateSearch {
public:
  /// `ideal`, when given, is the ideal plan at the whole batch, reused for
  /// the ideal policy.
  CandidateSearch(const PlanSpace &space, std::optional<Candidate> ideal)
      : sp(space), ideal(std::move(ideal)) {}

  void runAll(std::vector<Variant> &variants);
  /// The fastest so far, or null.
  const Candidate *best() const { return bestSoFar ? &*bestSoFar : nullptr; }
  /// The fastest; the internal errors when any variant had one; else the
  /// first error when every variant failed.
  llvm::Expected<Candidate> takeBest();
  /// Keeps the outcome of variant `v` when it is the fastest so far; a
  /// schedule that failed for the user's reasons (too little room) is
  /// dropped when another succeeds, an internal error never is.
  void merge(const Variant &v, llvm::Expected<Candidate> &c);
  /// The sub-batches scheduled and the schedules abandoned so far.
  const SearchRecord &record() const { return rec; }

private:
  void runWave(std::vector<Variant> &wave);

  PlanSpace sp;
  std::optional<Candidate> ideal;
  std::optional<Candidate> bestSoFar;
  bool bestAs = false; // the best was scheduled under another policy's rules
  SearchRecord rec;
  /// The first candidate's Infeasible error: the reason when none wins.
  llvm::Error firstErr = llvm::Error::success();
  /// Errors of any candidate other than Infeasible ones (memfit's own
  /// faults): never dropped for a winner.
  llvm::Error fatalErr = llvm::Error::success();
};

// --- the state the phases share (Pipeline.cpp) ---

/// What the phases of one search share: the request as asked (`req`, the
/// optimal policy searching under memfit's rules) and as resolved (`r`:
/// the plan's share of the budget, no reserve); what the floor, the ideal
/// plan and the budget came to; the best plan so far, or why there is
/// none, and the plan that lost to it in the bound-guided phase; and the
/// search's record. The outcome is built from it once, by finish().
struct SearchState {
  SearchState(const TaskGraph &tg, const CostTableFn &tableAt,
              const PlanRequest &asked)
      : tg(tg), tableAt(tableAt), req(asked), r(asked) {}
  ~SearchState() { llvm::consumeError(std::move(noBest)); }

  const TaskGraph &tg;
  const CostTableFn &tableAt;
  PlanRequest req;
  PlanRequest r;
  /// The policy asked for: its phases run (the search's candidates are
  /// scheduled as its `searchesAs` where it has one).
  const PolicyDef *policy = nullptr;
  bool coupled = false;     // statistics over the batch (statisticsOverBatch)
  bool chunking = false;    // the batch may go in chunks inside the round
  bool forceChunks = false; // --chunks
  /// The chunks phase ran in `order` (otherOrder's search runs it in the
  /// other order; the winner's is not run again).
  bool chunksSearched = false;
  std::vector<TaskId> order;
  size_t roundTasks = 0;

  LowerBound lowerBound;
  double idealSeconds = 0;
  int64_t idealPeakBytes = 0;
  ResolvedBudget budget;
  int64_t eq3SubBatch = 0;

  std::optional<Candidate> ideal;
  /// memfit's fastest whole-round plan before the chain program's
  /// candidates (where the integral program solves).
  std::optional<Candidate> beforeChain;
  std::optional<Candidate> best;
  llvm::Error noBest = llvm::Error::success(); // why `best` is empty
  /// The bound-guided phase's fastest plan when it lost to `best`: the
  /// refinement's second start.
  std::optional<Candidate> lost;
  /// The split graph `best` plans, when it has the batch in chunks.
  std::shared_ptr<const ChunkedGraph> chunked;
  /// The optimal policy's program, when that policy planned.
  std::optional<OptimalOutcome> optimalOutcome;
  SearchRecord record;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  /// The model's graph as this search plans it.
  PlanSpace space() const { return {tg, tableAt, order, req, r}; }
  void setBest(llvm::Expected<Candidate> c) {
    if (c) {
      best = std::move(*c);
      llvm::consumeError(std::move(noBest));
    } else {
      best.reset();
      noBest = c.takeError();
    }
  }
  /// Adds what a search tried to the record.
  void recordSearch(const SearchRecord &s, bool withTried) {
    record.abandoned += s.abandoned;
    if (withTried)
      record.tried.insert(record.tried.end(), s.tried.begin(), s.tried.end());
  }
};

// --- the phases of the search (Pipeline.cpp, PipelineOthers.cpp) ---

/// One step of the search: true when it applied to the request (ran).
using Phase = llvm::Expected<bool> (*)(SearchState &);

/// The policy's candidates in whole (sub-)batches.
llvm::Expected<bool> wholeRounds(SearchState &s);
/// The integral program's decisions on small graphs, kept when faster.
llvm::Expected<bool> optimalInSearch(SearchState &s);
/// The bound-guided phase, then the refinement, on the best plan.
llvm::Expected<bool> guideAndRefine(SearchState &s);
/// Every other sub-batch a bound cannot rule out, searched and polished.
llvm::Expected<bool> otherSubBatches(SearchState &s);
/// The other task order, where a bound says it may win.
llvm::Expected<bool> otherOrder(SearchState &s);
/// The batch in chunks inside the round, once per order searched.
llvm::Expected<bool> chunks(SearchState &s);
/// The proven bound of every plan with `plan`'s order, budget and updates
/// at sub-batch `sb`: otherSubBatches' where it looked, else computed;
/// infinity below the sub-batch's memory floor; none where the relaxation
/// has none.
std::optional<double> subBatchBound(const SearchState &s, const Plan &plan,
                                    int64_t sb);
/// The least bound over every sub-batch the search allows in its order, or
/// 0 where none covers them all; `plan` is the outcome's, `own` its bound.
double spaceBound(const SearchState &s, const Plan &plan, double own);

// --- memfit's last phases (Pipeline.cpp, PipelineRefine.cpp) ---

/// What the bound-guided phase found for a plan: the bound of its space
/// (none when the graph is too large to prove it), and the fastest guided
/// plan, as `faster` when strictly faster than the plan, else as `lost`.
struct Guided {
  std::shared_ptr<const KnownBound> bound;
  std::optional<Candidate> faster, lost;
  int abandoned = 0;
};

/// memfit's bound-guided phase on `best`, a plan of `sp` with the tables
/// `tb`: the bound's relaxation at its order and sub-batch (or chunk),
/// rounded into drop and offload sets and scheduled. Errors: memfit's own
/// faults, and user errors other than Infeasible.
llvm::Expected<Guided> guideByBound(const PlanSpace &sp, const Tables &tb,
                                    const Candidate &best);

/// What the refinement phase found: a plan strictly faster than the one
/// it started from, if any, the moves it scheduled and the decisions the
/// faster plan changed.
struct Refined {
  std::optional<Candidate> faster;
  int64_t tries = 0;
  int changed = 0;
};

/// memfit's refinement phase (PipelineRefine.cpp): a local search over
/// `best`'s keep / recompute / offload decisions (and from `other`'s too,
/// a second start, when given), each move rescheduled on `sp` with the
/// tables `tb`.
llvm::Expected<Refined> refineDecisions(const PlanSpace &sp, const Tables &tb,
                                        const Candidate &best,
                                        const Candidate *other = nullptr);

// --- the batch split into chunks (PipelineChunks.cpp) ---

struct ChunkedCandidate {
  std::shared_ptr<const ChunkedGraph> graph;
  Candidate c;
};

/// Plans with the batch split into chunks inside the round, for a model
/// that needs whole batches to stay exact: the chunk counts given (fewest
/// first) whose floor fits the state's resolved budget, until more chunks
/// stop helping: a count whose proven bound (its order, its chunk) is no
/// faster than the best plan so far is not planned, and where the split
/// graph is too large for the bound, more chunks stop being tried once they
/// stop helping. Every count that planned (each plan's batch and chunks
/// set), fastest first, or none;
/// errors for memfit's own faults, and under --chunks for why the one
/// count given has no plan. Records the counts tried and the schedules
/// abandoned in `s`.
llvm::Expected<std::vector<ChunkedCandidate>>
searchChunks(SearchState &s, const std::vector<int32_t> &counts);

/// The request a split graph is planned with: the chunk is its batch and
/// its sub-batch; no bound and no further split.
PlanRequest chunkRequest(const PlanRequest &resolved, int64_t chunk);

/// The split graph's cost tables at its chunk size.
Tables chunkedTables(const ChunkedGraph &cg, const CostTableFn &tableAt,
                     int64_t batch);

} // namespace memfit::pipeline

#endif
