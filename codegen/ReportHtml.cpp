//===- ReportHtml.cpp - Self-contained report pages -----------------------===//
#include "codegen/ReportHtml.h"

#include "codegen/ReportText.h"
#include "compiler/support/Units.h"

#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace memfit {
namespace {

using json = nlohmann::ordered_json;

std::string dumpSafe(const json &j) {
  return scriptSafeJson(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string pct(double x) { return llvm::formatv("{0:F1}%", x * 100).str(); }

std::string head(const std::string &title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta "
         "charset=\"utf-8\">\n<meta name=\"viewport\" "
         "content=\"width=device-width\">\n<title>" +
         htmlEscape(title) + "</title>\n<style>" + reportCss() +
         "</style>\n</head>\n<body data-drawn=\"no\">\n";
}

std::string tail(const std::string &dataJson) {
  return "<script type=\"application/json\" id=\"memfit-data\">" + dataJson +
         "</script>\n<script>" + reportScript() +
         "</script>\n</body>\n</html>\n";
}

std::string card(const std::string &title,
                 const std::vector<std::string> &lines) {
  std::string s = "<div class=\"card\"><h3>" + htmlEscape(title) + "</h3>";
  for (const std::string &l : lines)
    s += "<div>" + htmlEscape(l) + "</div>";
  return s + "</div>\n";
}

} // namespace

std::string htmlEscape(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string scriptSafeJson(const std::string &j) {
  std::string out;
  out.reserve(j.size());
  for (char c : j) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

std::string planToHtml(const PlanReport &r, const RunLogData *run) {
  const ReportSummary &s = r.summary;
  RoundCounts counts = roundCounts(r);
  double roundSeconds = s.roundSeconds;
  for (const ReportTask &t : r.tasks)
    if (t.section == "round")
      roundSeconds = std::max(roundSeconds, t.end);
  for (const ReportTransfer &x : r.transfers)
    roundSeconds = std::max(roundSeconds, x.end);

  json d;
  d["kind"] = "plan";
  d["roundSeconds"] = roundSeconds;
  d["budget"] = r.budgetBytes;
  d["resident"] = s.residentBytes;
  d["lowerBound"] = s.lowerBoundBytes;
  d["idealPeak"] = s.idealPeakBytes;
  json arena = json::array();
  for (const ArenaPoint &p : arenaTimeline(r))
    arena.push_back({p.time, p.bytes});
  d["arena"] = std::move(arena);
  json slices = json::array();
  for (const ReportTask &t : r.tasks)
    if (t.section == "round")
      slices.push_back(
          {0, t.start, t.end, t.recompute ? "recompute" : t.kind, t.name});
  std::map<std::string, bool> isLoad;
  for (const ReportBlock &b : r.blocks)
    isLoad[b.name] = b.decision == "load";
  for (const ReportTransfer &x : r.transfers) {
    bool out = x.direction == "to_host";
    std::string what = out ? "offload" : isLoad[x.block] ? "load" : "prefetch";
    slices.push_back({out ? 1 : 2, x.start, x.end, what, what + " " + x.block});
  }
  d["slices"] = std::move(slices);
  json layers = json::array();
  for (const LayerRow &l : layerTable(r))
    layers.push_back({{"node", l.node},
                      {"op", l.op},
                      {"output", l.outputBytes},
                      {"decision", l.decision},
                      {"why", l.why},
                      {"algorithm", l.algo},
                      {"forward", l.forwardSeconds},
                      {"backward", l.backwardSeconds},
                      {"stall", l.stallSeconds}});
  d["layers"] = std::move(layers);
  json stalls = json::array();
  for (const ReportTask *t : largestStalls(r, 10)) {
    std::string what = t->waitedDirection == "to_host" ? "the offload"
                       : isLoad[t->waitedFor]          ? "the load"
                                                       : "the prefetch";
    stalls.push_back({{"task", t->name},
                      {"seconds", t->stallSeconds},
                      {"waitedFor", t->waitedFor},
                      {"what", what}});
  }
  d["stalls"] = std::move(stalls);
  if (run) {
    json points = json::array();
    for (const RunPoint &p : run->points)
      points.push_back(
          {p.step, p.loss, p.gradNorm ? json(*p.gradNorm) : json(nullptr)});
    d["run"] = std::move(points);
    json val = json::array();
    for (const ValPoint &v : run->validations)
      val.push_back({v.step, v.loss});
    d["val"] = std::move(val);
  }

  std::string h = head("memfit plan: " + r.model);
  h += "<h1>memfit plan: " + htmlEscape(r.model) + "</h1>\n";
  h += "<p class=\"meta\">" +
       htmlEscape(llvm::formatv(
                      "{0}policy {1}, precision {7}, device {2}, batch {3} as "
                      "{4} {5} of {6}",
                      r.modelFile.empty() ? "" : r.modelFile + ": ", r.policy,
                      r.device, r.batch,
                      r.chunks > 1 ? r.chunks : r.numSubBatches,
                      r.chunks > 1 ? "chunks in one round" : "sub-batches",
                      r.subBatch, r.precision)
                      .str()) +
       "</p>\n<div class=\"cards\">\n";
  h += std::string("<div class=\"card\"><h3>feasible</h3><div class=\"") +
       (s.feasible ? "ok\">yes, verified" : "bad\">no") + "</div></div>\n";
  h += card("memory", {"budget " + formatBytes(r.budgetBytes) +
                           " (CUDA context not in it)",
                       "library reserve " + formatBytes(r.libraryReserveBytes),
                       "planned peak " + formatBytes(s.plannedBytes),
                       "resident " + formatBytes(s.residentBytes) +
                           " + arena " + formatBytes(s.arenaBytes),
                       "lower bound " + formatBytes(s.lowerBoundBytes),
                       "ideal peak " + formatBytes(s.idealPeakBytes),
                       "allocation efficiency " + pct(s.allocationEfficiency)});
  h += card("time per iteration", {"ideal " + formatSeconds(s.idealSeconds),
                                   "planned " + formatSeconds(s.plannedSeconds),
                                   "overhead " + pct(s.overhead),
                                   "stall " + formatSeconds(s.stallSeconds)});
  h += card("traffic per iteration",
            {"to host " + formatBytes(s.bytesToHost),
             "to device " + formatBytes(s.bytesToDevice),
             llvm::formatv("per round: {0} offloads, {1} prefetches",
                           counts.offloads, counts.prefetches)
                 .str()});
  std::vector<std::string> sub = {
      r.chunks > 1
          ? llvm::formatv("{0} chunks of {1} samples in one round", r.chunks,
                          r.subBatch)
                .str()
          : llvm::formatv("{0} x {1} samples", r.numSubBatches, r.subBatch)
                .str()};
  if (counts.recomputedBlocks == 0)
    sub.push_back("recompute: none");
  else
    sub.push_back(
        llvm::formatv("recompute: {0} blocks", counts.recomputedBlocks).str());
  h += card("sub-batch", sub);
  h += "</div>\n";
  if (r.frozen.weights > 0)
    h += "<p class=\"note\">training " + htmlEscape(describeFrozen(r.frozen)) +
         "</p>\n";
  for (const std::string &n : r.notes)
    h += "<p class=\"note\">" + htmlEscape(n) + "</p>\n";
  if (run)
    h += "<h2>Training run</h2>\n<p class=\"note\">" +
         htmlEscape(describeRun(r, *run)) +
         "</p>\n<canvas id=\"run\" width=\"1000\" height=\"300\"></canvas>\n"
         "<div class=\"legend\" id=\"run-legend\"></div>\n";
  h += "<h2>Device memory over one round</h2>\n"
       "<canvas id=\"memory\" width=\"1000\" height=\"300\"></canvas>\n"
       "<div class=\"legend\" id=\"memory-legend\"></div>\n"
       "<h2>Streams over one round</h2>\n"
       "<canvas id=\"timeline\" width=\"1000\" height=\"170\"></canvas>\n"
       "<div class=\"legend\" id=\"timeline-legend\"></div>\n"
       "<p class=\"note\">The weight update (" +
       htmlEscape(formatSeconds(s.updateSeconds)) +
       ") runs once, after the last sub-batch.</p>\n"
       "<h2>Layers</h2>\n<table id=\"layers\"><thead><tr><th>layer</th>"
       "<th>op</th><th class=\"n\">output</th><th>decision</th>"
       "<th>algorithm</th><th class=\"n\">forward</th>"
       "<th class=\"n\">backward</th><th class=\"n\">stall</th><th>why</th>"
       "</tr></thead><tbody></tbody></table>\n"
       "<h2>Largest stalls</h2>\n<ul id=\"stalls\"></ul>\n"
       "<div id=\"tip\"></div>\n";
  return h + tail(dumpSafe(d));
}

std::string compareToHtml(const CompareReport &c) {
  std::string h = head("memfit compare: " + c.model);
  h += "<h1>memfit compare: " + htmlEscape(c.model) + "</h1>\n";
  h +=
      "<p class=\"meta\">" +
      htmlEscape(llvm::formatv("{0}device {1}, batch {2}; ideal peak {3}, "
                               "ideal time {4}, lower bound {5}",
                               c.modelFile.empty() ? "" : c.modelFile + ": ",
                               c.device, c.batch, formatBytes(c.idealPeakBytes),
                               formatSeconds(c.idealSeconds),
                               formatBytes(c.lowerBoundBytes))
                     .str()) +
      "</p>\n";
  h += "<h2>Overhead against budget</h2>\n"
       "<canvas id=\"curve\" width=\"1000\" height=\"380\"></canvas>\n"
       "<div class=\"legend\" id=\"curve-legend\"></div>\n"
       "<p class=\"note\">Overhead is the predicted iteration time over the "
       "ideal plan's, minus one, on the same cost model. A cross at the top "
       "marks a budget the policy cannot meet.</p>\n";
  auto table = [&](const char *title, auto &&value) {
    std::string t = std::string("<h2>") + title +
                    "</h2>\n<table><thead><tr><th>budget</th>";
    for (const std::string &p : c.policies)
      t += "<th class=\"n\">" + htmlEscape(p) + "</th>";
    t += "</tr></thead><tbody>\n";
    for (size_t bi = 0; bi < c.budgets.size(); ++bi) {
      t += "<tr><td>" +
           htmlEscape(c.budgets[bi].label + " (" +
                      formatBytes(c.budgets[bi].bytes) + ")") +
           "</td>";
      for (size_t pi = 0; pi < c.policies.size(); ++pi) {
        const CompareCell &x = c.cells[bi][pi];
        t += x.feasible ? "<td class=\"n\">" + htmlEscape(value(x)) + "</td>"
                        : "<td class=\"n bad\" title=\"" +
                              htmlEscape(x.reason) + "\">infeasible</td>";
      }
      t += "</tr>\n";
    }
    return t + "</tbody></table>\n";
  };
  h += table("Overhead", [](const CompareCell &x) { return pct(x.overhead); });
  h += table("Bytes moved per iteration", [](const CompareCell &x) {
    return formatBytes(x.bytesToHost + x.bytesToDevice);
  });
  h += table("Sub-batch", [](const CompareCell &x) { return x.shape(); });
  std::string data =
      "{\"kind\":\"compare\",\"data\":" + scriptSafeJson(compareToJson(c)) +
      "}";
  return h + tail(data);
}

} // namespace memfit
