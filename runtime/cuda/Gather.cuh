//===- Gather.cuh - CUDA backend: typed gathers, 16-byte stores -*- C++ -*-===//
//
// Internal to runtime/cuda's .cu files. Padding, slices, broadcasts,
// transposes and masked fills compute output element t from input
// positions only an index function of runtime/kernels knows (padAt,
// sliceSource, expandGradAt, ...). GatherTyped runs such a function on
// operands of one storage fixed at compile time: the output (read too when
// accumulating) by 16-byte packs, the input element by element through
// TypedIn, so no element switches on its storage. Where a function's
// neighbouring outputs read neighbouring inputs (a pad's interior rows, a
// slice or broadcast along the innermost axis), a warp's loads fall in the
// same cache lines and move as whole lines. Values and roundings are those
// of the View kernels, bit for bit: the same function, the same conversions.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_GATHER_CUH
#define MEMFIT_RUNTIME_CUDA_GATHER_CUH

#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"

namespace memfit::rt::cuda {

/// out[t] = f(in, t), or out[t] += f(in, t) (acc), for t < count: the first
/// `packs` * width outputs by 16-byte loads and stores, the rest one by one.
/// F is a functor whose `operator()(auto in, int64_t t)` returns a float;
/// an index gather (out[t] = in[f.source(t)]) also has `source`, and
/// `inner` and `step`: outputs t and t + 1 of one run of `inner` outputs
/// (t + 1 not a multiple of inner) read sources `step` apart.
template <Store S, typename F> struct GatherTyped {
  static constexpr int threads = kThreads;
  using P = Pack<S>;
  using T = Typed<S>;
  __device__ static void run(F f, int64_t count, int64_t packs, const char *in,
                             char *out, bool acc) {
    const TypedIn<S> x{in};
    MEMFIT_GRID_LOOP(v, packs) {
      const int64_t t0 = v * P::width;
      // Not read when overwritten, as put() does not read it.
      P o = acc ? P::load(out, v) : P{};
      if constexpr (requires { f.source(t0); }) {
        // An index gather: within a run of its innermost output axis the
        // sources advance by a fixed step, so a pack inside one run costs
        // one index computation, not `width`.
        const int64_t src = f.source(t0);
        const bool run = t0 % f.inner + P::width <= f.inner;
#pragma unroll
        for (int k = 0; k < P::width; ++k) {
          const float g = x[run ? src + k * f.step : f.source(t0 + k)];
          o.set(k, acc ? o.get(k) + g : g);
        }
      } else {
#pragma unroll
        for (int k = 0; k < P::width; ++k) {
          const float g = f(x, t0 + k);
          o.set(k, acc ? o.get(k) + g : g);
        }
      }
      o.store(out, v);
    }
    MEMFIT_GRID_LOOP_FROM(t, packs * P::width, count) {
      const float g = f(x, t);
      T::store(out, t, acc ? T::load(out, t) + g : g);
    }
  }
};

/// Launches GatherTyped of f over `count` outputs when `in` and `out`
/// share a storage; false (nothing launched) otherwise, for the caller's
/// View kernel. Only the output needs aligning: the input is gathered.
template <typename F>
bool gatherTyped(cudaStream_t s, const F &f, int64_t count, View in, View out,
                 bool acc) {
  if (!sameStore({in, out}))
    return false;
  withStore(out.t, [&](auto st) {
    constexpr Store S = decltype(st)::value;
    const int64_t packs = packsFor<S>(count, {out});
    launch<GatherTyped<S, F>>(typedGrid(count, packs, Pack<S>::width), s, f,
                              count, packs, in.p, out.p, acc);
  });
  return true;
}

} // namespace memfit::rt::cuda

#endif
