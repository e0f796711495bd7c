//===- Device.cuh - Device helpers of the CUDA backend's kernels -*- C++
//-*-===//
//
// Internal to runtime/cuda's .cu files: the accumulate convention of
// Kernels.h, grid-stride loops, and block reductions. Every reduction here
// combines values in an order fixed by the launch shape alone (no atomics),
// so a kernel run twice on the same data gives the same bits: a recomputed
// forward equals the original, as the plan requires.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_DEVICE_CUH
#define MEMFIT_RUNTIME_CUDA_DEVICE_CUH

#include "runtime/cuda/View.h"

#include <cstdint>

namespace memfit::rt::cuda {

/// Writes a gradient value: add into dst, or overwrite it (dst is not read
/// then, so poison or garbage there never leaks in). dst is a float or an
/// element of a View (rounded as it is stored).
__device__ __forceinline__ void put(float &dst, float v, bool acc) {
  dst = acc ? dst + v : v;
}
__device__ __forceinline__ void put(Elem dst, float v, bool acc) {
  dst = acc ? float(dst) + v : v;
}

/// Adds v into a 16-bit or fp32 element from many threads at once: fp32
/// through atomicAdd, 16 bits through a compare-and-swap on the aligned
/// word that holds it (rounded at every add, as atomics on 16-bit values
/// round).
__device__ __forceinline__ void atomicPut(Elem e, float v) {
  if (e.t == Store::F32) {
    atomicAdd(reinterpret_cast<float *>(e.p), v);
    return;
  }
  auto addr = reinterpret_cast<uintptr_t>(e.p);
  auto *word = reinterpret_cast<unsigned int *>(addr & ~uintptr_t(3));
  const int shift = (addr & 2) ? 16 : 0;
  unsigned int old = *word, seen;
  do {
    seen = old;
    uint16_t bits = uint16_t(seen >> shift);
    Elem tmp{reinterpret_cast<char *>(&bits), e.t};
    tmp = float(tmp) + v;
    unsigned int next = (seen & ~(0xffffu << shift)) | (unsigned int)(bits)
                                                           << shift;
    old = atomicCAS(word, seen, next);
  } while (old != seen);
}

/// for (int64_t i = global thread index; i < count; i += grid size)
#define MEMFIT_GRID_LOOP(i, count)                                             \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;             \
       i < (count); i += int64_t(gridDim.x) * blockDim.x)

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};

template <typename T, typename Op> __device__ T warpReduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

/// Reduces one value per thread over the block (blockDim.x a multiple of 32,
/// at most 1024); every thread receives the result. All threads must call
/// it. `scratch` is a __shared__ array of 32 T; consecutive calls may share
/// it.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T identity, T *scratch) {
  v = warpReduce(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); // a previous call may still read scratch[0]
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? scratch[lane] : identity;
    v = warpReduce(v, op);
    if (lane == 0)
      scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

} // namespace memfit::rt::cuda

#endif
