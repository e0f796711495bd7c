//===- EvaluationTest.cpp - The evaluation program's plan -----------------===//
#include "PlanTestUtil.h"

#include "codegen/Emit.h"
#include "compiler/ir/OffloadSlots.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/Schedule.h"
#include "passes/search/Evaluation.h"

#include <algorithm>

using namespace memfit;

namespace {

/// The evaluation graph of `p`'s model with its own cost tables.
struct EvalGraph {
  TaskGraph tg;
  std::map<int64_t, CostTable> tables;
  const CostModel &model;
  EvalGraph(test::Planned &p, TrainingConfig cfg) : model(*p.model) {
    cfg.evaluation = true;
    auto t = buildTaskGraph(p.graph, cfg);
    REQUIRE(static_cast<bool>(t));
    tg = std::move(*t);
  }
  CostTableFn fn() {
    return [this](int64_t b) -> const CostTable & {
      auto it = tables.find(b);
      if (it == tables.end())
        it = tables.emplace(b, buildCostTable(model, tg, b)).first;
      return it->second;
    };
  }
};

int64_t count(const Plan &plan, InstrKind k) {
  return std::count_if(plan.round.begin(), plan.round.end(),
                       [&](const Instr &in) { return in.kind == k; });
}

} // namespace

TEST_CASE("the evaluation program plans inside the training arena",
          "[evaluation]") {
  test::Planned p("tiny-residual", 32);
  auto train = p.plan(0.5, false);
  REQUIRE(static_cast<bool>(train));
  EvalGraph e(p, {});
  auto out = planEvaluation(e.tg, p.tg, *train, e.fn(), PlanRequest{});
  REQUIRE(static_cast<bool>(out));
  const Plan &ev = out->plan;
  CHECK(ev.arenaBytes <= train->plan.arenaBytes);
  CHECK(ev.batch == 32);
  CHECK(ev.update.empty());
  // Forward only: nothing is offloaded, and the copy-ins are the inputs
  // and labels of each sub-batch.
  CHECK(offloadSlotBlocks(e.tg, ev).empty());
  CHECK(count(ev, InstrKind::CopyOut) == 0);
  CHECK(count(ev, InstrKind::CopyIn) == 2);
  // Its resident blocks are the weights (and the loss): the budget it
  // planned under leaves the training arena to it.
  CHECK(ev.residentBytes == e.tg.weightSideBytes());
  CHECK(ev.residentBytes < train->plan.residentBytes);
  // The evaluation plan is emitted as a second round of the trainer.
  EmitOptions eo;
  eo.evaluation = {&e.tg, &ev, ""};
  auto files = emitTrainer(train->scheduledGraph(p.tg), train->plan, eo);
  REQUIRE(static_cast<bool>(files));
  std::string main, eval;
  for (const GeneratedFile &f : *files) {
    if (f.path == "src/main.cpp")
      main = f.contents;
    if (f.path == "src/eval_round_0.cpp")
      eval = f.contents;
  }
  CHECK_THAT(main, Catch::Contains(".evalRound = memfit_eval_round"));
  CHECK_THAT(main,
             Catch::Contains(".evalSubBatch = " + std::to_string(ev.subBatch)));
  CHECK_THAT(eval, Catch::Contains("x.evalLoss("));
  CHECK_THAT(eval, !Catch::Contains("x.loss("));
}

TEST_CASE("a trainer without an evaluation plan says why", "[evaluation]") {
  test::Planned p("mlp", 4);
  auto train = p.plan(1.0, false);
  REQUIRE(static_cast<bool>(train));
  EmitOptions eo;
  eo.evaluation.why = "no evaluation plan: because";
  auto files = emitTrainer(p.tg, train->plan, eo);
  REQUIRE(static_cast<bool>(files));
  for (const GeneratedFile &f : *files) {
    CHECK(f.path.find("eval") == std::string::npos);
    if (f.path == "src/main.cpp")
      CHECK_THAT(f.contents,
                 Catch::Contains(".evalWhy = \"no evaluation plan: because\""));
  }
}

TEST_CASE("evaluation keeps the training plan's homes and copies homed "
          "weights in",
          "[evaluation]") {
  TrainingConfig cfg;
  cfg.optimizer = OptimizerKind::AdamW;
  test::Planned p("gpt2-tiny", 4, "h100-sxm", cfg);
  PlanRequest req;
  req.batch = p.graph.batch;
  req.budget = p.tg.weightSideBytes() / 2;
  req.hostBudget = int64_t(1) << 30;
  auto train = planTraining(
      p.tg, [&](int64_t b) -> const CostTable & { return p.table(b); }, req);
  REQUIRE(static_cast<bool>(train));
  REQUIRE(train->homed);
  const TaskGraph &trained = train->scheduledGraph(p.tg);
  EvalGraph e(p, cfg);
  auto out = planEvaluation(e.tg, trained, *train, e.fn(), req);
  REQUIRE(static_cast<bool>(out));
  int64_t homed = 0;
  for (BlockId b = 0; b < (BlockId)e.tg.blocks.size(); ++b) {
    const Block &blk = e.tg.blocks[b];
    if (blk.kind != BlockKind::Weight)
      continue;
    INFO(blk.name);
    CHECK(e.tg.homeOf(b) == trained.homeOf(trained.valueBlock[blk.value]));
    if (e.tg.homeOf(b) != Tier::Host)
      continue;
    ++homed;
    // Read in the arena where the plan copied it.
    bool copied = std::any_of(
        out->plan.round.begin(), out->plan.round.end(), [&](const Instr &in) {
          return in.kind == InstrKind::CopyIn &&
                 out->plan.residencies[in.residency].block == b;
        });
    CHECK(copied);
  }
  CHECK(homed > 0);
  CHECK(out->plan.arenaBytes <= train->plan.arenaBytes);
}

TEST_CASE("an evaluation round drops nothing to recompute it for the loss",
          "[evaluation]") {
  // The loss is the evaluation round's last use of its logits: dropping
  // them after the forward pass would re-run the network (the blocks
  // before are released as their last reader finishes) to read them once.
  test::Planned p("tiny-residual", 8);
  EvalGraph e(p, {});
  ScheduleOptions so{
      .policy = Policy::Memfit, .budget = int64_t(1) << 30, .batch = 8};
  so.dropAfterForward.assign(e.tg.blocks.size(), true);
  auto fn = e.fn();
  auto plan = schedule(e.tg, fn(8), builtOrder(e.tg), so);
  REQUIRE(static_cast<bool>(plan));
  CHECK(!verifyPlan(e.tg, *plan));
  CHECK(plan->summary.recomputes == 0);
  CHECK(std::none_of(plan->round.begin(), plan->round.end(),
                     [](const Instr &in) { return in.recompute; }));
}
