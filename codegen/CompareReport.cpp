//===- CompareReport.cpp - Every policy at every budget -------------------===//
#include "codegen/CompareReport.h"

#include <nlohmann/json.hpp>

namespace memfit {

std::string compareToJson(const CompareReport &c) {
  using json = nlohmann::ordered_json;
  json j;
  j["model"] = c.model;
  j["model_file"] = c.modelFile;
  j["device"] = c.device;
  j["precision"] = c.precision;
  j["batch"] = c.batch;
  j["ideal_peak_bytes"] = c.idealPeakBytes;
  j["ideal_seconds"] = c.idealSeconds;
  j["lower_bound_bytes"] = c.lowerBoundBytes;
  j["policies"] = c.policies;
  json budgets = json::array();
  for (const CompareBudget &b : c.budgets)
    budgets.push_back({{"label", b.label},
                       {"bytes", b.bytes},
                       {"fraction_of_ideal_peak", b.fraction}});
  j["budgets"] = std::move(budgets);
  json cells = json::array();
  for (size_t bi = 0; bi < c.cells.size(); ++bi)
    for (size_t pi = 0; pi < c.cells[bi].size(); ++pi) {
      const CompareCell &x = c.cells[bi][pi];
      json e = {{"budget", c.budgets[bi].label},
                {"budget_bytes", c.budgets[bi].bytes},
                {"policy", c.policies[pi]},
                {"feasible", x.feasible}};
      if (x.feasible) {
        e["planned_seconds"] = x.plannedSeconds;
        e["overhead"] = x.overhead;
        e["stall_seconds"] = x.stallSeconds;
        e["planned_bytes"] = x.plannedBytes;
        e["bytes_to_host"] = x.bytesToHost;
        e["bytes_to_device"] = x.bytesToDevice;
        e["sub_batch"] = x.subBatch;
        if (x.chunks > 1)
          e["chunks"] = x.chunks;
      } else {
        e["reason"] = x.reason;
      }
      cells.push_back(std::move(e));
    }
  j["cells"] = std::move(cells);
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

} // namespace memfit
