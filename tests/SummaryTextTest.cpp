//===- SummaryTextTest.cpp - One report, rendered four ways ---------------===//
//
// The summary `memfit plan` prints (text and --json), plan.json and
// report.txt are each rendered from one PlanReport. These tests change the
// report's figures and find the changed figures in every rendering, and
// read a summary back from plan.json to the same printed summary.
//
//===----------------------------------------------------------------------===//
#include "codegen/SummaryText.h"
#include "codegen/PlanJson.h"
#include "codegen/ReportText.h"
#include "compiler/support/Units.h"
#include "tests/ReportFixture.h"

#include "llvm/Support/FormatVariadic.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace memfit;
using memfit::test::reportFixture;
using json = nlohmann::json;

namespace {

std::string summaryText(const PlanReport &r) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printPlanSummary(os, r);
  return os.str();
}

std::string reportText(const PlanReport &r) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printReportText(os, r, ReportTextOptions{});
  return os.str();
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::string ms(double seconds) {
  return llvm::formatv("{0:F2} ms", seconds * 1e3).str();
}

/// Equal JSON, numbers to a relative 1e-12 (plan.json keeps some times in
/// milliseconds).
bool sameJson(const json &a, const json &b, std::string &where) {
  if (a.is_number() && b.is_number()) {
    double x = a.get<double>(), y = b.get<double>();
    if (std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y)))
      return true;
  } else if (a.is_object() && b.is_object() && a.size() == b.size()) {
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !sameJson(*it, b[it.key()], where)) {
        where = it.key() + (where.empty() ? "" : "." + where);
        return false;
      }
    return true;
  } else if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!sameJson(a[i], b[i], where))
        return false;
    return true;
  } else if (a == b) {
    return true;
  }
  where = where.empty() ? "(value)" : where;
  return false;
}

/// The fixture's report with figures no two fields share, so a renderer
/// that printed one field for another would be caught.
PlanReport distinctReport() {
  PlanReport r = reportFixture().report;
  ReportSummary &s = r.summary;
  r.budgetBytes = 7'340'032;       // 7.00 MiB
  r.libraryReserveBytes = 524'288; // 512.00 KiB
  s.plannedBytes = 3'145'728;      // 3.00 MiB
  s.residentBytes = 1'048'576;
  s.arenaBytes = 2'097'152;
  s.lowerBoundBytes = 1'572'864;
  s.idealPeakBytes = 5'242'880;
  s.idealSeconds = 0.01234;
  s.plannedSeconds = 0.02345;
  s.overhead = s.plannedSeconds / s.idealSeconds - 1;
  s.stallSeconds = 0.00456;
  s.boundSeconds = 0.02111;
  s.bytesToHost = 6'291'456;
  s.bytesToDevice = 4'194'304;
  s.allocationEfficiency = 0.875;
  s.inPlaceRuns = 3;
  s.planSeconds = 1.5;
  return r;
}

} // namespace

TEST_CASE("summary: text, --json, plan.json and report.txt show one report",
          "[summary]") {
  PlanReport r = distinctReport();
  const ReportSummary &s = r.summary;
  std::string text = summaryText(r);
  json j = json::parse(planSummaryJson(r));
  json file = json::parse(planToJson(r));
  std::string report = reportText(r);
  INFO(text);

  // --json carries the report's figures, and so does plan.json.
  for (auto [key, value] : std::vector<std::pair<const char *, double>>{
           {"budget_bytes", double(r.budgetBytes)},
           {"library_reserve_bytes", double(r.libraryReserveBytes)},
           {"planned_bytes", double(s.plannedBytes)},
           {"resident_bytes", double(s.residentBytes)},
           {"arena_bytes", double(s.arenaBytes)},
           {"lower_bound_bytes", double(s.lowerBoundBytes)},
           {"ideal_peak_bytes", double(s.idealPeakBytes)},
           {"ideal_seconds", s.idealSeconds},
           {"planned_seconds", s.plannedSeconds},
           {"overhead", s.overhead},
           {"stall_seconds", s.stallSeconds},
           {"bound_seconds", s.boundSeconds},
           {"bytes_to_host", double(s.bytesToHost)},
           {"bytes_to_device", double(s.bytesToDevice)},
           {"allocation_efficiency", s.allocationEfficiency},
           {"in_place_runs", double(s.inPlaceRuns)}}) {
    INFO(key);
    CHECK(j[key].get<double>() == value);
    const json &f = file.contains(key) ? file[key] : file["summary"][key];
    CHECK(f.get<double>() == value);
  }
  CHECK(j["plan_seconds"].get<double>() == 1.5);
  CHECK(!file["summary"].contains("plan_seconds")); // differs run to run

  // The text shows the --json figures, formatted.
  auto bytes = [&](const char *key) {
    return formatBytes(j[key].get<int64_t>());
  };
  auto secs = [&](const char *key) { return ms(j[key].get<double>()); };
  auto pct = [&](const char *key) {
    return llvm::formatv("{0:P1}", j[key].get<double>()).str();
  };
  for (const std::string &part :
       {"model " + quoteName(j["model"].get<std::string>()) + " (" +
            j["file"].get<std::string>() + "), batch " +
            std::to_string(j["batch"].get<int64_t>()) + ", device " +
            j["device"].get<std::string>() + ", policy " +
            j["policy"].get<std::string>() + "\n",
        "budget " + bytes("budget_bytes") + ", planned " +
            formatBytes(j["library_reserve_bytes"].get<int64_t>() +
                        j["planned_bytes"].get<int64_t>()) +
            " (library reserve " + bytes("library_reserve_bytes") +
            " + resident " + bytes("resident_bytes") + " + arena " +
            bytes("arena_bytes") + ")",
        "lower bound " + bytes("lower_bound_bytes") + ", ideal peak " +
            bytes("ideal_peak_bytes") + ", allocation efficiency " +
            pct("allocation_efficiency"),
        "time     ideal " + secs("ideal_seconds") + ", planned " +
            secs("planned_seconds") + ", overhead " + pct("overhead") +
            ", stall " + secs("stall_seconds"),
        "bound    " + secs("bound_seconds") + " per iteration",
        "traffic  to host " + bytes("bytes_to_host") + ", to device " +
            bytes("bytes_to_device"),
        "batch    " + std::to_string(j["sub_batches"].get<int64_t>()) +
            " sub-batches of " + std::to_string(j["sub_batch"].get<int64_t>()),
        "; " + std::to_string(j["in_place_runs"].get<int64_t>()) +
            " tasks run in place",
        "note     " + j["attention"].get<std::string>() + "\n"}) {
    INFO(part);
    CHECK(contains(text, part));
  }
  // report.txt, in its own units.
  for (const std::string &part :
       {"budget " + formatBytes(r.budgetBytes),
        "planned peak " + formatBytes(s.plannedBytes),
        "ideal " + formatSeconds(s.idealSeconds) + ", planned " +
            formatSeconds(s.plannedSeconds),
        "bound      " + formatSeconds(s.boundSeconds),
        "to host " + formatBytes(s.bytesToHost)}) {
    INFO(part);
    CHECK(contains(report, part));
  }
}

TEST_CASE("summary: read back from plan.json, the same summary", "[summary]") {
  PlanReport r = distinctReport();
  r.profile = {.used = true,
               .file = "prof.json",
               .measured = 4,
               .interpolated = 1,
               .estimated = 2,
               .estimatedExamples = {}};
  // What plan.json leaves out is printed only when the plan is made.
  r.attention.clear();
  r.notes.clear();
  r.summary.planSeconds = 0;
  auto back = parsePlanJson(planToJson(r), "plan.json");
  if (!back)
    FAIL(llvm::toString(back.takeError()));
  CHECK(summaryText(*back) == summaryText(r));
  std::string where;
  bool same = sameJson(json::parse(planSummaryJson(*back)),
                       json::parse(planSummaryJson(r)), where);
  INFO(where);
  CHECK(same);
  // The block counts come back from the blocks.
  CHECK(back->summary.blocks == r.summary.blocks);
  CHECK(back->summary.offloadedBlocks == r.summary.offloadedBlocks);
  CHECK(r.summary.offloadedBlocks == roundCounts(r).offloadedBlocks);
  CHECK(r.summary.offloadedBlocks > 0);
}

TEST_CASE("summary: built alone, as the whole report has it", "[summary]") {
  const auto &f = reportFixture();
  PlanReport alone = buildPlanSummary(f.tg, f.plan, f.sim, f.ctx);
  CHECK(alone.tasks.empty());
  CHECK(alone.blocks.empty());
  CHECK(alone.schedule.empty());
  CHECK(summaryText(alone) == summaryText(f.report));
  CHECK(planSummaryJson(alone) == planSummaryJson(f.report));
  CHECK(alone.notes == f.report.notes);
  CHECK(alone.summary.blocks == static_cast<int64_t>(f.tg.blocks.size()));
}

TEST_CASE("summary: notes and the lines only some plans have", "[summary]") {
  PlanReport r = distinctReport();
  r.exact = false;
  r.batch = 10;
  r.subBatch = 4;
  r.numSubBatches = 3;
  r.summary.boundSeconds = 0;
  r.summary.boundWhy = "the graph is too large";
  r.summary.optimal = ReportOptimal{.objectiveSeconds = 0.002,
                                    .proven = true,
                                    .nodes = 7,
                                    .maxNodes = 500,
                                    .blocks = 9,
                                    .offloaded = 2,
                                    .recomputed = 1,
                                    .rows = 40,
                                    .columns = 30,
                                    .memfitSeconds = 0.025,
                                    .solveSeconds = 0.5,
                                    .realization = 1};
  r.frozen = {.weights = 6,
              .bytes = 40960,
              .trainedWeights = 3,
              .trainedBytes = 1536,
              .trainOnly = "fc",
              .freeze = ""};
  std::string text = summaryText(r);
  INFO(text);
  CHECK(contains(text, "training restricted by --train-only 'fc': 3 of 9 "
                       "weights train (1.50 KiB); 6 frozen (40.00 KiB) get "
                       "no gradient, optimizer state or update\n"));
  CHECK(contains(text, "batch    3 sub-batches of 4 (the last of 2)\n"));
  CHECK(contains(text, "note     " + inexactNote(r) + "\n"));
  CHECK(contains(inexactNote(r), "sub-batch of 4, not over the batch of 10"));
  CHECK(contains(text, "bound    none: the graph is too large\n"));
  CHECK(contains(text, "optimal  integral program over 9 blocks (40 rows, "
                       "30 columns): 2.00 ms per round, proven optimal "
                       "after 7 nodes (limit 500)"));
  // 23.45 ms against memfit's 25.00 ms.
  CHECK(contains(text, "memfit's own plan 25.00 ms: the solver's plan is "
                       "6.2% faster than or as fast as it (offloads leave "
                       "when room is needed)"));
  json j = json::parse(planSummaryJson(r));
  CHECK(j["bound_seconds"].is_null());
  CHECK(j["exact"] == false);
  CHECK(j["optimal"]["blocks"] == 9);
  CHECK(j["optimal"]["realization"] == 1);
  CHECK(j["frozen"]["weights"] == 6);
  CHECK(j["frozen"]["trained_bytes"] == 1536);

  r.chunks = 2;
  r.batch = 8;
  r.numSubBatches = 1;
  r.exact = true;
  text = summaryText(r);
  CHECK(contains(text, "batch    2 chunks of 4 in one round\nnote     " +
                           chunkNote(r) + "\n"));
  CHECK(contains(chunkNote(r), "the batch of 8 runs as 2 chunks of 4"));
}

TEST_CASE("summary: the profile line", "[summary]") {
  ReportProfile p{.used = true,
                  .file = "prof.json",
                  .measured = 1,
                  .interpolated = 1,
                  .estimated = 3,
                  .estimatedExamples = {"forward Conv(x) at sub-batch 16",
                                        "forward Sigmoid(x) at sub-batch 4"}};
  std::string line;
  llvm::raw_string_ostream os(line);
  printProfileLine(os, p);
  CHECK(os.str() == "profile  2 task measurements used (1 interpolated "
                    "between sub-batches); 3 not in the profile, estimated "
                    "by the analytic model, e.g. forward Conv(x) at "
                    "sub-batch 16; forward Sigmoid(x) at sub-batch 4; ...\n");
  // Without a profile: nothing.
  std::string none;
  llvm::raw_string_ostream os2(none);
  printProfileLine(os2, ReportProfile{});
  CHECK(os2.str().empty());
}
