//===- TraceTest.cpp - trace.json in the Chrome trace event format --------===//
#include "codegen/Trace.h"
#include "tests/ReportFixture.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>

using namespace memfit;
using memfit::test::reportFixture;
using json = nlohmann::json;

namespace {

json parseTrace(const PlanReport &r) {
  json j = json::parse(planToTrace(r));
  REQUIRE(j.is_object());
  REQUIRE(j["traceEvents"].is_array());
  return j;
}

/// Live arena bytes at `t`, derived here from the instruction stream and the
/// simulated times: a residency holds its bytes from the start of its first
/// access to the end of its last, a workspace during its task; intervals are
/// half-open, which is what "frees before allocations" means at one instant.
int64_t liveAt(const TaskGraph &tg, const Plan &plan, const Simulation &sim,
               double t) {
  std::vector<double> first(plan.residencies.size(), -1),
      last(plan.residencies.size(), -1);
  auto touch = [&](ResidencyId r, size_t i) {
    if (first[r] < 0 || sim.start[i] < first[r])
      first[r] = sim.start[i];
    last[r] = std::max(last[r], sim.end[i]);
  };
  int64_t live = 0;
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind == InstrKind::Run) {
      // An input the run overwrites in place is gone once it starts.
      ResidencyId over = inPlaceInput(tg, plan, in);
      for (ResidencyId r : in.operands)
        if (r >= 0 && r != over)
          touch(r, i);
      if (over >= 0) {
        if (first[over] < 0 || sim.start[i] < first[over])
          first[over] = sim.start[i];
        last[over] = std::max(last[over], sim.start[i]);
      }
      if (in.workspaceBytes > 0 && sim.start[i] <= t && t < sim.end[i])
        live += in.workspaceBytes;
    } else if (in.kind == InstrKind::CopyIn || in.kind == InstrKind::CopyOut) {
      touch(in.residency, i);
    }
  }
  for (size_t r = 0; r < plan.residencies.size(); ++r)
    if (first[r] >= 0 && first[r] <= t && t < last[r])
      live += plan.residencies[r].bytes;
  return live;
}

} // namespace

TEST_CASE("trace: three named stream tracks", "[trace]") {
  const auto &f = reportFixture();
  json j = parseTrace(f.report);
  std::map<int, std::string> names;
  for (const json &e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  REQUIRE(names.size() == 3);
  CHECK(names[1] == "compute stream");
  CHECK(names[2] == "copy-out stream (device to host)");
  CHECK(names[3] == "copy-in stream (host to device)");
}

TEST_CASE("trace: every task is one slice at its simulated time", "[trace]") {
  const auto &f = reportFixture();
  json j = parseTrace(f.report);
  std::multimap<std::string, const json *> slices;
  for (const json &e : j["traceEvents"])
    if (e["ph"] == "X")
      slices.insert({e["name"].get<std::string>(), &e});
  size_t runs = 0;
  for (size_t i = 0; i < f.plan.round.size(); ++i) {
    const Instr &in = f.plan.round[i];
    if (in.kind != InstrKind::Run)
      continue;
    ++runs;
    const std::string &name = f.tg.tasks[in.task].name;
    INFO(name);
    REQUIRE(slices.count(name) == 1);
    const json &e = *slices.find(name)->second;
    CHECK(e["tid"] == 1);
    CHECK(e["ts"].get<double>() == Approx(f.sim.start[i] * 1e6));
    CHECK(e["dur"].get<double>() ==
          Approx((f.sim.end[i] - f.sim.start[i]) * 1e6));
  }
  // Transfers on the copy tracks, one slice each.
  size_t out = 0, in = 0;
  for (const Instr &x : f.plan.round) {
    out += x.kind == InstrKind::CopyOut;
    in += x.kind == InstrKind::CopyIn;
  }
  REQUIRE(out > 0); // the fixture offloads
  size_t onOut = 0, onIn = 0, onCompute = 0;
  for (const json &e : j["traceEvents"])
    if (e["ph"] == "X") {
      onCompute += e["tid"] == 1;
      onOut += e["tid"] == 2;
      onIn += e["tid"] == 3;
    }
  CHECK(onOut == out);
  CHECK(onIn == in);
  // The update's tasks follow the round on the compute track.
  size_t updates = 0;
  for (const Instr &x : f.plan.update)
    updates += x.kind == InstrKind::Run;
  REQUIRE(updates > 0);
  CHECK(onCompute == runs + updates);
  for (const json &e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "update")
      CHECK(e["ts"].get<double>() >= f.sim.roundSeconds * 1e6 - 1e-6);
}

TEST_CASE("trace: the arena counter equals the live bytes", "[trace]") {
  const auto &f = reportFixture();
  json j = parseTrace(f.report);
  std::vector<const json *> counters;
  for (const json &e : j["traceEvents"])
    if (e["ph"] == "C")
      counters.push_back(&e);
  std::vector<ArenaPoint> points = arenaTimeline(f.report);
  REQUIRE(counters.size() == points.size());
  REQUIRE(points.size() > 4);
  int64_t peak = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const json &e = *counters[i];
    INFO("t = " << points[i].time);
    CHECK(e["name"] == "arena in use");
    CHECK(e["ts"].get<double>() == Approx(points[i].time * 1e6));
    CHECK(e["args"]["bytes"].get<int64_t>() == points[i].bytes);
    CHECK(points[i].bytes == liveAt(f.tg, f.plan, f.sim, points[i].time));
    if (i > 0) {
      CHECK(points[i].time > points[i - 1].time); // one sample per change
      CHECK(points[i].bytes != points[i - 1].bytes);
    }
    peak = std::max(peak, points[i].bytes);
  }
  CHECK(points.back().bytes == 0); // the round ends with an empty arena
  CHECK(peak == f.sim.maxLiveBytes);
  CHECK(peak <= f.plan.arenaBytes);
}

TEST_CASE("trace: deterministic bytes", "[trace]") {
  const auto &f = reportFixture();
  CHECK(planToTrace(f.report) == planToTrace(f.report));
}
