//===- Planning.h - What plan, compile and compare share --------*- C++ -*-===//
//
// The model, batch, budget, device and policy flags that every planning
// command takes, and the one function that turns them into a verified plan:
// import -> task graph -> cost model -> planner pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_PLANNING_H
#define MEMFIT_TOOLS_PLANNING_H

#include "codegen/PlanReport.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/Freeze.h"
#include "compiler/cost/CostModel.h"
#include "compiler/ir/Graph.h"
#include "compiler/ir/TaskGraph.h"
#include "compiler/support/OutputDir.h"
#include "passes/analysis/MemoryLowerBound.h"
#include "passes/search/Pipeline.h"
#include "tools/memfit/Progress.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <optional>

namespace memfit::tool {

/// The planning subcommands. Function-local statics, so options in other
/// files can name them whatever the order of static initialisation.
llvm::cl::SubCommand &planCommand();
llvm::cl::SubCommand &compileCommand();
llvm::cl::SubCommand &compareCommand();

/// Everything a planning command works on. Owns the graph the task graph
/// points into, so it is not movable once built.
struct PlanningSession {
  std::string modelPath;
  std::string profilePath; // --profile ("" for none)
  FreezeSpec freeze;       // --freeze and --train-only as given
  /// Which form attention takes and why (empty: the model has none, or
  /// it is kept as written on request).
  std::string attentionNote;
  /// The loss computes the head's product (--fuse-head; TaskGraph::
  /// fusedHead where the model allows it), and which form the plan took
  /// and why (empty when the model's head cannot be fused).
  bool fuseHead = false;
  std::string headNote;
  /// Fused forms (--fuse; compiler/onnx/EpilogueFusion.cpp) made at
  /// import, how many, and which form the plan took and why (empty when
  /// the model has none to fuse).
  bool fuseEpilogues = false;
  int64_t epilogues = 0;
  std::string fuseNote;
  /// `graph` already holds the model as this session plans it (--fuse
  /// imports once and derives the fused graph): importInto leaves it.
  bool imported = false;
  /// Rows per chunk of the fused head; 0: --head-chunk-rows or its default.
  int64_t headChunkRows = 0;
  /// A budget given as a percentage, already resolved into device bytes
  /// against another form of the model (the head as written, for
  /// --fuse-head=auto); 0 when none.
  int64_t budgetBytes = 0;
  /// The bytes another form of the model homed off the GPU (the fused
  /// head's, for the head as written): this form's homing starts there
  /// (PlanRequest::homeBytesAtLeast); -1 when none.
  int64_t homeBytesAtLeast = -1;
  /// PlanRequest::homeKeepsCopies.
  bool homeKeepsCopies = false;
  Graph graph;
  TaskGraph tg;
  std::unique_ptr<CostModel> costs;
  std::map<int64_t, CostTable> tables;
  /// The cost table of a plan that splits the batch into chunks (its
  /// report's algorithm names).
  std::optional<CostTable> chunkedTable;
  /// The training configuration the task graph was built with.
  TrainingConfig config;
  /// The evaluation program (planEvaluation): its graph, cost tables and
  /// plan, or why there is none (evalWhy).
  TaskGraph evalTg;
  std::map<int64_t, CostTable> evalTables;
  std::optional<PlanOutcome> evalOutcome;
  std::string evalWhy;

  PlanningSession() = default;
  PlanningSession(const PlanningSession &) = delete;
  PlanningSession &operator=(const PlanningSession &) = delete;

  const CostTable &tableAt(int64_t b);
  CostTableFn tableFn() {
    return [this](int64_t b) -> const CostTable & { return tableAt(b); };
  }
};

/// --ranks, --shard and --link, checked (the batch must split evenly).
llvm::Expected<DataParallel> dataParallelFlags();
/// The same checks for any command's values (ranks 0: one rank).
llvm::Expected<DataParallel> checkDataParallel(int64_t ranks, int shard,
                                               DataParallel::Link link,
                                               int64_t batch);

/// Models with more tasks than this are large: their planning stages are
/// announced on stderr even without --verbose.
constexpr size_t kLargeTaskCount = 5000;

/// The progress reporter --quiet and --verbose ask for.
Progress makeProgress();
/// True under --quiet: print nothing but errors (and what --json asks for).
bool quietFlag();
/// --accumulate: micro-batches per optimizer step (1 when not given).
int32_t accumulateFlag();

/// --fuse-attention: choose (plan and compile; compare fuses), always
/// fused, or as the model writes it.
enum class AttentionMode { Auto, Fused, Materialized };

/// --fuse: the planner chooses between the fused forms and the model as
/// written (auto), or plans the model as written (none).
enum class FuseMode { Auto, None };
FuseMode fuseFlag();
/// "9 BatchNorm+ReLU", "3 BatchNorm+Clip", or both joined by "and".
std::string fusedFormsText(int64_t relu, int64_t clip);

/// --fuse-head is not false: compare plans the fused head.
bool fuseHeadRequested();
/// --fuse-attention and --fuse-head as given.
AttentionMode fuseAttentionFlag();
AttentionMode fuseHeadFlag();
/// --head-chunk-rows (0 when not given).
int64_t headChunkRowsFlag();
/// --budget asks for the lower bound (lb).
bool budgetIsLowerBoundFlag();
/// --budget is a size in bytes (not a percentage, nor the lower bound),
/// and --host-budget is given: a plan that may home weights on the host,
/// under the same bytes whichever form of the model is planned.
bool hostTierInBytesFlag();
/// The memory lower bound of the task graph `config` builds from `g` with
/// the fused head in chunks of `rows` rows: `config`'s graph but for the
/// head's scratch block (FormChoice.cpp).
llvm::Expected<LowerBound>
lowerBoundAtChunk(const Graph &g, TrainingConfig config, int64_t rows);
/// Imports the model as the flags say into `s`, attention fused when
/// `fuse` (FormChoice.cpp imports each form it plans).
llvm::Error importInto(PlanningSession &s, bool keepWeightData, bool fuse,
                       Progress &p);

/// Imports the model and builds the task graph and the cost model from the
/// shared flags (attention fused unless --fuse-attention=false).
llvm::Error openSession(PlanningSession &s, bool keepWeightData,
                        Progress *progress = nullptr);
/// Builds the task graph and the cost model of `s.graph`.
llvm::Error buildSession(PlanningSession &s, Progress &progress);

/// Opens the session and plans with the shared flags. Under
/// --fuse-head=auto a model whose head can be fused is planned with the
/// head as written and fused, the percentage budget of the head as
/// written in both, and the faster feasible plan is kept (headNote says
/// which). Under
/// --fuse-attention=auto a model with attention is planned as written and
/// fused, under the same budget in bytes (a percentage is of the model's own
/// ideal peak), and the faster feasible plan is kept: `s` is then the
/// session it was planned in, and its attentionNote says which and why.
llvm::Expected<PlanOutcome> planChosen(std::unique_ptr<PlanningSession> &s,
                                       bool keepWeightData, Progress &progress);

/// Plans the evaluation program beside the training plan `train` into
/// `s.evalOutcome`, or says why there is none in `s.evalWhy` (a trainer
/// without one refuses validation with that reason; the compile goes on).
void planEvaluationFor(PlanningSession &s, const PlanOutcome &train,
                       Progress &progress);

/// Runs the planner with progress messages; errors name the model file.
llvm::Expected<PlanOutcome>
runPlanner(PlanningSession &s, const PlanRequest &req, Progress &progress);

/// How much of the report a command needs.
enum class ReportDetail {
  Summary, // what the printed summary shows (buildPlanSummary)
  Full     // every task, transfer and block too, for the files
};
/// The one summary of the outcome (codegen/PlanReport.h), built once; the
/// printed summary (SummaryText.h), plan.json and report.txt render it.
PlanReport planReport(PlanningSession &s, const PlanOutcome &o,
                      ReportDetail detail);

/// Writes plan.json, trace.json and report.html into `out`.
llvm::Error writePlanReports(OutputDir &out, const PlanReport &r);

/// The request the shared flags describe (policy overridable).
llvm::Expected<PlanRequest> planRequest(const PlanningSession &s);
/// For `memfit compare`: refuses the single --budget and --policy flags.
llvm::Error checkCompareFlags();
/// For `memfit compare`: the shared flags' request with the ideal policy
/// and no budget.
llvm::Expected<PlanRequest> compareRequest(const PlanningSession &s);
/// --nvme's directory as an absolute path ("" without --nvme): what the
/// generated trainer opens unless its own --nvme says otherwise.
llvm::Expected<std::string> nvmeDirectory();
/// --library-reserve, or the device's reserve when not given.
llvm::Expected<int64_t> libraryReserve(const PlanningSession &s);
/// Parses a budget (a size with units, or a percentage of the ideal peak)
/// into `r`; `flag` names the option in messages.
llvm::Error parseBudget(llvm::StringRef text, llvm::StringRef flag,
                        PlanRequest &r);

/// "restricted by --freeze '...': 3 of 9 weights train ...", naming the
/// flags that chose them; empty when every weight trains.
std::string trainingRestriction(const TaskGraph &tg);

} // namespace memfit::tool

#endif
