//===- Accuracy.cpp - How far the cost model's times were measured off ----===//
//
// The cases are the whole-network comparisons docs/benchmarks/ records,
// each as predicted / measured iteration time - 1 (throughput figures
// inverted). Adding a measurement here is adding a row.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/Accuracy.h"

#include <algorithm>
#include <string_view>

namespace memfit {

namespace {

struct Source {
  std::string_view deviceClass;
  Precision precision;
  std::string_view basis;
  /// predicted / measured iteration time - 1, one per network.
  std::initializer_list<double> errors;
};

// clang-format off
const Source kSources[] = {
    // docs/benchmarks/gpu.md (2026-11-27): memfit's own trainers on an
    // H200, 100% budget, predicted against measured ms per iteration:
    // ResNet-18 b16 8.78 / 9.08, ResNet-50 b64 69.42 / 78.53 (fp32);
    // 4.30 / 5.80, 25.86 / 28.17 (bf16).
    {"Hopper", Precision::FP32,
     "memfit's trainers of ResNet-18 and ResNet-50 on an H200, "
     "docs/benchmarks/gpu.md",
     {8.78 / 9.08 - 1, 69.42 / 78.53 - 1}},
    {"Hopper", Precision::BF16,
     "memfit's trainers of ResNet-18 and ResNet-50 on an H200, "
     "docs/benchmarks/gpu.md",
     {4.30 / 5.80 - 1, 25.86 / 28.17 - 1}},
    // docs/benchmarks/cost-model.md, "Whole network: ResNet-50 training":
    // published 367 img/s, predicted 276.4 (V100, PyTorch, NVIDIA's
    // DeepLearningExamples); 219 against 198.2 (P100, TensorFlow 2017).
    {"Volta", Precision::FP32,
     "ResNet-50 training on a V100 as NVIDIA's DeepLearningExamples "
     "publish it, docs/benchmarks/cost-model.md",
     {367.0 / 276.4 - 1}},
    // The same page, "Whole networks on three architectures": eight
    // networks at batch 16 in Torch with cuDNN 5 (jcjohnson's
    // cnn-benchmarks), measured / predicted ms, and ResNet-50 on the P100.
    {"Pascal", Precision::FP32,
     "eight CNNs on a GTX 1080 (cnn-benchmarks) and ResNet-50 on a P100 "
     "(TensorFlow's published benchmarks), docs/benchmarks/cost-model.md",
     {18.9 / 23.2 - 1, 166.9 / 232.6 - 1, 194.5 / 281.7 - 1,
      39.6 / 47.1 - 1, 68.7 / 79.7 - 1, 129.2 / 153.9 - 1,
      214.0 / 235.3 - 1, 304.6 / 328.9 - 1, 219.0 / 198.2 - 1}},
    {"Maxwell", Precision::FP32,
     "eight CNNs on a GTX TITAN X (cnn-benchmarks), "
     "docs/benchmarks/cost-model.md",
     {22.1 / 23.7 - 1, 186.9 / 262.4 - 1, 221.0 / 323.4 - 1,
      44.2 / 53.8 - 1, 75.3 / 91.9 - 1, 147.8 / 171.0 - 1,
      245.1 / 260.1 - 1, 348.2 / 367.0 - 1}},
    {"Kepler", Precision::FP32,
     "eight CNNs on a K40c at its base clock (cnn-benchmarks) and "
     "ResNet-50 on a K80 die (TensorFlow's published benchmarks), "
     "docs/benchmarks/cost-model.md",
     {30.9 / 61.5 - 1, 247.6 / 920.2 - 1, 298.6 / 1129.7 - 1,
      58.0 / 168.3 - 1, 96.3 / 303.8 - 1, 203.3 / 449.9 - 1,
      336.0 / 797.9 - 1, 475.1 / 1146.7 - 1, 52.0 / 77.2 - 1}},
};
// clang-format on

} // namespace

std::string deviceClassOf(int cc) {
  const int major = cc / 10, minor = cc % 10;
  switch (major) {
  case 3:
    return "Kepler";
  case 5:
    return "Maxwell";
  case 6:
    return "Pascal";
  case 7:
    return minor >= 5 ? "Turing" : "Volta";
  case 8:
    return minor >= 9 ? "Ada" : "Ampere";
  case 9:
    return "Hopper";
  case 10:
  case 12:
    return "Blackwell";
  default:
    return "";
  }
}

Accuracy accuracyFor(int cc, Precision precision) {
  Accuracy a;
  a.deviceClass = deviceClassOf(cc);
  a.precision = std::string(precisionName(precision));
  for (const Source &s : kSources) {
    if (s.deviceClass != a.deviceClass || s.precision != precision)
      continue;
    a.cases = static_cast<int>(s.errors.size());
    a.low = *std::min_element(s.errors.begin(), s.errors.end());
    a.high = *std::max_element(s.errors.begin(), s.errors.end());
    a.basis = std::string(s.basis);
  }
  return a;
}

} // namespace memfit
