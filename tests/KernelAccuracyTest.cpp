//===- KernelAccuracyTest.cpp - The model against measured kernels --------===//
#include "compiler/cost/KernelAccuracy.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>

using namespace memfit;

namespace {

const char *kShapes = "M,N,K\n"
                      "1024,1024,1024\n"
                      "512,2048,256\n"
                      "4096,128,64\n"
                      "64,64,64\n"
                      "2048,2048,2048\n";

// Each row's prediction over its measurement, minus 1: the measured times
// are written from the predictions so that the errors are known exactly.
const double kErrors[] = {-0.5, 0.25, 0.0, 1.0, -0.2};

} // namespace

TEST_CASE("kernel accuracy: bands of predicted / measured - 1 per kind",
          "[kernelaccuracy]") {
  DeviceSpec spec = *builtinDevice("v100");
  auto shapes = parseKernelCsv(kShapes, "shapes.csv");
  REQUIRE(static_cast<bool>(shapes));
  // A file of shapes alone measures nothing.
  CHECK(kernelBands(spec, *shapes).empty());

  std::string text = "M,N,K,ms\n";
  for (size_t i = 0; i < shapes->rows.size(); ++i) {
    double pred =
        *predictKernel(spec, *shapes, shapes->rows[i], KernelKind::Gemm);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.17g", pred * 1e3 / (1 + kErrors[i]));
    text += shapes->rows[i].text + "," + ms + "\n";
  }
  auto measured = parseKernelCsv(text, "measured.csv");
  REQUIRE(static_cast<bool>(measured));
  std::vector<KernelBand> bands = kernelBands(spec, *measured);
  REQUIRE(bands.size() == 1);
  const KernelBand &b = bands[0];
  CHECK(b.kind == KernelKind::Gemm);
  CHECK(b.count == 5);
  // Sorted: -0.5, -0.2, 0, 0.25, 1. Nearest rank: the 10th percentile is
  // the first of five, the 90th the fifth.
  CHECK(b.median == Approx(0.0).margin(1e-5));
  CHECK(b.low == Approx(-0.5).margin(1e-5));
  CHECK(b.high == Approx(1.0).margin(1e-5));
  CHECK(b.min == Approx(-0.5).margin(1e-5));
  CHECK(b.max == Approx(1.0).margin(1e-5));
  // |ln| sorted: 0, ln 1.25 = 0.223, ln 1.25 (0.8), ln 2, ln 2.
  CHECK(b.medianAbsLog == Approx(std::log(1.25)).margin(1e-5));
}

TEST_CASE("kernel accuracy: unmeasured cells are left out",
          "[kernelaccuracy]") {
  DeviceSpec spec = *builtinDevice("v100");
  auto csv = parseKernelCsv(
      "app,W,H,C,N,K,S,R,pad_w,pad_h,stride_w,stride_h,fwd_ms,bwd_data_ms,"
      "bwd_filter_ms\n"
      "a,56,56,64,16,64,3,3,1,1,1,1,0.5,,\n"
      "b,28,28,128,16,128,3,3,1,1,1,1,0.4,,\n",
      "conv.csv");
  REQUIRE(static_cast<bool>(csv));
  std::vector<KernelBand> bands = kernelBands(spec, *csv);
  // Forward measured twice, the backward passes never.
  REQUIRE(bands.size() == 1);
  CHECK(bands[0].kind == KernelKind::ConvFwd);
  CHECK(bands[0].count == 2);
  CHECK(bands[0].low <= bands[0].median);
  CHECK(bands[0].median <= bands[0].high);
}
