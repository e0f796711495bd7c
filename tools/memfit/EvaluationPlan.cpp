//===- EvaluationPlan.cpp - The evaluation program beside the training one ===//
//
// Every compiled trainer can validate: the model's evaluation graph is
// built from the session's graph and configuration and planned in the
// training plan's arena (passes/search/Evaluation.h). Where that cannot be
// done, the compile still succeeds and the trainer says why when asked to
// validate.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/CostModel.h"
#include "compiler/support/Diagnostics.h"
#include "passes/search/Evaluation.h"
#include "tools/memfit/Planning.h"

#include "llvm/Support/FormatVariadic.h"

namespace memfit::tool {

void planEvaluationFor(PlanningSession &s, const PlanOutcome &train,
                       Progress &progress) {
  s.evalOutcome.reset();
  s.evalWhy.clear();
  const TaskGraph &trained = train.scheduledGraph(s.tg);
  TrainingConfig tc = s.config;
  tc.evaluation = true;
  auto tg = buildTaskGraph(s.graph, tc);
  if (!tg) {
    s.evalWhy = llvm::toString(tg.takeError());
    return;
  }
  s.evalTg = std::move(*tg);
  s.evalTg.graph = &s.graph;
  s.evalTables.clear();
  CostTableFn tables = [&s](int64_t b) -> const CostTable & {
    auto it = s.evalTables.find(b);
    if (it == s.evalTables.end())
      it = s.evalTables.emplace(b, buildCostTable(*s.costs, s.evalTg, b)).first;
    return it->second;
  };
  auto req = planRequest(s);
  if (!req) {
    s.evalWhy = llvm::toString(req.takeError());
    return;
  }
  progress.start("planning the evaluation program",
                 s.evalTg.tasks.size() > kLargeTaskCount);
  auto out = planEvaluation(s.evalTg, trained, train, tables, *req);
  progress.done();
  if (!out) {
    s.evalWhy = "no evaluation plan: " + llvm::toString(out.takeError());
    return;
  }
  s.evalOutcome = std::move(*out);
}

} // namespace memfit::tool
