//===- AccuracyJson.h - The summary's accuracy in JSON ----------*- C++ -*-===//
//
// One writer and one reader of the `accuracy` object that plan.json and
// `plan --json` both carry (ReportSummary's accuracy fields).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_ACCURACYJSON_H
#define MEMFIT_CODEGEN_ACCURACYJSON_H

#include "codegen/PlanReport.h"

#include <nlohmann/json.hpp>

namespace memfit {

/// {device_class, precision, cases[, low, high, basis]}; null when the
/// planner said nothing (a plan.json written before it did).
nlohmann::json accuracyJson(const ReportSummary &s);
/// Reads it back into `s`; false with `why` set on a malformed object.
bool readAccuracyJson(const nlohmann::json &j, ReportSummary &s,
                      std::string &why);

} // namespace memfit

#endif
