//===- AccuracyTest.cpp - How far the cost model's times were measured off ===//
#include "compiler/cost/Accuracy.h"

#include "codegen/AccuracyJson.h"

#include <catch2/catch.hpp>

using namespace memfit;

TEST_CASE("a compute capability names its architecture", "[accuracy]") {
  CHECK(deviceClassOf(35) == "Kepler");
  CHECK(deviceClassOf(52) == "Maxwell");
  CHECK(deviceClassOf(60) == "Pascal");
  CHECK(deviceClassOf(61) == "Pascal");
  CHECK(deviceClassOf(70) == "Volta");
  CHECK(deviceClassOf(75) == "Turing");
  CHECK(deviceClassOf(80) == "Ampere");
  CHECK(deviceClassOf(86) == "Ampere");
  CHECK(deviceClassOf(89) == "Ada");
  CHECK(deviceClassOf(90) == "Hopper");
  CHECK(deviceClassOf(100) == "Blackwell");
  CHECK(deviceClassOf(0).empty());
}

TEST_CASE("the accuracy of a device class is its measurements' band",
          "[accuracy]") {
  // Hopper in fp32: memfit's ResNet-18 and ResNet-50 trainers on an H200
  // (docs/benchmarks/gpu.md), 8.78 against 9.08 ms and 69.42 against
  // 78.53 ms.
  Accuracy h = accuracyFor(90, Precision::FP32);
  CHECK(h.deviceClass == "Hopper");
  CHECK(h.precision == "fp32");
  CHECK(h.cases == 2);
  CHECK(h.low == Approx(69.42 / 78.53 - 1));
  CHECK(h.high == Approx(8.78 / 9.08 - 1));
  CHECK(h.low <= h.high);
  CHECK_THAT(h.basis, Catch::Contains("H200"));
  // The same class in bf16 has its own measurements; in tf32 none.
  CHECK(accuracyFor(90, Precision::BF16).cases == 2);
  CHECK(accuracyFor(90, Precision::BF16).low < h.low);
  CHECK(accuracyFor(90, Precision::TF32).cases == 0);
  // Nothing measured on Ampere: said, not invented.
  Accuracy a = accuracyFor(80, Precision::BF16);
  CHECK(a.deviceClass == "Ampere");
  CHECK(a.cases == 0);
  CHECK(a.basis.empty());
  // Kepler: eight CNNs on a K40c and ResNet-50 on a K80 die, all predicted
  // fast.
  Accuracy k = accuracyFor(35, Precision::FP32);
  CHECK(k.cases == 9);
  CHECK(k.high < 0);
}

TEST_CASE("plan.json's accuracy reads back, and a malformed one is refused",
          "[accuracy]") {
  ReportSummary s;
  s.accuracyClass = "Hopper";
  s.accuracyPrecision = "bf16";
  s.accuracyCases = 2;
  s.accuracyLow = -0.25;
  s.accuracyHigh = -0.08;
  s.accuracyBasis = "two trainers";
  nlohmann::json j = accuracyJson(s);
  ReportSummary back;
  std::string why;
  REQUIRE(readAccuracyJson(j, back, why));
  CHECK(back.accuracyClass == "Hopper");
  CHECK(back.accuracyCases == 2);
  CHECK(back.accuracyLow == -0.25);
  CHECK(back.accuracyHigh == -0.08);
  CHECK(back.accuracyBasis == "two trainers");
  // Nothing said (a plan.json from before) reads as nothing.
  CHECK(accuracyJson(ReportSummary{}).is_null());
  CHECK(readAccuracyJson(nullptr, back, why));
  for (const char *bad :
       {R"({"device_class": 1, "precision": "fp32", "cases": 0})",
        R"({"device_class": "x", "precision": "fp32", "cases": -1})",
        R"({"device_class": "x", "precision": "fp32", "cases": 1,
            "low": -2, "high": 0, "basis": "b"})",
        R"({"device_class": "x", "precision": "fp32", "cases": 1,
            "low": 0, "high": 0})",
        R"([1, 2])"}) {
    INFO(bad);
    ReportSummary r;
    std::string w;
    CHECK_FALSE(readAccuracyJson(nlohmann::json::parse(bad), r, w));
    CHECK_THAT(w, Catch::Contains("accuracy"));
  }
}
