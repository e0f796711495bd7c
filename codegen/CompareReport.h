//===- CompareReport.h - Every policy at every budget -----------*- C++ -*-===//
//
// The result of `memfit compare`: one cell per (budget, policy), each a
// planned iteration on the same cost model and batch, or the reason the
// policy cannot meet that budget. Overhead is measured against the ideal
// plan's time for every policy alike (docs/memory.md). Written as JSON here
// and drawn as a page by ReportHtml.h.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_COMPAREREPORT_H
#define MEMFIT_CODEGEN_COMPAREREPORT_H

#include <cstdint>
#include <string>
#include <vector>

namespace memfit {

struct CompareCell {
  bool feasible = false;
  std::string reason; // why not, when infeasible
  double plannedSeconds = 0, overhead = 0, stallSeconds = 0;
  int64_t plannedBytes = 0, bytesToHost = 0, bytesToDevice = 0;
  int64_t subBatch = 0;
  int32_t chunks = 1; // > 1: the batch in chunks of subBatch in one round
  /// "64", or "2 chunks of 32".
  std::string shape() const {
    return chunks > 1 ? std::to_string(chunks) + " chunks of " +
                            std::to_string(subBatch)
                      : std::to_string(subBatch);
  }
};

struct CompareBudget {
  std::string label;   // as given: "50%", "8GiB"
  int64_t bytes = 0;   // resolved
  double fraction = 0; // of the ideal peak
};

struct CompareReport {
  std::string model, modelFile, device;
  std::string precision = "fp32"; // TaskGraph::precision
  int64_t batch = 0;
  int64_t idealPeakBytes = 0, lowerBoundBytes = 0;
  double idealSeconds = 0;
  std::vector<std::string> policies;
  std::vector<CompareBudget> budgets;
  std::vector<std::vector<CompareCell>> cells; // [budget][policy]
};

std::string compareToJson(const CompareReport &c);

} // namespace memfit

#endif
