//===- PlanReportTest.cpp - plan.json, its reader and the derived views ---===//
#include "codegen/PlanJson.h"
#include "codegen/ReportText.h"
#include "tests/ReportFixture.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

using namespace memfit;
using memfit::test::reportFixture;

namespace {

std::string errorOf(llvm::Expected<PlanReport> r) {
  if (r)
    return "";
  return llvm::toString(r.takeError());
}

const ReportBlock *blockNamed(const PlanReport &r, const std::string &name) {
  for (const ReportBlock &b : r.blocks)
    if (b.name == name)
      return &b;
  return nullptr;
}

} // namespace

TEST_CASE("plan report: tasks, blocks and decisions from the plan",
          "[report]") {
  const auto &f = reportFixture();
  const PlanReport &r = f.report;
  size_t runs = 0;
  for (const Instr &in : f.plan.round)
    runs += in.kind == InstrKind::Run;
  size_t updates = 0;
  for (const ReportTask &t : r.tasks)
    updates += t.section == "update";
  CHECK(r.tasks.size() == runs + updates);
  CHECK(updates == 7); // six kernels and the fc weight
  REQUIRE(r.blocks.size() == f.tg.blocks.size());
  int offloaded = 0, cameBack = 0;
  for (BlockId b = 0; b < (BlockId)f.tg.blocks.size(); ++b) {
    const ReportBlock &rb = r.blocks[b];
    const Block &blk = f.tg.blocks[b];
    CHECK(rb.name == blk.name);
    CHECK(!rb.why.empty());
    if (isWeightSide(blk.kind))
      CHECK(rb.decision == "resident");
    else if (blk.viewOf >= 0)
      CHECK(rb.decision == "view");
    if (f.plan.decisions[b] == BlockDecision::Offload) {
      ++offloaded;
      CHECK(rb.decision == "offload");
      // The scheduler's reason names the task that caused it.
      CHECK(rb.why.find("task '") != std::string::npos);
      // It came back from the host, or the report says it never left.
      if (rb.residencies.size() == 1)
        CHECK(rb.why.find("the host copy went unused") != std::string::npos);
      else
        ++cameBack;
    }
    for (const ReportResidency &x : rb.residencies)
      if (x.start >= 0)
        CHECK(x.end >= x.start);
  }
  CHECK(offloaded > 0);
  CHECK(cameBack > 0);
  const ReportBlock *flat = blockNamed(r, "flat_out");
  REQUIRE(flat);
  CHECK(flat->decision == "view");
  CHECK(flat->residencies.empty());
  CHECK(flat->node == "flat");
  CHECK(blockNamed(r, "x")->decision == "load");
  // Every block a relu overwrote in place says so, naming the relu.
  int overwritten = 0;
  for (const Instr &in : f.plan.round) {
    ResidencyId over = inPlaceInput(f.tg, f.plan, in);
    if (over < 0)
      continue;
    ++overwritten;
    const ReportBlock &rb = r.blocks[f.plan.residencies[over].block];
    CHECK(rb.why.find("in place") != std::string::npos);
    CHECK(rb.why.find(f.tg.tasks[in.task].name) != std::string::npos);
  }
  CHECK(overwritten == f.plan.summary.inPlaceRuns);
  CHECK(overwritten > 0);
  // Algorithm names come from the cost table.
  for (const ReportTask &t : r.tasks)
    CHECK((t.algoName == "fast" || t.algoName == "baseline"));
}

TEST_CASE("plan report: stalls add up to the simulated stall", "[report]") {
  const auto &f = reportFixture();
  REQUIRE(f.plan.numSubBatches == 1); // one round is the iteration
  double sum = 0;
  for (const ReportTask &t : f.report.tasks)
    sum += t.stallSeconds;
  REQUIRE(f.sim.stallSeconds > 0);
  CHECK(sum == Approx(f.sim.stallSeconds));
  auto top = largestStalls(f.report, 3);
  REQUIRE(!top.empty());
  for (size_t i = 1; i < top.size(); ++i)
    CHECK(top[i - 1]->stallSeconds >= top[i]->stallSeconds);
  // The first task waits for the input batch to arrive.
  CHECK(f.report.tasks.front().waitedFor == "x");
  CHECK(f.report.tasks.front().waitedDirection == "to_device");
  // A stall caused by a transfer ends when that transfer does.
  for (const ReportTask &t : f.report.tasks) {
    if (t.waitedFor.empty())
      continue;
    bool found = false;
    for (const ReportTransfer &x : f.report.transfers)
      found = found || (x.block == t.waitedFor &&
                        x.direction == t.waitedDirection && x.end == t.start);
    CHECK(found);
  }
}

TEST_CASE("plan.json: written and read back to the same bytes", "[report]") {
  const auto &f = reportFixture();
  std::string text = planToJson(f.report);
  auto back = parsePlanJson(text, "plan.json");
  REQUIRE(static_cast<bool>(back));
  CHECK(back->tasks.size() == f.report.tasks.size());
  CHECK(back->blocks.size() == f.report.blocks.size());
  CHECK(back->summary.stallSeconds == f.report.summary.stallSeconds);
  CHECK(back->notes == std::vector<std::string>{"a note"});
  CHECK(planToJson(*back) == text);
}

TEST_CASE("plan.json: reader errors name the file and the field", "[report]") {
  const auto &f = reportFixture();
  CHECK(errorOf(readPlanJson("/nonexistent/plan.json"))
            .find("cannot read /nonexistent/plan.json") == 0);
  CHECK(errorOf(parsePlanJson("{\"schema_version\": 1,", "p.json"))
            .find("p.json: not valid JSON") == 0);
  CHECK(errorOf(parsePlanJson("[1, 2]", "p.json"))
            .find("p.json: not a memfit plan") == 0);
  CHECK(errorOf(parsePlanJson("{\"schema_version\": 2}", "p.json")) ==
        "p.json: schema_version 2 is not supported: this memfit reads "
        "schema_version 1");
  std::string text = planToJson(f.report);
  auto replaceFirst = [&](const std::string &from, const std::string &to) {
    std::string t = text;
    size_t pos = t.find(from);
    REQUIRE(pos != std::string::npos);
    return t.replace(pos, from.size(), to);
  };
  CHECK(errorOf(parsePlanJson(replaceFirst("\"start\": ", "\"start\": \"x\", "
                                                          "\"old\": "),
                              "p.json")) ==
        "p.json: tasks[0]: field 'start' must be a number, not a string");
  CHECK(errorOf(parsePlanJson(replaceFirst("\"summary\"", "\"summery\""),
                              "p.json")) ==
        "p.json: field 'summary' is missing");
  CHECK(errorOf(parsePlanJson(replaceFirst("\"direction\": \"to_host\"",
                                           "\"direction\": \"sideways\""),
                              "p.json"))
            .find("field 'direction' must be") != std::string::npos);
}

TEST_CASE("arena timeline: a step function of residencies and workspaces",
          "[report]") {
  // Residencies [0, 2) of 100 bytes and [1, 3) of 50; a task from 2 to 4
  // with a 10-byte workspace.
  PlanReport r;
  ReportBlock a, b;
  a.residencies = {{0, 100, 0.0, 2.0}};
  b.residencies = {{100, 50, 1.0, 3.0}, {0, 7, -1, -1}}; // one never used
  r.blocks = {a, b};
  ReportTask t;
  t.section = "round";
  t.start = 2;
  t.end = 4;
  t.workspaceBytes = 10;
  r.tasks = {t};
  std::vector<ArenaPoint> p = arenaTimeline(r);
  std::vector<std::pair<double, int64_t>> got;
  for (const ArenaPoint &x : p)
    got.push_back({x.time, x.bytes});
  std::vector<std::pair<double, int64_t>> want = {
      {0, 100}, {1, 150}, {2, 60}, {3, 10}, {4, 0}};
  CHECK(got == want);
}

TEST_CASE("layer table: one row per node in execution order", "[report]") {
  // conv (kept), relu whose output and its gradient were offloaded, and a
  // flatten whose output is a view.
  PlanReport r;
  auto task = [](std::string name, std::string kind, std::string node,
                 double start, double end, double stall = 0) {
    ReportTask t;
    t.name = std::move(name);
    t.kind = std::move(kind);
    t.node = std::move(node);
    t.op = t.node == "c" ? "Conv" : t.node == "r" ? "Relu" : "Flatten";
    t.section = "round";
    t.algoName = t.node == "c" ? "winograd" : "default";
    t.start = start;
    t.end = end;
    t.stallSeconds = stall;
    return t;
  };
  r.tasks = {task("FP(c)", "FP", "c", 0, 1),
             task("FP(r)", "FP", "r", 1, 1.5),
             task("FP(f)", "FP", "f", 1.5, 1.5),
             task("loss", "loss", "", 1.5, 2),
             task("BP-data(r)", "BP-data", "r", 2.5, 3, 0.5),
             task("BP-weight(c)", "BP-weight", "c", 3, 4)};
  auto block = [](std::string name, std::string kind, std::string node,
                  int64_t bytes, std::string decision) {
    ReportBlock b;
    b.name = std::move(name);
    b.kind = std::move(kind);
    b.node = std::move(node);
    b.bytes = bytes;
    b.decision = std::move(decision);
    b.why = "because";
    return b;
  };
  r.blocks = {block("c_out", "Y", "c", 400, "keep"),
              block("r_out", "Y", "r", 400, "offload"),
              block("d(r_out)", "dY", "r", 400, "offload"),
              block("f_out", "Y", "f", 400, "view")};
  std::vector<LayerRow> rows = layerTable(r);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].node == "c");
  CHECK(rows[0].decision == "keep");
  CHECK(rows[0].algo == "winograd");
  CHECK(rows[0].forwardSeconds == 1);
  CHECK(rows[0].backwardSeconds == 1);
  CHECK(rows[0].outputBytes == 400);
  CHECK(rows[1].decision == "offload Y, offload dY");
  CHECK(rows[1].offloadedBytes == 800);
  CHECK(rows[1].stallSeconds == 0.5);
  CHECK(rows[1].why == "r_out: because");
  CHECK(rows[2].decision == "view");
  CHECK(rows[2].outputBytes == 400);
}

TEST_CASE("report text: every section a person looks for", "[report]") {
  const auto &f = reportFixture();
  std::string text;
  llvm::raw_string_ostream os(text);
  ReportTextOptions opts;
  opts.source = "out/plan.json";
  printReportText(os, f.report, opts);
  os.flush();
  for (const char *section :
       {"feasible   yes", "memory     budget", "lower bound 1.21 KiB",
        "ideal peak", "allocation efficiency", "time       ideal", "overhead",
        "traffic    to host", "recompute  none",
        "sub-batch  none: the whole batch of 4", "note       a note",
        "layers (in execution order", "why blocks move", "largest stalls",
        "waiting for the load of 'x'"})
    CHECK(text.find(section) != std::string::npos);
  // Every layer of the chain has a row.
  for (const char *node : {"conv0", "relu5", "gap", "flat", "fc"})
    CHECK(text.find(std::string("\n  ") + node + " ") != std::string::npos);
}

TEST_CASE("plan.json and report text: training restricted to some weights",
          "[report]") {
  const auto &f = reportFixture();
  // Every weight trains: no field, no line (older plans read the same).
  CHECK(planToJson(f.report).find("\"frozen\"") == std::string::npos);
  PlanReport r = f.report;
  r.frozen = {
      .weights = 3, .bytes = 3072, .trainedWeights = 2, .trainedBytes = 64};
  std::string json = planToJson(r);
  auto back = parsePlanJson(json, "plan.json");
  REQUIRE(static_cast<bool>(back));
  CHECK(back->frozen.weights == 3);
  CHECK(back->frozen.bytes == 3072);
  CHECK(back->frozen.trainedWeights == 2);
  CHECK(back->frozen.trainedBytes == 64);
  CHECK(planToJson(*back) == json);
  std::string text;
  llvm::raw_string_ostream os(text);
  printReportText(os, *back, {});
  os.flush();
  CHECK(text.find("training   restricted: 2 of 5 weights train (64 B); 3 "
                  "frozen (3.00 KiB): no gradient, optimizer state or "
                  "update\n") != std::string::npos);
}
