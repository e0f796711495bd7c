//===- PaperNumbersTest.cpp - sizes the papers state, end to end ----------===//
//
// The zoo model, imported and turned into a task graph, must reproduce the
// memory figures the papers give (hand-computed below), so the importer, the
// autodiff reads and the accounting are checked together.
//
//===----------------------------------------------------------------------===//
#include "compiler/autodiff/Autodiff.h"
#include "compiler/onnx/OnnxImport.h"
#include "models/Zoo.h"
#include "passes/analysis/MemoryLowerBound.h"

#include <catch2/catch.hpp>

using namespace memfit;

TEST_CASE("Caffe AlexNet at batch 200: CONV1 and SuperNeurons' LRN1 peak",
          "[papers]") {
  auto bytes = buildZooModel("alexnet", {});
  REQUIRE(static_cast<bool>(bytes));
  ImportOptions io;
  io.batch = 200;
  io.keepWeightData = false;
  auto g = importOnnxBytes(*bytes, "alexnet.onnx", io);
  REQUIRE(static_cast<bool>(g));
  auto tg = buildTaskGraph(*g);
  REQUIRE(static_cast<bool>(tg));
  // CONV1's output: 200 x 96 x 55 x 55 floats = 232,320,000 B = 221.56 MiB.
  const int64_t conv1 = int64_t(200) * 96 * 55 * 55 * 4;
  bool found = false;
  for (const Block &b : tg->blocks)
    if (b.name == "conv1_out" ||
        (b.kind == BlockKind::Activation && b.writers.size() == 1 &&
         tg->tasks[b.writers[0]].name == "FP(conv1)")) {
      CHECK(b.bytesAt(200) == conv1);
      found = true;
    }
  CHECK(found);
  // LRN1's backward holds x, y, dy and dx of CONV1's size: SuperNeurons'
  // 886.23 MiB peak, the largest single task of the network.
  LowerBound at200 = computeLowerBound(*tg, 200);
  CHECK(at200.taskBytes == 4 * conv1);
  CHECK(tg->tasks[at200.task].name == "BP-data(norm1)");
  CHECK(double(4 * conv1) / (1 << 20) == Approx(886.23).margin(0.01));
  // At sub-batch 1 the same task sets moDNN's lower bound.
  LowerBound lb = computeLowerBound(*tg, 1);
  CHECK(lb.taskBytes == 4 * 96 * 55 * 55 * 4);
  CHECK(lb.bytes == tg->weightSideBytes() + lb.taskBytes);
}
