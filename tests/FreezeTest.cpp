//===- FreezeTest.cpp - Frozen weights in the TDFG ------------------------===//
#include "compiler/autodiff/Freeze.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Verify.h"
#include "tests/GraphLiteral.h"
#include "tests/PlanTestUtil.h"

#include <catch2/catch.hpp>

#include <set>

using namespace memfit;
using memfit::test::GraphLiteral;
using memfit::test::names;

namespace {

std::set<std::string> taskNames(const TaskGraph &tg) {
  std::set<std::string> out;
  for (const Task &t : tg.tasks)
    out.insert(t.name);
  return out;
}

/// Blocks of kind `k` that belong to weight `w`.
int countBlocks(const TaskGraph &tg, BlockKind k, ValueId w) {
  int n = 0;
  for (const Block &b : tg.blocks)
    n += b.kind == k && b.value == w;
  return n;
}

/// x[N,4] -> fc1 (W1[8,4], b1[8]) -> relu1 -> fc2 (W2[8,8], b2[8]) -> relu2
/// -> fc3 (W3[3,8], b3[3]).
struct Mlp3 {
  GraphLiteral L{2};
  ValueId W1, b1, W2, b2, W3, b3;
  Mlp3() {
    ValueId x = L.input("x", {4});
    OpAttrs gemm;
    gemm.transB = true;
    W1 = L.weight("W1", {8, 4});
    b1 = L.weight("b1", {8});
    W2 = L.weight("W2", {8, 8});
    b2 = L.weight("b2", {8});
    W3 = L.weight("W3", {3, 8});
    b3 = L.weight("b3", {3});
    ValueId h = L.op(OpKind::Gemm, "fc1", {x, W1, b1}, {8}, gemm);
    h = L.op(OpKind::Relu, "relu1", {h}, {8});
    h = L.op(OpKind::Gemm, "fc2", {h, W2, b2}, {8}, gemm);
    h = L.op(OpKind::Relu, "relu2", {h}, {8});
    L.op(OpKind::Gemm, "fc3", {h, W3, b3}, {3}, gemm);
  }
};

TaskGraph build(const Graph &g, TrainingConfig cfg) {
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}

FreezeSpec spec(std::string freeze, std::string trainOnly = "") {
  FreezeSpec s;
  s.freeze = std::move(freeze);
  s.trainOnly = std::move(trainOnly);
  return s;
}

std::string errorOf(const Graph &g, FreezeSpec freeze) {
  TrainingConfig cfg;
  cfg.freeze = std::move(freeze);
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE_FALSE(static_cast<bool>(tg));
  return llvm::toString(tg.takeError());
}

} // namespace

TEST_CASE("a frozen first layer: no gradient, state, update or backward "
          "below the first trained weight",
          "[freeze]") {
  // x[N,4] -> fc1 (W1[8,4], b1[8]) -> relu -> fc2 (W2[3,8], b2[3])
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId W1 = L.weight("W1", {8, 4}), b1 = L.weight("b1", {8});
  ValueId h = L.op(OpKind::Gemm, "fc1", {x, W1, b1}, {8}, gemm);
  ValueId r = L.op(OpKind::Relu, "relu", {h}, {8});
  L.op(OpKind::Gemm, "fc2", {r, L.weight("W2", {3, 8}), L.weight("b2", {3})},
       {3}, gemm);
  for (OptimizerKind opt : {OptimizerKind::SGD, OptimizerKind::AdamW}) {
    TrainingConfig all;
    all.optimizer = opt;
    TrainingConfig cfg = all;
    cfg.freeze.freeze = "1$";
    TaskGraph full = build(L.g, all), tg = build(L.g, cfg);

    // Nothing needs a gradient below fc2's weights: no BP-data at all
    // (fc2's data input comes from frozen weights and the data batch).
    CHECK(taskNames(tg) ==
          std::set<std::string>{"FP(fc1)", "FP(relu)", "FP(fc2)", "loss(loss)",
                                "BP-weight(fc2)", "update(W2)", "update(b2)"});
    CHECK(tg.gradBlock[h] < 0);
    CHECK(tg.gradBlock[r] < 0);
    for (ValueId w : {W1, b1}) {
      CHECK(tg.isFrozen(w));
      CHECK(countBlocks(tg, BlockKind::Weight, w) == 1);
      CHECK(countBlocks(tg, BlockKind::WeightGrad, w) == 0);
      CHECK(countBlocks(tg, BlockKind::Momentum, w) == 0);
      CHECK(countBlocks(tg, BlockKind::SecondMoment, w) == 0);
      CHECK(tg.gradBlock[w] < 0);
    }
    // The weight side loses exactly the frozen weights' gradients and
    // optimizer state: W1 and b1 are 40 floats, each with dW and one (SGD
    // momentum) or two (Adam moments) state buffers.
    int64_t frozenBytes = 40 * 4;
    int perWeight = opt == OptimizerKind::SGD ? 2 : 3;
    CHECK(full.weightSideBytes() - tg.weightSideBytes() ==
          perWeight * frozenBytes);
    CHECK(tg.weightSideBytes() == frozenBytes + (1 + perWeight) * 27 * 4 + 4);
    FrozenCount c = countFrozen(tg);
    CHECK(c.frozen == 2);
    CHECK(c.frozenBytes == frozenBytes);
    CHECK(c.trained == 2);
    CHECK(c.trainedBytes == 27 * 4);
    CHECK(countFrozen(full).frozen == 0);
    CHECK(full.frozen.empty());
  }
}

TEST_CASE("a frozen middle layer: the data gradient runs through it to a "
          "trained layer below",
          "[freeze]") {
  Mlp3 m;
  TrainingConfig cfg;
  cfg.freeze.freeze = "^[Wb]2$";
  TaskGraph tg = build(m.L.g, cfg);
  CHECK(taskNames(tg) == std::set<std::string>{
                             "FP(fc1)", "FP(relu1)", "FP(fc2)", "FP(relu2)",
                             "FP(fc3)", "loss(loss)", "BP-data(fc3)",
                             "BP-weight(fc3)", "BP-data(relu2)", "BP-data(fc2)",
                             "BP-data(relu1)", "BP-weight(fc1)", "update(W1)",
                             "update(b1)", "update(W3)", "update(b3)"});
  // fc2's BP-data reads its frozen weight and writes the gradient fc1's
  // BP-weight needs.
  TaskId bd = memfit::test::findTask(tg, "BP-data(fc2)");
  CHECK(names(tg, tg.tasks[bd].reads) ==
        std::set<std::string>{"W2", "d(fc2_out)"});
  CHECK(names(tg, tg.tasks[bd].writes) ==
        std::set<std::string>{"d(relu1_out)"});
  CHECK(countBlocks(tg, BlockKind::WeightGrad, m.W2) == 0);
  CHECK(countBlocks(tg, BlockKind::Momentum, m.b2) == 0);
  CHECK_FALSE(verifyTaskGraph(tg).has_value());
}

TEST_CASE("--train-only chooses the trained set, --freeze takes from it",
          "[freeze]") {
  Mlp3 m;
  TrainingConfig cfg;
  cfg.freeze.trainOnly = "^[Wb]3$";
  TaskGraph tg = build(m.L.g, cfg);
  for (ValueId w : {m.W1, m.b1, m.W2, m.b2})
    CHECK(tg.isFrozen(w));
  CHECK_FALSE(tg.isFrozen(m.W3));
  // Only the head trains: nothing below it runs backward.
  CHECK(taskNames(tg) ==
        std::set<std::string>{"FP(fc1)", "FP(relu1)", "FP(fc2)", "FP(relu2)",
                              "FP(fc3)", "loss(loss)", "BP-weight(fc3)",
                              "update(W3)", "update(b3)"});
  cfg.freeze.trainOnly = "[Wb][13]";
  cfg.freeze.freeze = "^b";
  tg = build(m.L.g, cfg);
  for (ValueId w : {m.b1, m.W2, m.b2, m.b3})
    CHECK(tg.isFrozen(w));
  CHECK_FALSE(tg.isFrozen(m.W1));
  CHECK_FALSE(tg.isFrozen(m.W3));
  CHECK(countFrozen(tg).trained == 2);
}

TEST_CASE("a 16-bit working copy of a frozen weight is made once, never "
          "refreshed",
          "[freeze]") {
  Mlp3 m;
  TrainingConfig cfg;
  cfg.precision = Precision::BF16;
  cfg.freeze.freeze = "^[Wb]2$";
  TaskGraph tg = build(m.L.g, cfg);
  BlockId copy = tg.weightCopyBlock[m.W2];
  REQUIRE(copy >= 0);
  // Read by fc2's forward and BP-data, written by no task.
  CHECK(tg.blocks[copy].writers.empty());
  CHECK(tg.blocks[copy].readers.size() == 2);
  // A trained weight's copy is refreshed by its update.
  BlockId trained = tg.weightCopyBlock[m.W1];
  REQUIRE(trained >= 0);
  REQUIRE(tg.blocks[trained].writers.size() == 1);
  CHECK(tg.tasks[tg.blocks[trained].writers[0]].name == "update(W1)");
}

TEST_CASE("freeze patterns: bad, matching nothing, freezing everything",
          "[freeze]") {
  Mlp3 m;
  CHECK_THAT(errorOf(m.L.g, spec("fc[(")),
             Catch::Contains("invalid --freeze 'fc[('"));
  CHECK_THAT(errorOf(m.L.g, spec("", "(lora")),
             Catch::Contains("invalid --train-only '(lora'"));
  CHECK_THAT(errorOf(m.L.g, spec("base")),
             Catch::Contains("--freeze 'base' matches no trainable weight") &&
                 Catch::Contains("'W1', 'b1', 'W2', 'b2', ..."));
  CHECK_THAT(errorOf(m.L.g, spec("", "lora")),
             Catch::Contains("--train-only 'lora' matches no trainable"));
  CHECK_THAT(errorOf(m.L.g, spec("[Wb]")),
             Catch::Contains("--freeze '[Wb]' leaves no weight to train: "
                             "all 6 trainable weights"));
  CHECK_THAT(errorOf(m.L.g, spec("3", "3")),
             Catch::Contains("--train-only '3' with --freeze '3' leaves no "
                             "weight to train"));
}

TEST_CASE("state is never a candidate: running statistics stay as they are",
          "[freeze]") {
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId W = L.weight("fc.weight", {3, 4});
  ValueId state = L.weight("fc.running", {3}, /*trainable=*/false);
  ValueId h = L.op(OpKind::Gemm, "fc", {x, W}, {3}, gemm);
  L.op(OpKind::Add, "add", {h, state}, {3});
  // The only match is state: no trainable weight matches.
  auto none = frozenWeights(L.g, spec("running"));
  REQUIRE_FALSE(static_cast<bool>(none));
  CHECK_THAT(llvm::toString(none.takeError()),
             Catch::Contains("matches no trainable weight"));
  auto frozen = frozenWeights(L.g, spec("", "weight"));
  REQUIRE(static_cast<bool>(frozen));
  CHECK_FALSE((*frozen)[state]);
  CHECK_FALSE((*frozen)[W]);
}

TEST_CASE("a frozen part runs no backward, so nothing there is recomputable",
          "[freeze][recompute]") {
  // conv -> bn -> relu -> gap -> flat -> fc. A recompute reads its task's
  // operands again: bn's saved statistics and its input live on only while
  // a backward task reads them, which a frozen part never runs.
  GraphLiteral L(2);
  ValueId x = L.input("x", {3, 4, 4});
  OpAttrs conv;
  conv.kernel = {1, 1};
  conv.pads = {0, 0, 0, 0};
  ValueId c = L.op(OpKind::Conv, "conv", {x, L.weight("k", {6, 3, 1, 1})},
                   {6, 4, 4}, conv);
  ValueId bn = L.op(OpKind::BatchNorm, "bn",
                    {c, L.weight("gamma", {6}), L.weight("beta", {6}),
                     L.weight("mean", {6}, false), L.weight("var", {6}, false)},
                    {6, 4, 4});
  ValueId r = L.op(OpKind::Relu, "relu", {bn}, {6, 4, 4});
  ValueId p = L.op(OpKind::GlobalAveragePool, "gap", {r}, {6, 1, 1});
  ValueId f = L.op(OpKind::Flatten, "flat", {p}, {6});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {f, L.weight("fc.w", {3, 6})}, {3}, gemm);
  auto recomputable = [&](const TaskGraph &tg) {
    std::vector<bool> r = recomputableBlocks(tg);
    std::set<std::string> out;
    for (BlockId b = 0; b < (BlockId)r.size(); ++b)
      if (r[b])
        out.insert(tg.blocks[b].name);
    return out;
  };
  TrainingConfig all;
  all.loss = LossKind::MSE;
  // Trained throughout, every forward output but the views regenerates.
  CHECK(recomputable(build(L.g, all)) ==
        std::set<std::string>{"conv_out", "bn_out", "relu_out", "gap_out",
                              "fc_out"});
  TrainingConfig head = all;
  head.freeze = spec("", "fc");
  // Only fc trains: bn's statistics and conv's output die with the
  // forward pass, so bn's output cannot be made again, nor relu's from it,
  // nor gap's from relu's. conv reads only the batch and its weight; fc's
  // input stays for fc's weight gradient.
  CHECK(recomputable(build(L.g, head)) ==
        std::set<std::string>{"conv_out", "fc_out"});
}

TEST_CASE("a network with frozen BatchNorm layers plans at every budget",
          "[freeze][pipeline]") {
  // ResNet-18 fine-tuning its classifier only: the memfit policy's drops
  // once asked to recompute a frozen BatchNorm whose statistics were gone.
  TrainingConfig cfg;
  cfg.freeze = spec("", "^fc\\.");
  test::Planned p("resnet18", 4, "k40m", cfg);
  for (double fraction : {1.0, 0.7, 0.5, 0.35}) {
    INFO("budget " << fraction);
    auto out = p.plan(fraction, /*statistics=*/false);
    if (!out) {
      // Below the lower bound is a user's error, never an internal one.
      std::string why = llvm::toString(out.takeError());
      CHECK_THAT(why, Catch::Contains("lower bound"));
      continue;
    }
    llvm::Error err = verifyPlan(out->scheduledGraph(p.tg), out->plan);
    CHECK_FALSE(static_cast<bool>(err));
    llvm::consumeError(std::move(err));
  }
}
