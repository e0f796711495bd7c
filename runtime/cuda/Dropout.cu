//===- Dropout.cu - CUDA backend: dropout ---------------------------------===//
//
// Dropout's forward and backward: the kept values scaled, the dropped ones
// zero, by the counter-based mask of runtime/kernels/Elementwise.h that the
// CPU emulation draws too (bit for bit: same key, same element index, same
// scaling). Operands of one storage go by 16-byte packs (DropoutTyped),
// deriving each sample's key once per pack rather than once per element;
// mixed storage keeps the per-element View kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::Store;
using cuda::View;

namespace {

/// y = the kept and scaled x (forward), or dx (put) the kept and scaled dy.
struct DropoutKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(DropoutParams p, int64_t count, cuda::DropoutKey k,
                             int64_t firstSample, View in, View out, bool acc) {
    const uint64_t key = k.get();
    MEMFIT_GRID_LOOP(at, count) {
      put(out[at], kernels::dropoutAt(p, key, firstSample, at, in[at]), acc);
    }
  }
};

/// A run of consecutive elements' masks: the sample of the current element
/// and its key, advanced (never recomputed from scratch) as the run
/// crosses into the next sample.
struct SampleCursor {
  const DropoutParams &p;
  uint64_t key;
  int64_t firstSample, s, end;
  uint64_t sampleKey;
  __device__ SampleCursor(const DropoutParams &p, uint64_t key,
                          int64_t firstSample, int64_t at)
      : p(p), key(key), firstSample(firstSample), s(at / p.perSample),
        end((s + 1) * p.perSample),
        sampleKey(kernels::dropoutSampleKey(key, firstSample, s)) {}
  __device__ float kept(int64_t at, float in) {
    while (at >= end) { // a pack crossing a sample boundary
      ++s;
      end += p.perSample;
      sampleKey = kernels::dropoutSampleKey(key, firstSample, s);
    }
    return kernels::dropoutKept(p, sampleKey, at - (end - p.perSample), in);
  }
};

/// DropoutKernel on operands of one storage: the first `packs` * width
/// elements by 16-byte loads and stores, the rest one by one.
template <Store S> struct DropoutTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(DropoutParams p, int64_t count, int64_t packs,
                             cuda::DropoutKey k, int64_t firstSample,
                             const char *in, char *out, bool acc) {
    const uint64_t key = k.get();
    MEMFIT_GRID_LOOP(v, packs) {
      const P x = P::load(in, v);
      // Not read when overwritten, as put() does not read it.
      P o = acc ? P::load(out, v) : P{};
      SampleCursor c(p, key, firstSample, v * P::width);
#pragma unroll
      for (int j = 0; j < P::width; ++j) {
        const float g = c.kept(v * P::width + j, x.get(j));
        o.set(j, acc ? o.get(j) + g : g);
      }
      o.store(out, v);
    }
    MEMFIT_GRID_LOOP_FROM(at, packs * P::width, count) {
      const float g =
          kernels::dropoutAt(p, key, firstSample, at, T::load(in, at));
      T::store(out, at, acc ? T::load(out, at) + g : g);
    }
  }
};

void dropout(const Exec::Impl &im, const DropoutParams &p, int64_t count,
             cuda::DropoutKey key, int64_t firstSample, View in, View out,
             bool acc) {
  if (cuda::sameStore({in, out})) {
    cuda::withStore(out.t, [&](auto s) {
      using K = DropoutTyped<decltype(s)::value>;
      const int64_t packs =
          cuda::packsFor<decltype(s)::value>(count, {in, out});
      cuda::launch<K>(cuda::typedGrid(count, packs, K::P::width), im.compute(),
                      p, count, packs, key, firstSample, in.p, out.p, acc);
    });
    return;
  }
  cuda::launch<DropoutKernel>(gridFor(count), im.compute(), p, count, key,
                              firstSample, in, out, acc);
}

} // namespace

void Exec::dropoutForward(const DropoutParams &p, uint64_t taskKey,
                          const float *x, float *y) {
  dropout(*impl, p, p.perSample * n, impl->dropoutKey(*this, taskKey),
          firstSample, impl->view(x), impl->view(y), false);
  impl->done(*this, "dropout forward kernel");
}

void Exec::dropoutBackward(const DropoutParams &p, uint64_t taskKey,
                           const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  dropout(*impl, p, p.perSample * n, impl->dropoutKey(*this, taskKey),
          firstSample, impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "dropout backward kernel");
}

} // namespace memfit::rt
