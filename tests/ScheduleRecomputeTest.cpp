//===- ScheduleRecomputeTest.cpp - Recompute chains in the scheduler ------===//
//
// What a recompute brings back, what it lets go, and what its inputs cost:
// feature maps read by several dropped concatenations run once, and host
// copies a recompute reads are prefetched instead of fetched on demand.
//
//===----------------------------------------------------------------------===//
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/schedule/Schedule.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace memfit;
using memfit::test::conv3x3;
using memfit::test::GraphLiteral;
using memfit::test::perSampleTable;

namespace {

/// Copies at 16 KB per ms.
constexpr double kCopyRate = 16e6;

BlockId blockNamed(const TaskGraph &tg, const std::string &name) {
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.blocks[b].name == name)
      return b;
  FAIL("no block " << name);
  return -1;
}

int recomputeRuns(const TaskGraph &tg, const Plan &p, const std::string &task) {
  int n = 0;
  for (const Instr &in : p.round)
    if (in.kind == InstrKind::Run && in.recompute &&
        tg.tasks[in.task].name == task)
      ++n;
  return n;
}

/// x -> conv0 -> relu0 -> conv1 -> relu1 -> gap -> fc at batch 4, every
/// feature map 4 x 8 x 8 (1 KiB per sample).
Graph convReluChain() {
  GraphLiteral L(4);
  ValueId x = L.input("x", {4, 8, 8});
  for (int i = 0; i < 2; ++i) {
    std::string n = std::to_string(i);
    x = L.op(OpKind::Conv, "conv" + n, {x, L.weight("k" + n, {4, 4, 3, 3})},
             {4, 8, 8}, conv3x3());
    x = L.op(OpKind::Relu, "relu" + n, {x}, {4, 8, 8});
  }
  L.head4(x);
  return std::move(L.g);
}

} // namespace

TEST_CASE("a feature map two dropped concatenations read is recomputed once",
          "[schedule][recompute]") {
  // A DenseNet's pattern: three feature maps of x, two concatenations of
  // them (both dropped, both read by the backward pass), summed.
  GraphLiteral L(2);
  ValueId x = L.input("x", {4, 8, 8});
  ValueId f[3];
  for (int i = 0; i < 3; ++i) {
    std::string n = std::to_string(i + 1);
    f[i] = L.op(OpKind::Conv, "conv" + n, {x, L.weight("k" + n, {4, 4, 3, 3})},
                {4, 8, 8}, conv3x3());
  }
  ValueId cat1 = L.op(OpKind::Concat, "cat1", {f[0], f[1]}, {8, 8, 8});
  ValueId cat2 = L.op(OpKind::Concat, "cat2", {f[0], f[1], f[2]}, {12, 8, 8});
  ValueId ga = L.op(OpKind::Conv, "convA", {cat1, L.weight("kA", {4, 8, 3, 3})},
                    {4, 8, 8}, conv3x3());
  ValueId gb =
      L.op(OpKind::Conv, "convB", {cat2, L.weight("kB", {4, 12, 3, 3})},
           {4, 8, 8}, conv3x3());
  ValueId s = L.op(OpKind::Add, "sum", {ga, gb}, {4, 8, 8});
  s = L.op(OpKind::GlobalAveragePool, "gap", {s}, {4, 1, 1});
  s = L.op(OpKind::Flatten, "flat", {s}, {4});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {s, L.weight("W", {10, 4})}, {10}, gemm);
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));

  std::vector<bool> drop(tg->blocks.size(), false);
  drop[blockNamed(*tg, "cat1_out")] = drop[blockNamed(*tg, "cat2_out")] = true;
  CostTable c = perSampleTable(*tg, 2, kCopyRate);
  for (const PolicyDef &def : policies()) {
    // vDNN moves data by its fixed per-layer rule and recomputes nothing;
    // every other policy honours a drop set it is given.
    if (def.rules.layerOffload != sched::PolicyRules::LayerOffload::None)
      continue;
    INFO(def.name);
    ScheduleOptions so{
        .policy = def.policy, .budget = int64_t(1) << 30, .batch = 2};
    so.dropAfterForward = drop;
    auto plan = schedule(*tg, c, builtOrder(*tg), so);
    REQUIRE(static_cast<bool>(plan));
    CHECK(!verifyPlan(*tg, *plan));
    // Recomputing cat2 brings conv1's and conv2's outputs back; cat1, still
    // dropped and still needed, keeps them: each runs once more, not twice.
    CHECK(recomputeRuns(*tg, *plan, "FP(cat2)") == 1);
    CHECK(recomputeRuns(*tg, *plan, "FP(cat1)") == 1);
    for (const char *t : {"FP(conv1)", "FP(conv2)", "FP(conv3)"})
      CHECK(recomputeRuns(*tg, *plan, t) == 1);
  }
}

TEST_CASE("a recompute chain through frozen branches runs each task once",
          "[schedule][recompute]") {
  // Eight frozen modules x -> (convA, convB) -> add, then a trained conv.
  // The trained conv's backward pass reads its dropped input, whose chain
  // back through the frozen modules (blocks no backward pass reads) re-runs
  // both branches of each: the input they share stays for the second
  // branch. Releasing it after the first re-ran module 0 2^8 times.
  constexpr int kModules = 8;
  GraphLiteral L(2);
  ValueId x = L.input("x", {4, 4, 4});
  for (int i = 0; i < kModules; ++i) {
    std::string n = std::to_string(i);
    ValueId a =
        L.op(OpKind::Conv, "convA" + n, {x, L.weight("fa" + n, {4, 4, 3, 3})},
             {4, 4, 4}, conv3x3());
    ValueId b =
        L.op(OpKind::Conv, "convB" + n, {x, L.weight("fb" + n, {4, 4, 3, 3})},
             {4, 4, 4}, conv3x3());
    x = L.op(OpKind::Add, "add" + n, {a, b}, {4, 4, 4});
  }
  ValueId top = L.op(OpKind::Conv, "top", {x, L.weight("kt", {4, 4, 3, 3})},
                     {4, 4, 4}, conv3x3());
  L.head4(top);
  TrainingConfig cfg;
  cfg.freeze.trainOnly = "^(kt|W)$";
  auto tg = buildTaskGraph(L.g, cfg);
  REQUIRE(static_cast<bool>(tg));

  ScheduleOptions so{.policy = Policy::Memfit,
                     .budget = int64_t(1) << 30,
                     .batch = 2,
                     .inPlace = false};
  so.dropAfterForward.assign(tg->blocks.size(), false);
  so.dropAfterForward[blockNamed(*tg, "add7_out")] = true;
  CostTable c = perSampleTable(*tg, 2, kCopyRate);
  auto plan = schedule(*tg, c, builtOrder(*tg), so);
  REQUIRE(static_cast<bool>(plan));
  CHECK(!verifyPlan(*tg, *plan));
  REQUIRE(recomputeRuns(*tg, *plan, "FP(add7)") == 1);
  for (int i = 0; i < kModules; ++i) {
    std::string n = std::to_string(i);
    INFO("module " << n);
    CHECK(recomputeRuns(*tg, *plan, "FP(add" + n + ")") == 1);
    CHECK(recomputeRuns(*tg, *plan, "FP(convA" + n + ")") == 1);
    CHECK(recomputeRuns(*tg, *plan, "FP(convB" + n + ")") == 1);
  }
}

TEST_CASE("a host copy a recompute reads is prefetched ahead of it",
          "[schedule][recompute]") {
  // x -> conv0 -> relu0 -> conv1 -> relu1 -> gap -> fc; conv0's output is
  // copied out after the forward pass and relu0's output dropped: the
  // backward pass of conv1 recomputes relu0 from the host copy.
  auto tg = buildTaskGraph(convReluChain());
  REQUIRE(static_cast<bool>(tg));

  ScheduleOptions so{.policy = Policy::Optimal,
                     .budget = int64_t(1) << 30,
                     .batch = 4,
                     .inPlace = false,
                     .lookPastIdle = true};
  so.dropAfterForward.assign(tg->blocks.size(), false);
  so.offloadAfterForward.assign(tg->blocks.size(), false);
  BlockId conv0 = blockNamed(*tg, "conv0_out");
  so.dropAfterForward[blockNamed(*tg, "relu0_out")] = true;
  so.offloadAfterForward[conv0] = true;
  CostTable c = perSampleTable(*tg, 4, kCopyRate);
  // Copies of 4 KB take 8 ms, two tasks' time: a copy issued on demand
  // would stall the recompute.
  c.d2hBytesPerSecond = c.h2dBytesPerSecond = 0.5e6;
  auto plan = schedule(*tg, c, builtOrder(*tg), so);
  REQUIRE(static_cast<bool>(plan));
  CHECK(!verifyPlan(*tg, *plan));
  // Copied back in once, issued while earlier backward tasks still run
  // (Eq. 4's look-ahead), not on demand just before the recompute.
  int copiesIn = 0;
  size_t copy = 0, rerun = 0;
  for (size_t i = 0; i < plan->round.size(); ++i) {
    const Instr &in = plan->round[i];
    if (in.kind == InstrKind::CopyIn &&
        plan->residencies[in.residency].block == conv0) {
      ++copiesIn;
      copy = i;
    }
    if (in.kind == InstrKind::Run && in.recompute &&
        tg->tasks[in.task].name == "FP(relu0)")
      rerun = i;
  }
  CHECK(copiesIn == 1);
  REQUIRE(rerun > copy);
  int between = 0;
  for (size_t i = copy + 1; i < rerun; ++i)
    between += plan->round[i].kind == InstrKind::Run;
  CHECK(between > 0);
}

TEST_CASE("a re-run writes over an input nothing reads again",
          "[schedule][recompute]") {
  // x -> conv0 -> relu0 -> conv1 -> relu1 -> gap -> fc, in place: relu0
  // runs over conv0's output, which nothing else reads. With relu0's output
  // dropped, the backward pass runs conv0 and relu0 again, and the re-run
  // of relu0 takes conv0's new output's bytes as the round's run did,
  // instead of fresh bytes (a ResNet stem's re-run evicted what its
  // backward pass read next).
  auto tg = buildTaskGraph(convReluChain());
  REQUIRE(static_cast<bool>(tg));

  ScheduleOptions so{
      .policy = Policy::Optimal, .budget = int64_t(1) << 30, .batch = 4};
  so.dropAfterForward.assign(tg->blocks.size(), false);
  so.dropAfterForward[blockNamed(*tg, "relu0_out")] = true;
  CostTable c = perSampleTable(*tg, 4, kCopyRate);
  auto plan = schedule(*tg, c, builtOrder(*tg), so);
  REQUIRE(static_cast<bool>(plan));
  CHECK(!verifyPlan(*tg, *plan));
  CHECK(recomputeRuns(*tg, *plan, "FP(conv0)") == 1);
  CHECK(recomputeRuns(*tg, *plan, "FP(relu0)") == 1);
  int checked = 0;
  for (const Instr &in : plan->round) {
    if (in.kind != InstrKind::Run || !in.recompute)
      continue;
    const Task &t = tg->tasks[in.task];
    // Operands: the reads, then the writes.
    const Residency &read = plan->residencies[in.operands[0]];
    const Residency &wrote = plan->residencies[in.operands[t.reads.size()]];
    if (t.name == "FP(relu0)") {
      CHECK(wrote.offset == read.offset);
      ++checked;
    }
    if (t.name == "FP(conv0)") {
      CHECK(wrote.offset != read.offset); // a convolution never in place
      ++checked;
    }
  }
  CHECK(checked == 2);
}
