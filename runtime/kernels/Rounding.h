//===- Rounding.h - Float to bf16, fp16 and tf32, both backends -*- C++ -*-===//
//
// The one place memfit rounds an fp32 value to a narrower format, with
// round-to-nearest-even as the hardware does on every 16-bit store and as
// tensor cores do to a TF32 input. The result is returned as the fp32 value
// the narrow one stands for (the widening back is exact), so the CPU
// emulation can keep fp32 arithmetic and still see exactly the numbers a
// GPU storing 16 bits sees. Overflow rounds to infinity, NaN stays NaN,
// fp16 keeps its subnormals.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_ROUNDING_H
#define MEMFIT_RUNTIME_KERNELS_ROUNDING_H

#include "runtime/kernels/Elementwise.h"

#include <cstdint>
#include <cstring>

namespace memfit::rt::kernels {

MEMFIT_HD uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

MEMFIT_HD float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Drops the low `drop` bits of the mantissa, nearest-even; a carry into
/// the exponent is the right result (up to infinity).
MEMFIT_HD float roundMantissa(float f, int drop) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return f; // NaN
  uint32_t half = (1u << (drop - 1)) - 1;
  u += half + ((u >> drop) & 1u);
  return bitsFloat(u & ~((1u << drop) - 1u));
}

/// bfloat16: fp32's exponent, 7 mantissa bits.
MEMFIT_HD float roundToBf16(float f) { return roundMantissa(f, 16); }

/// TF32, what a tensor core reads of an fp32 input: 10 mantissa bits.
MEMFIT_HD float roundToTf32(float f) { return roundMantissa(f, 13); }

/// IEEE binary16: 5 exponent bits, 10 mantissa bits, largest finite 65504,
/// subnormals down to 2^-24.
MEMFIT_HD float roundToFp16(float f) {
  uint32_t u = floatBits(f);
  uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  if (mag >= 0x7f800000u)
    return f;             // infinity or NaN
  if (mag >= 0x477ff000u) // 65520 and up round to infinity
    return bitsFloat(sign | 0x7f800000u);
  if (mag < 0x38800000u) { // below 2^-14: a multiple of 2^-24
    // Scaling by powers of two is exact here; rint rounds to nearest even.
    float q = ::rintf(bitsFloat(mag) * 16777216.0f) * (1.0f / 16777216.0f);
    return bitsFloat(sign | floatBits(q));
  }
  return bitsFloat(sign | floatBits(roundMantissa(bitsFloat(mag), 13)));
}

} // namespace memfit::rt::kernels

#endif
