//===- HostDevice.h - Functions of both backends ----------------*- C++ -*-===//
//
// MEMFIT_HD marks a kernel function compiled twice: by nvcc for the device
// (and host) in the CUDA backend, by the host compiler into the CPU
// emulation (runtime/kernels/*.h).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_HOSTDEVICE_H
#define MEMFIT_RUNTIME_KERNELS_HOSTDEVICE_H

#include <cstdint>

#ifdef __CUDACC__
#define MEMFIT_HD __host__ __device__ __forceinline__
#else
#define MEMFIT_HD inline
#endif

namespace memfit::rt::kernels {

/// a / b for a >= 0 and b > 0, in 32 bits where both fit: a GPU divides
/// 64-bit integers in software, several times the instructions, and the
/// index arithmetic of the pooling and reduction kernels is mostly
/// divisions.
MEMFIT_HD int64_t divNonNeg(int64_t a, int64_t b) {
  if (((a | b) >> 31) == 0)
    return int64_t(uint32_t(a) / uint32_t(b));
  return a / b;
}

/// f(j) for every j in [0, n), n <= W. On the device, for W up to 128, the
/// loop runs to the constant W with a guard and is unrolled, so that a
/// per-thread array indexed by j lives in registers: an array in local
/// memory makes the driver reserve its size for every thread the GPU can
/// hold (794 MiB for the 4 KiB of attention's backward on an H200). Wider
/// state cannot fit 255 registers and stays a loop. The host loops to n.
template <int W, class F> MEMFIT_HD void forLanes(int64_t n, F &&f) {
#ifdef __CUDA_ARCH__
  if constexpr (W <= 128) {
#pragma unroll
    for (int j = 0; j < W; ++j)
      if (j < n)
        f(j);
    return;
  }
#endif
  for (int64_t j = 0; j < n; ++j)
    f(j);
}

} // namespace memfit::rt::kernels

#endif
