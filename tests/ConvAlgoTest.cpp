//===- ConvAlgoTest.cpp - Conv algorithms, applicability, formulas --------===//
#include "compiler/cost/ConvAlgo.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/cost/AnalyticCost.h"
#include "compiler/cost/CostModel.h"
#include "passes/analysis/MemoryLowerBound.h"
#include "runtime/ConvCheck.h"
#include "runtime/Kernels.h"
#include "tests/GraphLiteral.h"
#include "tests/PlanTestUtil.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

using namespace memfit;
using memfit::test::GraphLiteral;

namespace {

/// One Conv op: x[N, c, h, w] -> conv(k, kernel, stride, pad, dilation,
/// group) with the output dims the importer would compute.
struct OneConv {
  GraphLiteral L{8};
  OpId op = 0;
  OneConv(int64_t c, int64_t hw, int64_t k, int64_t kernel, int64_t stride,
          int64_t pad, int64_t dilation = 1, int64_t group = 1) {
    ValueId x = L.input("x", {c, hw, hw});
    OpAttrs a;
    a.kernel = {kernel, kernel};
    a.strides = {stride, stride};
    a.pads = {pad, pad, pad, pad};
    a.dilations = {dilation, dilation};
    a.group = group;
    int64_t out = (hw + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
    L.op(OpKind::Conv, "conv",
         {x, L.weight("w", {k, c / group, kernel, kernel})}, {k, out, out}, a);
  }
  ConvShape shape(int64_t b) const { return convShape(L.g, op, b); }
};

std::vector<int> algos(const ConvShape &s, ConvDirection d) {
  return applicableConvAlgos(s, d);
}

} // namespace

TEST_CASE("conv algorithm ids mirror cuDNN and each direction has one "
          "zero-workspace baseline",
          "[conv]") {
  CHECK(convAlgorithms(ConvDirection::Forward).size() == 8);
  CHECK(convAlgorithms(ConvDirection::BackwardData).size() == 6);
  CHECK(convAlgorithms(ConvDirection::BackwardFilter).size() == 6);
  // cuDNN's enum values.
  CHECK(findConvAlgo(ConvDirection::Forward, 6)->name == "winograd");
  CHECK(findConvAlgo(ConvDirection::BackwardData, 3)->name == "fft_tiling");
  CHECK(findConvAlgo(ConvDirection::BackwardFilter, 6)->name == "fft_tiling");
  CHECK(findConvAlgo(ConvDirection::BackwardFilter, 4) == nullptr);
  CHECK(convBaselineAlgo(ConvDirection::Forward) == (int)FwdAlgo::ImplicitGemm);
  CHECK(convBaselineAlgo(ConvDirection::BackwardData) ==
        (int)BwdDataAlgo::Algo1);
  CHECK(convBaselineAlgo(ConvDirection::BackwardFilter) ==
        (int)BwdFilterAlgo::Algo1);
  // Backward ALGO_0 accumulates with atomics.
  CHECK_FALSE(findConvAlgo(ConvDirection::BackwardFilter, 0)->deterministic);

  OneConv big(64, 56, 64, 3, 1, 1);
  for (ConvDirection d : {ConvDirection::Forward, ConvDirection::BackwardData,
                          ConvDirection::BackwardFilter}) {
    int baselines = 0;
    for (const ConvAlgoInfo &a : convAlgorithms(d))
      baselines += a.baseline;
    CHECK(baselines == 1);
    CHECK(convWorkspaceBytes(big.shape(32), d, convBaselineAlgo(d)) == 0);
  }
}

TEST_CASE("which algorithms apply follows cuDNN's limits", "[conv]") {
  using D = ConvDirection;
  // 3x3 stride 1 on 56x56: everything but DIRECT (which cuDNN lacks).
  OneConv c3(64, 56, 64, 3, 1, 1);
  CHECK(algos(c3.shape(8), D::Forward) ==
        std::vector<int>{0, 1, 2, 4, 5, 6, 7});
  CHECK(algos(c3.shape(8), D::BackwardData) ==
        std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(algos(c3.shape(8), D::BackwardFilter) ==
        std::vector<int>{0, 1, 2, 3, 5, 6});
  // 7x7 stride 2 (ResNet stem): no FFT, no Winograd.
  OneConv stem(3, 224, 64, 7, 2, 3);
  CHECK(algos(stem.shape(8), D::Forward) == std::vector<int>{0, 1, 2});
  CHECK(algos(stem.shape(8), D::BackwardData) == std::vector<int>{0, 1});
  CHECK(algos(stem.shape(8), D::BackwardFilter) == std::vector<int>{0, 1, 3});
  // 300 + 2 > 256: whole-image FFT is out, tiled FFT stays.
  OneConv wide(16, 300, 16, 3, 1, 1);
  CHECK(algos(wide.shape(1), D::Forward) == std::vector<int>{0, 1, 2, 5, 6, 7});
  // 5x5: only the non-fused Winograd handles it.
  OneConv c5(16, 28, 16, 5, 1, 2);
  CHECK(algos(c5.shape(1), D::Forward) == std::vector<int>{0, 1, 2, 4, 5, 7});
  // Dilated and grouped convolutions: the GEMM family only.
  OneConv dil(16, 28, 16, 3, 1, 2, /*dilation=*/2);
  CHECK(algos(dil.shape(1), D::Forward) == std::vector<int>{0, 1, 2});
  OneConv grp(32, 28, 32, 3, 1, 1, 1, /*group=*/32);
  CHECK(algos(grp.shape(1), D::Forward) == std::vector<int>{0, 1, 2});
  CHECK(algos(grp.shape(1), D::BackwardFilter) == std::vector<int>{0, 1, 3});
}

TEST_CASE("workspace formulas of each method on a hand-computed conv",
          "[conv]") {
  // x[2,64,56,56], w[64,64,3,3], pad 1 -> y[2,64,56,56].
  OneConv c(64, 56, 64, 3, 1, 1);
  ConvShape s = c.shape(2);
  using D = ConvDirection;
  // im2col: 4 B * b * C*R*S * P*Q = 4 * 2 * 576 * 3136.
  CHECK(convWorkspaceBytes(s, D::Forward, (int)FwdAlgo::Gemm) == 14450688);
  // Two int32 offsets per (channel, tap): 8 * 64 * 9.
  CHECK(convWorkspaceBytes(s, D::Forward, (int)FwdAlgo::ImplicitPrecompGemm) ==
        4608);
  // Fused F(2x2,3x3): transformed filters 4 B * 4x4 * K * C.
  CHECK(convWorkspaceBytes(s, D::Forward, (int)FwdAlgo::Winograd) == 262144);
  // Non-fused F(4x4,3x3): 14x14 tiles of 6x6 for inputs, filters, outputs,
  // with cuDNN 9's 1.5 slack: 1.5 * 4 * 36 * (2*64*196 + 64*64 + 2*64*196).
  CHECK(convWorkspaceBytes(s, D::Forward, (int)FwdAlgo::WinogradNonfused) ==
        11722752);
  // FFT of the 58x58 padded image, 58x30 complex bins:
  // 8 * 1740 * (2*64 + 64*64 + 2*64).
  CHECK(convWorkspaceBytes(s, D::Forward, (int)FwdAlgo::Fft) == 60579840);
  // 32x32 tiles, 2x2 tiles per image, 32x17 bins:
  // 8 * 544 * (2*64*4 + 64*64 + 2*64*4).
  CHECK(convWorkspaceBytes(s, D::Forward, (int)FwdAlgo::FftTiling) == 22282240);
  // Backward directions use the same spectra and tiles.
  CHECK(convWorkspaceBytes(s, D::BackwardData, (int)BwdDataAlgo::Fft) ==
        60579840);
  CHECK(convWorkspaceBytes(s, D::BackwardFilter, (int)BwdFilterAlgo::Algo3) ==
        4608);
  CHECK(convWorkspaceBytes(s, D::BackwardData, (int)BwdDataAlgo::Algo0) == 0);
  // The im2col buffer grows with the sub-batch, the index table does not.
  CHECK(convWorkspaceBytes(c.shape(4), D::Forward, (int)FwdAlgo::Gemm) ==
        2 * 14450688);
  CHECK(convWorkspaceBytes(c.shape(4), D::Forward,
                           (int)FwdAlgo::ImplicitPrecompGemm) == 4608);
}

TEST_CASE("FLOPs per method", "[conv]") {
  OneConv c(64, 56, 64, 3, 1, 1);
  ConvShape s = c.shape(1);
  // 2 * K * C * R * S * P * Q.
  CHECK(s.directFlops() == 231211008.0);
  CHECK(convFlops(s, ConvDirection::Forward, (int)FwdAlgo::ImplicitGemm) ==
        231211008.0);
  // Winograd F(4x4,3x3) multiplies 4x less; its transforms add less than
  // that saves.
  double wino =
      convFlops(s, ConvDirection::Forward, (int)FwdAlgo::WinogradNonfused);
  CHECK(wino > 231211008.0 / 4);
  CHECK(wino < 231211008.0 / 2);
  // Fused F(2x2,3x3) multiplies 2.25x less.
  CHECK(convFlops(s, ConvDirection::Forward, (int)FwdAlgo::Winograd) >
        231211008.0 / 2.25);
}

TEST_CASE("a 16-bit program stages its convolutions' weight gradients",
          "[conv][precision]") {
  // The planner's formula and the runtime's twin lay the workspace out
  // alike: 2 bytes a weight, rounded up to 256.
  for (int64_t c : {1, 127, 128, 129, 1000, 2359296})
    CHECK(convGradStagingBytes(c) == rt::convGradStagingBytes(c));
  CHECK(convGradStagingBytes(128) == 256);
  CHECK(convGradStagingBytes(129) == 512);

  // 64 -> 32 channels, 3x3: 18432 weights, 36864 bytes staged in bf16.
  OneConv c(64, 14, 32, 3, 1, 1);
  auto at = [&](Precision p) {
    TrainingConfig cfg;
    cfg.precision = p;
    auto tg = buildTaskGraph(c.L.g, cfg);
    REQUIRE(static_cast<bool>(tg));
    return std::move(*tg);
  };
  TaskGraph fp32 = at(Precision::FP32), bf16 = at(Precision::BF16);
  AnalyticCostModel m(llvm::cantFail(builtinDevice("h100-sxm")));
  CostTable t32 = buildCostTable(m, fp32, 4), t16 = buildCostTable(m, bf16, 4);
  int checked = 0;
  for (TaskId t = 0; t < (TaskId)bf16.tasks.size(); ++t) {
    bool filter = convDirectionOf(bf16, t) == ConvDirection::BackwardFilter;
    CHECK(convGradStagingBytes(bf16, t) == (filter ? 36864 : 0));
    CHECK(convGradStagingBytes(fp32, t) == 0);
    if (!filter)
      continue;
    // Every algorithm, the zero-workspace one too, gets the room on top of
    // its own workspace (the 16-bit im2col of the others is half fp32's).
    for (const AlgoCost &a : t16.tasks[t])
      CHECK(a.workspace >= 36864);
    CHECK(t16.baseline(t).workspace == 36864);
    CHECK(t32.baseline(t).workspace == 0);
    ++checked;
  }
  CHECK(checked == 1);
  // The floor counts it: the BP-weight task's footprint at b = 1, its x
  // and dy in 16 bits plus the staging, is the largest.
  LowerBound lb = computeLowerBound(bf16);
  CHECK(lb.taskBytes == 64 * 14 * 14 * 2 + 32 * 14 * 14 * 2 + 36864);
  CHECK(convDirectionOf(bf16, lb.task) == ConvDirection::BackwardFilter);
}

TEST_CASE("sm_80 and later devices offer only what cuDNN 9 runs there",
          "[conv]") {
  using D = ConvDirection;
  // Refused by cuDNN 9.19 on an H200 (issue 43): forward 3-7,
  // backward-data 2-5, backward-filter 2, 3, 5, 6 (and 7, which it lacks).
  const std::vector<std::pair<D, std::vector<int>>> refused = {
      {D::Forward, {3, 4, 5, 6, 7}},
      {D::BackwardData, {2, 3, 4, 5}},
      {D::BackwardFilter, {2, 3, 4, 5, 6, 7}}};
  for (const char *name :
       {"a100-40g", "a100-80g", "h100-pcie", "h100-sxm", "h200"}) {
    DeviceSpec spec = llvm::cantFail(builtinDevice(name));
    INFO(name);
    CHECK(spec.computeCapability >= 80);
    for (const auto &[d, ids] : refused)
      for (int id : ids)
        CHECK_FALSE(convAlgoOffered(spec.computeCapability, d, id));
    // The implicit-GEMM family stays.
    CHECK(convAlgoOffered(spec.computeCapability, D::Forward, 1));
    CHECK(convAlgoOffered(spec.computeCapability, D::BackwardData, 1));
    CHECK(convAlgoOffered(spec.computeCapability, D::BackwardFilter, 1));
  }
  CHECK(llvm::cantFail(builtinDevice("h200")).computeCapability == 90);
  CHECK(llvm::cantFail(builtinDevice("v100")).computeCapability == 70);
  // Older GPUs keep every algorithm their shapes allow.
  OneConv c3(64, 56, 64, 3, 1, 1);
  CHECK(applicableConvAlgos(c3.shape(8), D::Forward, 70) ==
        std::vector<int>{0, 1, 2, 4, 5, 6, 7});
  CHECK(applicableConvAlgos(c3.shape(8), D::Forward, 90) ==
        std::vector<int>{0, 1, 2});
  CHECK(applicableConvAlgos(c3.shape(8), D::BackwardData, 90) ==
        std::vector<int>{0, 1});
  CHECK(applicableConvAlgos(c3.shape(8), D::BackwardFilter, 90) ==
        std::vector<int>{0, 1});
}

TEST_CASE("the runtime's algorithm table is the device model's", "[conv]") {
  for (int cc : {0, 35, 52, 60, 70, 75, 80, 86, 89, 90, 100, 120})
    for (int d = 0; d < kNumConvDirections; ++d)
      for (int id = 0; id < kMaxConvAlgoId + 1; ++id) {
        INFO("cc " << cc << " direction " << d << " algo " << id);
        CHECK(rt::cudnnRunsConvAlgo(cc, d, id) ==
              convAlgoOffered(cc, static_cast<ConvDirection>(d), id));
        CHECK(rt::cudnnDefinesConvAlgo(d, id) ==
              (findConvAlgo(static_cast<ConvDirection>(d), id) != nullptr));
      }
}

TEST_CASE("workspace formulas cover what cuDNN 9 asked on an H200", "[conv]") {
  using D = ConvDirection;
  // ResNet-50's first convolution at batch 64 in TF32: backward-filter
  // ALGO_1 asked 263 MB (read as MiB, the larger), where 0 was planned.
  OneConv conv1(3, 224, 64, 7, 2, 3);
  ConvShape s = conv1.shape(64);
  REQUIRE(s.out[0] == 112);
  const int64_t asked = 263ll << 20;
  CHECK(convWorkspaceBytes(s, D::BackwardFilter, (int)BwdFilterAlgo::Algo1, 4,
                           /*tensorOps=*/true) >= asked);
  // Under strict FP32 no tensor-core copies, and aligned channels need none.
  CHECK(convWorkspaceBytes(s, D::BackwardFilter, (int)BwdFilterAlgo::Algo1) ==
        0);
  OneConv aligned(64, 56, 64, 3, 1, 1);
  CHECK(convWorkspaceBytes(aligned.shape(64), D::BackwardFilter,
                           (int)BwdFilterAlgo::Algo1, 4, true) == 0);

  // VGG-16's backward-data ALGO_5 asked 1.39-1.44 times what was planned
  // (192 MB for 138, 472 MB for 327): the formula now is 1.5 times the
  // transformed tensors it planned with.
  OneConv vgg(256, 56, 256, 3, 1, 1);
  ConvShape v = vgg.shape(16);
  const double planned = 4.0 * 36 * (16.0 * 256 * 196 * 2 + 256.0 * 256);
  const double workspace = static_cast<double>(convWorkspaceBytes(
      v, D::BackwardData, (int)BwdDataAlgo::WinogradNonfused));
  CHECK(workspace >= planned * 472.0 / 327.0);
  CHECK(workspace >= planned * 192.0 / 138.0);
}

TEST_CASE("the sm_90 ALGO_1 workspace covers every request cuDNN 9 made on "
          "an H200",
          "[conv]") {
  using D = ConvDirection;
  std::ifstream in(std::string(MEMFIT_SOURCE_DIR) +
                   "/docs/benchmarks/data/cudnn9-h200-workspace.csv");
  REQUIRE(in);
  std::string line;
  int rows = 0;
  double asked = 0, planned = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("precision", 0) == 0)
      continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');)
      f.push_back(cell);
    REQUIRE(f.size() == 12);
    auto num = [&](int i) { return std::stoll(f[i]); };
    OneConv conv(num(3), num(4), num(5), num(6), num(7), num(8));
    ConvShape s = conv.shape(num(2));
    REQUIRE(s.out[0] == num(9));
    D dir = f[1] == "forward"         ? D::Forward
            : f[1] == "backward_data" ? D::BackwardData
                                      : D::BackwardFilter;
    const bool half = f[0] == "bf16";
    const int64_t ws = convWorkspaceBytes(s, dir, static_cast<int>(num(10)),
                                          half ? 2 : 4, half, 90);
    INFO(line);
    CHECK(ws >= num(11));
    // What the algorithm was planned with before: at most the index table.
    CHECK(convWorkspaceBytes(s, dir, static_cast<int>(num(10)), half ? 2 : 4,
                             half) < num(11));
    asked += static_cast<double>(num(11));
    planned += static_cast<double>(ws);
    ++rows;
  }
  CHECK(rows == 190);
  // An upper bound, not a blanket: the table's total within a factor.
  CHECK(planned <= 2.5 * asked);
  // Older GPUs keep the legacy formulas.
  OneConv c3(64, 56, 64, 3, 1, 1);
  CHECK(convWorkspaceBytes(c3.shape(64), D::BackwardFilter, 1, 2, true, 75) ==
        0);
}

TEST_CASE("an sm_90 plan's cost table holds no refused algorithm and a "
          "zero-workspace baseline",
          "[conv]") {
  for (Precision prec : {Precision::FP32, Precision::TF32}) {
    memfit::test::Planned m("resnet50", 64, "h200");
    TrainingConfig cfg;
    cfg.precision = prec;
    m.tg = llvm::cantFail(buildTaskGraph(m.graph, cfg));
    const TaskGraph &tg = m.tg;
    const CostTable &table = m.table(64);
    int convTasks = 0, conv1Baseline = -1;
    for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
      auto dir = convDirectionOf(tg, t);
      if (!dir)
        continue;
      ++convTasks;
      for (const AlgoCost &a : table.tasks[t])
        CHECK(convAlgoOffered(90, *dir, a.algo));
      CHECK(table.baseline(t).workspace == 0);
      ConvShape s = convShape(m.graph, tg.task(t).op, 64);
      if (*dir == ConvDirection::BackwardFilter && s.c == 3)
        conv1Baseline = table.baseline(t).algo;
    }
    CHECK(convTasks > 100);
    // On sm_90 cuDNN 9's ALGO_1 copies the operands under either math
    // (convEngineBytes), so the zero-workspace ALGO_0 is the baseline.
    CHECK(conv1Baseline == 0);
  }
}
