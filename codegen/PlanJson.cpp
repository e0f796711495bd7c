//===- PlanJson.cpp - plan.json, the plan for people and tools ------------===//
#include "codegen/PlanJson.h"

#include "codegen/AccuracyJson.h"
#include "codegen/SearchJson.h"

#include "compiler/support/JsonText.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

namespace memfit {
namespace {

using json = nlohmann::ordered_json;

json taskJson(const ReportTask &t) {
  json waited = nullptr;
  if (!t.waitedFor.empty())
    waited = {{"block", t.waitedFor}, {"direction", t.waitedDirection}};
  json j = {{"task", t.name},
            {"kind", t.kind},
            {"node", t.node},
            {"op", t.op},
            {"section", t.section},
            {"algo", t.algo},
            {"algo_name", t.algoName},
            {"workspace_bytes", t.workspaceBytes},
            {"workspace_offset", t.workspaceOffset},
            {"stream", t.stream},
            {"recompute", t.recompute},
            {"start", t.start},
            {"end", t.end},
            {"stall_seconds", t.stallSeconds},
            {"waited_for", waited}};
  if (t.nvmeBytes > 0) // written only with state on NVMe
    j["nvme_bytes"] = t.nvmeBytes;
  return j;
}

json blockJson(const ReportBlock &b, bool withDtype) {
  json res = json::array();
  for (const ReportResidency &x : b.residencies)
    res.push_back({{"offset", x.offset},
                   {"bytes", x.bytes},
                   {"start", x.start},
                   {"end", x.end}});
  json j = {{"name", b.name}, {"kind", b.kind},      {"value", b.value},
            {"node", b.node}, {"bytes", b.bytes},    {"decision", b.decision},
            {"why", b.why},   {"view_of", b.viewOf}, {"residencies", res}};
  if (withDtype)
    j["dtype"] = b.dtype;
  return j;
}

/// Typed field access that keeps the first error and goes on with defaults,
/// so the reading code stays straight-line. Unknown fields are ignored:
/// version 1 may grow new fields without breaking older readers.
class Reader {
public:
  explicit Reader(std::string file) : file(std::move(file)) {}

  const json *field(const json &o, const std::string &where, const char *key,
                    bool required) {
    if (!o.is_object()) {
      fail(where, "expected an object, not " + jsonTypeName(o));
      return nullptr;
    }
    auto it = o.find(key);
    if (it == o.end()) {
      if (required)
        fail(where, std::string("field '") + key + "' is missing");
      return nullptr;
    }
    return &*it;
  }
  std::string str(const json &o, const std::string &where, const char *key,
                  bool required = true) {
    const json *v = field(o, where, key, required);
    if (!v || v->is_null())
      return "";
    if (!v->is_string()) {
      wrong(where, key, "a string", *v);
      return "";
    }
    return v->get<std::string>();
  }
  int64_t integer(const json &o, const std::string &where, const char *key,
                  int64_t min = 0, bool required = true) {
    const json *v = field(o, where, key, required);
    if (!v)
      return min > 0 ? min : 0;
    if (!v->is_number_integer()) {
      wrong(where, key, "an integer", *v);
      return min > 0 ? min : 0;
    }
    int64_t x = v->get<int64_t>();
    if (x < min) {
      fail(where, llvm::formatv("field '{0}' must be at least {1}, got {2}",
                                key, min, x)
                      .str());
      return min;
    }
    return x;
  }
  double number(const json &o, const std::string &where, const char *key,
                bool required = true, double min = 0) {
    const json *v = field(o, where, key, required);
    if (!v)
      return 0;
    if (!v->is_number()) {
      wrong(where, key, "a number", *v);
      return 0;
    }
    double x = v->get<double>();
    if (!(x >= min)) {
      fail(where, llvm::formatv("field '{0}' must be at least {1}, got {2}",
                                key, min, x)
                      .str());
      return min;
    }
    return x;
  }
  bool boolean(const json &o, const std::string &where, const char *key,
               bool required = true) {
    const json *v = field(o, where, key, required);
    if (!v)
      return false;
    if (!v->is_boolean()) {
      wrong(where, key, "true or false", *v);
      return false;
    }
    return v->get<bool>();
  }
  /// An array field; null when missing (an error when required) or wrong.
  const json *array(const json &o, const std::string &where, const char *key,
                    bool required = true) {
    const json *v = field(o, where, key, required);
    if (v && !v->is_array()) {
      wrong(where, key, "an array", *v);
      return nullptr;
    }
    return v;
  }

  bool failed() const { return !first.empty(); }
  llvm::Error error() const { return makeError(first); }
  void fail(const std::string &where, const std::string &what) {
    if (first.empty())
      first = file + ": " + (where.empty() ? "" : where + ": ") + what;
  }

private:
  void wrong(const std::string &where, const char *key, const char *expected,
             const json &v) {
    fail(where, std::string("field '") + key + "' must be " + expected +
                    ", not " + jsonTypeName(v));
  }
  std::string file, first;
};

std::string at(const char *list, size_t i) {
  return std::string(list) + "[" + std::to_string(i) + "]";
}

} // namespace

std::string planToJson(const PlanReport &r) {
  const ReportSummary &s = r.summary;
  json j;
  j["schema_version"] = r.schemaVersion;
  j["model"] = r.model;
  j["model_file"] = r.modelFile;
  j["device"] = r.device;
  if (r.profile.used)
    j["profile"] = {{"file", r.profile.file},
                    {"measured", r.profile.measured},
                    {"interpolated", r.profile.interpolated},
                    {"estimated", r.profile.estimated}};
  else
    j["profile"] = nullptr;
  j["policy"] = r.policy;
  // Written only when not fp32, as each block's dtype: fp32 plans read the
  // same as before precisions existed.
  bool fp32 = r.precision == "fp32";
  if (!fp32)
    j["precision"] = r.precision;
  if (r.clipGradNorm > 0) // written only when used: older plans read the same
    j["clip_grad_norm"] = {{"max_norm", r.clipGradNorm},
                           {"seconds", r.clipSeconds}};
  j["batch"] = r.batch;
  if (r.accumulate > 1) // written only when used: older plans read the same
    j["accumulate"] = r.accumulate;
  j["sub_batch"] = r.subBatch;
  j["sub_batches"] = r.numSubBatches;
  // Written by memfit compile (plan.json of memfit plan has none).
  if (const ReportEvaluation &e = r.evaluation; e.planned)
    j["evaluation"] = {{"sub_batch", e.subBatch},
                       {"sub_batches", e.numSubBatches},
                       {"arena_bytes", e.arenaBytes},
                       {"instructions", e.instructions},
                       {"predicted_seconds", e.seconds}};
  else if (!e.why.empty())
    j["evaluation"] = {{"none", e.why}};
  if (r.chunks > 1) // written only when used: older plans read the same
    j["chunks"] = r.chunks;
  if (const ReportDataParallel &d = r.dataParallel; d.ranks > 1) {
    json cs = json::array();
    for (const ReportCollective &c : d.collectives)
      cs.push_back({{"what", c.what},
                    {"bucket", c.bucket},
                    {"round", c.round},
                    {"bytes", c.bytes},
                    {"start", c.start},
                    {"end", c.end}});
    j["data_parallel"] = {
        {"ranks", d.ranks},
        {"shard", d.shard},
        {"link", d.link},
        {"global_batch", r.batch * d.ranks},
        {"buckets", d.buckets},
        {"weight_side_bytes", d.weightSideBytes},
        {"replicated_weight_side_bytes", d.replicatedWeightSideBytes},
        {"collective_buffer_bytes", d.collectiveBufferBytes},
        {"collective_seconds", d.collectiveSeconds},
        {"exposed_collective_seconds", d.exposedSeconds},
        {"collectives", std::move(cs)}};
  }
  if (const ReportFrozen &f = r.frozen; f.weights > 0) // as chunks
    j["frozen"] = {{"weights", f.weights},
                   {"bytes", f.bytes},
                   {"trained_weights", f.trainedWeights},
                   {"trained_bytes", f.trainedBytes}};
  if (r.headChunkRows > 0) // the head fused with its loss
    j["fused_head"] = {{"chunk_rows", r.headChunkRows},
                       {"scratch_bytes", r.headScratchBytes}};
  if (r.fusedBatchNormRelu + r.fusedBatchNormClip > 0 || !r.fuse.empty())
    j["fused_forms"] = {{"batchnorm_relu", r.fusedBatchNormRelu},
                        {"batchnorm_clip", r.fusedBatchNormClip},
                        {"note", r.fuse}};
  j["budget_bytes"] = r.budgetBytes;
  j["library_reserve_bytes"] = r.libraryReserveBytes;
  j["exact"] = r.exact;
  json tried = json::array();
  for (auto [b, t] : s.subBatchesTried)
    tried.push_back({{"sub_batch", b}, {"planned_seconds", t}});
  j["summary"] = {{"feasible", s.feasible},
                  {"planned_bytes", s.plannedBytes},
                  {"resident_bytes", s.residentBytes},
                  {"arena_bytes", s.arenaBytes},
                  {"lower_bound_bytes", s.lowerBoundBytes},
                  {"lower_bound_task", s.lowerBoundTask},
                  {"ideal_peak_bytes", s.idealPeakBytes},
                  {"max_live_bytes", s.maxLiveBytes},
                  {"allocation_efficiency", s.allocationEfficiency},
                  {"ideal_seconds", s.idealSeconds},
                  {"planned_seconds", s.plannedSeconds},
                  {"overhead", s.overhead},
                  {"stall_seconds", s.stallSeconds},
                  {"round_seconds", s.roundSeconds},
                  {"update_seconds", s.updateSeconds},
                  {"bytes_to_host", s.bytesToHost},
                  {"bytes_to_device", s.bytesToDevice},
                  {"eq3_sub_batch", s.eq3SubBatch},
                  {"bound_seconds",
                   s.boundSeconds > 0 ? json(s.boundSeconds) : json(nullptr)},
                  {"space_bound_seconds", s.spaceBoundSeconds > 0
                                              ? json(s.spaceBoundSeconds)
                                              : json(nullptr)},
                  {"accuracy", accuracyJson(s)},
                  {"sub_batches_tried", tried},
                  // The names of `memfit plan --json`, derived.
                  {"peak_bytes", s.plannedBytes},
                  {"ideal_time_ms", s.idealSeconds * 1e3},
                  {"planned_time_ms", s.plannedSeconds * 1e3},
                  {"offload_bytes", s.bytesToHost},
                  {"prefetch_bytes", s.bytesToDevice},
                  {"recompute_ms", s.recomputeSeconds * 1e3},
                  {"recomputed_tasks", s.recomputedTasks},
                  {"in_place_runs", s.inPlaceRuns},
                  {"stall_ms", s.stallSeconds * 1e3},
                  {"verified", true}};
  if (s.hostHomedWeights > 0) { // written only with weights homed there
    j["summary"]["host_home_bytes"] = s.hostHomeBytes;
    j["summary"]["host_homed_weights"] = s.hostHomedWeights;
    j["summary"]["host_updates"] = s.hostUpdates;
    j["summary"]["host_updates_overlapped"] = s.hostUpdatesOverlapped;
    if (s.gpuCopyWeights > 0) {
      j["summary"]["gpu_copy_weights"] = s.gpuCopyWeights;
      j["summary"]["gpu_copy_bytes"] = s.gpuCopyBytes;
    }
    if (s.roundedCopyWeights > 0) {
      j["summary"]["rounded_copy_weights"] = s.roundedCopyWeights;
      j["summary"]["rounded_copy_bytes"] = s.roundedCopyBytes;
      j["summary"]["rounded_copy_nvme_weights"] = s.nvmeRoundedCopyWeights;
      j["summary"]["copy_staging_bytes"] = s.copyStagingBytes;
    }
    if (s.gradPoolBytes > 0) {
      j["summary"]["host_memory_bytes"] = s.hostMemoryBytes;
      j["summary"]["grad_pool_bytes"] = s.gradPoolBytes;
      j["summary"]["pooled_grad_bytes"] = s.pooledGradBytes;
      j["summary"]["pooled_gradients"] = s.pooledGradients;
    }
    if (s.nvmeHomedWeights > 0) {
      j["summary"]["nvme_home_bytes"] = s.nvmeHomeBytes;
      j["summary"]["nvme_homed_weights"] = s.nvmeHomedWeights;
      j["summary"]["nvme_state_weights"] = s.nvmeStateWeights;
      j["summary"]["nvme_master_weights"] = s.nvmeMasterWeights;
    }
  }
  chunkRecordsJson(j["summary"], s); // only where chunks were searched
  if (s.refineTries > 0) // written only when the refinement phase ran
    j["summary"]["refine"] = {{"moves_tried", s.refineTries},
                              {"decisions_changed", s.refineChanged}};
  j["notes"] = r.notes;
  json tasks = json::array();
  for (const ReportTask &t : r.tasks)
    tasks.push_back(taskJson(t));
  j["tasks"] = std::move(tasks);
  json transfers = json::array();
  for (const ReportTransfer &x : r.transfers)
    transfers.push_back({{"block", x.block},
                         {"direction", x.direction},
                         {"bytes", x.bytes},
                         {"offset", x.offset},
                         {"start", x.start},
                         {"end", x.end}});
  j["transfers"] = std::move(transfers);
  json schedule = json::array();
  for (const ReportInstr &x : r.schedule) {
    json o = {{"section", x.section}, {"op", x.op}, {"stream", x.stream}};
    if (x.op == "run") {
      o["task"] = x.task;
      if (x.afterEvent >= 0)
        o["after_event"] = x.afterEvent;
    } else if (x.op == "wait_host")
      o["task"] = x.task;
    else if (x.op == "record" || x.op == "wait")
      o["event"] = x.event;
    else
      o.update({{"block", x.block},
                {"block_kind", x.blockKind},
                {"offset", x.offset},
                {"bytes", x.bytes}});
    schedule.push_back(std::move(o));
  }
  j["schedule"] = std::move(schedule);
  json blocks = json::array();
  for (const ReportBlock &b : r.blocks)
    blocks.push_back(blockJson(b, !fp32));
  j["blocks"] = std::move(blocks);
  j["events"] = r.events;
  // Names come from the model: invalid UTF-8 is replaced, never thrown on.
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string planToJson(const TaskGraph &tg, const Plan &plan,
                       const Simulation &sim, const PlanContext &ctx) {
  return planToJson(buildPlanReport(tg, plan, sim, ctx));
}

llvm::Expected<PlanReport> parsePlanJson(llvm::StringRef text,
                                         const std::string &fileName) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    // e.what() starts with the library's own tag; keep what follows.
    std::string what = e.what();
    size_t pos = what.find("] ");
    return makeErrorF("{0}: not valid JSON: {1}", fileName,
                      pos == std::string::npos ? what : what.substr(pos + 2));
  }
  if (!root.is_object() || !root.contains("schema_version"))
    return makeErrorF("{0}: not a memfit plan (no schema_version field; "
                      "plan.json is written by memfit plan -o and memfit "
                      "compile)",
                      fileName);
  Reader rd(fileName);
  PlanReport r;
  r.schemaVersion = static_cast<int>(rd.integer(root, "", "schema_version"));
  if (rd.failed())
    return rd.error();
  if (r.schemaVersion != kPlanSchemaVersion)
    return makeErrorF("{0}: schema_version {1} is not supported: this "
                      "memfit reads schema_version {2}",
                      fileName, r.schemaVersion, kPlanSchemaVersion);
  r.model = rd.str(root, "", "model");
  r.modelFile = rd.str(root, "", "model_file");
  r.device = rd.str(root, "", "device");
  if (const json *p = rd.field(root, "", "profile", false);
      p && !p->is_null()) {
    r.profile.used = true;
    r.profile.file = rd.str(*p, "profile", "file");
    r.profile.measured = rd.integer(*p, "profile", "measured");
    r.profile.interpolated = rd.integer(*p, "profile", "interpolated");
    r.profile.estimated = rd.integer(*p, "profile", "estimated");
  }
  r.policy = rd.str(root, "", "policy");
  r.precision = rd.str(root, "", "precision", false);
  if (r.precision.empty())
    r.precision = "fp32";
  if (const json *c = rd.field(root, "", "clip_grad_norm", false)) {
    r.clipGradNorm = rd.number(*c, "clip_grad_norm", "max_norm");
    r.clipSeconds = rd.number(*c, "clip_grad_norm", "seconds");
    if (!(r.clipGradNorm > 0))
      rd.fail("clip_grad_norm", "field 'max_norm' must be above 0");
  }
  r.batch = rd.integer(root, "", "batch", 1);
  r.accumulate = static_cast<int32_t>(
      std::max<int64_t>(1, rd.integer(root, "", "accumulate", 1, false)));
  r.subBatch = rd.integer(root, "", "sub_batch", 1);
  r.numSubBatches = rd.integer(root, "", "sub_batches", 1);
  r.chunks = static_cast<int32_t>(rd.integer(root, "", "chunks", 1, false));
  if (const json *ej = rd.field(root, "", "evaluation", false)) {
    ReportEvaluation &e = r.evaluation;
    e.why = rd.str(*ej, "evaluation", "none", false);
    if (e.why.empty()) {
      e.planned = true;
      e.subBatch = rd.integer(*ej, "evaluation", "sub_batch", 1);
      e.numSubBatches = rd.integer(*ej, "evaluation", "sub_batches", 1);
      e.arenaBytes = rd.integer(*ej, "evaluation", "arena_bytes", 0);
      e.instructions = rd.integer(*ej, "evaluation", "instructions", 0);
      e.seconds = rd.number(*ej, "evaluation", "predicted_seconds");
    }
  }
  if (const json *fj = rd.field(root, "", "frozen", false)) {
    ReportFrozen &f = r.frozen;
    f.weights = rd.integer(*fj, "frozen", "weights", 0);
    f.bytes = rd.integer(*fj, "frozen", "bytes", 0);
    f.trainedWeights = rd.integer(*fj, "frozen", "trained_weights", 0);
    f.trainedBytes = rd.integer(*fj, "frozen", "trained_bytes", 0);
  }
  if (const json *dj = rd.field(root, "", "data_parallel", false)) {
    const json &o = *dj;
    const std::string w = "data_parallel";
    ReportDataParallel &d = r.dataParallel;
    d.ranks = static_cast<int32_t>(rd.integer(o, w, "ranks", 2));
    d.shard = static_cast<int32_t>(rd.integer(o, w, "shard", 0));
    d.link = rd.str(o, w, "link");
    d.buckets = static_cast<int32_t>(rd.integer(o, w, "buckets", 0));
    d.weightSideBytes = rd.integer(o, w, "weight_side_bytes", 0);
    d.replicatedWeightSideBytes =
        rd.integer(o, w, "replicated_weight_side_bytes", 0);
    d.collectiveBufferBytes = rd.integer(o, w, "collective_buffer_bytes", 0);
    d.collectiveSeconds = rd.number(o, w, "collective_seconds");
    d.exposedSeconds = rd.number(o, w, "exposed_collective_seconds");
    if (const json *cs = rd.array(o, w, "collectives", false))
      for (size_t i = 0; i < cs->size(); ++i) {
        const json &c = (*cs)[i];
        std::string cw = w + ".collectives[" + std::to_string(i) + "]";
        d.collectives.push_back(
            {rd.str(c, cw, "what"),
             static_cast<int32_t>(rd.integer(c, cw, "bucket", -1)),
             static_cast<int32_t>(rd.integer(c, cw, "round", 0)),
             rd.integer(c, cw, "bytes", 0), rd.number(c, cw, "start"),
             rd.number(c, cw, "end")});
      }
  }
  r.budgetBytes = rd.integer(root, "", "budget_bytes");
  // Plans written before the budget covered the libraries have none.
  r.libraryReserveBytes = rd.integer(root, "", "library_reserve_bytes", 0,
                                     /*required=*/false);
  r.events = static_cast<int32_t>(rd.integer(root, "", "events"));

  if (const json *sj = rd.field(root, "", "summary", true)) {
    const json &o = *sj;
    const char *w = "summary";
    ReportSummary &s = r.summary;
    s.feasible = rd.boolean(o, w, "feasible");
    s.plannedBytes = rd.integer(o, w, "planned_bytes");
    s.residentBytes = rd.integer(o, w, "resident_bytes");
    s.arenaBytes = rd.integer(o, w, "arena_bytes");
    s.lowerBoundBytes = rd.integer(o, w, "lower_bound_bytes");
    s.lowerBoundTask = rd.str(o, w, "lower_bound_task", false);
    s.idealPeakBytes = rd.integer(o, w, "ideal_peak_bytes");
    s.maxLiveBytes = rd.integer(o, w, "max_live_bytes");
    s.allocationEfficiency = rd.number(o, w, "allocation_efficiency");
    s.idealSeconds = rd.number(o, w, "ideal_seconds");
    s.plannedSeconds = rd.number(o, w, "planned_seconds");
    s.overhead = rd.number(o, w, "overhead", true, -1);
    s.stallSeconds = rd.number(o, w, "stall_seconds");
    s.roundSeconds = rd.number(o, w, "round_seconds", false);
    s.updateSeconds = rd.number(o, w, "update_seconds", false);
    s.recomputeSeconds = rd.number(o, w, "recompute_ms", false) / 1e3;
    s.recomputedTasks =
        static_cast<int32_t>(rd.integer(o, w, "recomputed_tasks", 0, false));
    s.inPlaceRuns =
        static_cast<int32_t>(rd.integer(o, w, "in_place_runs", 0, false));
    s.bytesToHost = rd.integer(o, w, "bytes_to_host");
    s.bytesToDevice = rd.integer(o, w, "bytes_to_device");
    s.eq3SubBatch = rd.integer(o, w, "eq3_sub_batch", 0, false);
    if (o.contains("bound_seconds") && !o["bound_seconds"].is_null())
      s.boundSeconds = rd.number(o, w, "bound_seconds");
    if (o.contains("space_bound_seconds") &&
        !o["space_bound_seconds"].is_null())
      s.spaceBoundSeconds = rd.number(o, w, "space_bound_seconds");
    if (o.contains("accuracy")) {
      std::string why;
      if (!readAccuracyJson(o["accuracy"], s, why))
        rd.fail(w, why);
    }
    // Written only with weights homed off the GPU.
    s.hostHomeBytes = rd.integer(o, w, "host_home_bytes", 0, false);
    s.hostHomedWeights = rd.integer(o, w, "host_homed_weights", 0, false);
    s.hostUpdates = rd.integer(o, w, "host_updates", 0, false);
    s.hostUpdatesOverlapped =
        rd.integer(o, w, "host_updates_overlapped", 0, false);
    s.gpuCopyWeights = rd.integer(o, w, "gpu_copy_weights", 0, false);
    s.gpuCopyBytes = rd.integer(o, w, "gpu_copy_bytes", 0, false);
    s.roundedCopyWeights = rd.integer(o, w, "rounded_copy_weights", 0, false);
    s.roundedCopyBytes = rd.integer(o, w, "rounded_copy_bytes", 0, false);
    s.nvmeRoundedCopyWeights =
        rd.integer(o, w, "rounded_copy_nvme_weights", 0, false);
    s.copyStagingBytes = rd.integer(o, w, "copy_staging_bytes", 0, false);
    s.gradPoolBytes = rd.integer(o, w, "grad_pool_bytes", 0, false);
    s.pooledGradBytes = rd.integer(o, w, "pooled_grad_bytes", 0, false);
    s.pooledGradients = rd.integer(o, w, "pooled_gradients", 0, false);
    // Below the homes' bytes with a gradient pool; the homes' without one
    // (not written then).
    s.hostMemoryBytes = o.contains("host_memory_bytes")
                            ? rd.integer(o, w, "host_memory_bytes", 0)
                            : s.hostHomeBytes;
    s.nvmeHomeBytes = rd.integer(o, w, "nvme_home_bytes", 0, false);
    s.nvmeHomedWeights = rd.integer(o, w, "nvme_homed_weights", 0, false);
    s.nvmeStateWeights = rd.integer(o, w, "nvme_state_weights", 0, false);
    s.nvmeMasterWeights = rd.integer(o, w, "nvme_master_weights", 0, false);
    if (s.nvmeStateWeights == 0 && s.nvmeMasterWeights == 0)
      s.nvmeStateWeights = s.nvmeHomedWeights; // written before masters moved
    if (const json *tried = rd.array(o, w, "sub_batches_tried", false))
      for (size_t i = 0; i < tried->size(); ++i) {
        std::string tw = std::string(w) + "." + at("sub_batches_tried", i);
        s.subBatchesTried.push_back(
            {rd.integer((*tried)[i], tw, "sub_batch", 1),
             rd.number((*tried)[i], tw, "planned_seconds")});
      }
    // chunkRecordsJson's lists.
    for (auto [key, seconds, into] :
         {std::tuple{"chunks_tried", "planned_seconds", &s.chunksTried},
          std::tuple{"chunks_pruned", "bound_seconds", &s.chunksPruned}})
      if (const json *list = rd.array(o, w, key, false))
        for (size_t i = 0; i < list->size(); ++i) {
          std::string lw = std::string(w) + "." + at(key, i);
          into->push_back({rd.integer((*list)[i], lw, "chunks", 2),
                           rd.number((*list)[i], lw, seconds)});
        }
    if (o.contains("refine")) {
      std::string rw = std::string(w) + ".refine";
      const json &rf = o["refine"];
      s.refineTries = rd.integer(rf, rw, "moves_tried", 0);
      s.refineChanged = rd.integer(rf, rw, "decisions_changed", 0);
    }
  }
  if (const json *notes = rd.array(root, "", "notes", false))
    for (size_t i = 0; i < notes->size(); ++i) {
      if (!(*notes)[i].is_string()) {
        rd.fail(at("notes", i), "must be a string");
        break;
      }
      r.notes.push_back((*notes)[i].get<std::string>());
    }
  // Plans written before the field said so in a note when they were not.
  if (root.contains("exact"))
    r.exact = rd.boolean(root, "", "exact");
  else
    r.exact = llvm::none_of(r.notes, [](const std::string &n) {
      return llvm::StringRef(n).startswith("BatchNorm statistics are computed");
    });

  if (const json *tasks = rd.array(root, "", "tasks"))
    for (size_t i = 0; i < tasks->size() && !rd.failed(); ++i) {
      const json &o = (*tasks)[i];
      std::string w = at("tasks", i);
      ReportTask t;
      t.name = rd.str(o, w, "task");
      t.kind = rd.str(o, w, "kind");
      t.node = rd.str(o, w, "node");
      t.op = rd.str(o, w, "op");
      t.section = rd.str(o, w, "section", false);
      if (t.section.empty())
        t.section = "round";
      else if (t.section != "round" && t.section != "update")
        rd.fail(w, "field 'section' must be \"round\" or \"update\"");
      t.algo = static_cast<int32_t>(rd.integer(o, w, "algo"));
      t.algoName = rd.str(o, w, "algo_name", false);
      t.workspaceBytes = rd.integer(o, w, "workspace_bytes");
      t.workspaceOffset = rd.integer(o, w, "workspace_offset", 0, false);
      t.stream = rd.str(o, w, "stream");
      t.recompute = rd.boolean(o, w, "recompute");
      // The update section's times count from its start; a host update
      // the plan starts inside the last round begins before it.
      t.start = rd.number(
          o, w, "start", true,
          t.section == "update" ? -std::numeric_limits<double>::max() : 0.0);
      t.end = rd.number(o, w, "end", true, t.start);
      t.stallSeconds = rd.number(o, w, "stall_seconds", false);
      t.nvmeBytes = rd.integer(o, w, "nvme_bytes", 0, false);
      if (const json *wf = rd.field(o, w, "waited_for", false);
          wf && !wf->is_null()) {
        t.waitedFor = rd.str(*wf, w + ".waited_for", "block");
        t.waitedDirection = rd.str(*wf, w + ".waited_for", "direction");
      }
      r.tasks.push_back(std::move(t));
    }
  if (const json *xs = rd.array(root, "", "transfers"))
    for (size_t i = 0; i < xs->size() && !rd.failed(); ++i) {
      const json &o = (*xs)[i];
      std::string w = at("transfers", i);
      ReportTransfer x;
      x.block = rd.str(o, w, "block");
      x.direction = rd.str(o, w, "direction");
      if (!rd.failed() && x.direction != "to_host" &&
          x.direction != "to_device")
        rd.fail(w, "field 'direction' must be \"to_host\" or \"to_device\"");
      x.bytes = rd.integer(o, w, "bytes");
      x.offset = rd.integer(o, w, "offset");
      x.start = rd.number(o, w, "start");
      x.end = rd.number(o, w, "end", true, x.start);
      r.transfers.push_back(std::move(x));
    }
  // Plans written before the schedule was part of plan.json have none.
  if (const json *xs = rd.array(root, "", "schedule", false))
    for (size_t i = 0; i < xs->size() && !rd.failed(); ++i) {
      const json &o = (*xs)[i];
      std::string w = at("schedule", i);
      ReportInstr x;
      x.section = rd.str(o, w, "section");
      x.op = rd.str(o, w, "op");
      x.stream = rd.str(o, w, "stream");
      if (x.op == "run") {
        x.task = rd.str(o, w, "task");
        if (o.contains("after_event"))
          x.afterEvent = static_cast<int32_t>(rd.integer(o, w, "after_event"));
      } else if (x.op == "wait_host") {
        x.task = rd.str(o, w, "task");
      } else if (x.op == "record" || x.op == "wait") {
        x.event = static_cast<int32_t>(rd.integer(o, w, "event"));
      } else if (x.op == "copy_out" || x.op == "copy_in") {
        x.block = rd.str(o, w, "block");
        x.blockKind = rd.str(o, w, "block_kind");
        x.offset = rd.integer(o, w, "offset");
        x.bytes = rd.integer(o, w, "bytes");
      } else if (!rd.failed()) {
        rd.fail(w, "field 'op' must be run, copy_out, copy_in, record, wait "
                   "or wait_host");
      }
      r.schedule.push_back(std::move(x));
    }
  if (const json *bs = rd.array(root, "", "blocks"))
    for (size_t i = 0; i < bs->size() && !rd.failed(); ++i) {
      const json &o = (*bs)[i];
      std::string w = at("blocks", i);
      ReportBlock b;
      b.name = rd.str(o, w, "name");
      b.kind = rd.str(o, w, "kind");
      b.value = rd.str(o, w, "value", false);
      b.node = rd.str(o, w, "node", false);
      b.bytes = rd.integer(o, w, "bytes");
      b.decision = rd.str(o, w, "decision");
      b.why = rd.str(o, w, "why", false);
      b.viewOf = rd.str(o, w, "view_of", false);
      b.dtype = rd.str(o, w, "dtype", false);
      if (const json *res = rd.array(o, w, "residencies"))
        for (size_t k = 0; k < res->size(); ++k) {
          const json &x = (*res)[k];
          std::string rw = w + "." + at("residencies", k);
          ReportResidency y;
          y.offset = rd.integer(x, rw, "offset");
          y.bytes = rd.integer(x, rw, "bytes");
          // -1 marks a residency nothing touched.
          y.start = rd.number(x, rw, "start", true, -1);
          y.end = rd.number(x, rw, "end", true, -1);
          b.residencies.push_back(y);
        }
      r.blocks.push_back(std::move(b));
    }
  if (rd.failed())
    return rd.error();
  // The counts the printed summary shows, as buildPlanSummary makes them.
  r.summary.blocks = static_cast<int64_t>(r.blocks.size());
  r.summary.offloadedBlocks = llvm::count_if(
      r.blocks, [](const ReportBlock &b) { return b.decision == "offload"; });
  return r;
}

llvm::Expected<PlanReport> readPlanJson(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return makeErrorF("cannot read {0}: {1}", path, buf.getError().message());
  return parsePlanJson((*buf)->getBuffer(), path);
}

} // namespace memfit
