//===- ReportHtmlTest.cpp - Self-contained report pages -------------------===//
#include "codegen/ReportHtml.h"
#include "tests/ReportFixture.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace memfit;
using memfit::test::reportFixture;

namespace {

size_t count(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

/// The JSON the page's script draws from.
nlohmann::json pageData(const std::string &html) {
  const std::string open = "<script type=\"application/json\" "
                           "id=\"memfit-data\">";
  size_t a = html.find(open);
  REQUIRE(a != std::string::npos);
  a += open.size();
  size_t b = html.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return nlohmann::json::parse(html.substr(a, b - a));
}

} // namespace

TEST_CASE("report.html: self-contained and deterministic", "[html]") {
  const auto &f = reportFixture();
  std::string html = planToHtml(f.report);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  for (const char *external :
       {"http:", "https:", "//", "src=", "href=", "@import", "url("})
    CHECK(html.find(external) == std::string::npos);
  CHECK(count(html, "<canvas") == 2);
  CHECK(html == planToHtml(f.report));
}

TEST_CASE("report.html: the data behind the drawing", "[html]") {
  const auto &f = reportFixture();
  nlohmann::json d = pageData(planToHtml(f.report));
  size_t roundTasks = 0;
  for (const ReportTask &t : f.report.tasks)
    roundTasks += t.section == "round";
  CHECK(d["slices"].size() == roundTasks + f.report.transfers.size());
  CHECK(d["layers"].size() == layerTable(f.report).size());
  CHECK(d["arena"].size() == arenaTimeline(f.report).size());
  CHECK(d["budget"] == f.plan.budget);
  CHECK(d["resident"] == f.plan.residentBytes);
  CHECK(d["lowerBound"] == 1234);
  for (const auto &s : d["slices"]) {
    int lane = s[0].get<int>();
    std::string cat = s[3].get<std::string>();
    if (lane == 0)
      CHECK((cat == "FP" || cat == "BP-data" || cat == "BP-weight" ||
             cat == "loss"));
    else if (lane == 1)
      CHECK(cat == "offload");
    else
      CHECK((cat == "prefetch" || cat == "load"));
  }
}

TEST_CASE("report.html: names from the model cannot inject markup", "[html]") {
  PlanReport r = reportFixture().report;
  const std::string evil = "</script><img src=x onerror=alert(1)>&";
  r.model = evil;
  r.tasks.front().name = evil;
  r.blocks.front().name = evil;
  std::string html = planToHtml(r);
  CHECK(html.find("<img") == std::string::npos);
  CHECK(count(html, "</script>") == 2); // the page's own two scripts
  CHECK(html.find("&lt;/script&gt;&lt;img src=x") != std::string::npos);
  // The data still carries the name exactly.
  nlohmann::json d = pageData(html);
  CHECK(d["slices"][0][4] == evil);
}

TEST_CASE("compare.html: every cell, infeasible ones marked", "[html]") {
  CompareReport c;
  c.model = "m";
  c.batch = 8;
  c.idealPeakBytes = 1000;
  c.policies = {"modnn", "memfit"};
  c.budgets = {{"100%", 1000, 1.0}, {"10%", 100, 0.1}};
  CompareCell ok;
  ok.feasible = true;
  ok.overhead = 0.25;
  ok.bytesToHost = 512;
  ok.bytesToDevice = 512;
  ok.subBatch = 4;
  CompareCell no;
  no.reason = "budget is below the lower bound";
  c.cells = {{ok, ok}, {no, ok}};
  std::string html = compareToHtml(c);
  CHECK(html.find("http") == std::string::npos);
  CHECK(count(html, ">infeasible</td>") == 3); // one cell in three tables
  CHECK(count(html, ">25.0%</td>") == 3);
  CHECK(count(html, ">1.00 KiB</td>") == 3);
  nlohmann::json d = pageData(html);
  CHECK(d["kind"] == "compare");
  CHECK(d["data"]["cells"].size() == 4);
  CHECK(d["data"]["cells"][2]["feasible"] == false);
  CHECK(d["data"]["cells"][2]["reason"] == no.reason);
}
