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
// does not diverge; the hottest element-wise kernels go further and are
// templated on it (Typed, Pack), chosen once per launch on the host.
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
/// A 16-bit element's value from its bits, and the bits a value rounds to:
/// the one conversion that element reads, element writes and the packed
/// loads and stores of Pack all go through.
MEMFIT_VIEW_D float from16(Store t, uint16_t b) {
  return t == Store::BF16 ? kernels::bitsFloat(uint32_t(b) << 16)
                          : __half2float(__ushort_as_half(b));
}

MEMFIT_VIEW_D uint16_t to16(Store t, float v) {
  // bf16: rounded first, so the top half is the nearest-even bf16 exactly.
  // fp16: exactly representable once rounded, so the conversion adds
  // nothing.
  return t == Store::BF16
             ? uint16_t(kernels::floatBits(kernels::roundToBf16(v)) >> 16)
             : __half_as_ushort(__float2half_rn(kernels::roundToFp16(v)));
}

MEMFIT_VIEW_D float loadAs(const char *p, Store t) {
  if (t == Store::F32)
    return *reinterpret_cast<const float *>(p);
  return from16(t, *reinterpret_cast<const uint16_t *>(p));
}

MEMFIT_VIEW_D void storeAs(char *p, Store t, float v) {
  if (t == Store::F32)
    *reinterpret_cast<float *>(p) = v;
  else
    *reinterpret_cast<uint16_t *>(p) = to16(t, v);
}

/// A storage fixed at compile time: kernels templated on it index a raw
/// pointer with no per-element switch, converting exactly as Elem does.
template <Store S> struct Typed {
  static constexpr int bytes = S == Store::F32 ? 4 : 2;
  MEMFIT_VIEW_D static float load(const char *base, int64_t i) {
    return loadAs(base + i * bytes, S);
  }
  MEMFIT_VIEW_D static void store(char *base, int64_t i, float v) {
    storeAs(base + i * bytes, S, v);
  }
};

/// A read-only operand of storage S that indexes as a float pointer does:
/// the runtime/kernels functions taking `auto` operands (padAt,
/// sliceGradAt, ...) run on it with no per-element switch.
template <Store S> struct TypedIn {
  const char *p;
  MEMFIT_VIEW_D float operator[](int64_t i) const {
    return Typed<S>::load(p, i);
  }
  MEMFIT_VIEW_D TypedIn operator+(int64_t i) const {
    return {p + i * Typed<S>::bytes};
  }
};

/// A written operand of storage S that indexes as a float pointer does:
/// an element reads as fp32 and assigns with Typed's rounding, so the
/// runtime/kernels functions writing through `auto` operands
/// (maxPoolCellGrad, ...) run on it with no per-element switch.
template <Store S> struct TypedOut {
  char *p;
  struct Ref {
    char *p;
    MEMFIT_VIEW_D operator float() const { return Typed<S>::load(p, 0); }
    MEMFIT_VIEW_D Ref &operator=(float v) {
      Typed<S>::store(p, 0, v);
      return *this;
    }
  };
  MEMFIT_VIEW_D Ref operator[](int64_t i) const {
    return {p + i * Typed<S>::bytes};
  }
  MEMFIT_VIEW_D TypedOut operator+(int64_t i) const {
    return {p + i * Typed<S>::bytes};
  }
};

/// 16 bytes of storage S, moved by one vector load or store: `width`
/// elements (4 fp32, 8 16-bit), element k at the k-th lowest address. Its
/// elements convert as Typed's do, so a packed kernel computes what the
/// element-wise one does, bit for bit. Indexed with constants (unrolled
/// loops) it lives in registers.
template <Store S> struct Pack {
  static constexpr int width = 16 / Typed<S>::bytes;
  uint32_t w[4];

  /// Pack v of base, which is 16-byte aligned.
  MEMFIT_VIEW_D static Pack load(const char *base, int64_t v) {
    const uint4 u = reinterpret_cast<const uint4 *>(base)[v];
    return {{u.x, u.y, u.z, u.w}};
  }
  MEMFIT_VIEW_D void store(char *base, int64_t v) const {
    reinterpret_cast<uint4 *>(base)[v] = make_uint4(w[0], w[1], w[2], w[3]);
  }
  MEMFIT_VIEW_D float get(int k) const {
    if constexpr (S == Store::F32)
      return kernels::bitsFloat(w[k]);
    else
      return from16(S, uint16_t(w[k >> 1] >> ((k & 1) * 16)));
  }
  MEMFIT_VIEW_D void set(int k, float v) {
    if constexpr (S == Store::F32) {
      w[k] = kernels::floatBits(v);
    } else {
      const int shift = (k & 1) * 16;
      w[k >> 1] = (w[k >> 1] & ~(0xffffu << shift)) | uint32_t(to16(S, v))
                                                          << shift;
    }
  }
};
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
