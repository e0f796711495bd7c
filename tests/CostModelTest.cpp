//===- CostModelTest.cpp - The analytic model and the cost table ----------===//
#include "compiler/cost/CostModel.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/cost/AnalyticCost.h"
#include "compiler/onnx/OnnxImport.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

using namespace memfit;
using memfit::test::findTask;
using memfit::test::GraphLiteral;

namespace {

/// A round-number device so expected times can be worked out by hand.
DeviceSpec toyDevice() {
  DeviceSpec s;
  s.name = "toy";
  s.fp32Flops = 1e12;
  s.memoryBandwidth = 1e11;
  s.memoryBytes = int64_t(1) << 30;
  s.h2dBandwidth = 1e10;
  s.d2hBandwidth = 5e9;
  s.linkEfficiency = 0.5;
  s.transferLatency = 1e-5;
  s.launchSeconds = 5e-6;
  s.smCount = 10;
  s.halfRateItemsPerSm = 100; // half rate at 1000 items
  s.efficiency = defaultEfficiencies();
  return s;
}

/// toyDevice with tensor cores: TF32 at 8x, bf16 and fp16 at 16x its fp32.
DeviceSpec tensorCoreDevice() {
  DeviceSpec s = toyDevice();
  s.tf32Flops = 8e12;
  s.bf16Flops = s.fp16Flops = 16e12;
  return s;
}

/// conv(3x3, 16->16, pad 1) -> relu -> maxpool 2x2 -> flatten -> gemm(10).
Graph smallCnn(int64_t batch) {
  GraphLiteral L(batch);
  ValueId x = L.input("x", {16, 32, 32});
  OpAttrs conv;
  conv.kernel = {3, 3};
  conv.strides = {1, 1};
  conv.pads = {1, 1, 1, 1};
  x = L.op(OpKind::Conv, "conv",
           {x, L.weight("w", {16, 16, 3, 3}), L.weight("b", {16})},
           {16, 32, 32}, conv);
  x = L.op(OpKind::Conv, "conv2", {x, L.weight("w2", {16, 16, 3, 3})},
           {16, 32, 32}, conv);
  x = L.op(OpKind::Relu, "relu", {x}, {16, 32, 32});
  OpAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  pool.pads = {0, 0, 0, 0};
  x = L.op(OpKind::MaxPool, "pool", {x}, {16, 16, 16}, pool);
  x = L.op(OpKind::Flatten, "flat", {x}, {16 * 16 * 16});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {x, L.weight("W", {10, 4096}), L.weight("B", {10})},
       {10}, gemm);
  return std::move(L.g);
}

TaskGraph build(const Graph &g) {
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}

} // namespace

TEST_CASE("roofline time of an elementwise task, worked by hand", "[cost]") {
  // relu on x[b, 1000]: reads 4000 b bytes, writes 4000 b bytes, 1000 b
  // elements in parallel.
  GraphLiteral L(4);
  ValueId x = L.input("x", {1000});
  OpAttrs gemm;
  gemm.transB = true;
  x = L.op(OpKind::Gemm, "fc", {x, L.weight("W", {1000, 1000})}, {1000}, gemm);
  L.op(OpKind::Relu, "relu", {x}, {1000});
  TaskGraph tg = build(L.g);
  AnalyticCostModel m(toyDevice());
  TaskId fp = findTask(tg, "FP(relu)");
  const Efficiency &e = m.device().classEfficiency(CostClass::Elementwise);
  for (int64_t b : {1, 4, 64}) {
    double bytes = 8000.0 * b, flops = 1000.0 * b, items = 1000.0 * b;
    double memory = bytes / (1e11 * e.memory);
    double compute = flops / (1e12 * e.compute);
    double u = items / (items + 1000);
    double expected = 5e-6 + std::max(memory, compute) / u;
    CHECK(m.taskSeconds(tg, fp, 0, b) == Approx(expected).epsilon(1e-12));
  }
  // At b = 1 the kernel runs at half rate: the utilisation halves it.
  CHECK(m.taskSeconds(tg, fp, 0, 1) ==
        Approx(5e-6 + 2 * 8000 / (1e11 * e.memory)));
  // One algorithm, the baseline, no workspace.
  auto algos = m.algorithms(tg, fp);
  REQUIRE(algos.size() == 1);
  CHECK(algos[0].id == 0);
  CHECK(algos[0].baseline);
  CHECK(m.workspaceBytes(tg, fp, 0, 64) == 0);
}

TEST_CASE("roofline time of a convolution, worked by hand", "[cost]") {
  Graph g = smallCnn(8);
  TaskGraph tg = build(g);
  AnalyticCostModel m(toyDevice());
  TaskId fp = findTask(tg, "FP(conv2)");
  // x, y: 16*32*32 = 16384 floats per sample; w: 2304 floats.
  // FLOPs 2 * 16 * 16 * 9 * 1024 * b; bytes (2 * 65536 b + 9216).
  int64_t b = 2;
  double flops = 2.0 * 16 * 16 * 9 * 1024 * b;
  double bytes = 2.0 * 65536 * b + 9216;
  double items = 16384.0 * b;
  const Efficiency &e = m.device().convEfficiency(ConvDirection::Forward, 0);
  // The weights (9216 bytes) are the fixed part: not slowed by the low
  // utilisation of a small sub-batch.
  double u = items / (items + 1000);
  double expected = 5e-6 + std::max(flops / (1e12 * e.compute) / u,
                                    (bytes - 9216) / (1e11 * e.memory) / u +
                                        9216 / (1e11 * e.memory));
  CHECK(m.taskSeconds(tg, fp, (int)FwdAlgo::ImplicitGemm, b) ==
        Approx(expected).epsilon(1e-12));
  // GEMM: two kernels, and the im2col buffer crosses memory twice.
  int64_t ws = m.workspaceBytes(tg, fp, (int)FwdAlgo::Gemm, b);
  CHECK(ws == 4 * b * 16 * 9 * 1024);
  const Efficiency &eg = m.device().convEfficiency(ConvDirection::Forward, 2);
  double expectedGemm =
      2 * 5e-6 + std::max(flops / (1e12 * eg.compute) / u,
                          (bytes - 9216 + 2.0 * ws) / (1e11 * eg.memory) / u +
                              9216 / (1e11 * eg.memory));
  CHECK(m.taskSeconds(tg, fp, (int)FwdAlgo::Gemm, b) ==
        Approx(expectedGemm).epsilon(1e-12));
  // The biased conv adds one kernel for the bias.
  TaskId fp1 = findTask(tg, "FP(conv)");
  double withBias = m.taskSeconds(tg, fp1, 0, b);
  CHECK(withBias > expected + 5e-6 - 1e-12);
}

TEST_CASE("times are monotone in b, floored per kernel, and sub-batching "
          "is never free",
          "[cost]") {
  Graph g = smallCnn(32);
  TaskGraph tg = build(g);
  for (const std::string &dev : builtinDeviceNames()) {
    auto spec = builtinDevice(dev);
    REQUIRE(static_cast<bool>(spec));
    AnalyticCostModel m(*spec);
    double whole = 0, quarters = 0, ones = 0;
    for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
      if (tg.tasks[t].kind == TaskKind::Update)
        continue; // once per batch, whatever the sub-batch
      for (const AlgoChoice &a : m.algorithms(tg, t)) {
        double prev = 0, prevPerSample = 1e300;
        for (int64_t b = 1; b <= 64; ++b) {
          double s = m.taskSeconds(tg, t, a.id, b);
          INFO(dev << " " << tg.tasks[t].name << " " << a.name << " b=" << b);
          CHECK(s >= prev);
          CHECK(s / b <= prevPerSample * (1 + 1e-12));
          if (!m.isFree(tg, t))
            CHECK(s >= spec->launchSeconds);
          prev = s;
          prevPerSample = s / b;
        }
      }
      int base = m.baseline(tg, t).id;
      whole += m.taskSeconds(tg, t, base, 32);
      quarters += 4 * m.taskSeconds(tg, t, base, 8);
      ones += 32 * m.taskSeconds(tg, t, base, 1);
    }
    INFO(dev);
    CHECK(whole < quarters);
    CHECK(quarters < ones);
    // 31 extra rounds pay at least one launch per non-free task each.
    CHECK(ones - whole > 31 * spec->launchSeconds * 10);
  }
}

TEST_CASE("views cost nothing, the baseline needs no workspace, faster "
          "algorithms beat it",
          "[cost]") {
  Graph g = smallCnn(32);
  TaskGraph tg = build(g);
  AnalyticCostModel m(*builtinDevice("v100"));
  TaskId flatFp = findTask(tg, "FP(flat)");
  TaskId flatBp = findTask(tg, "BP-data(flat)");
  CHECK(m.isFree(tg, flatFp));
  CHECK(m.isFree(tg, flatBp));
  CHECK(m.taskSeconds(tg, flatFp, 0, 32) == 0);
  CHECK(m.taskSeconds(tg, flatBp, 0, 32) == 0);
  CHECK_FALSE(m.isFree(tg, findTask(tg, "FP(pool)")));

  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    auto algos = m.algorithms(tg, t);
    int baselines = 0;
    for (const AlgoChoice &a : algos)
      baselines += a.baseline;
    CHECK(baselines == 1);
    CHECK(m.workspaceBytes(tg, t, m.baseline(tg, t).id, 32) == 0);
  }
  TaskId conv = findTask(tg, "FP(conv2)");
  // The fastest algorithm beats the zero-workspace baseline. Fused
  // Winograd does 2.25x fewer multiplies but, on 16 channels, as many
  // again in its transforms; the non-fused one also moves its transformed
  // tiles through memory and loses to it.
  CHECK(m.fastest(tg, conv, 32).id != (int)FwdAlgo::ImplicitGemm);
  CHECK(m.taskSeconds(tg, conv, m.fastest(tg, conv, 32).id, 32) <
        m.taskSeconds(tg, conv, (int)FwdAlgo::ImplicitGemm, 32));
  CHECK(m.taskSeconds(tg, conv, (int)FwdAlgo::WinogradNonfused, 32) >
        m.taskSeconds(tg, conv, (int)FwdAlgo::Winograd, 32));
  // Backward-filter of conv2 exists, with its own algorithm list.
  TaskId bw = findTask(tg, "BP-weight(conv2)");
  auto bwAlgos = m.algorithms(tg, bw);
  CHECK(bwAlgos.size() == 6);
  CHECK(m.baseline(tg, bw).id == (int)BwdFilterAlgo::Algo1);
}

TEST_CASE("transfers: linear in bytes per direction, serialised per copy "
          "engine",
          "[cost]") {
  AnalyticCostModel m(toyDevice());
  // 1e10 B/s link at efficiency 0.5, plus 10 us.
  CHECK(m.transferSeconds(5'000'000, CopyDirection::HostToDevice) ==
        Approx(1e-5 + 5e6 / 5e9));
  CHECK(m.transferSeconds(5'000'000, CopyDirection::DeviceToHost) ==
        Approx(1e-5 + 5e6 / 2.5e9));
  CHECK(m.transferSeconds(0, CopyDirection::DeviceToHost) == 0);

  CopyEngines e;
  CHECK(e.issue(CopyDirection::HostToDevice, 0, 2) == 2);
  // Ready at 1 but the engine is busy until 2.
  CHECK(e.issue(CopyDirection::HostToDevice, 1, 3) == 5);
  // The other direction has its own engine.
  CHECK(e.issue(CopyDirection::DeviceToHost, 1, 3) == 4);
  // A copy ready after the engine went idle starts when ready.
  CHECK(e.issue(CopyDirection::HostToDevice, 10, 1) == 11);
}

TEST_CASE("cost table: fastest first, one baseline, copy rates", "[cost]") {
  Graph g = smallCnn(16);
  TaskGraph tg = build(g);
  AnalyticCostModel m(toyDevice());
  CostTable c = buildCostTable(m, tg, 4);
  CHECK(c.subBatch == 4);
  CHECK(c.h2dBytesPerSecond == Approx(5e9));
  CHECK(c.d2hBytesPerSecond == Approx(2.5e9));
  CHECK(c.copyLatencySeconds == Approx(1e-5));
  REQUIRE(c.tasks.size() == tg.tasks.size());
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    const auto &algos = c.tasks[t];
    REQUIRE(!algos.empty());
    for (size_t i = 1; i < algos.size(); ++i)
      CHECK(algos[i - 1].seconds <= algos[i].seconds);
    CHECK(c.baseline(t).workspace == 0);
    CHECK(c.baseline(t).algo == m.baseline(tg, t).id);
    CHECK(c.fastest(t).seconds ==
          Approx(m.taskSeconds(tg, t, m.fastest(tg, t, 4).id, 4)));
  }
}

namespace {

TaskGraph buildAt(const Graph &g, Precision p) {
  TrainingConfig cfg;
  cfg.precision = p;
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}

} // namespace

TEST_CASE("tensor cores price convolutions and products, not the rest",
          "[cost][precision]") {
  DeviceSpec dev = tensorCoreDevice();
  AnalyticCostModel m(dev);
  Graph g = smallCnn(64);
  TaskGraph fp32 = buildAt(g, Precision::FP32);
  TaskGraph tf32 = buildAt(g, Precision::TF32);
  TaskGraph bf16 = buildAt(g, Precision::BF16);
  int implicit = (int)FwdAlgo::ImplicitGemm;
  int precomp = (int)FwdAlgo::ImplicitPrecompGemm;
  int winograd = (int)FwdAlgo::Winograd;
  TaskId conv = findTask(fp32, "FP(conv2)");
  REQUIRE(findTask(tf32, "FP(conv2)") == conv);
  int64_t b = 64;
  // The toy device is compute-bound on this convolution in fp32.
  double t32 = m.taskSeconds(fp32, conv, precomp, b);
  double ttf = m.taskSeconds(tf32, conv, precomp, b);
  double tbf = m.taskSeconds(bf16, conv, precomp, b);
  CHECK(ttf < t32);
  CHECK(tbf < ttf);
  // TF32 keeps fp32 storage: the same bytes at 8x the rate, so the time
  // is the larger of the fp32 compute over 8 and the fp32 memory time.
  // The index table (8 bytes per reduction index) is read once.
  const Efficiency &e = dev.convEfficiency(ConvDirection::Forward, precomp);
  double flops = 2.0 * 16 * 16 * 9 * 1024 * b;
  double items = 16384.0 * b, u = items / (items + 1000);
  double fixed = 9216 + 8.0 * 16 * 9;
  double bytes = 2.0 * 65536 * b;
  double expected = 5e-6 + std::max(flops / (8e12 * e.compute) / u,
                                    bytes / (1e11 * e.memory) / u +
                                        fixed / (1e11 * e.memory));
  CHECK(ttf == Approx(expected).epsilon(1e-12));
  // cuDNN's implicit GEMM (ALGO_0) has no tensor-core kernels: TF32 does
  // not speed it up.
  CHECK(m.taskSeconds(tf32, conv, implicit, b) ==
        m.taskSeconds(fp32, conv, implicit, b));
  // Winograd keeps its fp32 transforms: no tensor cores under TF32.
  CHECK(m.taskSeconds(tf32, conv, winograd, b) ==
        m.taskSeconds(fp32, conv, winograd, b));
  // A memory-bound elementwise op runs at the same FLOP rate; in bf16 its
  // bytes halve, in tf32 they do not.
  TaskId relu = findTask(fp32, "FP(relu)");
  CHECK(m.taskSeconds(tf32, relu, 0, b) == m.taskSeconds(fp32, relu, 0, b));
  double mem = 2.0 * 65536 * b /
               (1e11 * dev.classEfficiency(CostClass::Elementwise).memory);
  CHECK(m.taskSeconds(fp32, relu, 0, b) - m.taskSeconds(bf16, relu, 0, b) ==
        Approx(mem / 2 / u).epsilon(1e-9));
  // The im2col workspace holds 16-bit elements in bf16.
  int gemm = (int)FwdAlgo::Gemm;
  CHECK(m.workspaceBytes(bf16, conv, gemm, b) * 2 ==
        m.workspaceBytes(fp32, conv, gemm, b));
  // A GPU without tensor cores computes at its fp32 rate in every precision.
  AnalyticCostModel plain(toyDevice());
  CHECK(plain.taskSeconds(tf32, conv, implicit, b) ==
        plain.taskSeconds(fp32, conv, implicit, b));
}

namespace {

/// Per sample: x [512, 64] projected by MatMuls to Q, K and V, then
/// softmax(Q K^T) V fused into one Attention operator ("context").
Graph projectedAttention(int64_t batch) {
  GraphLiteral L(batch);
  ValueId x = L.input("x", {512, 64});
  auto proj = [&](const char *name) {
    return L.op(OpKind::MatMul, name,
                {x, L.weight(std::string("W") + name, {64, 64})}, {512, 64});
  };
  ValueId q = proj("q"), k = proj("k"), v = proj("v");
  OpAttrs perm, softmax;
  perm.perm = {0, 2, 1};
  softmax.axis = 2;
  ValueId kt = L.op(OpKind::Transpose, "kt", {k}, {64, 512}, perm);
  ValueId scores = L.op(OpKind::BatchMatMul, "scores", {q, kt}, {512, 512});
  ValueId probs = L.op(OpKind::Softmax, "probs", {scores}, {512, 512}, softmax);
  L.op(OpKind::BatchMatMul, "context", {probs, v}, {512, 64});
  return fuseAttention(L.g);
}

} // namespace

TEST_CASE("fused attention computes at the fp32 rate in every precision",
          "[cost][precision]") {
  // memfit's attention kernel reads 16-bit operands but multiplies in fp32
  // FMA: pricing it at the tensor-core rate would promise a speed-up that
  // no kernel delivers. The projections around it are cuBLAS products.
  DeviceSpec dev = tensorCoreDevice();
  AnalyticCostModel m(dev);
  int64_t b = 8;
  Graph g = projectedAttention(b);
  REQUIRE(std::count_if(g.ops.begin(), g.ops.end(), [](const Op &op) {
            return op.kind == OpKind::Attention;
          }) == 1);
  TaskGraph fp32 = buildAt(g, Precision::FP32);
  TaskGraph tf32 = buildAt(g, Precision::TF32);
  TaskGraph bf16 = buildAt(g, Precision::BF16);
  for (const char *name : {"FP(context)", "BP-data(context)"}) {
    TaskId t = findTask(fp32, name);
    REQUIRE(findTask(bf16, name) == t);
    double t32 = m.taskSeconds(fp32, t, 0, b);
    // Compute-bound in fp32 (its bytes alone take a fraction of the time),
    // so halving them in bf16 changes nothing: the same FLOPs at the same
    // rate. TF32 keeps the bytes too.
    TaskWork w = analyticWork(dev, fp32, t, 0, b);
    double memory = w.bytes / (dev.memoryBandwidth *
                               dev.classEfficiency(CostClass::Gemm).memory);
    CHECK(memory < t32 / 4);
    CHECK(analyticWork(dev, bf16, t, 0, b).peakFlops == 0);
    CHECK(m.taskSeconds(bf16, t, 0, b) == Approx(t32).epsilon(1e-12));
    CHECK(m.taskSeconds(tf32, t, 0, b) == t32);
    // At the tensor-core rate it would take under half the time.
    w.peakFlops = dev.bf16Flops;
    CHECK(workSeconds(dev, w) < t32 / 2);
  }
  // The projections are matrix products: priced at the tensor cores' rate
  // (small ones may be bound by their bytes or the launch instead, so the
  // rate is what is checked under tf32), and faster in bf16.
  TaskId proj = findTask(fp32, "FP(q)");
  CHECK(analyticWork(dev, tf32, proj, 0, b).peakFlops == dev.tf32Flops);
  CHECK(analyticWork(dev, bf16, proj, 0, b).peakFlops == dev.bf16Flops);
  CHECK(m.taskSeconds(bf16, proj, 0, b) < m.taskSeconds(fp32, proj, 0, b));
  CHECK(m.taskSeconds(tf32, proj, 0, b) <= m.taskSeconds(fp32, proj, 0, b));
  // Its operands are still 16-bit blocks: under bf16 fused attention moves
  // half the bytes.
  TaskId fwd = findTask(fp32, "FP(context)");
  CHECK(analyticWork(dev, bf16, fwd, 0, b).bytes * 2 ==
        Approx(analyticWork(dev, fp32, fwd, 0, b).bytes).epsilon(0.01));
}
