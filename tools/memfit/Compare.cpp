//===- Compare.cpp - memfit compare ---------------------------------------===//
//
// memfit compare MODEL --budgets 100%,75%,50%,25%,10% [--policies ...]:
// plans every policy at every budget on one cost model and batch and prints
// the overhead and the bytes moved side by side; a policy that cannot meet
// a budget shows as infeasible. -o DIR writes compare.html (the
// budget-versus-overhead curve of every policy) and compare.json.
//
//===----------------------------------------------------------------------===//
#include "codegen/CompareReport.h"
#include "codegen/ReportHtml.h"
#include "compiler/support/Units.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/search/Pipeline.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/Planning.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::list<std::string>
    Budgets("budgets",
            cl::desc("Budgets to compare: sizes (8GiB), percentages of the "
                     "ideal peak, or lb for the lower bound (default: "
                     "100%,75%,50%,25%,10%)"),
            cl::CommaSeparated, cl::value_desc("b1,b2,..."),
            cl::sub(compareCommand()));
// cl::desc keeps a reference: the text lives as long as the option.
const std::string PoliciesHelp =
    "Policies to compare (default: " + join(policiesComparedByDefault(), ",") +
    ")";
cl::list<std::string> Policies("policies", cl::desc(PoliciesHelp),
                               cl::CommaSeparated, cl::value_desc("p1,p2,..."),
                               cl::sub(compareCommand()));
cl::opt<bool> Json("json", cl::desc("Print one JSON object"),
                   cl::sub(compareCommand()));
cl::opt<bool> Csv("csv", cl::desc("Print one CSV row per budget and policy"),
                  cl::sub(compareCommand()));
cl::opt<std::string> OutDir("o",
                            cl::desc("Write compare.html and compare.json "
                                     "into this directory"),
                            cl::value_desc("DIR"), cl::init(""),
                            cl::sub(compareCommand()));
cl::opt<bool> Force("force", cl::desc("Replace an existing -o directory"),
                    cl::sub(compareCommand()));

void printTable(raw_ostream &os, const CompareReport &c, const char *title,
                function_ref<std::string(const CompareCell &)> value) {
  os << "\n" << title << "\n";
  std::vector<std::string> labels;
  size_t w = 6;
  for (const CompareBudget &b : c.budgets) {
    labels.push_back(b.label + " (" + formatBytes(b.bytes) + ")");
    w = std::max(w, labels.back().size());
  }
  os << "  " << left_justify("budget", w);
  for (const std::string &p : c.policies)
    os << formatv(" {0,12}", p);
  os << "\n";
  for (size_t bi = 0; bi < c.budgets.size(); ++bi) {
    os << "  " << left_justify(labels[bi], w);
    for (const CompareCell &x : c.cells[bi])
      os << formatv(" {0,12}", x.feasible ? value(x) : "infeasible");
    os << "\n";
  }
}

int run() {
  if (auto err = checkCompareFlags())
    return reportError(std::move(err));
  CompareReport c;
  std::vector<std::string> policyNames(Policies.begin(), Policies.end());
  if (policyNames.empty())
    policyNames = policiesComparedByDefault();
  std::vector<Policy> policies;
  for (const std::string &name : policyNames) {
    Policy p;
    if (!parsePolicy(name, p) || p == Policy::Ideal)
      return reportError(makeErrorF(
          "unknown policy '{0}' in --policies: expected {1} (the ideal plan "
          "is the yardstick of every row)",
          name, policyNamesText(/*withIdeal=*/false)));
    if (std::find(policies.begin(), policies.end(), p) != policies.end())
      return reportError(
          makeErrorF("policy '{0}' is listed twice in --policies", name));
    policies.push_back(p);
    c.policies.push_back(name);
  }
  std::vector<std::string> budgetTexts(Budgets.begin(), Budgets.end());
  if (budgetTexts.empty())
    budgetTexts = {"100%", "75%", "50%", "25%", "10%"};
  std::vector<PlanRequest> budgetReqs;
  for (const std::string &text : budgetTexts) {
    PlanRequest r;
    if (auto err = parseBudget(text, "--budgets", r))
      return reportError(std::move(err));
    budgetReqs.push_back(r);
  }

  Progress progress = makeProgress();
  PlanningSession s;
  // As attention: compare plans the fused head unless told otherwise.
  s.fuseHead = fuseHeadRequested();
  s.fuseEpilogues = fuseFlag() == FuseMode::Auto;
  if (auto err = openSession(s, /*keepWeightData=*/false, &progress))
    return reportError(std::move(err));
  auto baseReq = compareRequest(s);
  if (!baseReq)
    return reportError(baseReq.takeError());
  PlanRequest base = *baseReq;
  for (PlanRequest &r : budgetReqs) {
    PlanRequest b = base;
    b.budget = r.budget;
    b.budgetFraction = r.budgetFraction;
    b.budgetIsLowerBound = r.budgetIsLowerBound;
    r = b;
  }
  c.model = s.graph.name;
  c.modelFile = s.modelPath;
  c.device = s.costs->device().name;
  c.precision = precisionName(s.tg.precision);
  c.batch = base.batch;

  std::optional<OutputDir> out;
  if (!OutDir.empty()) {
    auto dir = OutputDir::create(OutDir, Force);
    if (!dir)
      return reportError(dir.takeError());
    out.emplace(std::move(*dir));
  }

  // The ideal plan resolves percentages and is every row's yardstick.
  auto ideal = runPlanner(s, base, progress);
  if (!ideal)
    return reportError(ideal.takeError());
  c.idealPeakBytes = ideal->idealPeakBytes;
  c.idealSeconds = ideal->idealSeconds;
  c.lowerBoundBytes = ideal->lowerBound.bytes;

  bool large = s.tg.tasks.size() > kLargeTaskCount;
  for (size_t bi = 0; bi < budgetReqs.size(); ++bi) {
    // Every policy plans the same device budget in bytes.
    ResolvedBudget resolved =
        resolveBudget(budgetReqs[bi], c.idealPeakBytes, c.lowerBoundBytes);
    PlanRequest r = withBudget(budgetReqs[bi], resolved);
    CompareBudget b;
    b.label = StringRef(budgetTexts[bi]).trim().str();
    b.bytes = resolved.device;
    // The fraction is the plan's share (the reserve taken off), as a
    // percentage budget means it.
    b.fraction =
        c.idealPeakBytes > 0 ? double(resolved.plan()) / c.idealPeakBytes : 0;
    c.budgets.push_back(b);
    std::vector<CompareCell> row;
    for (size_t pi = 0; pi < policies.size(); ++pi) {
      r.policy = policies[pi];
      progress.start(formatv("planning {0} at {1} ({2} of {3})", c.policies[pi],
                             b.label, bi * policies.size() + pi + 1,
                             budgetReqs.size() * policies.size()),
                     large);
      // An internal error is memfit's bug: the comparison stops there.
      auto planned = planOrReason(s.tg, s.tableFn(), r);
      progress.done();
      if (!planned)
        return reportError(
            withContext(planned.takeError(), s.modelPath + ": "));
      const std::optional<PlanOutcome> &o = planned->outcome;
      CompareCell x;
      if (!o) {
        x.reason = planned->reason;
        progress.info(c.policies[pi] + " at " + b.label + ": " + x.reason);
      } else {
        x.feasible = true;
        x.plannedSeconds = o->plan.summary.plannedSeconds;
        x.overhead = o->overhead();
        x.stallSeconds = o->plan.summary.stallSeconds;
        x.plannedBytes = o->plan.totalBytes();
        x.bytesToHost = o->plan.summary.bytesToHost;
        x.bytesToDevice = o->plan.summary.bytesToDevice;
        x.subBatch = o->plan.subBatch;
        x.chunks = o->plan.chunks;
      }
      row.push_back(std::move(x));
    }
    c.cells.push_back(std::move(row));
  }

  if (out) {
    if (auto err = out->write("compare.html", compareToHtml(c)))
      return reportError(std::move(err));
    if (auto err = out->write("compare.json", compareToJson(c) + "\n"))
      return reportError(std::move(err));
    if (auto err = out->commit())
      return reportError(std::move(err));
  }
  if (Json) {
    outs() << compareToJson(c) << "\n";
    return ExitOk;
  }
  if (Csv) {
    outs() << "budget,budget_bytes,policy,feasible,sub_batch,overhead,"
              "planned_seconds,bytes_to_host,bytes_to_device\n";
    for (size_t bi = 0; bi < c.budgets.size(); ++bi)
      for (size_t pi = 0; pi < c.policies.size(); ++pi) {
        const CompareCell &x = c.cells[bi][pi];
        outs() << formatv("{0},{1},{2},{3},{4},{5:F6},{6:F6},{7},{8}\n",
                          c.budgets[bi].label, c.budgets[bi].bytes,
                          c.policies[pi], x.feasible ? "yes" : "no", x.subBatch,
                          x.overhead, x.plannedSeconds, x.bytesToHost,
                          x.bytesToDevice);
      }
    return ExitOk;
  }
  if (quietFlag())
    return ExitOk;
  outs() << formatv("model {0} ({1}), batch {2}, device {3}{4}\n",
                    quoteName(c.model), c.modelFile, c.batch, c.device,
                    c.precision == "fp32" ? "" : ", precision " + c.precision);
  if (std::string r = trainingRestriction(s.tg); !r.empty())
    outs() << "training " << r << "\n";
  outs() << formatv("ideal plan: peak {0}, {1:F3} ms per iteration; lower "
                    "bound Mmin {2}\n",
                    formatBytes(c.idealPeakBytes), c.idealSeconds * 1e3,
                    formatBytes(c.lowerBoundBytes));
  printTable(outs(), c,
             "overhead (predicted iteration time over the ideal's, minus one)",
             [](const CompareCell &x) {
               return formatv("{0:F1}%", x.overhead * 100).str();
             });
  printTable(outs(), c, "bytes moved per iteration (to host + to device)",
             [](const CompareCell &x) {
               return formatBytes(x.bytesToHost + x.bytesToDevice);
             });
  printTable(outs(), c, "sub-batch",
             [](const CompareCell &x) { return x.shape(); });
  outs() << "\ninfeasible: the policy cannot meet that budget (--json or "
            "--verbose says why)\n";
  if (out)
    outs() << "wrote " << OutDir << "/compare.html and compare.json\n";
  return ExitOk;
}

RegisterCommand reg(compareCommand(), run);

} // namespace
} // namespace memfit::tool
