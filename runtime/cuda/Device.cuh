//===- Device.cuh - Device helpers of the CUDA backend's kernels -*- C++
//-*-===//
//
// Internal to runtime/cuda's .cu files: how a kernel is declared and
// launched, the accumulate convention of Kernels.h, grid-stride loops, and
// block reductions. Every reduction here combines values in an order fixed
// by the launch shape alone (no atomics), so a kernel run twice on the same
// data gives the same bits: a recomputed forward equals the original, as
// the plan requires.
//
// A kernel is a struct: its block size `threads` and a static __device__
// `run`. cuda::launch<K> instantiates kernelOf<K, ...>, the backend's one
// kernel entry, bounded by __launch_bounds__(K::threads), and launches it
// with K::threads: the size ptxas fitted the registers to is the size
// launched, and no call site can name another (tests/launch_resources.py
// reads what ptxas made of every kernel for every architecture built).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_DEVICE_CUH
#define MEMFIT_RUNTIME_CUDA_DEVICE_CUH

#include "runtime/cuda/View.h"
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Sum.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace memfit::rt::cuda {

/// The kernel of K: its parameters are those of K::run, by value.
template <typename K, typename... P>
__global__ void __launch_bounds__(K::threads) kernelOf(P... p) {
  K::run(p...);
}

template <typename K, typename... P, typename... A>
void launchAs(void (*)(P...), unsigned blocks, cudaStream_t s, A &&...a) {
  static_assert(K::threads > 0 && K::threads <= 1024 &&
                    (K::threads % 32 == 0 || K::threads == 1),
                "a block is whole warps, or one thread, and at most 1024");
  kernelOf<K, std::decay_t<P>...>
      <<<blocks, K::threads, 0, s>>>(static_cast<A &&>(a)...);
}

/// Launches kernel K on `blocks` blocks of K::threads threads.
template <typename K, typename... A>
void launch(unsigned blocks, cudaStream_t s, A &&...a) {
  launchAs<K>(static_cast<decltype(&K::run)>(nullptr), blocks, s,
              static_cast<A &&>(a)...);
}

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

/// for (int64_t i = first + global thread index; i < count; i += grid size)
#define MEMFIT_GRID_LOOP_FROM(i, first, count)                                 \
  for (int64_t i = (first) + blockIdx.x * int64_t(blockDim.x) + threadIdx.x;   \
       i < (count); i += int64_t(gridDim.x) * blockDim.x)

/// Calls f(std::integral_constant<Store, s>{}) on the host: the one switch
/// on a launch's storage, which picks the kernel templated on it.
template <typename F> void withStore(Store s, F &&f) {
  switch (s) {
  case Store::BF16:
    f(std::integral_constant<Store, Store::BF16>{});
    break;
  case Store::FP16:
    f(std::integral_constant<Store, Store::FP16>{});
    break;
  default:
    f(std::integral_constant<Store, Store::F32>{});
  }
}

/// Whether every view has the storage of the first (null views included:
/// a typed kernel would read or write them as that storage).
inline bool sameStore(std::initializer_list<View> vs) {
  for (const View &v : vs)
    if (v.t != vs.begin()->t)
      return false;
  return true;
}

/// How many whole packs of Pack<S>::width elements, out of `count`, a
/// typed kernel moves by 16-byte loads and stores: all of them when every
/// view is 16-byte aligned (its elements past the packs go one by one),
/// none otherwise.
template <Store S>
int64_t packsFor(int64_t count, std::initializer_list<View> vs) {
  for (const View &v : vs)
    if (reinterpret_cast<uintptr_t>(v.p) % 16 != 0)
      return 0;
  return count / Pack<S>::width;
}

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

/// Neumaier's compensated float sum (runtime/kernels/Sum.h), shared with
/// the CPU tests of the reductions built on it.
using kernels::CompensatedSum;

__device__ inline CompensatedSum shuffleDown(CompensatedSum v, int o) {
  return {__shfl_down_sync(0xffffffffu, v.s, o),
          __shfl_down_sync(0xffffffffu, v.c, o)};
}

__device__ inline kernels::BnPartial shuffleDown(kernels::BnPartial v, int o) {
  return {shuffleDown(v.d, o), shuffleDown(v.dd, o)};
}

/// Sums one T (CompensatedSum or BnPartial: anything with add(T) and a
/// shuffleDown) per thread over the block, in a tree fixed by the block
/// size; the result is thread 0's. All threads must call it, at most once
/// per kernel and T (its scratch is not guarded for a second call).
template <int Threads, typename T> __device__ T blockSum(T v) {
  static_assert(Threads % 32 == 0, "whole warps");
  __shared__ T scratch[Threads / 32];
  for (int o = 16; o > 0; o >>= 1)
    v.add(shuffleDown(v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < Threads / 32 ? scratch[lane] : T{};
    for (int o = 16; o > 0; o >>= 1)
      v.add(shuffleDown(v, o));
  }
  return v;
}

} // namespace memfit::rt::cuda

#endif
