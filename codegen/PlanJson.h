//===- PlanJson.h - plan.json, the plan for people and tools ----*- C++ -*-===//
//
// Writes a PlanReport as versioned JSON (schema_version 1,
// docs/report-format.md): the run's parameters and summary, every task with
// its ONNX node, algorithm, stream, predicted start and end and the stall
// before it, every transfer, every block with its size, decision and why,
// and its residencies (offsets and times). Deterministic: keys in a fixed
// order, numbers printed the same way every time.
//
// Reads it back for `memfit report`: a missing or unreadable file, text that
// is not JSON, another schema_version, or a field of the wrong type is an
// error naming the file and the field.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_PLANJSON_H
#define MEMFIT_CODEGEN_PLANJSON_H

#include "codegen/PlanReport.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace memfit {

std::string planToJson(const PlanReport &r);
std::string planToJson(const TaskGraph &tg, const Plan &plan,
                       const Simulation &sim, const PlanContext &ctx);

/// `fileName` only names the source in messages.
llvm::Expected<PlanReport> parsePlanJson(llvm::StringRef text,
                                         const std::string &fileName);
llvm::Expected<PlanReport> readPlanJson(const std::string &path);

} // namespace memfit

#endif
