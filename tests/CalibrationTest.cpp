//===- CalibrationTest.cpp - The fitted cost model against measurements ---===//
//
// The calibration committed in compiler/cost/CalibratedParams.inc, held
// against the DeepBench measurements it was fitted on (the V100 and the
// P100, committed under docs/benchmarks/data/deepbench/) and against six
// GPUs held out of it (their datasheets under docs/benchmarks/devices/),
// and the fit itself on data whose true parameters are known.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/Calibrate.h"
#include "tests/PlanTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit;

namespace {

std::string dataFile(const std::string &name) {
  return std::string(MEMFIT_SOURCE_DIR) + "/docs/benchmarks/data/deepbench/" +
         name;
}

/// A device file of docs/benchmarks/devices/.
std::string deviceFile(const std::string &name) {
  return std::string(MEMFIT_SOURCE_DIR) + "/docs/benchmarks/devices/" + name;
}

/// `gpu`'s measurements with its device: a built-in name or a device file
/// of docs/benchmarks/devices/ (datasheet figures only).
GpuMeasurements deepbench(const std::string &gpu, const std::string &device) {
  auto spec = device.find(".json") == std::string::npos
                  ? builtinDevice(device)
                  : loadDeviceFile(deviceFile(device));
  REQUIRE(static_cast<bool>(spec));
  GpuMeasurements m{*spec, {}};
  for (const char *kind : {"conv", "gemm"}) {
    auto csv =
        loadKernelCsv(dataFile("deepbench_" + gpu + "_" + kind + "_fp32.csv"));
    REQUIRE(static_cast<bool>(csv));
    m.files.push_back(std::move(*csv));
  }
  return m;
}

ErrorSummary allKinds(const DeviceSpec &spec,
                      const std::vector<KernelCsv> &files) {
  std::vector<double> all;
  for (const std::vector<double> &e : kernelErrors(spec, files))
    all.insert(all.end(), e.begin(), e.end());
  return summarizeErrors(all);
}

// The bound: a median error of at most 30%.
const double kMedianBound = std::log(1.3);

/// The ideal plan's predicted iteration time, seconds: every task at its
/// fastest algorithm, the input loaded, the update run.
double idealIteration(const std::string &model, int64_t batch,
                      const std::string &device) {
  memfit::test::Planned m(model, batch, device);
  PlanRequest req;
  req.policy = Policy::Ideal;
  req.batch = batch;
  auto out = planTraining(
      m.tg, [&](int64_t b) -> const CostTable & { return m.table(b); }, req);
  REQUIRE(static_cast<bool>(out));
  return out->idealSeconds;
}

/// A forward and a backward pass alone (no update, no input copy), as
/// cnn-benchmarks timed them: the round's tasks at their fastest.
double forwardBackward(const std::string &model, int64_t batch,
                       const std::string &device) {
  memfit::test::Planned m(model, batch, device);
  const CostTable &c = m.table(batch);
  double s = 0;
  for (TaskId t = 0; t < (TaskId)m.tg.tasks.size(); ++t)
    if (m.tg.tasks[t].kind != TaskKind::Update)
      s += c.fastest(t).seconds;
  return s;
}

} // namespace

TEST_CASE("error summaries: median and 90th percentile", "[calibration]") {
  ErrorSummary s =
      summarizeErrors({0.5, 0.1, 0.3, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0});
  CHECK(s.count == 10);
  CHECK(s.median == Approx(0.55));
  CHECK(s.p90 == Approx(0.9));
  CHECK(summarizeErrors({0.2}).p90 == 0.2);
  CHECK(summarizeErrors({}).count == 0);
}

TEST_CASE("the committed calibration predicts DeepBench's V100 and P100 "
          "within the published bound",
          "[calibration]") {
  for (auto [gpu, device] : {std::pair{"V100", "v100"}, {"P100", "p100"}}) {
    INFO(gpu);
    GpuMeasurements m = deepbench(gpu, device);
    KernelErrors errs = kernelErrors(m.device, m.files);
    CHECK(errs[0].size() == 94);
    CHECK(errs[3].size() == 160);
    ErrorSummary all = allKinds(m.device, m.files);
    CHECK(all.median <= kMedianBound);
    for (int k = 0; k < kNumKernelKinds; ++k) {
      INFO(kernelKindName(static_cast<KernelKind>(k)));
      CHECK(summarizeErrors(errs[k]).median <= kMedianBound);
    }
    // The prior, chosen before any measurement, did worse: the
    // calibration is what makes the bound.
    DeviceSpec prior = m.device;
    applyCalibration(prior, priorCalibration());
    CHECK(allKinds(prior, m.files).median > all.median);
  }
}

TEST_CASE("the committed calibration is the fit of the committed data",
          "[calibration]") {
  // compiler/cost/CalibratedParams.inc must be what tools/calibrate-cost-
  // model writes from docs/benchmarks/data/deepbench: no hand edits, no
  // stale table after a change to the model or the fit.
  CalibrationFit fit =
      fitCalibration({deepbench("V100", "v100"), deepbench("P100", "p100")},
                     priorCalibration());
  CHECK(calibrationInc(fit.calibration, "") ==
        calibrationInc(calibratedDefaults(), ""));
}

TEST_CASE("the committed calibration predicts six GPUs held out of it from "
          "their datasheets",
          "[calibration]") {
  // The GPUs of the committed data that the built-in calibration was not
  // fitted on (tools/calibrate-cost-model --evaluate). Measured median
  // error over all kernels: M40 45%, TITAN X (Maxwell) 39%, TITAN X
  // (Pascal) 27%, TITAN Xp 19%, GTX 1080 Ti 24%, T4 35%
  // (docs/benchmarks/cost-model.md). The bound is above all of them, and
  // catches a change to the model or the fit that makes a GPU known only
  // from its datasheet clearly worse.
  const double bound = std::log(1.5);
  for (auto [gpu, device] : {std::pair{"M40", "m40.json"},
                             {"TitanX", "titanx-maxwell-boost.json"},
                             {"TitanXPascal", "titanx-pascal.json"},
                             {"TitanXp", "titanxp.json"},
                             {"1080Ti", "gtx1080ti.json"},
                             {"T4", "t4.json"}}) {
    INFO(gpu);
    GpuMeasurements m = deepbench(gpu, device);
    // Only the datasheet: the device file leaves the calibration built in.
    CHECK(calibrationInc(calibrationOf(m.device), "") ==
          calibrationInc(calibratedDefaults(), ""));
    ErrorSummary all = allKinds(m.device, m.files);
    CHECK(all.count >= 432);
    CHECK(all.median <= bound);
  }
}

TEST_CASE("a fit on one GPU predicts the other from its datasheet",
          "[calibration]") {
  GpuMeasurements v100 = deepbench("V100", "v100");
  GpuMeasurements p100 = deepbench("P100", "p100");
  for (auto [train, test] : {std::pair{&v100, &p100}, {&p100, &v100}}) {
    INFO("held out: " << test->device.name);
    CalibrationFit fit = fitCalibration({*train}, priorCalibration());
    DeviceSpec spec = test->device;
    applyCalibration(spec, fit.calibration);
    CHECK(allKinds(spec, test->files).median <= kMedianBound);
  }
}

TEST_CASE("the fit recovers a known calibration and is deterministic",
          "[calibration]") {
  // Times made by a known calibration on a spread of shapes: the fit,
  // started from the prior, must predict them closely again.
  CostCalibration truth = priorCalibration();
  truth.launchSeconds = 6e-6;
  truth.halfRateItemsPerSm = 3000;
  truth.halfRateReduction = 40;
  for (Efficiency &e : truth.efficiency)
    e = {std::min(1.0, e.compute * 1.3), 0.7};
  DeviceSpec dev = *builtinDevice("v100");
  applyCalibration(dev, truth);
  std::string conv = "W,H,C,N,K,S,R,pad_w,pad_h,stride_w,stride_h,fwd_ms,"
                     "bwd_data_ms,bwd_filter_ms\n";
  std::string gemm = "M,N,K,ms\n";
  auto ms = [](double s) { return std::to_string(s * 1e3); };
  for (int64_t n : {1, 8, 32})
    for (int64_t c : {3, 64, 256})
      for (int64_t hw : {7, 28, 112})
        for (int64_t r : {1, 3, 5}) {
          ConvKernel k{hw, hw, c, n, 2 * c + 16, r, r, r / 2, r / 2, 1, 1};
          ConvShape s;
          REQUIRE(convKernelShape(k, s));
          conv += std::to_string(hw) + "," + std::to_string(hw) + "," +
                  std::to_string(c) + "," + std::to_string(n) + "," +
                  std::to_string(k.k) + "," + std::to_string(r) + "," +
                  std::to_string(r) + "," + std::to_string(r / 2) + "," +
                  std::to_string(r / 2) + ",1,1";
          for (int d = 0; d < 3; ++d)
            conv += "," +
                    ms(fastestConvSeconds(dev, s, static_cast<ConvDirection>(d))
                           .seconds);
          conv += "\n";
        }
  for (int64_t m : {64, 1024, 8192})
    for (int64_t nn : {1, 16, 512, 4096})
      for (int64_t k : {32, 1024, 16384})
        gemm += std::to_string(m) + "," + std::to_string(nn) + "," +
                std::to_string(k) + "," +
                ms(workSeconds(dev, gemmKernelWork(dev, {m, nn, k}))) + "\n";
  GpuMeasurements synth{
      *builtinDevice("v100"),
      {*parseKernelCsv(conv, "c.csv"), *parseKernelCsv(gemm, "g.csv")}};
  CalibrationFit fit = fitCalibration({synth}, priorCalibration());
  CHECK(fit.meanError < 0.03);
  CHECK(fit.calibration.launchSeconds == Approx(6e-6).epsilon(0.15));
  CHECK(fit.calibration.halfRateItemsPerSm == Approx(3000).epsilon(0.25));
  int gemmSlot = efficiencySlot(CostClass::Gemm);
  CHECK(fit.calibration.efficiency[gemmSlot].compute ==
        Approx(truth.efficiency[gemmSlot].compute).epsilon(0.1));
  // The same data give the same table, byte for byte.
  CalibrationFit again = fitCalibration({synth}, priorCalibration());
  CHECK(calibrationInc(again.calibration, "x") ==
        calibrationInc(fit.calibration, "x"));
}

TEST_CASE("whole networks: predicted training within 25% of published",
          "[calibration]") {
  // docs/benchmarks/cost-model.md's whole-network tables (the goal: within
  // 25%). ResNet-50 FP32 throughput: the V100 (NVIDIA DeepLearningExamples,
  // PyTorch, batch 112: 367 img/s) and the P100 (TensorFlow 2017, batch 64:
  // 219 img/s); predicted 276 and 198.
  CHECK(std::abs(112 / idealIteration("resnet50", 112, "v100") / 367 - 1) <=
        0.25);
  CHECK(std::abs(64 / idealIteration("resnet50", 64, "p100") / 219 - 1) <=
        0.25);
  // cnn-benchmarks (Torch, cuDNN 5.0.05, batch 16), forward and backward
  // ms, on two GPUs the calibration never saw, from their datasheets:
  // ResNets within 5% to 19%.
  struct Row {
    const char *model, *device;
    double ms;
  };
  for (Row r : {Row{"resnet18", "gtx1080.json", 47.07},
                Row{"resnet50", "gtx1080.json", 153.90},
                Row{"resnet152", "gtx1080.json", 328.90},
                Row{"resnet18", "titanx-maxwell-boost.json", 53.84},
                Row{"resnet50", "titanx-maxwell-boost.json", 171.02},
                Row{"resnet152", "titanx-maxwell-boost.json", 366.97}}) {
    INFO(r.model << " on " << r.device);
    double predicted = forwardBackward(r.model, 16, deviceFile(r.device));
    CHECK(std::abs(std::log(predicted * 1e3 / r.ms)) <= std::log(1.25));
  }
}
