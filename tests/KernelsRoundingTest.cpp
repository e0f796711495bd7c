//===- KernelsRoundingTest.cpp - bf16, fp16 and tf32 rounding -------------===//
//
// The rounding every 16-bit store and every TF32 tensor-core input goes
// through, against the compiler's own IEEE binary16 conversion (_Float16,
// round-to-nearest-even) over a sweep of bit patterns, and against values
// worked by hand for bfloat16 and TF32.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Rounding.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

using namespace memfit::rt::kernels;

TEST_CASE("fp16 rounding equals the IEEE conversion", "[rounding]") {
  int64_t mismatches = 0, checked = 0;
  // Every 251st bit pattern covers each exponent, both signs, the
  // subnormal range, overflow and NaN.
  for (uint64_t u = 0; u <= 0xffffffffull; u += 251) {
    float f = bitsFloat(static_cast<uint32_t>(u));
    float want = static_cast<float>(static_cast<_Float16>(f));
    float got = roundToFp16(f);
    ++checked;
    if (std::isnan(want) ? !std::isnan(got) : floatBits(got) != floatBits(want))
      ++mismatches;
  }
  CHECK(checked > 17000000);
  CHECK(mismatches == 0);
  // Ties at the edges: 65520 is halfway to 65536 and goes to infinity;
  // 2^-25 is halfway between 0 and the smallest subnormal, even is 0.
  CHECK(roundToFp16(65519.0f) == 65504.0f);
  CHECK(std::isinf(roundToFp16(65520.0f)));
  CHECK(roundToFp16(std::ldexp(1.0f, -25)) == 0.0f);
  CHECK(roundToFp16(std::ldexp(1.5f, -25)) == std::ldexp(1.0f, -24));
}

TEST_CASE("bf16 and tf32 rounding is nearest-even", "[rounding]") {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 in bf16: even is 1.
  CHECK(roundToBf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  CHECK(roundToBf16(1.0f + 3 * std::ldexp(1.0f, -8)) ==
        1.0f + std::ldexp(1.0f, -6));
  CHECK(roundToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) ==
        1.0f + std::ldexp(1.0f, -7));
  CHECK(roundToBf16(-3.0f) == -3.0f);
  CHECK(std::isinf(roundToBf16(std::numeric_limits<float>::max())));
  CHECK(std::isnan(roundToBf16(std::nanf(""))));
  // TF32 keeps 10 mantissa bits: 1 + 2^-11 ties to 1, 1 + 3 * 2^-11 to
  // 1 + 2^-9.
  CHECK(roundToTf32(1.0f + std::ldexp(1.0f, -11)) == 1.0f);
  CHECK(roundToTf32(1.0f + 3 * std::ldexp(1.0f, -11)) ==
        1.0f + std::ldexp(1.0f, -9));
  CHECK(roundToTf32(1.0f + std::ldexp(1.0f, -10)) ==
        1.0f + std::ldexp(1.0f, -10));
  // Rounding is idempotent: a stored value stores again unchanged.
  for (float f : {0.1f, -7.3e-5f, 1234.567f, 3.0e38f}) {
    CHECK(roundToBf16(roundToBf16(f)) == roundToBf16(f));
    CHECK(roundToFp16(roundToFp16(f)) == roundToFp16(f));
    CHECK(roundToTf32(roundToTf32(f)) == roundToTf32(f));
  }
}
