//===- PlanJson.h - plan.json, the plan for people and tools ----*- C++ -*-===//
//
// Writes a Plan as versioned JSON (schema_version 1, docs/report-format.md):
// the run's parameters and summary, every task with its ONNX node, algorithm,
// stream and predicted start and end, every block with its size, decision
// and residencies (offsets), and the event count. Deterministic: keys in a
// fixed order, numbers printed the same way every time.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_PLANJSON_H
#define MEMFIT_CODEGEN_PLANJSON_H

#include "compiler/Plan.h"
#include "passes/Simulate.h"

#include <string>

namespace memfit {

struct PlanContext {
  std::string modelFile, device;
  int64_t lowerBoundBytes = 0, idealPeakBytes = 0;
  double idealSeconds = 0;
};

std::string planToJson(const TaskGraph &tg, const Plan &plan,
                       const Simulation &sim, const PlanContext &ctx);

} // namespace memfit

#endif
