//===- PlanJson.cpp - plan.json, the plan for people and tools ------------===//
#include "codegen/PlanJson.h"

#include <nlohmann/json.hpp>

namespace memfit {

std::string planToJson(const TaskGraph &tg, const Plan &plan,
                       const Simulation &sim, const PlanContext &ctx) {
  using json = nlohmann::ordered_json;
  const Graph &g = *tg.graph;
  const PlanSummary &s = plan.summary;
  json j;
  j["schema_version"] = 1;
  j["model"] = g.name;
  j["model_file"] = ctx.modelFile;
  j["device"] = ctx.device;
  j["policy"] = plan.policy;
  j["batch"] = plan.batch;
  j["sub_batch"] = plan.subBatch;
  j["sub_batches"] = plan.numSubBatches;
  j["budget_bytes"] = plan.budget;
  j["summary"] = {{"feasible", true},
                  {"planned_bytes", plan.totalBytes()},
                  {"resident_bytes", plan.residentBytes},
                  {"arena_bytes", plan.arenaBytes},
                  {"lower_bound_bytes", ctx.lowerBoundBytes},
                  {"ideal_peak_bytes", ctx.idealPeakBytes},
                  {"max_live_bytes", s.maxLiveBytes},
                  {"allocation_efficiency", sim.allocationEfficiency},
                  {"ideal_seconds", ctx.idealSeconds},
                  {"planned_seconds", s.plannedSeconds},
                  {"overhead", ctx.idealSeconds > 0
                                   ? s.plannedSeconds / ctx.idealSeconds - 1
                                   : 0.0},
                  {"stall_seconds", s.stallSeconds},
                  {"bytes_to_host", s.bytesToHost},
                  {"bytes_to_device", s.bytesToDevice}};
  json tasks = json::array();
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::Run)
      continue;
    const Task &t = tg.tasks[in.task];
    json e = {{"task", t.name},
              {"kind", std::string(taskKindName(t.kind))},
              {"node", t.op >= 0 ? g.ops[t.op].name : ""},
              {"op", t.op >= 0 ? g.ops[t.op].onnxOp : ""},
              {"algo", in.algo},
              {"workspace_bytes", in.workspaceBytes},
              {"stream", std::string(streamName(in.stream))},
              {"recompute", in.recompute},
              {"start", sim.start[i]},
              {"end", sim.end[i]}};
    tasks.push_back(e);
  }
  j["tasks"] = tasks;
  json transfers = json::array();
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::CopyOut && in.kind != InstrKind::CopyIn)
      continue;
    const Residency &r = plan.residencies[in.residency];
    transfers.push_back(
        {{"block", tg.blocks[r.block].name},
         {"direction", in.kind == InstrKind::CopyOut ? "to_host" : "to_device"},
         {"bytes", r.bytes},
         {"offset", r.offset},
         {"start", sim.start[i]},
         {"end", sim.end[i]}});
  }
  j["transfers"] = transfers;
  std::vector<json> byBlock(tg.blocks.size(), json::array());
  for (const Residency &r : plan.residencies)
    byBlock[r.block].push_back({{"offset", r.offset}, {"bytes", r.bytes}});
  json blocks = json::array();
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const Block &blk = tg.blocks[b];
    const char *decision = "keep";
    if (isWeightSide(blk.kind))
      decision = "resident";
    else if (blk.viewOf >= 0)
      decision = "view";
    else if (plan.decisions[b] == BlockDecision::Offload)
      decision = "offload";
    else if (plan.decisions[b] == BlockDecision::Recompute)
      decision = "recompute";
    blocks.push_back({{"name", blk.name},
                      {"kind", std::string(blockKindName(blk.kind))},
                      {"bytes", blk.bytesAt(plan.subBatch)},
                      {"decision", decision},
                      {"residencies", byBlock[b]}});
  }
  j["blocks"] = blocks;
  j["events"] = plan.numEvents;
  return j.dump(1);
}

} // namespace memfit
