//===- View.h - CUDA backend: a typed device buffer -------------*- C++ -*-===//
//
// Internal to runtime/cuda. The trainer's interface passes every operand as
// `float *`, because a block's storage type is a fact of the plan, not of
// the call: in a bf16 or fp16 program the generated code hands an operation
// its 16-bit blocks through Exec::arena16 and its 16-bit working copies
// through Exec::weightCopy, and everything else (master weights, their
// gradients, BatchNorm statistics, the loss) is fp32. The backend records
// those pointers per operation and turns each operand into a View: the
// address and its storage. Kernels index a View as they indexed a float
// pointer; an element converts to fp32 when read and rounds to nearest even
// when written (kernels::roundToBf16 and roundToFp16, the CPU emulation's
// rounding), so arithmetic stays fp32 as in the emulation and only the
// stores narrow. The storage is uniform over a launch, so the switch on it
// does not diverge.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_VIEW_H
#define MEMFIT_RUNTIME_CUDA_VIEW_H

#include <cstdint>
#include <cstring>

#include "runtime/kernels/Rounding.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define MEMFIT_VIEW_HD __host__ __device__ __forceinline__
#define MEMFIT_VIEW_D __device__ __forceinline__
#else
#define MEMFIT_VIEW_HD inline
#endif

namespace memfit::rt::cuda {

enum class Store : uint8_t { F32, BF16, FP16 };

MEMFIT_VIEW_HD int64_t storeBytes(Store s) { return s == Store::F32 ? 4 : 2; }

#ifdef __CUDACC__
MEMFIT_VIEW_D float loadAs(const char *p, Store t) {
  switch (t) {
  case Store::BF16:
    return kernels::bitsFloat(uint32_t(*reinterpret_cast<const uint16_t *>(p))
                              << 16);
  case Store::FP16:
    return __half2float(*reinterpret_cast<const __half *>(p));
  default:
    return *reinterpret_cast<const float *>(p);
  }
}

MEMFIT_VIEW_D void storeAs(char *p, Store t, float v) {
  switch (t) {
  case Store::BF16:
    // Rounded first, so the top half is the nearest-even bf16 exactly.
    *reinterpret_cast<uint16_t *>(p) =
        uint16_t(kernels::floatBits(kernels::roundToBf16(v)) >> 16);
    break;
  case Store::FP16:
    // Exactly representable once rounded: the conversion adds nothing.
    *reinterpret_cast<__half *>(p) = __float2half_rn(kernels::roundToFp16(v));
    break;
  default:
    *reinterpret_cast<float *>(p) = v;
  }
}
#endif

/// The 16-bit pattern a host stores for v (bf16 or fp16), rounded as the
/// device rounds: the host-side conversion of a 16-bit program's input.
inline uint16_t narrowBits(Store t, float v) {
  using kernels::bitsFloat;
  using kernels::floatBits;
  if (t == Store::BF16)
    return uint16_t(floatBits(kernels::roundToBf16(v)) >> 16);
  // fp16, from the value it rounds to (exactly representable).
  const uint32_t u = floatBits(kernels::roundToFp16(v));
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag >= 0x7f800000u) // infinity, or a quiet NaN
    return uint16_t(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  if (mag < 0x38800000u) // zero or subnormal: a multiple of 2^-24
    return uint16_t(sign | uint16_t(bitsFloat(mag) * 16777216.0f));
  return uint16_t(sign | (((mag >> 23) - 112u) << 10) | ((mag >> 13) & 0x3ffu));
}

/// One element of a View: reads as float, assigns with rounding.
struct Elem {
  char *p;
  Store t;
#ifdef __CUDACC__
  MEMFIT_VIEW_D operator float() const { return loadAs(p, t); }
  MEMFIT_VIEW_D Elem &operator=(float v) {
    storeAs(p, t, v);
    return *this;
  }
  // Assigning an element is assigning its value, never re-pointing.
  MEMFIT_VIEW_D Elem &operator=(const Elem &o) { return *this = float(o); }
  MEMFIT_VIEW_D Elem &operator+=(float v) { return *this = float(*this) + v; }
#endif
};

/// A device buffer and its storage; null when p is.
struct View {
  char *p = nullptr;
  Store t = Store::F32;
  MEMFIT_VIEW_HD explicit operator bool() const { return p != nullptr; }
  MEMFIT_VIEW_HD View operator+(int64_t i) const {
    return {p ? p + i * storeBytes(t) : p, t};
  }
  MEMFIT_VIEW_HD bool operator==(const View &o) const { return p == o.p; }
#ifdef __CUDACC__
  MEMFIT_VIEW_D Elem operator[](int64_t i) const {
    return {p + i * storeBytes(t), t};
  }
#endif
};

} // namespace memfit::rt::cuda

#endif
