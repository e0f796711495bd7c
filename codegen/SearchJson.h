//===- SearchJson.h - The chunk search's records in JSON --------*- C++ -*-===//
//
// One writer of the chunk counts the search planned and those it ruled out
// by bound, which plan.json's summary and `plan --json` both carry
// (ReportSummary's chunksTried and chunksPruned).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_SEARCHJSON_H
#define MEMFIT_CODEGEN_SEARCHJSON_H

#include "codegen/PlanReport.h"

#include <utility>
#include <vector>

namespace memfit {

/// Sets `chunks_tried` ({chunks, planned_seconds} each) and
/// `chunks_pruned` ({chunks, bound_seconds} each) in `j`, each only where
/// it lists something; `Json` is nlohmann's json or ordered_json.
template <class Json> void chunkRecordsJson(Json &j, const ReportSummary &s) {
  auto list = [&](const char *key, const char *seconds,
                  const std::vector<std::pair<int64_t, double>> &counts) {
    if (counts.empty())
      return;
    Json a = Json::array();
    for (auto [k, t] : counts)
      a.push_back({{"chunks", k}, {seconds, t}});
    j[key] = std::move(a);
  };
  list("chunks_tried", "planned_seconds", s.chunksTried);
  list("chunks_pruned", "bound_seconds", s.chunksPruned);
}

} // namespace memfit

#endif
