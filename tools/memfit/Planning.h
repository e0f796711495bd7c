//===- Planning.h - What plan, compile and compare share --------*- C++ -*-===//
//
// The model, batch, budget, device and policy flags that every planning
// command takes, and the one function that turns them into a verified plan:
// import -> task graph -> cost model -> planner pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_PLANNING_H
#define MEMFIT_TOOLS_PLANNING_H

#include "compiler/CostModel.h"
#include "compiler/Graph.h"
#include "compiler/TaskGraph.h"
#include "passes/Pipeline.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>

namespace memfit::tool {

/// The planning subcommands. Function-local statics, so options in other
/// files can name them whatever the order of static initialisation.
llvm::cl::SubCommand &planCommand();
llvm::cl::SubCommand &compileCommand();
llvm::cl::SubCommand &compareCommand();

/// Everything a planning command works on. Owns the graph the task graph
/// points into, so it is not movable once built.
struct PlanningSession {
  std::string modelPath;
  Graph graph;
  TaskGraph tg;
  std::unique_ptr<CostModel> costs;
  std::map<int64_t, CostTable> tables;

  PlanningSession() = default;
  PlanningSession(const PlanningSession &) = delete;
  PlanningSession &operator=(const PlanningSession &) = delete;

  const CostTable &tableAt(int64_t b);
  CostTableFn tableFn() {
    return [this](int64_t b) -> const CostTable & { return tableAt(b); };
  }
};

/// Imports the model and builds the task graph and the cost model from the
/// shared flags.
llvm::Error openSession(PlanningSession &s, bool keepWeightData);

/// The request the shared flags describe (policy overridable).
llvm::Expected<PlanRequest> planRequest(const PlanningSession &s);

/// Prints the human summary of an outcome.
void printSummary(llvm::raw_ostream &os, const PlanningSession &s,
                  const PlanOutcome &o);
/// The summary as JSON (the fields of `memfit plan --json`).
std::string summaryJson(const PlanningSession &s, const PlanOutcome &o);

} // namespace memfit::tool

#endif
