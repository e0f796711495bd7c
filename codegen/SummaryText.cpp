//===- SummaryText.cpp - What plan and compile print ----------------------===//
#include "codegen/SummaryText.h"

#include "codegen/AccuracyJson.h"
#include "codegen/SearchJson.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"

#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace memfit {
namespace {

using json = nlohmann::ordered_json;

/// Milliseconds with two decimals, whatever the size: a terminal summary
/// lines up better than formatSeconds' mixed units would.
std::string ms(double seconds) {
  return llvm::formatv("{0:F2} ms", seconds * 1e3).str();
}

/// A ratio as a signed percentage: "+33%", "-12%".
std::string signedPercent(double r) {
  return llvm::formatv("{0}{1:F0}%", r >= 0 ? "+" : "-", std::abs(r) * 100)
      .str();
}

} // namespace

void printAccuracy(llvm::raw_ostream &os, const ReportSummary &s, int width) {
  if (s.accuracyPrecision.empty())
    return;
  os << "accuracy";
  os.indent(std::max(1, width - 8));
  const std::string where = s.accuracyClass.empty()
                                ? "this device (it states no compute "
                                  "capability)"
                                : s.accuracyClass;
  if (s.accuracyCases == 0) {
    os << llvm::formatv("no measured iteration time on {0} in {1}: "
                        "the times here are the device model's, not checked "
                        "against a run there\n",
                        where, s.accuracyPrecision);
    return;
  }
  os << llvm::formatv("on {0} in {1}, {2}\n", where, s.accuracyPrecision,
                      measuredOffText(s.accuracyCases, s.accuracyLow,
                                      s.accuracyHigh, s.accuracyBasis));
}

std::string measuredOffText(int cases, double low, double high,
                            llvm::StringRef basis) {
  const std::string band =
      cases == 1 ? signedPercent(low)
                 : signedPercent(low) + " to " + signedPercent(high);
  return llvm::formatv("predicted iteration times were {0} off the measured "
                       "({1} network{2}: {3})",
                       band, cases, cases == 1 ? "" : "s", basis)
      .str();
}

namespace {

void printOptimal(llvm::raw_ostream &os, const ReportSummary &s) {
  const ReportOptimal &opt = *s.optimal;
  os << llvm::formatv(
      "optimal  integral program over {0} blocks ({1} rows, {2} "
      "columns): {3} per round, {4} after {5} nodes (limit "
      "{6}), solved in {7:F2} s{10}; chose {8} offloads, {9} "
      "recomputes\n",
      opt.blocks, opt.rows, opt.columns, ms(opt.objectiveSeconds),
      opt.proven ? "proven optimal" : "not proven optimal", opt.nodes,
      opt.maxNodes, opt.solveSeconds, opt.offloaded, opt.recomputed,
      opt.subBatchesSolved > 1
          ? llvm::formatv(" at {0} sub-batches, the fastest kept (no "
                          "other's proven bound was below it)",
                          opt.subBatchesSolved)
                .str()
          : std::string());
  double d = s.plannedSeconds / opt.memfitSeconds - 1;
  os << llvm::formatv("         memfit's own plan {0}: the solver's plan is "
                      "{1:P1} {2} it ({3})\n",
                      ms(opt.memfitSeconds), std::abs(d),
                      d > 0 ? "slower than" : "faster than or as fast as",
                      opt.realization == 0   ? "offloads leave after their "
                                               "last forward use"
                      : opt.realization == 1 ? "offloads leave when room is "
                                               "needed"
                                             : "its recomputes, memfit's "
                                               "offloads");
}

void printDataParallel(llvm::raw_ostream &os, const PlanReport &r) {
  const ReportDataParallel &d = r.dataParallel;
  os << llvm::formatv(
      "ranks    {0} data-parallel over {1}, global batch {2} "
      "({3} per rank); weight side {4} per rank{5}\n",
      d.ranks, d.link, r.batch * d.ranks, r.batch,
      formatBytes(d.weightSideBytes),
      d.shard == 0
          ? std::string(", replicated")
          : llvm::formatv(" (replicated {0}; {1} sharded over the ranks)",
                          formatBytes(d.replicatedWeightSideBytes),
                          d.shard == 1 ? "optimizer state"
                                       : "optimizer state and gradients")
                .str());
  os << llvm::formatv("         collectives {0} per iteration on their own "
                      "stream, {1} of it not hidden behind compute\n",
                      ms(d.collectiveSeconds), ms(d.exposedSeconds));
  os << "note     BatchNorm statistics are per rank, as DDP without "
        "SyncBatchNorm\n";
}

void printBatch(llvm::raw_ostream &os, const PlanReport &r) {
  if (r.chunks > 1) {
    os << llvm::formatv("batch    {0} chunks of {1} in one round\n", r.chunks,
                        r.subBatch);
    os << "note     " << chunkNote(r) << "\n";
    return;
  }
  os << llvm::formatv("batch    {0} sub-batches of {1}", r.numSubBatches,
                      r.subBatch);
  if (r.batch % r.subBatch)
    os << llvm::formatv(" (the last of {0})", r.batch % r.subBatch);
  os << "\n";
  if (r.accumulate > 1)
    os << "note     " << accumulateNote(r) << "\n";
}

json dataParallelJson(const PlanReport &r) {
  const ReportDataParallel &d = r.dataParallel;
  return {{"ranks", d.ranks},
          {"shard", d.shard},
          {"link", d.link},
          {"global_batch", r.batch * d.ranks},
          {"bucket_bytes", d.bucketBytes},
          {"weight_side_bytes", d.weightSideBytes},
          {"replicated_weight_side_bytes", d.replicatedWeightSideBytes},
          {"collective_buffer_bytes", d.collectiveBufferBytes},
          {"collective_seconds", d.collectiveSeconds},
          {"exposed_collective_seconds", d.exposedSeconds}};
}

json optimalJson(const ReportOptimal &opt) {
  return {{"round_objective_seconds", opt.objectiveSeconds},
          {"proven", opt.proven},
          {"nodes", opt.nodes},
          {"max_nodes", opt.maxNodes},
          {"blocks", opt.blocks},
          {"offloaded", opt.offloaded},
          {"recomputed", opt.recomputed},
          {"memfit_seconds", opt.memfitSeconds},
          {"realization", opt.realization},
          {"solve_seconds", opt.solveSeconds},
          {"sub_batches_solved", opt.subBatchesSolved}};
}

/// What the search tried: sub-batches, chunk counts, refinement moves.
void searchJson(json &j, const ReportSummary &s) {
  json tried = json::array();
  for (auto [b, t] : s.subBatchesTried)
    tried.push_back({{"sub_batch", b}, {"planned_seconds", t}});
  j["sub_batches_tried"] = tried;
  chunkRecordsJson(j, s); // as plan.json
  if (s.refineTries > 0)  // memfit's refinement phase
    j["refine"] = {{"moves_tried", s.refineTries},
                   {"decisions_changed", s.refineChanged}};
}

} // namespace

void printProfileLine(llvm::raw_ostream &os, const ReportProfile &p) {
  if (!p.used)
    return;
  os << "profile  " << p.measured + p.interpolated << " task measurements used";
  if (p.interpolated)
    os << " (" << p.interpolated << " interpolated between sub-batches)";
  os << "; " << p.estimated
     << " not in the profile, estimated by the analytic model";
  for (size_t i = 0; i < p.estimatedExamples.size(); ++i)
    os << (i ? "; " : ", e.g. ") << p.estimatedExamples[i];
  if (p.estimated > static_cast<int64_t>(p.estimatedExamples.size()))
    os << "; ...";
  os << "\n";
}

void printTierLines(llvm::raw_ostream &os, const ReportSummary &s,
                    llvm::StringRef precision, int width) {
  auto label = [&](llvm::StringRef l) {
    os << l;
    os.indent(std::max<int>(1, width - static_cast<int>(l.size())));
  };
  if (s.hostHomedWeights > 0) {
    label("host");
    os << llvm::formatv("{0} weights homed in pinned host memory, "
                        "{1} with their gradients and optimizer state: "
                        "copied in for the tasks that read them, updated by "
                        "the host's cores{2}\n",
                        s.hostHomedWeights, formatBytes(s.hostHomeBytes),
                        s.hostUpdatesOverlapped > 0
                            ? llvm::formatv(" ({0} of {1} updates start inside "
                                            "the last round, beside its "
                                            "backward pass)",
                                            s.hostUpdatesOverlapped,
                                            s.hostUpdates)
                                  .str()
                            : std::string());
  }
  if (s.gpuCopyWeights > 0) {
    // fp32 and tf32 plans have such copies for this layout alone.
    const bool full = precision == "fp32" || precision == "tf32";
    label("copies");
    os << llvm::formatv(
        "{0} of those weights keep {1} ({2}, in the resident bytes): read "
        "there with no copy in; a trained one's host update {3} at home, "
        "uploaded once a step (ZeRO-Offload's layout)\n",
        s.gpuCopyWeights,
        full ? "their value on the GPU too, as an f32 working copy"
             : "their 16-bit working copy on the GPU",
        formatBytes(s.gpuCopyBytes),
        full ? "writes its master" : "rounds its new copy");
  }
  if (s.roundedCopyWeights > 0) {
    label("copies");
    os << llvm::formatv(
        "{0} of those weights keep no 16-bit working copy at home ({1} "
        "saved): each copy in sends the fp32 master, which the GPU rounds "
        "through a {2} staging buffer (in the resident bytes; MegaTrain's "
        "layout){3}\n",
        s.roundedCopyWeights, formatBytes(s.roundedCopyBytes),
        formatBytes(s.copyStagingBytes),
        s.nvmeRoundedCopyWeights > 0
            ? llvm::formatv("; {0} of those masters are on NVMe, read from "
                            "the drive into pinned staging on each copy in",
                            s.nvmeRoundedCopyWeights)
                  .str()
            : std::string());
  }
  if (s.gradPoolBytes > 0) {
    label("pool");
    os << llvm::formatv(
        "{0} of those gradients ({1}) stream through a {2} pinned pool: "
        "each takes its bytes when copied home and gives them back when its "
        "host update has finished (pinned host memory {3} in all)\n",
        s.pooledGradients, formatBytes(s.pooledGradBytes),
        formatBytes(s.gradPoolBytes), formatBytes(s.hostMemoryBytes));
  }
  if (s.nvmeHomedWeights > 0) {
    label("nvme");
    os << llvm::formatv(
        "{0}{1}{2} of them, {3}, in a file of the "
        "--nvme directory: the host's update streams it from "
        "the drive and back\n",
        s.nvmeStateWeights > 0
            ? llvm::formatv("the optimizer state of {0}", s.nvmeStateWeights)
                  .str()
            : std::string(),
        s.nvmeStateWeights > 0 && s.nvmeMasterWeights > 0 ? " and " : "",
        s.nvmeMasterWeights > 0
            ? llvm::formatv("the fp32 master of {0}", s.nvmeMasterWeights).str()
            : std::string(),
        formatBytes(s.nvmeHomeBytes));
  }
}

void printPlanSummary(llvm::raw_ostream &os, const PlanReport &r) {
  const ReportSummary &s = r.summary;
  os << llvm::formatv(
      "model {0} ({1}), batch {2}, device {3}, policy {4}{5}\n",
      quoteName(r.model), r.modelFile, r.batch, r.device, r.policy,
      r.precision == "fp32" ? std::string() : ", precision " + r.precision);
  printProfileLine(os, r.profile);
  os << "feasible: yes (verified)\n";
  if (r.frozen.weights > 0)
    os << "training " << describeRestriction(r.frozen) << "\n";
  if (r.clipGradNorm > 0)
    os << "update   " << describeClipping(r) << "\n";
  if (std::string e = describeEvaluation(r); !e.empty())
    os << "evaluate " << e << "\n";
  os << llvm::formatv("memory   budget {0}, planned {1} (library reserve {2} "
                      "+ resident {3} + arena {4})\n",
                      formatBytes(r.budgetBytes),
                      formatBytes(r.libraryReserveBytes + s.plannedBytes),
                      formatBytes(r.libraryReserveBytes),
                      formatBytes(s.residentBytes), formatBytes(s.arenaBytes));
  os << llvm::formatv("         lower bound {0}, ideal peak {1}, allocation "
                      "efficiency {2:P1}\n",
                      formatBytes(s.lowerBoundBytes),
                      formatBytes(s.idealPeakBytes), s.allocationEfficiency);
  os << "         the CUDA context is not in the budget: the trainer "
        "measures it and reports it beside the budget\n";
  printTierLines(os, s, r.precision, 9);
  os << llvm::formatv(
      "time     ideal {0}, planned {1}, overhead {2:P1}, stall {3}\n",
      ms(s.idealSeconds), ms(s.plannedSeconds), s.overhead, ms(s.stallSeconds));
  printAccuracy(os, s, 9);
  if (s.boundSeconds > 0) {
    os << llvm::formatv("bound    {0} per iteration, proven for this order "
                        "and sub-batch: the plan is {1:P1} above it\n",
                        ms(s.boundSeconds),
                        s.plannedSeconds / s.boundSeconds - 1);
    if (s.spaceBoundSeconds > 0)
      os << llvm::formatv("         {0} over every sub-batch of this order: no "
                          "plan of any sub-batch is faster; this one is {1:P1} "
                          "above it\n",
                          ms(s.spaceBoundSeconds),
                          s.plannedSeconds / s.spaceBoundSeconds - 1);
  } else if (!s.boundWhy.empty())
    os << "bound    none: " << s.boundWhy << "\n";
  if (s.optimal)
    printOptimal(os, s);
  os << llvm::formatv("traffic  to host {0}, to device {1} per iteration\n",
                      formatBytes(s.bytesToHost), formatBytes(s.bytesToDevice));
  printBatch(os, r);
  if (!r.exact)
    os << "note     " << inexactNote(r) << "\n";
  if (!r.attention.empty())
    os << "note     " << r.attention << "\n";
  if (!r.head.empty())
    os << "note     " << r.head << "\n";
  if (!r.fuse.empty())
    os << "note     " << r.fuse << "\n";
  if (r.dataParallel.ranks > 1)
    printDataParallel(os, r);
  os << llvm::formatv("blocks   {0} offloaded of {1}; {2} tasks run in place\n",
                      s.offloadedBlocks, s.blocks, s.inPlaceRuns);
}

std::string planSummaryJson(const PlanReport &r) {
  const ReportSummary &s = r.summary;
  json j;
  j["model"] = r.model;
  j["file"] = r.modelFile;
  j["device"] = r.device;
  if (r.profile.used)
    j["profile"] = {{"measured", r.profile.measured},
                    {"interpolated", r.profile.interpolated},
                    {"estimated", r.profile.estimated}};
  j["policy"] = r.policy;
  if (r.precision != "fp32") // as plan.json
    j["precision"] = r.precision;
  j["feasible"] = s.feasible;
  j["batch"] = r.batch;
  j["sub_batch"] = r.subBatch;
  j["sub_batches"] = r.numSubBatches;
  if (r.chunks > 1) // as plan.json
    j["chunks"] = r.chunks;
  if (r.dataParallel.ranks > 1)
    j["data_parallel"] = dataParallelJson(r);
  if (const ReportFrozen &f = r.frozen; f.weights > 0) // as plan.json
    j["frozen"] = {{"weights", f.weights},
                   {"bytes", f.bytes},
                   {"trained_weights", f.trainedWeights},
                   {"trained_bytes", f.trainedBytes}};
  j["exact"] = r.exact;
  j["bound_seconds"] =
      s.boundSeconds > 0 ? json(s.boundSeconds) : json(nullptr);
  j["space_bound_seconds"] =
      s.spaceBoundSeconds > 0 ? json(s.spaceBoundSeconds) : json(nullptr);
  j["accuracy"] = accuracyJson(s);
  if (s.optimal)
    j["optimal"] = optimalJson(*s.optimal);
  j["budget_bytes"] = r.budgetBytes;
  j["library_reserve_bytes"] = r.libraryReserveBytes;
  j["planned_bytes"] = s.plannedBytes;
  j["resident_bytes"] = s.residentBytes;
  if (s.hostHomedWeights > 0) { // absent without tiers: plans stay as before
    j["host_home_bytes"] = s.hostHomeBytes;
    j["host_homed_weights"] = s.hostHomedWeights;
    j["host_updates"] = s.hostUpdates;
    j["host_updates_overlapped"] = s.hostUpdatesOverlapped;
    if (s.gpuCopyWeights > 0) {
      j["gpu_copy_weights"] = s.gpuCopyWeights;
      j["gpu_copy_bytes"] = s.gpuCopyBytes;
    }
    if (s.roundedCopyWeights > 0) {
      j["rounded_copy_weights"] = s.roundedCopyWeights;
      j["rounded_copy_bytes"] = s.roundedCopyBytes;
      j["rounded_copy_nvme_weights"] = s.nvmeRoundedCopyWeights;
      j["copy_staging_bytes"] = s.copyStagingBytes;
    }
    if (s.gradPoolBytes > 0) {
      j["host_memory_bytes"] = s.hostMemoryBytes;
      j["grad_pool_bytes"] = s.gradPoolBytes;
      j["pooled_grad_bytes"] = s.pooledGradBytes;
      j["pooled_gradients"] = s.pooledGradients;
    }
    if (s.nvmeHomedWeights > 0) {
      j["nvme_home_bytes"] = s.nvmeHomeBytes;
      j["nvme_homed_weights"] = s.nvmeHomedWeights;
      j["nvme_state_weights"] = s.nvmeStateWeights;
      j["nvme_master_weights"] = s.nvmeMasterWeights;
    }
  }
  j["arena_bytes"] = s.arenaBytes;
  j["lower_bound_bytes"] = s.lowerBoundBytes;
  j["ideal_peak_bytes"] = s.idealPeakBytes;
  j["max_live_bytes"] = s.maxLiveBytes;
  j["allocation_efficiency"] = s.allocationEfficiency;
  j["ideal_seconds"] = s.idealSeconds;
  j["planned_seconds"] = s.plannedSeconds;
  j["overhead"] = s.overhead;
  j["stall_seconds"] = s.stallSeconds;
  j["bytes_to_host"] = s.bytesToHost;
  j["bytes_to_device"] = s.bytesToDevice;
  // The same figures under the names scripts expect (docs/user-guide.md).
  j["peak_bytes"] = s.plannedBytes;
  j["ideal_time_ms"] = s.idealSeconds * 1e3;
  j["planned_time_ms"] = s.plannedSeconds * 1e3;
  j["offload_bytes"] = s.bytesToHost;
  j["prefetch_bytes"] = s.bytesToDevice;
  j["recompute_ms"] = s.recomputeSeconds * 1e3;
  j["recomputed_tasks"] = s.recomputedTasks;
  j["in_place_runs"] = s.inPlaceRuns;
  j["stall_ms"] = s.stallSeconds * 1e3;
  j["verified"] = true; // plans are verified before they are reported
  j["plan_seconds"] = s.planSeconds;
  if (!r.attention.empty())
    j["attention"] = r.attention;
  if (!r.head.empty())
    j["head"] = r.head;
  if (!r.fuse.empty())
    j["fuse"] = r.fuse;
  searchJson(j, s);
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

} // namespace memfit
