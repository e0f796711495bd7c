//===- BatchNorm.cu - CUDA backend: BatchNorm -----------------------------===//
//
// Own kernels rather than cuDNN's: the backward is split into a data task
// and a weight task (cuDNN computes both at once), epsilon may be below
// CUDNN_BN_MIN_EPSILON, one value per channel keeps the biased variance,
// and a batch split into chunks combines its statistics exactly.
//
// Each channel's n * spatial values are cut into slices, one block each,
// enough blocks over all channels to fill the GPU (kernels::bnSlices):
// one block per channel left most of a 132-SM GPU idle at 64 to 256
// channels. A reduction is two launches: every block leaves a
// kernels::BnPartial (float, compensated) in Exec::Impl::bnPartials, the
// scratch allocated at start-up, and the next launch combines a channel's
// partials in slice order before it uses them. So the forward reads x once
// for the statistics and once to normalize (a launch of one thread per
// channel between them saves the statistics, so y may overwrite x), the
// backward-data task reads x and dy once for the sums and once for dx, and the
// order of every sum depends on the launch shape alone: a rerun, and a
// recomputed forward, give the same bits. Where x, dy and dx share a storage
// the kernels are templated on it and move 16-byte packs wherever a
// sample's positions and the slices are whole packs (slices are cut so
// when the positions are); a mix of storages takes the View kernels. No double
// per element (1/64 of float on GeForce, L4 and L40S cards); the per-element
// arithmetic is runtime/kernels/Norm.h, which the CPU emulation runs.
// Evaluation (bnInference) reduces nothing: the apply kernels run with the
// running statistics in place of the saved ones.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Norm.h"

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::View;
using kernels::BnPartial;
using kernels::BnSlices;

namespace {

constexpr int kBnThreads = 512;

/// The channel and slice of this block in a launch over channels ch0 ...:
/// blocks are channel-major, `slices` per channel.
struct BnBlock {
  int64_t local, ch, slice, begin, end;
};
__device__ BnBlock bnBlock(int64_t ch0, BnSlices sl, int64_t count) {
  BnBlock b;
  b.local = blockIdx.x / sl.slices;
  b.slice = blockIdx.x - b.local * sl.slices;
  b.ch = ch0 + b.local;
  b.begin = b.slice * sl.per;
  b.end = b.begin + sl.per < count ? b.begin + sl.per : count;
  return b;
}

/// Calls f(e) for every run of W consecutive values of one sample in the
/// block's slice that this thread owns, e the element index of the run's
/// first value (value j of the channel is sample j / spatial, position
/// j % spatial), walked without a division per step. With W > 1 the
/// positions of a sample and the slices are whole runs (the caller checks
/// spatial % W and slices with bnSlicesAligned), so no run crosses a sample.
template <int W, typename F>
__device__ void forEachRun(const BatchNormParams &p, const BnBlock &b, F f) {
  const int64_t step = int64_t(blockDim.x) * W;
  const int64_t ds = step / p.spatial, dq = step - ds * p.spatial;
  int64_t j = b.begin + int64_t(threadIdx.x) * W;
  int64_t s = j / p.spatial, q = j - s * p.spatial;
  for (; j < b.end; j += step) {
    f((s * p.c + b.ch) * p.spatial + q);
    q += dq;
    s += ds;
    if (q >= p.spatial) {
      q -= p.spatial;
      ++s;
    }
  }
}

/// The typed kernels' access to their operands: storage S fixed at compile
/// time, by one 16-byte pack of `width` values where Packed, else one value.
template <cuda::Store S, bool Packed> struct BnIo {
  using P = cuda::Pack<S>;
  static constexpr int width = Packed ? P::width : 1;
  __device__ static void load(const char *base, int64_t e, float (&v)[width]) {
    if constexpr (Packed) {
      const P pk = P::load(base, e / width);
#pragma unroll
      for (int k = 0; k < width; ++k)
        v[k] = pk.get(k);
    } else {
      v[0] = cuda::Typed<S>::load(base, e);
    }
  }
  __device__ static void store(char *base, int64_t e, const float (&v)[width]) {
    if constexpr (Packed) {
      P pk{};
#pragma unroll
      for (int k = 0; k < width; ++k)
        pk.set(k, v[k]);
      pk.store(base, e / width);
    } else {
      cuda::Typed<S>::store(base, e, v[0]);
    }
  }
};

/// A channel's partials combined in slice order.
__device__ BnPartial combined(const BnPartial *parts, int64_t slices) {
  BnPartial all;
  for (int64_t i = 0; i < slices; ++i)
    all.add(parts[i]);
  return all;
}

/// The channel means of dy and dy * xhat over `batchCount` values that a
/// backward-data block uses: from the partials (whole batch) or from the
/// gradients of scale and bias (a batch in chunks: their sums over the
/// whole batch). Thread 0 computes them once per block (double costs
/// nothing there; it divides as the CPU emulation does); every thread
/// returns after the block's barrier.
__device__ float2 bnDataMeans(const BnBlock &b, BnSlices sl, double batchCount,
                              const BnPartial *parts, const float *sumDyXhat,
                              const float *sumDy) {
  __shared__ float means[2];
  if (threadIdx.x == 0) {
    double d, dd;
    if (parts) {
      const BnPartial all = combined(parts + b.local * sl.slices, sl.slices);
      d = all.d.value();
      dd = all.dd.value();
    } else {
      d = sumDy[b.ch];
      dd = sumDyXhat[b.ch];
    }
    means[0] = float(d / batchCount);
    means[1] = float(dd / batchCount);
  }
  __syncthreads();
  return make_float2(means[0], means[1]);
}

/// The shift of channel ch's statistics: its first value.
__device__ float bnShift(const BatchNormParams &p, View x, int64_t ch) {
  return x[ch * p.spatial];
}

/// One slice's sums of x - shift and its squares.
struct BnStatsPartialKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, View x, BnPartial *parts) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float shift = bnShift(p, x, b.ch);
    BnPartial mine;
    forEachRun<1>(p, b, [&](int64_t i) { mine.addValue(x[i], shift); });
    mine = cuda::blockSum<threads>(mine);
    if (threadIdx.x == 0)
      parts[blockIdx.x] = mine;
  }
};

/// Each channel's statistics from its partials, saved and folded into the
/// running ones: one thread per channel, before any block writes y, so y
/// may be x itself (the shift is read from x). Double for the running
/// statistics is once per channel, off the hot path.
struct BnSaveKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BatchNormParams p, int64_t ch0, int64_t channels,
                             int64_t slices, int64_t count, View x,
                             const BnPartial *parts, float *runMean,
                             float *runVar, float *saved, bool updateRunning) {
    MEMFIT_GRID_LOOP(local, channels) {
      const int64_t ch = ch0 + local;
      float mean, m2;
      kernels::bnMoments(combined(parts + local * slices, slices),
                         bnShift(p, x, ch), float(count), mean, m2);
      saved[ch] = mean;
      saved[p.c + ch] = kernels::bnInvStdF(p, float(count), m2);
      if (updateRunning)
        kernels::bnUpdateRunning(p, double(count), mean, m2, runMean[ch],
                                 runVar[ch]);
    }
  }
};

/// Where the apply kernels take a channel's mean and 1/std from: the
/// saved (float) batch statistics, which the forward and a recomputed
/// forward both apply, so a recompute is bit-identical; or the running
/// statistics (evaluation).
struct SavedStats {
  const float *saved;
  __device__ float2 of(const BatchNormParams &p, int64_t ch) const {
    return make_float2(saved[ch], saved[p.c + ch]);
  }
};
struct RunningStats {
  const float *runMean, *runVar;
  __device__ float2 of(const BatchNormParams &p, int64_t ch) const {
    return make_float2(runMean[ch], kernels::bnRunningInvStd(p, runVar[ch]));
  }
};

/// y over the block's slice, normalized with the statistics of St.
template <typename St> struct BnApplyKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, View x, const float *scale,
                             const float *bias, St stats, View y) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float2 st = stats.of(p, b.ch);
    const float fm = st.x, fi = st.y, sc = scale[b.ch], bi = bias[b.ch];
    forEachRun<1>(p, b, [&](int64_t i) {
      y[i] = kernels::bnOut(p, kernels::bnNormalize(x[i], sc, bi, fm, fi));
    });
  }
};

/// A fused ReLU's channel scale and bias, which its mask is recomputed
/// with (kernels::bnMaskedDy); unread without one.
struct BnRelu {
  const float *scale = nullptr, *bias = nullptr;
  __device__ float2 of(const BatchNormParams &p, int64_t ch) const {
    return kernels::bnFusesAct(p) ? make_float2(scale[ch], bias[ch])
                                  : make_float2(0, 0);
  }
};

/// One slice's sums of dy and dy * xhat (both backward tasks).
struct BnGradPartialKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, View x, const float *saved, View dy,
                             BnRelu relu, BnPartial *parts) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float mean = saved[b.ch], invStd = saved[p.c + b.ch];
    const float2 sb = relu.of(p, b.ch);
    BnPartial mine;
    forEachRun<1>(p, b, [&](int64_t i) {
      const float xv = x[i];
      kernels::bnAddGrad(
          mine, xv, kernels::bnMaskedDy(p, xv, dy[i], sb.x, sb.y, mean, invStd),
          mean, invStd);
    });
    mine = cuda::blockSum<threads>(mine);
    if (threadIdx.x == 0)
      parts[blockIdx.x] = mine;
  }
};

struct BnWeightKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t ch0, int64_t channels, int64_t slices,
                             const BnPartial *parts, float *dscale,
                             float *dbias, bool acc) {
    MEMFIT_GRID_LOOP(local, channels) {
      const BnPartial all = combined(parts + local * slices, slices);
      if (dscale)
        put(dscale[ch0 + local], all.dd.value(), acc);
      if (dbias)
        put(dbias[ch0 + local], all.d.value(), acc);
    }
  }
};

/// dx over the block's slice from the channel's sums; meanDy and
/// meanDyXhat are the channel's sums over `batchCount` values, from the
/// partials (whole batch) or from the gradients of scale and bias (a batch
/// in chunks: their sums over the whole batch).
struct BnBackwardDataKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, double batchCount, View x,
                             const float *scale, const float *saved,
                             const BnPartial *parts, const float *sumDyXhat,
                             const float *sumDy, View dy, const float *bias,
                             View dx, bool acc) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float2 means =
        bnDataMeans(b, sl, batchCount, parts, sumDyXhat, sumDy);
    const float mean = saved[b.ch], invStd = saved[p.c + b.ch],
                sc = scale[b.ch], meanDy = means.x, meanDyXhat = means.y;
    const float bi = kernels::bnFusesAct(p) ? bias[b.ch] : 0.0f;
    forEachRun<1>(p, b, [&](int64_t i) {
      const float xv = x[i];
      put(dx[i],
          kernels::bnGrad(
              xv, kernels::bnMaskedDy(p, xv, dy[i], sc, bi, mean, invStd), sc,
              mean, invStd, meanDy, meanDyXhat),
          acc);
    });
  }
};

// --- The same slices on operands of one storage: no per-element switch,
// 16-byte loads and stores where the positions are whole packs. The sums
// are those of the View kernels in another order within a thread.

template <cuda::Store S, bool Packed> struct BnStatsPartialTyped {
  static constexpr int threads = kBnThreads;
  using Io = BnIo<S, Packed>;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, const char *x, BnPartial *parts) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float shift = cuda::Typed<S>::load(x, b.ch * p.spatial);
    BnPartial mine;
    forEachRun<Io::width>(p, b, [&](int64_t e) {
      float v[Io::width];
      Io::load(x, e, v);
#pragma unroll
      for (int k = 0; k < Io::width; ++k)
        mine.addValue(v[k], shift);
    });
    mine = cuda::blockSum<threads>(mine);
    if (threadIdx.x == 0)
      parts[blockIdx.x] = mine;
  }
};

template <cuda::Store S, bool Packed, typename St> struct BnApplyTyped {
  static constexpr int threads = kBnThreads;
  using Io = BnIo<S, Packed>;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, const char *x, const float *scale,
                             const float *bias, St stats, char *y) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float2 st = stats.of(p, b.ch);
    const float fm = st.x, fi = st.y, sc = scale[b.ch], bi = bias[b.ch];
    forEachRun<Io::width>(p, b, [&](int64_t e) {
      float v[Io::width];
      Io::load(x, e, v);
#pragma unroll
      for (int k = 0; k < Io::width; ++k)
        v[k] = kernels::bnOut(p, kernels::bnNormalize(v[k], sc, bi, fm, fi));
      Io::store(y, e, v);
    });
  }
};

template <cuda::Store S, bool Packed> struct BnGradPartialTyped {
  static constexpr int threads = kBnThreads;
  using Io = BnIo<S, Packed>;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, const char *x, const float *saved,
                             const char *dy, BnRelu relu, BnPartial *parts) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float mean = saved[b.ch], invStd = saved[p.c + b.ch];
    const float2 sb = relu.of(p, b.ch);
    BnPartial mine;
    forEachRun<Io::width>(p, b, [&](int64_t e) {
      float xv[Io::width], dv[Io::width];
      Io::load(x, e, xv);
      Io::load(dy, e, dv);
#pragma unroll
      for (int k = 0; k < Io::width; ++k)
        kernels::bnAddGrad(
            mine, xv[k],
            kernels::bnMaskedDy(p, xv[k], dv[k], sb.x, sb.y, mean, invStd),
            mean, invStd);
    });
    mine = cuda::blockSum<threads>(mine);
    if (threadIdx.x == 0)
      parts[blockIdx.x] = mine;
  }
};

template <cuda::Store S, bool Packed> struct BnBackwardDataTyped {
  static constexpr int threads = kBnThreads;
  using Io = BnIo<S, Packed>;
  __device__ static void run(BatchNormParams p, int64_t ch0, BnSlices sl,
                             int64_t count, double batchCount, const char *x,
                             const float *scale, const float *saved,
                             const BnPartial *parts, const float *sumDyXhat,
                             const float *sumDy, const char *dy,
                             const float *bias, char *dx, bool acc) {
    const BnBlock b = bnBlock(ch0, sl, count);
    const float2 means =
        bnDataMeans(b, sl, batchCount, parts, sumDyXhat, sumDy);
    const float mean = saved[b.ch], invStd = saved[p.c + b.ch],
                sc = scale[b.ch], meanDy = means.x, meanDyXhat = means.y;
    const float bi = kernels::bnFusesAct(p) ? bias[b.ch] : 0.0f;
    forEachRun<Io::width>(p, b, [&](int64_t e) {
      float xv[Io::width], dv[Io::width], out[Io::width];
      Io::load(x, e, xv);
      Io::load(dy, e, dv);
      if (acc)
        Io::load(dx, e, out);
#pragma unroll
      for (int k = 0; k < Io::width; ++k) {
        const float g = kernels::bnGrad(
            xv[k], kernels::bnMaskedDy(p, xv[k], dv[k], sc, bi, mean, invStd),
            sc, mean, invStd, meanDy, meanDyXhat);
        out[k] = acc ? out[k] + g : g;
      }
      Io::store(dx, e, out);
    });
  }
};

// A batch split into chunks: the chunk's float statistics per channel,
// combined pairwise (Chan et al.) into the stats block's running
// combination in double, once per channel and chunk, as the CPU emulation
// combines them; the count moves after every channel has read it.
struct BnChunkCombineKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BatchNormParams p, int64_t ch0, int64_t channels,
                             int64_t slices, int64_t count, View x,
                             const BnPartial *parts, float *stats, bool acc) {
    kernels::BnChunkState st = kernels::bnChunkState(p, stats);
    const double before = acc ? *st.count : 0;
    MEMFIT_GRID_LOOP(local, channels) {
      const int64_t ch = ch0 + local;
      float mean, m2;
      kernels::bnMoments(combined(parts + local * slices, slices),
                         bnShift(p, x, ch), float(count), mean, m2);
      if (acc) {
        kernels::bnCombine(st.mean[ch], st.m2[ch], before, mean, m2,
                           double(count));
      } else {
        st.mean[ch] = mean;
        st.m2[ch] = m2;
      }
    }
  }
};

struct BnChunkCountKernel {
  static constexpr int threads = 1;
  __device__ static void run(BatchNormParams p, double count, float *stats,
                             bool acc) {
    kernels::BnChunkState st = kernels::bnChunkState(p, stats);
    *st.count = acc ? *st.count + count : count;
  }
};

struct BnFinalizeKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(BatchNormParams p, float *stats, float *runMean,
                             float *runVar) {
    kernels::BnChunkState st = kernels::bnChunkState(p, stats);
    MEMFIT_GRID_LOOP(ch, p.c) {
      stats[ch] = float(st.mean[ch]);
      stats[p.c + ch] = float(kernels::bnInvStd(p, *st.count, st.m2[ch]));
      kernels::bnUpdateRunning(p, *st.count, st.mean[ch], st.m2[ch],
                               runMean[ch], runVar[ch]);
    }
  }
};

/// Calls f(ch0, channels, slicing, blocks) for each group of at most
/// kernels::kBnGroupChannels channels: a group's partials fit the scratch,
/// and the launches of one group finish with them (stream order) before
/// the next group's overwrite them.
template <typename F>
void forChannelGroups(const BatchNormParams &p, int64_t count, F f) {
  // Slices of whole 16-byte packs (8 values cover fp32's 4 and 16 bits' 8)
  // wherever a sample's positions are.
  const int64_t align = p.spatial % 8 == 0 ? 8 : 1;
  for (int64_t ch0 = 0; ch0 < p.c; ch0 += kernels::kBnGroupChannels) {
    const int64_t channels =
        std::min<int64_t>(kernels::kBnGroupChannels, p.c - ch0);
    const BnSlices sl = kernels::bnSlicesAligned(channels, count, align);
    f(ch0, channels, sl, static_cast<unsigned>(channels * sl.slices));
  }
}

/// Calls f(std::integral_constant<Store, S>, std::bool_constant<Packed>)
/// where every view shares storage S, Packed when the slices and a sample's
/// positions are whole packs and every view is 16-byte aligned; false
/// (nothing called) for mixed storage, which the View kernels take.
template <typename F>
bool withTypedBn(const BatchNormParams &p, BnSlices sl,
                 std::initializer_list<View> vs, F f) {
  if (!cuda::sameStore(vs))
    return false;
  cuda::withStore(vs.begin()->t, [&](auto st) {
    constexpr cuda::Store S = decltype(st)::value;
    constexpr int64_t W = cuda::Pack<S>::width;
    if (p.spatial % W == 0 && sl.per % W == 0 && cuda::packsFor<S>(W, vs) > 0)
      f(st, std::true_type{});
    else
      f(st, std::false_type{});
  });
  return true;
}

// One launch of a slice kernel: the typed one where the operands share a
// storage, else the View one.

void statsPartial(const Exec::Impl &im, const BatchNormParams &p, int64_t ch0,
                  BnSlices sl, unsigned blocks, int64_t count, View x,
                  BnPartial *parts) {
  if (!withTypedBn(p, sl, {x}, [&](auto st, auto packed) {
        cuda::launch<
            BnStatsPartialTyped<decltype(st)::value, decltype(packed)::value>>(
            blocks, im.compute(), p, ch0, sl, count,
            static_cast<const char *>(x.p), parts);
      }))
    cuda::launch<BnStatsPartialKernel>(blocks, im.compute(), p, ch0, sl, count,
                                       x, parts);
}

template <typename St>
void apply(const Exec::Impl &im, const BatchNormParams &p, int64_t ch0,
           BnSlices sl, unsigned blocks, int64_t count, View x,
           const float *scale, const float *bias, St stats, View y) {
  if (!withTypedBn(p, sl, {x, y}, [&](auto st, auto packed) {
        cuda::launch<
            BnApplyTyped<decltype(st)::value, decltype(packed)::value, St>>(
            blocks, im.compute(), p, ch0, sl, count,
            static_cast<const char *>(x.p), scale, bias, stats, y.p);
      }))
    cuda::launch<BnApplyKernel<St>>(blocks, im.compute(), p, ch0, sl, count, x,
                                    scale, bias, stats, y);
}

void gradPartial(const Exec::Impl &im, const BatchNormParams &p, int64_t ch0,
                 BnSlices sl, unsigned blocks, int64_t count, View x,
                 const float *saved, View dy, BnRelu relu, BnPartial *parts) {
  if (!withTypedBn(p, sl, {x, dy}, [&](auto st, auto packed) {
        cuda::launch<
            BnGradPartialTyped<decltype(st)::value, decltype(packed)::value>>(
            blocks, im.compute(), p, ch0, sl, count,
            static_cast<const char *>(x.p), saved,
            static_cast<const char *>(dy.p), relu, parts);
      }))
    cuda::launch<BnGradPartialKernel>(blocks, im.compute(), p, ch0, sl, count,
                                      x, saved, dy, relu, parts);
}

void backwardData(const Exec::Impl &im, const BatchNormParams &p, int64_t ch0,
                  BnSlices sl, unsigned blocks, int64_t count,
                  double batchCount, View x, const float *scale,
                  const float *saved, const BnPartial *parts,
                  const float *sumDyXhat, const float *sumDy, View dy,
                  const float *bias, View dx, bool acc) {
  if (!withTypedBn(p, sl, {x, dy, dx}, [&](auto st, auto packed) {
        cuda::launch<
            BnBackwardDataTyped<decltype(st)::value, decltype(packed)::value>>(
            blocks, im.compute(), p, ch0, sl, count, batchCount,
            static_cast<const char *>(x.p), scale, saved, parts, sumDyXhat,
            sumDy, static_cast<const char *>(dy.p), bias, dx.p, acc);
      }))
    cuda::launch<BnBackwardDataKernel>(blocks, im.compute(), p, ch0, sl, count,
                                       batchCount, x, scale, saved, parts,
                                       sumDyXhat, sumDy, dy, bias, dx, acc);
}

} // namespace

void Exec::bnForward(const BatchNormParams &p, const float *x,
                     const float *scale, const float *bias, float *runMean,
                     float *runVar, float *y, float *saved,
                     bool updateRunning) {
  const int64_t count = n * p.rows * p.spatial;
  auto *parts = impl->bnPartials;
  forChannelGroups(
      p, count,
      [&](int64_t ch0, int64_t channels, BnSlices sl, unsigned blocks) {
        const View vx = impl->view(x), vy = impl->view(y);
        statsPartial(*impl, p, ch0, sl, blocks, count, vx, parts);
        cuda::launch<BnSaveKernel>(gridFor(channels), impl->compute(), p, ch0,
                                   channels, sl.slices, count, vx, parts,
                                   runMean, runVar, saved, updateRunning);
        apply(*impl, p, ch0, sl, blocks, count, vx, scale, bias,
              SavedStats{saved}, vy);
      });
  impl->done(*this, "batch normalization forward kernel");
}

void Exec::bnApply(const BatchNormParams &p, const float *x, const float *scale,
                   const float *bias, const float *saved, float *y) {
  const int64_t count = n * p.rows * p.spatial;
  forChannelGroups(p, count,
                   [&](int64_t ch0, int64_t, BnSlices sl, unsigned blocks) {
                     apply(*impl, p, ch0, sl, blocks, count, impl->view(x),
                           scale, bias, SavedStats{saved}, impl->view(y));
                   });
  impl->done(*this, "batch normalization apply kernel");
}

void Exec::bnInference(const BatchNormParams &p, const float *x,
                       const float *scale, const float *bias,
                       const float *runMean, const float *runVar, float *y) {
  const int64_t count = n * p.rows * p.spatial;
  forChannelGroups(
      p, count, [&](int64_t ch0, int64_t, BnSlices sl, unsigned blocks) {
        apply(*impl, p, ch0, sl, blocks, count, impl->view(x), scale, bias,
              RunningStats{runMean, runVar}, impl->view(y));
      });
  impl->done(*this, "batch normalization inference kernel");
}

void Exec::bnBackwardData(const BatchNormParams &p, const float *x,
                          const float *scale, const float *saved,
                          const float *dy, float *dx, bool acc,
                          const float *bias) {
  if (!dx)
    return;
  assert((!kernels::bnFusesAct(p) || bias) &&
         "a fused activation's mask needs the bias");
  const int64_t count = n * p.rows * p.spatial;
  auto *parts = impl->bnPartials;
  forChannelGroups(
      p, count, [&](int64_t ch0, int64_t, BnSlices sl, unsigned blocks) {
        gradPartial(*impl, p, ch0, sl, blocks, count, impl->view(x), saved,
                    impl->view(dy), BnRelu{scale, bias}, parts);
        backwardData(*impl, p, ch0, sl, blocks, count, double(count),
                     impl->view(x), scale, saved, parts, nullptr, nullptr,
                     impl->view(dy), bias, impl->view(dx), acc);
      });
  impl->done(*this, "batch normalization backward-data kernel");
}

void Exec::bnBackwardWeight(const BatchNormParams &p, const float *x,
                            const float *saved, const float *dy, float *dscale,
                            float *dbias, bool acc, const float *scale,
                            const float *bias) {
  if (!dscale && !dbias)
    return;
  assert((!kernels::bnFusesAct(p) || (scale && bias)) &&
         "a fused activation's mask needs the scale and bias");
  const int64_t count = n * p.rows * p.spatial;
  auto *parts = impl->bnPartials;
  forChannelGroups(
      p, count,
      [&](int64_t ch0, int64_t channels, BnSlices sl, unsigned blocks) {
        gradPartial(*impl, p, ch0, sl, blocks, count, impl->view(x), saved,
                    impl->view(dy), BnRelu{scale, bias}, parts);
        cuda::launch<BnWeightKernel>(gridFor(channels), impl->compute(), ch0,
                                     channels, sl.slices, parts, dscale, dbias,
                                     acc);
      });
  impl->done(*this, "batch normalization backward-weight kernel");
}

void Exec::bnStatistics(const BatchNormParams &p, const float *x, float *stats,
                        bool acc) {
  const int64_t count = n * p.rows * p.spatial;
  auto *parts = impl->bnPartials;
  forChannelGroups(
      p, count,
      [&](int64_t ch0, int64_t channels, BnSlices sl, unsigned blocks) {
        statsPartial(*impl, p, ch0, sl, blocks, count, impl->view(x), parts);
        cuda::launch<BnChunkCombineKernel>(gridFor(channels), impl->compute(),
                                           p, ch0, channels, sl.slices, count,
                                           impl->view(x), parts, stats, acc);
      });
  cuda::launch<BnChunkCountKernel>(1, impl->compute(), p, double(count), stats,
                                   acc);
  impl->done(*this, "batch normalization chunk statistics kernel");
}

void Exec::bnFinalize(const BatchNormParams &p, float *stats, float *runMean,
                      float *runVar) {
  cuda::launch<BnFinalizeKernel>(gridFor(p.c), impl->compute(), p, stats,
                                 runMean, runVar);
  impl->done(*this, "batch normalization finalize kernel");
}

void Exec::bnBackwardDataBatch(const BatchNormParams &p, const float *x,
                               const float *scale, const float *saved,
                               const float *dscale, const float *dbias,
                               const float *dy, float *dx, bool acc,
                               const float *bias) {
  if (!dx)
    return;
  assert((!kernels::bnFusesAct(p) || bias) &&
         "a fused activation's mask needs the bias");
  const int64_t count = n * p.rows * p.spatial;
  forChannelGroups(
      p, count, [&](int64_t ch0, int64_t, BnSlices sl, unsigned blocks) {
        backwardData(*impl, p, ch0, sl, blocks, count,
                     double(prog.batch * p.rows * p.spatial), impl->view(x),
                     scale, saved, nullptr, dscale, dbias, impl->view(dy), bias,
                     impl->view(dx), acc);
      });
  impl->done(*this, "batch normalization backward-data kernel");
}

} // namespace memfit::rt
