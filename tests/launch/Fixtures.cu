//===- Fixtures.cu - Kernels tests/launch_resources.py must judge right ---===//
//
// Compiled by the launch-resource test only, never linked. The checker
// must reject the first, second and fourth and accept the third; the test
// fails if its verdict on any of them is another, or if one is missing:
//  - a kernel with no launch bound (launched at any size, ptxas does not
//    know how many registers a thread may have);
//  - a kernel that keeps ~100 values live per thread, bounded at 1024
//    threads: 64K registers / 1024 = 64 a thread, so ptxas spills the rest;
//  - the same kernel bounded at 256 threads: 255 a thread, no spill;
//  - a kernel with a 2 KiB array indexed at run time: local memory over the
//    1 KiB a thread the context reserves (rejected).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"

namespace memfit::launchfixture {

constexpr int kLive = 100;

__global__ void unboundedFixture(const float *x, float *y) {
  y[threadIdx.x] = x[threadIdx.x] * 2.0f;
}

/// Loads kLive values, mixes them in rounds where each depends on all of
/// the previous round (so all stay live), then stores them all.
template <int Threads> struct HungryFixture {
  static constexpr int threads = Threads;
  __device__ static void run(const float *x, float *y, int rounds) {
    float v[kLive];
    const int64_t base = blockIdx.x * int64_t(Threads) * kLive + threadIdx.x;
#pragma unroll
    for (int i = 0; i < kLive; ++i)
      v[i] = x[base + int64_t(i) * Threads];
    for (int r = 0; r < rounds; ++r) {
      const float first = v[0];
#pragma unroll
      for (int i = 0; i + 1 < kLive; ++i)
        v[i] = v[i] * v[i + 1] + v[kLive - 1 - i];
      v[kLive - 1] = v[kLive - 1] * first;
    }
#pragma unroll
    for (int i = 0; i < kLive; ++i)
      y[base + int64_t(i) * Threads] = v[i];
  }
};

/// A per-thread array indexed by a value known only at run time: local
/// memory, 2 KiB a thread.
struct LocalArrayFixture {
  static constexpr int threads = 64;
  __device__ static void run(const float *x, float *y, int n) {
    float a[512];
    for (int i = 0; i < n && i < 512; ++i)
      a[i] = x[i * threads + threadIdx.x];
    y[threadIdx.x] = a[(n * 7 + threadIdx.x) % 512];
  }
};

// Never called: instantiates the kernels through the launch helper the
// backend uses.
void instantiate(const float *x, float *y, cudaStream_t s) {
  rt::cuda::launch<HungryFixture<1024>>(1, s, x, y, 4);
  rt::cuda::launch<HungryFixture<256>>(1, s, x, y, 4);
  rt::cuda::launch<LocalArrayFixture>(1, s, x, y, 4);
  unboundedFixture<<<1, 32, 0, s>>>(x, y);
}

} // namespace memfit::launchfixture
