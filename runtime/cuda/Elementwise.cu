//===- Elementwise.cu - CUDA backend: element-wise operations -------------===//
//
// Activations, binary operations with broadcast, gradient accumulation,
// the 16-bit convolutions' bias and the SGD update: grid-stride kernels
// over the element functions of runtime/kernels/Elementwise.h, the source
// the CPU emulation runs too (so its masks and roundings are the
// emulation's, bit for bit; the backend compiles with --fmad=false).
//
// Broadcast gradients of a binary op's second operand are sums over the
// samples and broadcast positions, in double, in a fixed order.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"

#include <cmath>

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::Store;
using cuda::typedGrid;
using cuda::View;

namespace {

// --- activations ---

struct ActForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ActParams p, int64_t count, View x, View y) {
    MEMFIT_GRID_LOOP(i, count) { y[i] = kernels::activation(p, x[i]); }
  }
};

struct ActBackwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ActParams p, int64_t count, View src, View dy,
                             View dx, bool acc) {
    MEMFIT_GRID_LOOP(i, count) {
      put(dx[i], kernels::activationGrad(p, src[i], dy[i]), acc);
    }
  }
};

/// The typed kernels below (templated on the storage every operand shares,
/// chosen once per launch on the host) compute what the View kernels do,
/// element by element: the first `packs` * width elements by 16-byte loads
/// and stores, the rest one by one. Operands of differing storage keep the
/// View kernels.
template <Store S> struct ActForwardTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(ActParams p, int64_t count, int64_t packs,
                             const char *x, char *y) {
    MEMFIT_GRID_LOOP(v, packs) {
      const P in = P::load(x, v);
      P out;
#pragma unroll
      for (int k = 0; k < P::width; ++k)
        out.set(k, kernels::activation(p, in.get(k)));
      out.store(y, v);
    }
    MEMFIT_GRID_LOOP_FROM(i, packs * P::width, count) {
      T::store(y, i, kernels::activation(p, T::load(x, i)));
    }
  }
};

template <Store S> struct ActBackwardTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(ActParams p, int64_t count, int64_t packs,
                             const char *src, const char *dy, char *dx,
                             bool acc) {
    MEMFIT_GRID_LOOP(v, packs) {
      const P s = P::load(src, v), d = P::load(dy, v);
      // Not read when overwritten, as put() does not read it.
      P out = acc ? P::load(dx, v) : P{};
#pragma unroll
      for (int k = 0; k < P::width; ++k) {
        const float g = kernels::activationGrad(p, s.get(k), d.get(k));
        out.set(k, acc ? out.get(k) + g : g);
      }
      out.store(dx, v);
    }
    MEMFIT_GRID_LOOP_FROM(i, packs * P::width, count) {
      const float g =
          kernels::activationGrad(p, T::load(src, i), T::load(dy, i));
      T::store(dx, i, acc ? T::load(dx, i) + g : g);
    }
  }
};

// --- binary operations ---

using kernels::binaryBIndex;

/// The second operand's gradient term; a and b are read by Mul and Div.
__device__ __forceinline__ float gradB(BinaryKind k, float dy, View a,
                                       int64_t at, View b, int64_t bAt) {
  // An operand the gradient does not need may be null (the CPU backend's
  // binaryBackward says why it is read only where it exists).
  return kernels::binaryGradReadsOperands(k)
             ? kernels::binaryGradB(k, dy, a ? a[at] : 0.0f, b ? b[bAt] : 0.0f)
             : kernels::binaryGradB(k, dy, 0, 0);
}

struct BinaryForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BinaryParams p, int64_t count, View a, View b,
                             View y) {
    MEMFIT_GRID_LOOP(at, count) {
      y[at] = kernels::binary(p.kind, a[at], b[binaryBIndex(p, at)]);
    }
  }
};

/// b is gathered element by element (broadcast), a and y go by packs.
template <Store S> struct BinaryForwardTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(BinaryParams p, int64_t count, int64_t packs,
                             const char *a, const char *b, char *y) {
    MEMFIT_GRID_LOOP(v, packs) {
      const P in = P::load(a, v);
      P out;
#pragma unroll
      for (int k = 0; k < P::width; ++k) {
        const int64_t at = v * P::width + k;
        out.set(k, kernels::binary(p.kind, in.get(k),
                                   T::load(b, binaryBIndex(p, at))));
      }
      out.store(y, v);
    }
    MEMFIT_GRID_LOOP_FROM(at, packs * P::width, count) {
      T::store(y, at,
               kernels::binary(p.kind, T::load(a, at),
                               T::load(b, binaryBIndex(p, at))));
    }
  }
};

struct BinaryGradAKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BinaryParams p, int64_t count, View a, View b,
                             View dy, View da, bool acc) {
    MEMFIT_GRID_LOOP(at, count) {
      bool reads = kernels::binaryGradReadsOperands(p.kind);
      put(da[at],
          reads ? kernels::binaryGradA(p.kind, dy[at], a ? a[at] : 0.0f,
                                       b ? b[binaryBIndex(p, at)] : 0.0f)
                : kernels::binaryGradA(p.kind, dy[at], 0, 0),
          acc);
    }
  }
};

/// BinaryGradAKernel on operands of one storage: dy, a and da go by packs,
/// b is gathered (broadcast); a and b are read only where the gradient
/// reads them, as there.
template <Store S> struct BinaryGradATyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static float grad(const BinaryParams &p, float dy, float a,
                               const char *b, int64_t at) {
    return kernels::binaryGradA(p.kind, dy, a,
                                b ? T::load(b, binaryBIndex(p, at)) : 0.0f);
  }
  __device__ static void run(BinaryParams p, int64_t count, int64_t packs,
                             const char *a, const char *b, const char *dy,
                             char *da, bool acc) {
    if (!kernels::binaryGradReadsOperands(p.kind))
      a = b = nullptr;
    MEMFIT_GRID_LOOP(v, packs) {
      const P d = P::load(dy, v);
      const P in = a ? P::load(a, v) : P{};
      // Not read when overwritten, as put() does not read it.
      P out = acc ? P::load(da, v) : P{};
#pragma unroll
      for (int k = 0; k < P::width; ++k) {
        const float g =
            grad(p, d.get(k), a ? in.get(k) : 0.0f, b, v * P::width + k);
        out.set(k, acc ? out.get(k) + g : g);
      }
      out.store(da, v);
    }
    MEMFIT_GRID_LOOP_FROM(at, packs * P::width, count) {
      const float g =
          grad(p, T::load(dy, at), a ? T::load(a, at) : 0.0f, b, at);
      T::store(da, at, acc ? T::load(da, at) + g : g);
    }
  }
};

struct BinaryGradBBatchedKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BinaryParams p, int64_t count, View a, View b,
                             View dy, View db, bool acc) {
    MEMFIT_GRID_LOOP(at, count) {
      put(db[at], gradB(p.kind, dy[at], a, at, b, at), acc);
    }
  }
};

/// The positions b[j] is broadcast to: element t of (sample, outer, inner)
/// maps to index ((o * bSize + j) * inner + r) of sample s, when that lies
/// inside the sample.
struct BroadcastShape {
  int64_t n, outer, inner, per, bSize;
  __device__ int64_t at(int64_t j, int64_t t, bool &inside) const {
    int64_t s = t / (outer * inner), rem = t - s * outer * inner;
    int64_t o = rem / inner, r = rem - o * inner;
    int64_t i = (o * bSize + j) * inner + r;
    inside = i < per;
    return s * per + i;
  }
  __host__ __device__ int64_t length() const { return n * outer * inner; }
};

/// One thread per b element: for short reductions (many b elements).
struct BinaryGradBThreadKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BinaryKind kind, BroadcastShape sh, View a, View b,
                             View dy, View db, bool acc) {
    MEMFIT_GRID_LOOP(j, sh.bSize) {
      double sum = 0;
      for (int64_t t = 0; t < sh.length(); ++t) {
        bool inside;
        int64_t at = sh.at(j, t, inside);
        if (inside)
          sum += gradB(kind, dy[at], a, at, b, j);
      }
      put(db[j], float(sum), acc);
    }
  }
};

/// One block per b element: for long reductions (per-channel biases).
struct BinaryGradBBlockKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BinaryKind kind, BroadcastShape sh, View a, View b,
                             View dy, View db, bool acc) {
    __shared__ double scratch[32];
    for (int64_t j = blockIdx.x; j < sh.bSize; j += gridDim.x) {
      double sum = 0;
      for (int64_t t = threadIdx.x; t < sh.length(); t += blockDim.x) {
        bool inside;
        int64_t at = sh.at(j, t, inside);
        if (inside)
          sum += gradB(kind, dy[at], a, at, b, j);
      }
      sum = cuda::blockReduce(sum, cuda::SumOp(), 0.0, scratch);
      if (threadIdx.x == 0)
        put(db[j], float(sum), acc);
    }
  }
};

// --- accumulation ---

struct AccumulateKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, View x, View y) {
    MEMFIT_GRID_LOOP(i, count) { y[i] += x[i]; }
  }
};

// --- 16-bit convolutions' bias and staged gradients ---

struct ChannelBiasAddKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, int64_t c, int64_t spatial,
                             View bias, View y) {
    MEMFIT_GRID_LOOP(t, count) {
      y[t] = float(y[t]) + float(bias[t / spatial % c]);
    }
  }
};

/// db[ch] = the sum of dy over the samples and positions of channel ch
/// (added onto db when accumulating): a convolution's bias gradient in a
/// 16-bit program, where cuDNN's backward-bias would write db in dy's type.
/// One block of 1024 threads per channel, reading 16-byte packs where each
/// sample's plane is whole packs, into a compensated float sum (the order
/// fixed by the launch shape). Its predecessor (256 threads, one element a
/// step, a 64-bit division per element, double sums) left VGG-16 bf16's
/// weight-gradient tasks at about 3x the time cuDNN's engines took for
/// their convolutions on an H200 (gpu.md).
template <Store S> struct ChannelSumTyped {
  static constexpr int threads = 1024;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(int64_t n, int64_t c, int64_t spatial, bool packed,
                             const char *dy, View db, bool acc) {
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
      cuda::CompensatedSum sum;
      if (packed) {
        const int64_t per = spatial / P::width, total = n * per;
        for (int64_t t = threadIdx.x; t < total; t += threads) {
          const int64_t s = kernels::divNonNeg(t, per);
          const P in = P::load(dy, (s * c + ch) * per + (t - s * per));
#pragma unroll
          for (int k = 0; k < P::width; ++k)
            sum.add(in.get(k));
        }
      } else {
        const int64_t total = n * spatial;
        for (int64_t t = threadIdx.x; t < total; t += threads) {
          const int64_t s = kernels::divNonNeg(t, spatial);
          sum.add(T::load(dy, (s * c + ch) * spatial + (t - s * spatial)));
        }
      }
      sum = cuda::blockSum<threads>(sum);
      if (threadIdx.x == 0)
        put(db[ch], sum.value(), acc);
      // The next channel's blockSum reuses its scratch.
      __syncthreads();
    }
  }
};

/// dst = src, or dst += src (acc): putInto, and accumulateInto (y += x is
/// put(y, x, true) exactly: y read, x added in fp32, the sum stored).
template <Store S> struct PutIntoTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(int64_t count, int64_t packs, const char *src,
                             char *dst, bool acc) {
    MEMFIT_GRID_LOOP(v, packs) {
      // Converted even when copied, as the element kernel does (a 16-bit
      // NaN comes out as the element store writes it).
      const P in = P::load(src, v);
      P out = acc ? P::load(dst, v) : P{};
#pragma unroll
      for (int k = 0; k < P::width; ++k)
        out.set(k, acc ? out.get(k) + in.get(k) : in.get(k));
      out.store(dst, v);
    }
    MEMFIT_GRID_LOOP_FROM(i, packs * P::width, count) {
      const float x = T::load(src, i);
      T::store(dst, i, acc ? T::load(dst, i) + x : x);
    }
  }
};

template <Store S> struct ChannelBiasAddTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(int64_t count, int64_t packs, int64_t c,
                             int64_t spatial, const char *bias, char *y) {
    MEMFIT_GRID_LOOP(v, packs) {
      P out = P::load(y, v);
#pragma unroll
      for (int k = 0; k < P::width; ++k) {
        const int64_t t = v * P::width + k;
        out.set(k, out.get(k) + T::load(bias, t / spatial % c));
      }
      out.store(y, v);
    }
    MEMFIT_GRID_LOOP_FROM(t, packs * P::width, count) {
      T::store(y, t, T::load(y, t) + T::load(bias, t / spatial % c));
    }
  }
};

struct PutIntoKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, View src, View dst, bool acc) {
    MEMFIT_GRID_LOOP(i, count) { put(dst[i], src[i], acc); }
  }
};

/// GradScaler's unscale: g /= scale (times the fp32 reciprocal, as torch),
/// flagging any value that is then not finite.
struct UnscaleKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, float inv, float *g,
                             int *nonFinite) {
    MEMFIT_GRID_LOOP(i, count) {
      g[i] *= inv;
      if (!isfinite(g[i]))
        *nonFinite = 1;
    }
  }
};

/// In an iteration graph the step comes from device memory (written by
/// Exec::beginIteration), so that a replay applies the current one.
struct AdamKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(AdamParams p, const cuda::IterationState *state,
                             int64_t count, float *w, const float *dw, float *m,
                             float *v) {
    if (state) {
      p.step = state->step;
      p.lr = state->lr;
    }
    MEMFIT_GRID_LOOP(i, count) { kernels::adamAt(p, i, w, dw, m, v); }
  }
};

struct SgdKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(const cuda::IterationState *state, int64_t count,
                             float lr, float momentum, float weightDecay,
                             bool first, float *w, const float *dw,
                             float *buf) {
    if (state)
      lr = state->lr;
    MEMFIT_GRID_LOOP(i, count) {
      kernels::sgdAt(i, lr, momentum, weightDecay, first, w, dw, buf);
    }
  }
};

} // namespace

void cuda::channelBiasAdd(const Exec::Impl &im, int64_t n, int64_t c,
                          int64_t spatial, View bias, View y) {
  int64_t count = n * c * spatial;
  if (cuda::sameStore({bias, y})) {
    cuda::withStore(y.t, [&](auto s) {
      using K = ChannelBiasAddTyped<decltype(s)::value>;
      const int64_t packs = cuda::packsFor<decltype(s)::value>(count, {y});
      cuda::launch<K>(typedGrid(count, packs, K::P::width), im.compute(), count,
                      packs, c, spatial, bias.p, y.p);
    });
    return;
  }
  cuda::launch<ChannelBiasAddKernel>(gridFor(count), im.compute(), count, c,
                                     spatial, bias, y);
}

void cuda::channelSum(const Exec::Impl &im, int64_t n, int64_t c,
                      int64_t spatial, View dy, View db, bool acc) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(c, 1 << 16));
  cuda::withStore(dy.t, [&](auto s) {
    using K = ChannelSumTyped<decltype(s)::value>;
    // Packs where every plane starts on one: whole packs a plane, dy
    // aligned.
    const bool packed = spatial % K::P::width == 0 &&
                        cuda::packsFor<decltype(s)::value>(spatial, {dy}) > 0;
    cuda::launch<K>(blocks, im.compute(), n, c, spatial, packed,
                    static_cast<const char *>(dy.p), db, acc);
  });
}

void cuda::putInto(const Exec::Impl &im, int64_t count, View src, View dst,
                   bool acc, cudaStream_t stream) {
  if (!stream)
    stream = im.compute();
  if (cuda::sameStore({src, dst})) {
    cuda::withStore(dst.t, [&](auto s) {
      using K = PutIntoTyped<decltype(s)::value>;
      const int64_t packs =
          cuda::packsFor<decltype(s)::value>(count, {src, dst});
      cuda::launch<K>(typedGrid(count, packs, K::P::width), stream, count,
                      packs, src.p, dst.p, acc);
    });
    return;
  }
  cuda::launch<PutIntoKernel>(gridFor(count), stream, count, src, dst, acc);
}

void Exec::actForward(const ActParams &p, int64_t perSample, const float *x,
                      float *y) {
  int64_t count = perSample * n;
  const View vx = impl->view(x), vy = impl->view(y);
  if (cuda::sameStore({vx, vy})) {
    cuda::withStore(vy.t, [&](auto s) {
      using K = ActForwardTyped<decltype(s)::value>;
      const int64_t packs = cuda::packsFor<decltype(s)::value>(count, {vx, vy});
      cuda::launch<K>(typedGrid(count, packs, K::P::width), impl->compute(), p,
                      count, packs, vx.p, vy.p);
    });
  } else {
    cuda::launch<ActForwardKernel>(gridFor(count), impl->compute(), p, count,
                                   vx, vy);
  }
  impl->done(*this, "activation forward kernel");
}

void Exec::actBackward(const ActParams &p, int64_t perSample, const float *src,
                       const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  int64_t count = perSample * n;
  const View vs = impl->view(src), vdy = impl->view(dy), vdx = impl->view(dx);
  if (cuda::sameStore({vs, vdy, vdx})) {
    cuda::withStore(vdx.t, [&](auto s) {
      using K = ActBackwardTyped<decltype(s)::value>;
      const int64_t packs =
          cuda::packsFor<decltype(s)::value>(count, {vs, vdy, vdx});
      cuda::launch<K>(typedGrid(count, packs, K::P::width), impl->compute(), p,
                      count, packs, vs.p, vdy.p, vdx.p, acc);
    });
  } else {
    cuda::launch<ActBackwardKernel>(gridFor(count), impl->compute(), p, count,
                                    vs, vdy, vdx, acc);
  }
  impl->done(*this, "activation backward kernel");
}

void Exec::binaryForward(const BinaryParams &p, const float *a, const float *b,
                         float *y) {
  if (p.bSize <= 0 || p.inner <= 0)
    fatal("binary operation with an empty broadcast shape");
  int64_t count = p.perSample * n;
  const View va = impl->view(a), vb = impl->view(b), vy = impl->view(y);
  if (cuda::sameStore({va, vb, vy})) {
    cuda::withStore(vy.t, [&](auto s) {
      using K = BinaryForwardTyped<decltype(s)::value>;
      // b is gathered (broadcast), so only a and y need aligning.
      const int64_t packs = cuda::packsFor<decltype(s)::value>(count, {va, vy});
      cuda::launch<K>(typedGrid(count, packs, K::P::width), impl->compute(), p,
                      count, packs, va.p, vb.p, vy.p);
    });
  } else {
    cuda::launch<BinaryForwardKernel>(gridFor(count), impl->compute(), p, count,
                                      va, vb, vy);
  }
  impl->done(*this, "binary forward kernel");
}

void Exec::binaryBackward(const BinaryParams &p, const float *a, const float *b,
                          const float *dy, float *da, float *db, bool accA,
                          bool accB) {
  if (p.bSize <= 0 || p.inner <= 0)
    fatal("binary operation with an empty broadcast shape");
  int64_t count = p.perSample * n;
  cudaStream_t s = impl->compute();
  const View va = impl->view(a), vb = impl->view(b), vdy = impl->view(dy),
             vda = impl->view(da), vdb = impl->view(db);
  // da before db: when both operands are one value, da and db are one
  // buffer, and db adds into what da wrote (the CPU reference's order).
  if (da) {
    // Null operands (not read by the gradient) take no part in the choice.
    const bool typed = cuda::sameStore({vda, vdy}) && (!a || va.t == vda.t) &&
                       (!b || vb.t == vda.t);
    if (typed) {
      cuda::withStore(vda.t, [&](auto st) {
        using K = BinaryGradATyped<decltype(st)::value>;
        // b is gathered (broadcast), so only a, dy and da need aligning.
        const int64_t packs =
            cuda::packsFor<decltype(st)::value>(count, {va, vdy, vda});
        cuda::launch<K>(typedGrid(count, packs, K::P::width), s, p, count,
                        packs, va.p, vb.p, vdy.p, vda.p, accA);
      });
    } else {
      cuda::launch<BinaryGradAKernel>(gridFor(count), s, p, count, va, vb, vdy,
                                      vda, accA);
    }
    impl->done(*this, "binary backward kernel (first operand)");
  }
  if (!db)
    return;
  if (p.bBatched && p.bSize == p.perSample) {
    cuda::launch<BinaryGradBBatchedKernel>(gridFor(count), s, p, count, va, vb,
                                           vdy, vdb, accB);
    impl->done(*this, "binary backward kernel (second operand)");
    return;
  }
  // A broadcast b: reduced over all samples, or (batched) per sample.
  BroadcastShape sh;
  sh.n = p.bBatched ? 1 : n;
  sh.inner = p.inner;
  sh.per = p.perSample;
  sh.bSize = p.bSize;
  sh.outer = (p.perSample + p.bSize * p.inner - 1) / (p.bSize * p.inner);
  for (int64_t smp = 0; smp < (p.bBatched ? n : 1); ++smp) {
    const View as = va + smp * p.perSample, bs = vb + smp * p.bSize;
    const View dys = vdy + smp * p.perSample, dbs = vdb + smp * p.bSize;
    if (sh.length() <= 256)
      cuda::launch<BinaryGradBThreadKernel>(gridFor(p.bSize), s, p.kind, sh, as,
                                            bs, dys, dbs, accB);
    else
      cuda::launch<BinaryGradBBlockKernel>(gridFor(p.bSize * kThreads), s,
                                           p.kind, sh, as, bs, dys, dbs, accB);
  }
  impl->done(*this, "binary backward kernel (second operand)");
}

void Exec::accumulateInto(int64_t perSample, const float *x, float *y) {
  int64_t count = perSample * n;
  const View vx = impl->view(x), vy = impl->view(y);
  if (cuda::sameStore({vx, vy}))
    cuda::putInto(*impl, count, vx, vy, true);
  else
    cuda::launch<AccumulateKernel>(gridFor(count), impl->compute(), count, vx,
                                   vy);
  impl->done(*this, "accumulate kernel");
}

void Exec::adam(int32_t id) {
  if (id < 0 || id >= (int32_t)wInfo.size() || !impl->g[id] || !impl->m[id] ||
      !impl->v[id])
    fatal("weight " + std::to_string(id) + " has no Adam state to update");
  const AdamParams p = adamParams(id);
  // Sharded, this rank updates its slice (docs/data-parallel.md).
  auto [lo, hi] = prog.shard >= 1
                      ? comm->mySlice(wInfo[id].count)
                      : std::pair<int64_t, int64_t>{0, wInfo[id].count};
  int64_t count = hi - lo;
  cuda::launch<AdamKernel>(
      gridFor(count), impl->compute(), p, impl->stateRead(), count,
      impl->w[id] + lo, impl->g[id] + lo, impl->m[id] + lo, impl->v[id] + lo);
  impl->done(*this, "adam kernel");
  impl->copyStale[id] = true;
}

void Exec::sgd(int32_t id) {
  if (id < 0 || id >= (int32_t)wInfo.size() || !impl->g[id])
    fatal("weight " + std::to_string(id) + " has no gradient to apply");
  bool useBuf = prog.hasMomentum && momentum != 0;
  auto [lo, hi] = prog.shard >= 1
                      ? comm->mySlice(wInfo[id].count)
                      : std::pair<int64_t, int64_t>{0, wInfo[id].count};
  int64_t count = hi - lo;
  cuda::launch<SgdKernel>(gridFor(count), impl->compute(), impl->stateRead(),
                          count, lr, momentum, weightDecayOf(id),
                          firstIteration, impl->w[id] + lo, impl->g[id] + lo,
                          useBuf ? impl->m[id] + lo : nullptr);
  impl->done(*this, "sgd kernel");
  impl->copyStale[id] = true;
}

bool Exec::unscaleGradients() {
  if (!impl->nonFinite)
    fatal("a loss scale in a program that does not scale its loss");
  cudaStream_t s = impl->compute();
  MEMFIT_CHECK(cudaMemsetAsync(impl->nonFinite, 0, sizeof(int), s));
  const float inv = static_cast<float>(1.0 / double(lossScale));
  for (size_t id = 0; id < wInfo.size(); ++id) {
    if (!impl->g[id] || wInfo[id].home == Home::Host)
      continue;
    auto [lo, hi] = prog.shard >= 1
                        ? comm->mySlice(wInfo[id].count)
                        : std::pair<int64_t, int64_t>{0, wInfo[id].count};
    if (hi > lo)
      cuda::launch<UnscaleKernel>(gridFor(hi - lo), s, hi - lo, inv,
                                  impl->g[id] + lo, impl->nonFinite);
  }
  impl->done(*this, "unscale kernel");
  int flag = 0;
  MEMFIT_CHECK(cudaMemcpyAsync(&flag, impl->nonFinite, sizeof flag,
                               cudaMemcpyDeviceToHost, s));
  MEMFIT_CHECK(cudaStreamSynchronize(s));
  // Gradients homed on the host, unscaled there by the same fp32 multiply:
  // the rounds, their copy-outs joined into the compute stream, are done.
  for (size_t id = 0; id < wInfo.size(); ++id) {
    if (!impl->g[id] || wInfo[id].home != Home::Host)
      continue;
    float *g = impl->g[id];
    for (int64_t i = 0; i < wInfo[id].count; ++i) {
      g[i] *= inv;
      flag = flag || !std::isfinite(g[i]);
    }
  }
  // Every rank skips the same steps.
  float bad = flag ? 1.0f : 0.0f;
  if (prog.ranks > 1)
    comm->allReduceSum(&bad, 1);
  return bad == 0.0f;
}

} // namespace memfit::rt
