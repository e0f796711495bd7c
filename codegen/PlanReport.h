//===- PlanReport.h - What a plan says, for people and tools ----*- C++ -*-===//
//
// The one summary of a plan, as a plain structure, from which every output
// is rendered: the summary `memfit plan` and `memfit compile` print (text
// and --json, SummaryText.h), plan.json (PlanJson.h), report.txt and
// `memfit report` (ReportText.h), the trace and the HTML page. It is built
// once from a Plan, its TaskGraph and Simulation and what the planner knew
// beside them (PlanContext) when a plan is made, or read back from
// plan.json, so every output says the same thing at compile time and later
// from the file alone. The views every output needs (arena bytes over time,
// the per-layer table, the stall causes) are derived here, once, from this
// structure only. A few fields only the planner knows (the wall time it
// took, the optimal policy's program, why no bound was computed) are not
// written to plan.json, and are empty when read back.
//
// Times are seconds from the start of a task's section: one full sub-batch
// round, or the weight update that follows the last round.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_PLANREPORT_H
#define MEMFIT_CODEGEN_PLANREPORT_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Plan.h"
#include "compiler/ir/Simulation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memfit {

constexpr int kPlanSchemaVersion = 1;

struct ReportTask {
  std::string name;    // e.g. "FP(conv1)"
  std::string kind;    // FP, BP-data, BP-weight, loss, update
  std::string node;    // the ONNX node ("" for the loss)
  std::string op;      // its ONNX op type
  std::string section; // "round" or "update"
  int32_t algo = 0;
  std::string algoName;
  int64_t workspaceBytes = 0, workspaceOffset = 0;
  std::string stream; // compute, copy-out, copy-in
  bool recompute = false;
  double start = 0, end = 0;
  /// The compute stream's idle time right before this task, and the block
  /// whose transfer it waited for ("" when no transfer ended the wait).
  double stallSeconds = 0;
  std::string waitedFor, waitedDirection;
  /// A host update's optimizer state read from NVMe and written back.
  int64_t nvmeBytes = 0;
};

struct ReportTransfer {
  std::string block;
  std::string direction; // "to_host" (offload) or "to_device" (prefetch, load)
  int64_t bytes = 0, offset = 0;
  double start = 0, end = 0;
};

/// One instruction of the plan as the generated program issues it: what
/// the trainer's iteration graph (trainer --dump-graph) is checked against.
struct ReportInstr {
  std::string section; // "round" or "update"
  std::string op;      // run, copy_out, copy_in, record, wait
  std::string stream;  // compute, copy-out, copy-in
  std::string task;    // run
  std::string block;   // copies: the block and its kind
  std::string blockKind;
  int64_t offset = 0, bytes = 0; // copies: the residency
  int32_t event = -1;            // record, wait
  /// A run on the host that starts after this event of the last round
  /// (-1: after the rounds).
  int32_t afterEvent = -1;
};

/// One stay of a block in the arena: where, and when its bytes are held in
/// a round (start < 0 when nothing touched it).
struct ReportResidency {
  int64_t offset = 0, bytes = 0;
  double start = -1, end = -1;
};

struct ReportBlock {
  std::string name, kind;
  std::string value; // the ONNX tensor it holds (or is the gradient of)
  std::string node;  // the ONNX node that produces that tensor
  int64_t bytes = 0; // at the planned sub-batch
  /// keep, offload, recompute, view, resident, host (homed in pinned host
  /// memory), or load (the data batch and
  /// labels, copied in every sub-batch).
  std::string decision;
  std::string why;
  std::string viewOf; // for views: the block whose storage it shares
  /// Its element type ("f32", "bf16", "i32", ...); plan.json of an fp32
  /// plan leaves it out, so it is empty when read back from one.
  std::string dtype;
  std::vector<ReportResidency> residencies;
};

/// What `--policy optimal`'s integral program found, beside the plan the
/// scheduler made of it (the planner's OptimalOutcome).
struct ReportOptimal {
  /// The program's round time at its solution (one round at the plan's
  /// sub-batch, no input load, no update).
  double objectiveSeconds = 0;
  bool proven = false; // optimal for the program within the node limit
  int64_t nodes = 0;   // branch-and-bound nodes explored
  int64_t maxNodes = 0;
  int64_t blocks = 0, offloaded = 0, recomputed = 0; // the program's
  int64_t rows = 0, columns = 0;
  /// memfit's own plan at the same order and sub-batch.
  double memfitSeconds = 0;
  double solveSeconds = 0; // wall time of the solve
  /// How the decisions became the plan: 0, offloads leave after their
  /// last forward use; 1, they leave when room is needed; 2, recompute
  /// choices only, memfit's early offload for the rest.
  int32_t realization = 0;
  /// The sub-batches the program was solved at (OptimalOutcome's).
  int32_t subBatchesSolved = 1;
};

struct ReportSummary {
  bool feasible = true;
  int64_t plannedBytes = 0, residentBytes = 0, arenaBytes = 0;
  /// Weights homed in pinned host memory (Tiers.h), and the bytes of their
  /// blocks there (gradients and optimizer state included); 0 without.
  int64_t hostHomeBytes = 0, hostHomedWeights = 0;
  /// Host updates that start inside the last round, beside the rest of its
  /// backward pass (HostOverlap.h), and all host updates.
  int64_t hostUpdatesOverlapped = 0, hostUpdates = 0;
  /// Optimizer state homed on NVMe: its bytes and the weights it is of;
  /// 0 without that tier.
  int64_t nvmeHomeBytes = 0, nvmeHomedWeights = 0;
  /// Of those, the weights whose optimizer state is on NVMe, and those
  /// whose fp32 master is (16-bit plans).
  int64_t nvmeStateWeights = 0, nvmeMasterWeights = 0;
  /// Of the weights homed on the host, those whose 16-bit working copy
  /// stays on the GPU (TaskGraph::copyStaysOnGpu), and those copies' bytes.
  int64_t gpuCopyWeights = 0, gpuCopyBytes = 0;
  /// Of the weights homed on the host, those whose 16-bit working copy the
  /// host does not keep (TaskGraph::roundsFromMaster: each copy in sends
  /// the master), the bytes that saves at home, and the device's staging
  /// for them (in the resident bytes).
  int64_t roundedCopyWeights = 0, roundedCopyBytes = 0, copyStagingBytes = 0;
  /// Of those, the weights whose master is on NVMe: each copy in reads it
  /// from the drive first (TaskGraph::nvmeCopyReadBytes).
  int64_t nvmeRoundedCopyWeights = 0;
  /// Homed gradients streamed through the host's gradient pool
  /// (GradPool.h): the pool's bytes, the gradients' and how many; 0
  /// without a pool.
  int64_t gradPoolBytes = 0, pooledGradBytes = 0, pooledGradients = 0;
  /// Pinned host memory the homes take (the pool in place of the pooled
  /// gradients' own buffers).
  int64_t hostMemoryBytes = 0;
  int64_t lowerBoundBytes = 0;
  std::string lowerBoundTask;
  int64_t idealPeakBytes = 0, maxLiveBytes = 0;
  double allocationEfficiency = 0;
  double idealSeconds = 0, plannedSeconds = 0, overhead = 0;
  double stallSeconds = 0, roundSeconds = 0, updateSeconds = 0;
  double recomputeSeconds = 0; // per iteration
  int32_t recomputedTasks = 0; // per round
  int32_t inPlaceRuns = 0;     // per round: outputs written over inputs
  int64_t bytesToHost = 0, bytesToDevice = 0;
  int64_t eq3SubBatch = 0;
  std::vector<std::pair<int64_t, double>> subBatchesTried;
  /// Chunk counts planned (passes/search/Chunk.h) and their predicted times.
  std::vector<std::pair<int64_t, double>> chunksTried;
  /// Chunk counts not planned: their proven bound was no faster than a
  /// plan in hand (chunks, bound seconds).
  std::vector<std::pair<int64_t, double>> chunksPruned;
  /// memfit's refinement phase: moves scheduled, and the decisions the
  /// plan differs in from where the phase started (0 and 0 when it did not
  /// run or changed nothing).
  int64_t refineTries = 0, refineChanged = 0;
  /// A proven lower bound on the iteration time of the plans with this
  /// order and sub-batch (passes/solve/TimeBound.h); 0 when none was computed.
  double boundSeconds = 0;
  /// A proven lower bound on the iteration time of every plan with this
  /// order and any sub-batch the search allows; 0 where none covers them
  /// all (a model that keeps whole batches, a sub-batch forced, a graph
  /// past the bound's size, a solve that failed).
  double spaceBoundSeconds = 0;
  /// Why none was, when the planner tried ("" otherwise; not in plan.json).
  std::string boundWhy;
  /// How far the device model's times were measured off on this device's
  /// architecture in this precision (compiler/cost/Accuracy.h): the class
  /// ("" when the device states no compute capability), the precision, the
  /// comparisons (0: none), the least and largest predicted / measured - 1
  /// and which measurements.
  std::string accuracyClass, accuracyPrecision;
  int32_t accuracyCases = 0;
  double accuracyLow = 0, accuracyHigh = 0;
  std::string accuracyBasis;
  /// The plan's blocks, and those it offloads (decision "offload").
  int64_t blocks = 0, offloadedBlocks = 0;
  /// Wall time the planner took (not in plan.json: it differs run to run).
  double planSeconds = 0;
  /// The optimal policy's program (not in plan.json).
  std::optional<ReportOptimal> optimal;
};

/// One collective of data-parallel training: a gradient bucket's
/// all-reduce or reduce-scatter in one sub-batch, or the weights' all-gather
/// after the update. Times from the start of the iteration.
struct ReportCollective {
  std::string what; // "all-reduce", "reduce-scatter", "all-gather"
  int32_t bucket = -1, round = 0;
  int64_t bytes = 0;
  double start = 0, end = 0;
};
/// Data-parallel training (absent, ranks 1, otherwise).
struct ReportDataParallel {
  int32_t ranks = 1, shard = 0;
  std::string link; // what carries the collectives
  int32_t buckets = 0;
  int64_t bucketBytes = 0; // the bucket size asked for (not in plan.json)
  int64_t weightSideBytes = 0, replicatedWeightSideBytes = 0;
  int64_t collectiveBufferBytes = 0;
  double collectiveSeconds = 0, exposedSeconds = 0; // per iteration
  std::vector<ReportCollective> collectives;        // in stream order
};
/// Training restricted to some weights (--freeze, --train-only): how many
/// trainable weights train and how many are frozen, and their bytes (fp32
/// masters). All zero when every weight trains.
struct ReportFrozen {
  int64_t weights = 0, bytes = 0;
  int64_t trainedWeights = 0, trainedBytes = 0;
  /// The --train-only and --freeze expressions that chose them, as given
  /// (not in plan.json).
  std::string trainOnly, freeze;
};
/// "restricted: 3 of 9 weights train (1.5 KiB); 6 frozen (40 KiB): no
/// gradient, optimizer state or update", for every report.
std::string describeFrozen(const ReportFrozen &f);
/// The same, naming the flags: "restricted by --freeze 'x': 3 of 9 weights
/// train (1.5 KiB); 6 frozen (40 KiB) get no gradient, optimizer state or
/// update", what `memfit plan` and `memfit compare` print.
std::string describeRestriction(const ReportFrozen &f);
struct ReportProfile {
  bool used = false;
  std::string file;
  int64_t measured = 0, interpolated = 0, estimated = 0;
  /// A few of the estimated task costs, named (not in plan.json).
  std::vector<std::string> estimatedExamples;
};

/// The evaluation program memfit compile plans beside the training one
/// (passes/search/Evaluation.h): forward only, in the training arena.
struct ReportEvaluation {
  bool planned = false;
  int64_t subBatch = 0, numSubBatches = 0;
  int64_t arenaBytes = 0;   // of the training plan's arena
  int64_t instructions = 0; // in its round
  double seconds = 0;       // predicted, one batch
  std::string why;          // when not planned: why not ("": not asked)
};

struct PlanReport {
  int schemaVersion = kPlanSchemaVersion;
  std::string model, modelFile, device, policy;
  /// The plan's precision (TaskGraph::precision): fp32, tf32, bf16, fp16.
  std::string precision = "fp32";
  /// Gradient clipping by global norm (TaskGraph::clipGradNorm; 0: none)
  /// and what its passes over the gradients add to the update section.
  double clipGradNorm = 0, clipSeconds = 0;
  /// Gradient accumulation (--accumulate): the batch is this many
  /// micro-batches of subBatch, one round each; 1: none.
  int32_t accumulate = 1;
  ReportProfile profile;
  int64_t batch = 0, subBatch = 0, numSubBatches = 0, budgetBytes = 0;
  /// The part of the budget the libraries keep (Plan::libraryReserve):
  /// budgetBytes >= libraryReserveBytes + summary.plannedBytes.
  int64_t libraryReserveBytes = 0;
  /// > 1: the batch in this many chunks of subBatch inside one round.
  int32_t chunks = 1;
  /// The plan computes what the model computes at the batch (up to the
  /// order of float sums); a note says why not when false.
  bool exact = true;
  /// Which form attention takes and why ("" when the model has none); one
  /// of the notes too.
  std::string attention;
  /// Which form the head takes and why ("" when it cannot be fused); one
  /// of the notes too. Where fused (TaskGraph::fusedHead): the rows of
  /// logits per chunk and the scratch block's bytes.
  std::string head;
  int64_t headChunkRows = 0, headScratchBytes = 0;
  /// Which fused forms the plan runs and why ("" when the model has none
  /// to fuse); one of the notes too. The BatchNorms that run a ReLU inside
  /// (OpAttrs::fusedRelu); their tasks' op reads "BatchNormalization+Relu"; and
  /// those that run a Clip (ReLU6), "BatchNormalization+Clip".
  std::string fuse;
  int64_t fusedBatchNormRelu = 0, fusedBatchNormClip = 0;
  ReportDataParallel dataParallel;
  ReportFrozen frozen;
  ReportSummary summary;
  std::vector<std::string> notes;
  std::vector<ReportTask> tasks; // the round in issue order, then the update
  std::vector<ReportTransfer> transfers; // the round, in issue order
  std::vector<ReportBlock> blocks;       // by block id
  int32_t events = 0;
  /// The round's instructions in issue order, then the update's.
  std::vector<ReportInstr> schedule;
  ReportEvaluation evaluation;
};

/// What the plan alone does not know: what the planner found beside it.
struct PlanContext {
  std::string modelFile, device;
  int64_t lowerBoundBytes = 0, idealPeakBytes = 0;
  double idealSeconds = 0;
  std::string lowerBoundTask;
  int64_t eq3SubBatch = 0;
  std::vector<std::pair<int64_t, double>> subBatchesTried;
  std::vector<std::pair<int64_t, double>> chunksTried, chunksPruned;
  int64_t refineTries = 0, refineChanged = 0; // ReportSummary's
  ReportProfile profile;
  std::string attention;         // PlanReport::attention
  std::string head;              // PlanReport::head
  std::string fuse;              // PlanReport::fuse
  std::string trainOnly, freeze; // ReportFrozen's
  bool exact = true;             // PlanReport::exact
  int32_t accumulate = 1;        // PlanReport::accumulate
  double boundSeconds = 0;       // ReportSummary::boundSeconds
  double spaceBoundSeconds = 0;  // ReportSummary::spaceBoundSeconds
  std::string boundWhy;          // ReportSummary::boundWhy
  /// ReportSummary's accuracy fields, as filled by the planner.
  std::string accuracyClass, accuracyPrecision, accuracyBasis;
  int32_t accuracyCases = 0;
  double accuracyLow = 0, accuracyHigh = 0;
  double planSeconds = 0; // ReportSummary::planSeconds
  std::optional<ReportOptimal> optimal;
  /// What carries data-parallel training's collectives, resolved from the
  /// device ("" names the TaskGraph's link setting).
  std::string collectiveLink;
  /// The full sub-batch's cost table, for algorithm names (optional).
  const CostTable *costs = nullptr;
};

/// The whole report: the summary and every task, transfer, instruction and
/// block (what plan.json, report.txt and the trace need).
PlanReport buildPlanReport(const TaskGraph &tg, const Plan &plan,
                           const Simulation &sim, const PlanContext &ctx);
/// The run's parameters, the summary, the data-parallel figures and the
/// notes alone: the same values buildPlanReport gives them, without the
/// per-task lists (what the printed summary needs, cheap for huge plans).
/// "gradients clipped to global norm 1 before every update: ...", for every
/// report of a plan that clips ("" otherwise).
std::string describeClipping(const PlanReport &r);
PlanReport buildPlanSummary(const TaskGraph &tg, const Plan &plan,
                            const Simulation &sim, const PlanContext &ctx);
/// "forward only, batch 64 as 1 sub-batch of 64 ...", or why the trainer
/// cannot validate; "" when no evaluation program was planned.
std::string describeEvaluation(const PlanReport &r);

/// The notes a plan carries (PlanReport::notes), worded once for every
/// output: why it is not exact, and how it keeps exact batch statistics in
/// chunks.
std::string inexactNote(const PlanReport &r);
/// "gradient accumulation (--accumulate 4): ...", for plans with it.
std::string accumulateNote(const PlanReport &r);
std::string chunkNote(const PlanReport &r);

/// Arena bytes in use over one round, as a step function: each point holds
/// from its time until the next. A residency holds its bytes over its span,
/// a workspace over its task; at one instant frees count before
/// allocations, as in the simulator.
struct ArenaPoint {
  double time = 0;
  int64_t bytes = 0;
};
std::vector<ArenaPoint> arenaTimeline(const PlanReport &r);

/// One row per ONNX node, in the order its first task runs.
struct LayerRow {
  std::string node, op;
  int64_t outputBytes = 0;
  /// "keep", "view", "offload Y", "offload Y, dY", "recompute", ...
  std::string decision;
  std::string why; // of the first block of the layer that moved
  std::string algo;
  double forwardSeconds = 0, backwardSeconds = 0, recomputeSeconds = 0;
  double stallSeconds = 0;
  int64_t offloadedBytes = 0;
};
std::vector<LayerRow> layerTable(const PlanReport &r);

/// Tasks the compute stream stalled before, largest first (ties: issue
/// order), at most `limit`.
std::vector<const ReportTask *> largestStalls(const PlanReport &r,
                                              size_t limit);

/// Counts over one round.
struct RoundCounts {
  int offloads = 0, prefetches = 0, loads = 0; // transfers
  int offloadedBlocks = 0, recomputedBlocks = 0;
  int recomputeRuns = 0;
  double recomputeSeconds = 0;
  int64_t recomputedBytes = 0;
};
RoundCounts roundCounts(const PlanReport &r);

} // namespace memfit

#endif
