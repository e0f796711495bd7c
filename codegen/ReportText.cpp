//===- ReportText.cpp - The plan summary a person reads -------------------===//
#include "codegen/ReportText.h"

#include "codegen/SummaryText.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"

#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace memfit {
namespace {

using json = nlohmann::ordered_json;

std::string pct(double x) { return llvm::formatv("{0:F1}%", x * 100).str(); }

/// A name for a table cell: escaped like quoteName but without the quotes,
/// and cut to `width` characters.
std::string cell(const std::string &name, size_t width) {
  std::string q = quoteName(name);
  q = q.substr(1, q.size() - 2);
  if (q.size() > width)
    q = q.substr(0, width - 2) + "..";
  return q;
}

std::string transferWord(const PlanReport &r, const std::string &block,
                         const std::string &direction) {
  if (direction == "to_host")
    return "the offload of";
  for (const ReportBlock &b : r.blocks)
    if (b.name == block && b.decision == "load")
      return "the load of";
  return "the prefetch of";
}

std::string stallLine(const PlanReport &r, const ReportTask &t) {
  std::string s = llvm::formatv("{0} before {1}", formatSeconds(t.stallSeconds),
                                quoteName(t.name))
                      .str();
  if (!t.waitedFor.empty())
    s += ": waiting for " + transferWord(r, t.waitedFor, t.waitedDirection) +
         " " + quoteName(t.waitedFor);
  return s;
}

std::vector<const ReportBlock *> movedBlocks(const PlanReport &r) {
  std::vector<const ReportBlock *> out;
  for (const ReportBlock &b : r.blocks)
    if (b.decision == "offload" || b.decision == "recompute")
      out.push_back(&b);
  return out;
}

} // namespace

std::string formatSeconds(double seconds) {
  if (seconds >= 1)
    return llvm::formatv("{0:F2} s", seconds).str();
  if (seconds == 0)
    return "0 s";
  if (seconds >= 1e-3)
    return llvm::formatv("{0:F2} ms", seconds * 1e3).str();
  return llvm::formatv("{0:F1} us", seconds * 1e6).str();
}

void printReportText(llvm::raw_ostream &os, const PlanReport &r,
                     const ReportTextOptions &opts) {
  const ReportSummary &s = r.summary;
  RoundCounts c = roundCounts(r);
  os << "plan of model " << quoteName(r.model);
  if (!r.modelFile.empty())
    os << " (" << quoteName(r.modelFile) << ")";
  os << ", batch " << r.batch << ", device " << quoteName(r.device)
     << ", policy " << r.policy;
  if (r.precision != "fp32")
    os << ", precision " << r.precision;
  if (!opts.source.empty())
    os << "\n  from " << opts.source;
  os << "\n";
  if (r.profile.used)
    os << llvm::formatv("profile    {0}: {1} task costs measured, {2} "
                        "interpolated, {3} estimated by the analytic model\n",
                        quoteName(r.profile.file), r.profile.measured,
                        r.profile.interpolated, r.profile.estimated);
  os << "feasible   "
     << (s.feasible ? "yes: the plan fits the budget (verified when planned)"
                    : "no")
     << "\n";
  os << llvm::formatv("memory     budget {0}; planned peak {1} = resident {2} "
                      "+ arena {3}\n",
                      formatBytes(r.budgetBytes), formatBytes(s.plannedBytes),
                      formatBytes(s.residentBytes), formatBytes(s.arenaBytes));
  os << llvm::formatv(
      "           library reserve {0} (cuDNN, cuBLAS): {1} "
      "of the budget in all, {2} left\n",
      formatBytes(r.libraryReserveBytes),
      formatBytes(r.libraryReserveBytes + s.plannedBytes),
      formatBytes(r.budgetBytes - r.libraryReserveBytes - s.plannedBytes));
  os << "           the CUDA context is not in the budget: the trainer "
        "measures it\n";
  os << llvm::formatv("           lower bound {0}",
                      formatBytes(s.lowerBoundBytes));
  if (!s.lowerBoundTask.empty())
    os << " (set by " << quoteName(s.lowerBoundTask) << ")";
  os << llvm::formatv(", ideal peak {0}\n", formatBytes(s.idealPeakBytes));
  os << llvm::formatv("           at most {0} live in the arena: allocation "
                      "efficiency {1}\n",
                      formatBytes(s.maxLiveBytes), pct(s.allocationEfficiency));
  os << llvm::formatv("time       ideal {0}, planned {1} per iteration: "
                      "overhead {2}, stall {3}\n",
                      formatSeconds(s.idealSeconds),
                      formatSeconds(s.plannedSeconds), pct(s.overhead),
                      formatSeconds(s.stallSeconds));
  printAccuracy(os, s, 11);
  if (const ReportDataParallel &d = r.dataParallel; d.ranks > 1)
    os << llvm::formatv(
        "ranks      {0} data-parallel over {1} (shard {2}), global batch {3}: "
        "weight side {4} per rank (replicated {5}); {6} gradient buckets, "
        "collectives {7} per iteration, {8} not hidden behind compute\n",
        d.ranks, d.link, d.shard, r.batch * d.ranks,
        formatBytes(d.weightSideBytes),
        formatBytes(d.replicatedWeightSideBytes), d.buckets,
        formatSeconds(d.collectiveSeconds), formatSeconds(d.exposedSeconds));
  if (const ReportFrozen &f = r.frozen; f.weights > 0)
    os << "training   " << describeFrozen(f) << "\n";
  printTierLines(os, s, r.precision, 11);
  if (s.boundSeconds > 0) {
    os << llvm::formatv("bound      {0} per iteration, proven for this order "
                        "and sub-batch: the plan is {1} above it\n",
                        formatSeconds(s.boundSeconds),
                        pct(s.plannedSeconds / s.boundSeconds - 1));
    if (s.spaceBoundSeconds > 0)
      os << llvm::formatv("           {0} over every sub-batch of this order: "
                          "no plan of any sub-batch is faster; this one is {1} "
                          "above it\n",
                          formatSeconds(s.spaceBoundSeconds),
                          pct(s.plannedSeconds / s.spaceBoundSeconds - 1));
  } else
    os << "bound      none computed\n";
  os << llvm::formatv("traffic    to host {0}, to device {1} per iteration; "
                      "each round {2} offloads, {3} prefetches, {4} loads\n",
                      formatBytes(s.bytesToHost), formatBytes(s.bytesToDevice),
                      c.offloads, c.prefetches, c.loads);
  if (c.recomputedBlocks == 0 && c.recomputeRuns == 0)
    os << "recompute  none\n";
  else
    os << llvm::formatv("recompute  {0} blocks ({1}) regenerated by {2} "
                        "forward runs, {3} per round\n",
                        c.recomputedBlocks, formatBytes(c.recomputedBytes),
                        c.recomputeRuns, formatSeconds(c.recomputeSeconds));
  os << llvm::formatv("in place   {0} tasks per round write their output "
                      "over their input\n",
                      s.inPlaceRuns);
  if (r.chunks > 1)
    os << llvm::formatv("sub-batch  none: the batch of {0} in one round, as "
                        "{1} chunks of {2} (BatchNorm statistics gathered "
                        "over the whole batch)",
                        r.batch, r.chunks, r.subBatch);
  else if (r.numSubBatches == 1)
    os << llvm::formatv("sub-batch  none: the whole batch of {0} in one round",
                        r.batch);
  else
    os << llvm::formatv("sub-batch  {0} sub-batches of {1}", r.numSubBatches,
                        r.subBatch);
  if (r.subBatch > 0 && r.numSubBatches > 1 && r.batch % r.subBatch)
    os << llvm::formatv(" (the last of {0})", r.batch % r.subBatch);
  if (s.eq3SubBatch > 0)
    os << llvm::formatv("; Eq. 3 gives {0}", s.eq3SubBatch);
  os << "\n";
  os << (r.exact ? "semantics  exact: what the model computes at the batch, "
                   "up to the order of float sums\n"
                 : "semantics  NOT exact (asked for; see the notes)\n");
  // Several schedules may be tried per sub-batch; show the best of each.
  std::map<int64_t, double> best;
  for (auto [b, secs] : s.subBatchesTried) {
    auto [it, fresh] = best.try_emplace(b, secs);
    if (!fresh)
      it->second = std::min(it->second, secs);
  }
  if (best.size() > 1) {
    os << "           best time per sub-batch tried:";
    const char *sep = " ";
    for (auto [b, secs] : best) {
      os << sep << b << ": " << formatSeconds(secs);
      sep = ", ";
    }
    os << "\n";
  }
  if (!s.chunksTried.empty()) {
    os << "           best time per chunk count tried:";
    const char *sep = " ";
    for (auto [k, secs] : s.chunksTried) {
      os << sep << k << " chunks: " << formatSeconds(secs);
      sep = ", ";
    }
    os << "\n";
  }
  if (!s.chunksPruned.empty()) {
    os << "           not planned, a proven bound no faster than a plan in "
          "hand:";
    const char *sep = " ";
    for (auto [k, secs] : s.chunksPruned) {
      os << sep << k << " chunks (at least " << formatSeconds(secs) << ")";
      sep = ", ";
    }
    os << "\n";
  }
  if (s.refineTries > 0)
    os << llvm::formatv("           refined: {0} decisions changed after "
                        "{1} moves tried (keep, recompute or offload of a "
                        "block, or a fastest algorithm, rescheduled)\n",
                        s.refineChanged, s.refineTries);
  if (r.clipGradNorm > 0)
    os << "update     " << describeClipping(r) << "\n";
  if (std::string e = describeEvaluation(r); !e.empty())
    os << "evaluate   " << e << "\n";
  for (const std::string &n : r.notes)
    os << "note       " << n << "\n";

  std::vector<LayerRow> rows = layerTable(r);
  size_t shown =
      opts.maxLayers == 0 ? rows.size() : std::min(rows.size(), opts.maxLayers);
  size_t nameW = 5, opW = 2, decW = 8, algoW = 9;
  for (size_t i = 0; i < shown; ++i) {
    nameW = std::max(nameW, cell(rows[i].node, 40).size());
    opW = std::max(opW, cell(rows[i].op, 20).size());
    decW = std::max(decW, rows[i].decision.size());
    algoW = std::max(algoW, cell(rows[i].algo, 24).size());
  }
  auto left = [](std::string t, size_t w) {
    return t.size() < w ? t + std::string(w - t.size(), ' ') : t;
  };
  auto right = [](std::string t, size_t w) {
    return t.size() < w ? std::string(w - t.size(), ' ') + t : t;
  };
  os << "\nlayers (in execution order; times per round)\n";
  os << "  " << left("layer", nameW) << " " << left("op", opW) << " "
     << right("output", 10) << " " << left("decision", decW) << " "
     << left("algorithm", algoW) << " " << right("forward", 10) << " "
     << right("backward", 10) << " " << right("stall", 10) << "\n";
  for (size_t i = 0; i < shown; ++i) {
    const LayerRow &row = rows[i];
    os << "  " << left(cell(row.node, 40), nameW) << " "
       << left(cell(row.op, 20), opW) << " "
       << right(formatBytes(row.outputBytes), 10) << " "
       << left(row.decision, decW) << " "
       << left(row.algo.empty() ? "-" : cell(row.algo, 24), algoW) << " "
       << right(formatSeconds(row.forwardSeconds), 10) << " "
       << right(formatSeconds(row.backwardSeconds), 10) << " "
       << right(row.stallSeconds > 0 ? formatSeconds(row.stallSeconds) : "-",
                10)
       << "\n";
  }
  if (shown < rows.size())
    os << llvm::formatv("  ... {0} more layers (--layers=0 shows all)\n",
                        rows.size() - shown);

  std::vector<const ReportBlock *> moved = movedBlocks(r);
  if (!moved.empty()) {
    os << "\nwhy blocks move\n";
    // Each block's type where the plan mixes them (fp32 plans do not).
    bool types = r.precision != "fp32";
    for (size_t i = 0; i < moved.size() && i < opts.maxWhy; ++i)
      os << "  " << quoteName(moved[i]->name) << " ("
         << formatBytes(moved[i]->bytes)
         << (types ? " " + moved[i]->dtype : std::string()) << ", "
         << moved[i]->decision << "): " << moved[i]->why << "\n";
    if (moved.size() > opts.maxWhy)
      os << llvm::formatv("  ... and {0} more (plan.json lists every block)\n",
                          moved.size() - opts.maxWhy);
  }

  std::vector<const ReportTask *> stalls = largestStalls(r, opts.maxStalls);
  os << "\nlargest stalls (compute waiting on copies, one round)\n";
  if (stalls.empty())
    os << "  none: every copy is hidden behind compute\n";
  for (const ReportTask *t : stalls)
    os << "  " << stallLine(r, *t) << "\n";
}

std::string reportToJson(const PlanReport &r, const ReportTextOptions &opts) {
  const ReportSummary &s = r.summary;
  RoundCounts c = roundCounts(r);
  json j;
  j["schema_version"] = r.schemaVersion;
  j["source"] = opts.source;
  j["model"] = r.model;
  j["model_file"] = r.modelFile;
  j["device"] = r.device;
  j["policy"] = r.policy;
  j["precision"] = r.precision;
  j["feasible"] = s.feasible;
  j["memory"] = {{"budget_bytes", r.budgetBytes},
                 {"library_reserve_bytes", r.libraryReserveBytes},
                 {"planned_bytes", s.plannedBytes},
                 {"resident_bytes", s.residentBytes},
                 {"arena_bytes", s.arenaBytes},
                 {"max_live_bytes", s.maxLiveBytes},
                 {"lower_bound_bytes", s.lowerBoundBytes},
                 {"lower_bound_task", s.lowerBoundTask},
                 {"ideal_peak_bytes", s.idealPeakBytes},
                 {"allocation_efficiency", s.allocationEfficiency}};
  j["time"] = {{"ideal_seconds", s.idealSeconds},
               {"planned_seconds", s.plannedSeconds},
               {"overhead", s.overhead},
               {"stall_seconds", s.stallSeconds},
               {"bound_seconds",
                s.boundSeconds > 0 ? json(s.boundSeconds) : json(nullptr)},
               {"space_bound_seconds", s.spaceBoundSeconds > 0
                                           ? json(s.spaceBoundSeconds)
                                           : json(nullptr)}};
  j["traffic"] = {{"bytes_to_host", s.bytesToHost},
                  {"bytes_to_device", s.bytesToDevice},
                  {"offloads_per_round", c.offloads},
                  {"prefetches_per_round", c.prefetches},
                  {"loads_per_round", c.loads}};
  j["recompute"] = {{"blocks", c.recomputedBlocks},
                    {"bytes", c.recomputedBytes},
                    {"runs_per_round", c.recomputeRuns},
                    {"seconds_per_round", c.recomputeSeconds}};
  j["in_place_runs_per_round"] = s.inPlaceRuns;
  json tried = json::array();
  for (auto [b, t] : s.subBatchesTried)
    tried.push_back({{"sub_batch", b}, {"planned_seconds", t}});
  j["sub_batch"] = {{"batch", r.batch},
                    {"sub_batch", r.subBatch},
                    {"sub_batches", r.numSubBatches},
                    {"chunks", r.chunks},
                    {"eq3_sub_batch", s.eq3SubBatch},
                    {"tried", tried}};
  j["exact"] = r.exact;
  j["notes"] = r.notes;
  json layers = json::array();
  for (const LayerRow &row : layerTable(r))
    layers.push_back({{"node", row.node},
                      {"op", row.op},
                      {"output_bytes", row.outputBytes},
                      {"decision", row.decision},
                      {"why", row.why},
                      {"algorithm", row.algo},
                      {"forward_seconds", row.forwardSeconds},
                      {"backward_seconds", row.backwardSeconds},
                      {"recompute_seconds", row.recomputeSeconds},
                      {"stall_seconds", row.stallSeconds},
                      {"offloaded_bytes", row.offloadedBytes}});
  j["layers"] = std::move(layers);
  json stalls = json::array();
  for (const ReportTask *t : largestStalls(r, opts.maxStalls))
    stalls.push_back({{"task", t->name},
                      {"stall_seconds", t->stallSeconds},
                      {"waited_for", t->waitedFor},
                      {"direction", t->waitedDirection}});
  j["stalls"] = std::move(stalls);
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

} // namespace memfit
