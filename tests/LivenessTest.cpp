//===- LivenessTest.cpp - live intervals, peak and lower bound ------------===//
#include "passes/analysis/Liveness.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/MemoryLowerBound.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

using namespace memfit;
using memfit::test::GraphLiteral;

namespace {
// x[N,4] -> fc1 (W1[8,4], b1[8]) -> relu -> fc2 (W2[3,8], b2[3]), batch 2.
TaskGraph mlp(GraphLiteral &L) {
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId h = L.op(OpKind::Gemm, "fc1",
                   {x, L.weight("W1", {8, 4}), L.weight("b1", {8})}, {8}, gemm);
  ValueId r = L.op(OpKind::Relu, "relu", {h}, {8});
  L.op(OpKind::Gemm, "fc2", {r, L.weight("W2", {3, 8}), L.weight("b2", {3})},
       {3}, gemm);
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}
} // namespace

TEST_CASE("liveness of an mlp at batch 2", "[liveness]") {
  GraphLiteral L(2);
  TaskGraph tg = mlp(L);
  Liveness lv = computeLiveness(tg, builtOrder(tg), 2, /*inPlace=*/false);
  // Steps: 0 FP(fc1), 1 FP(relu), 2 FP(fc2), 3 loss, 4 BP-data(fc2),
  // 5 BP-weight(fc2), 6 BP-data(relu), 7 BP-weight(fc1), 8..11 updates.
  // Bytes at b=2: x 32, fc1_out 64, relu_out 64, fc2_out 24, labels 8,
  // d(fc2_out) 24, d(relu_out) 64, d(fc1_out) 64 (the loss is resident).
  std::vector<int64_t> expected{104, 168, 128, 152, 184, 184,
                                224, 96,  0,   0,   0,   0};
  CHECK(lv.liveBytes == expected);
  CHECK(lv.peakStep == 6);
  CHECK(tg.tasks[lv.order[lv.peakStep]].name == "BP-data(relu)");
  // Weight side: (32 + 8 + 24 + 3) floats, times W, dW and momentum, and
  // the 4-byte loss.
  CHECK(lv.weightSideBytes == 808);
  CHECK(lv.peakBytes == 224 + 808);
  // fc1's output dies after relu reads it: Relu backward reads Y, not X.
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.blocks[b].name == "fc1_out")
      CHECK(lv.end[b] == 1);

  // In place, FP(relu) writes relu_out over fc1_out and BP-data(relu)
  // d(fc1_out) over d(relu_out): 64 bytes less at steps 1 and 6, and the
  // peak moves to BP-data(fc2) (the first of two steps at 184).
  Liveness ip = computeLiveness(tg, builtOrder(tg), 2);
  std::vector<int64_t> inPlace{104, 104, 128, 152, 184, 184,
                               160, 96,  0,   0,   0,   0};
  CHECK(ip.liveBytes == inPlace);
  CHECK(ip.peakStep == 4);
  CHECK(ip.peakBytes == 184 + 808);
  CHECK(ip.end == lv.end); // the last readers stay what they are
}

TEST_CASE("lower bound is the weight side plus the largest task at b=1",
          "[liveness]") {
  GraphLiteral L(2);
  TaskGraph tg = mlp(L);
  LowerBound lb = computeLowerBound(tg);
  // BP-data(relu) touches relu_out, d(relu_out), d(fc1_out): 3 x 32 bytes.
  CHECK(lb.taskBytes == 96);
  CHECK(tg.tasks[lb.task].name == "BP-data(relu)");
  CHECK(lb.bytes == 808 + 96);
  // At b=8 the same task dominates with 3 x 8 x 32 bytes.
  CHECK(computeLowerBound(tg, 8).taskBytes == 768);
}

TEST_CASE("views share their base's storage", "[liveness]") {
  GraphLiteral L(1);
  ValueId x = L.input("x", {2, 2, 2});
  OpAttrs conv;
  conv.kernel = {1, 1};
  ValueId c = L.op(OpKind::Conv, "conv", {x, L.weight("k", {2, 2, 1, 1})},
                   {2, 2, 2}, conv);
  ValueId f = L.op(OpKind::Flatten, "flat", {c}, {8});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {f, L.weight("W", {3, 8})}, {3}, gemm);
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));
  Liveness lv = computeLiveness(*tg, builtOrder(*tg), 1);
  BlockId base = tg->valueBlock[c], view = tg->valueBlock[f];
  CHECK(storageOf(*tg, view) == base);
  CHECK(lv.start[view] == -1);
  // The conv output lives until BP-weight(fc) reads the flattened view.
  std::string lastReader = tg->tasks[lv.order[lv.end[base]]].name;
  CHECK(lastReader == "BP-weight(fc)");
}
