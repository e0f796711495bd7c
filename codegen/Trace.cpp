//===- Trace.cpp - The plan as a Chrome trace -----------------------------===//
#include "codegen/Trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace memfit {
namespace {

using json = nlohmann::ordered_json;
constexpr int kPid = 1;

double us(double seconds) { return seconds * 1e6; }

/// After the collective stream's track (4 with data parallelism, which
/// homes refuse) and the host's.
constexpr int kNvmeTrack = 5;

} // namespace

int traceTrackOf(const std::string &stream) {
  if (stream == "copy-out")
    return 2;
  if (stream == "copy-in")
    return 3;
  if (stream == "host")
    return 4;
  return 1;
}

std::string planToTrace(const PlanReport &r) {
  std::vector<json> events;
  events.push_back(
      {{"name", "process_name"},
       {"ph", "M"},
       {"pid", kPid},
       {"args",
        {{"name", "memfit plan: " + r.model + " (" + r.policy + ", batch " +
                      std::to_string(r.batch) + ", sub-batch " +
                      std::to_string(r.subBatch) + ")"}}}});
  const char *tracks[] = {"compute stream", "copy-out stream (device to host)",
                          "copy-in stream (host to device)",
                          "host's cores (updates of weights homed there)"};
  // The host's track only where it runs updates: plans without tiers keep
  // their three.
  bool host =
      std::any_of(r.tasks.begin(), r.tasks.end(),
                  [](const ReportTask &t) { return t.stream == "host"; });
  for (int i = 0; i < (host ? 4 : 3); ++i) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", i + 1},
                      {"args", {{"name", tracks[i]}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", i + 1},
                      {"args", {{"sort_index", i}}}});
  }

  // The NVMe tier's track: each host update that streams its optimizer
  // state from the drive and back, over the update's span.
  bool nvme = std::any_of(r.tasks.begin(), r.tasks.end(),
                          [](const ReportTask &t) { return t.nvmeBytes > 0; });
  if (nvme)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", kNvmeTrack},
                      {"args",
                       {{"name", "NVMe (optimizer state read and written "
                                 "back by host updates)"}}}});

  // The update runs after the last round; the trace shows it after this
  // one, which is what each round's tail looks like in the last sub-batch.
  double roundEnd = r.summary.roundSeconds;
  for (const ReportTask &t : r.tasks)
    if (t.section == "round")
      roundEnd = std::max(roundEnd, t.end);
  for (const ReportTransfer &x : r.transfers)
    roundEnd = std::max(roundEnd, x.end);

  for (const ReportTask &t : r.tasks) {
    bool update = t.section == "update";
    double base = update ? roundEnd : 0;
    json args = {{"node", t.node}, {"op", t.op}, {"section", t.section}};
    if (!t.algoName.empty())
      args["algorithm"] = t.algoName;
    if (t.workspaceBytes > 0)
      args["workspace_bytes"] = t.workspaceBytes;
    if (t.recompute)
      args["recompute"] = true;
    if (t.stallSeconds > 0) {
      args["stall_us"] = us(t.stallSeconds);
      if (!t.waitedFor.empty())
        args["waited_for"] = t.waitedFor;
    }
    events.push_back({{"name", t.name},
                      {"cat", update ? std::string("update") : t.kind},
                      {"ph", "X"},
                      {"pid", kPid},
                      {"tid", traceTrackOf(t.stream)},
                      {"ts", us(base + t.start)},
                      {"dur", us(t.end - t.start)},
                      {"args", std::move(args)}});
    if (t.nvmeBytes > 0)
      events.push_back(
          {{"name", "state of " + t.name},
           {"cat", "nvme"},
           {"ph", "X"},
           {"pid", kPid},
           {"tid", kNvmeTrack},
           {"ts", us(base + t.start)},
           {"dur", us(t.end - t.start)},
           {"args",
            {{"read_bytes", t.nvmeBytes}, {"written_bytes", t.nvmeBytes}}}});
  }

  std::map<std::string, bool> isLoad;
  for (const ReportBlock &b : r.blocks)
    isLoad[b.name] = b.decision == "load";
  for (const ReportTransfer &x : r.transfers) {
    bool out = x.direction == "to_host";
    std::string what = out ? "offload" : isLoad[x.block] ? "load" : "prefetch";
    events.push_back(
        {{"name", what + " " + x.block},
         {"cat", what},
         {"ph", "X"},
         {"pid", kPid},
         {"tid", out ? 2 : 3},
         {"ts", us(x.start)},
         {"dur", us(x.end - x.start)},
         {"args",
          {{"block", x.block}, {"bytes", x.bytes}, {"offset", x.offset}}}});
  }

  // Data parallelism: the last sub-batch's collectives, on the round's
  // clock (earlier sub-batches' look the same with --shard 2).
  if (const ReportDataParallel &d = r.dataParallel; d.ranks > 1) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", 4},
                      {"args",
                       {{"name", "collective stream (" + d.link + ", " +
                                     std::to_string(d.ranks) + " ranks)"}}}});
    double lastRound = double(r.numSubBatches - 1) * r.summary.roundSeconds;
    for (const ReportCollective &c : d.collectives) {
      if (c.round != r.numSubBatches - 1)
        continue;
      std::string name =
          c.what + (c.bucket >= 0 ? " bucket " + std::to_string(c.bucket)
                                  : std::string(" weights"));
      events.push_back({{"name", name},
                        {"cat", "collective"},
                        {"ph", "X"},
                        {"pid", kPid},
                        {"tid", 4},
                        {"ts", us(c.start - lastRound)},
                        {"dur", us(c.end - c.start)},
                        {"args", {{"bytes", c.bytes}}}});
    }
  }
  for (const ArenaPoint &p : arenaTimeline(r))
    events.push_back({{"name", "arena in use"},
                      {"ph", "C"},
                      {"pid", kPid},
                      {"ts", us(p.time)},
                      {"args", {{"bytes", p.bytes}}}});

  json other = {{"model", r.model},
                {"policy", r.policy},
                {"device", r.device},
                {"batch", r.batch},
                {"sub_batch", r.subBatch},
                {"sub_batches", r.numSubBatches},
                {"budget_bytes", r.budgetBytes},
                {"resident_bytes", r.summary.residentBytes},
                {"arena_bytes", r.summary.arenaBytes},
                {"shows", "one sub-batch round, then the weight update"}};
  // One event per line: large traces stay greppable and diffable.
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":" +
                    other.dump(-1, ' ', false, json::error_handler_t::replace) +
                    ",\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += events[i].dump(-1, ' ', false, json::error_handler_t::replace);
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  return out;
}

} // namespace memfit
