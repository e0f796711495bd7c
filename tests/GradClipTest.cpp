//===- GradClipTest.cpp - Gradient clipping's arithmetic ------------------===//
#include "runtime/GradClip.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace memfit::rt;

TEST_CASE("clipping's norm is the norm of the per-tensor norms", "[clip]") {
  // Tensors [3, 4] and [12]: norms 5 and 12, global norm 13.
  const std::vector<float> a = {3, 4}, b = {12};
  const float norms[] = {l2Norm(a.data(), 2), l2Norm(b.data(), 1), 0.0f};
  CHECK(norms[0] == 5.0f);
  CHECK(norms[1] == 12.0f);
  CHECK(globalNorm(norms, 3, serialComm(), 0) == 13.0f);
}

TEST_CASE("clipping's coefficient is torch's: min(1, max / (norm + 1e-6)) "
          "in fp32",
          "[clip]") {
  // Above the maximum: scaled down, by the float quotient torch computes.
  const float norm = 13.0f;
  const float expected = 1.0f / (norm + 1e-6f);
  CHECK(clipCoefficient(1.0f, norm) == expected);
  CHECK(clipCoefficient(1.0f, norm) < 1.0f);
  // Within it: exactly 1, so the gradients are unchanged.
  CHECK(clipCoefficient(20.0f, norm) == 1.0f);
  // A non-finite norm stays visible, as in torch.
  CHECK(std::isnan(
      clipCoefficient(1.0f, std::numeric_limits<float>::quiet_NaN())));
  CHECK(clipCoefficient(1.0f, std::numeric_limits<float>::infinity()) == 0.0f);
}

TEST_CASE("the norm's sums run in double: no overflow past float's range "
          "in the squares",
          "[clip]") {
  // 1e20 squared overflows float; its norm does not.
  const std::vector<float> big = {1e20f, 1e20f};
  CHECK(l2Norm(big.data(), 2) == Approx(1.41421356e20).epsilon(1e-6));
}
