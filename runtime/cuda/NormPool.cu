//===- NormPool.cu - CUDA backend: pooling, BatchNorm, LRN ----------------===//
//
// Own kernels rather than cuDNN's, because the reference semantics are not
// cuDNN's (runtime/cpu/Pool.cpp, Norm.cpp):
//  - pooling: asymmetric and ceil-mode windows with PyTorch's divisor, and
//    max pooling's gradient to the FIRST maximum in row-major window order
//    (NaN wins, padding never does), which cuDNN does not promise. These
//    are the kernels of runtime/kernels/Pool.h, the emulation's own source;
//    the backward gathers per input position, so nothing races;
//  - BatchNorm: the backward is split into a data task and a weight task
//    (cuDNN computes both at once and would need scratch the plan does not
//    have), epsilon may be below CUDNN_BN_MIN_EPSILON, and one value per
//    channel keeps the biased variance. One block per channel reduces in
//    double, two-pass as the reference, and writes the saved mean and
//    1/sqrt(var + eps) into `saved` ([mean c][invstd c]);
//  - LRN: ONNX's channel window for even sizes as well.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Norm.h"

namespace memfit::rt {

using cuda::blockReduce;
using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::SumOp;
using cuda::View;

namespace {

// --- pooling ---

struct PoolForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(PoolParams p, int64_t n, View x, View y) {
    MEMFIT_GRID_LOOP(t, n * p.c * p.hout * p.wout) {
      y[t] = kernels::poolAt(p, x, t);
    }
  }
};

struct PoolBackwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(PoolParams p, int64_t n, View x, View dy, View dx,
                             bool acc) {
    MEMFIT_GRID_LOOP(t, n * p.c * p.hin * p.win) {
      dx[t] = kernels::poolGradAt(p, x, dy, t, acc ? dx[t] : 0.0f);
    }
  }
};

/// One warp per plane of `spatial` values.
struct GapForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t planes, int64_t spatial, View x, View y) {
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
    const int lane = threadIdx.x & 31;
    for (int64_t pl = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
         pl < planes; pl += warps) {
      double sum = 0;
      for (int64_t q = lane; q < spatial; q += 32)
        sum += x[pl * spatial + q];
      sum = cuda::warpReduce(sum, SumOp());
      if (lane == 0)
        y[pl] = float(sum / double(spatial));
    }
  }
};

struct GapBackwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, int64_t spatial, View dy, View dx,
                             bool acc) {
    MEMFIT_GRID_LOOP(t, count) {
      put(dx[t], kernels::gapGradAt(spatial, dy, t), acc);
    }
  }
};

// --- BatchNorm: one block per channel ---

constexpr int kBnThreads = 512;

/// Calls f(index) for every value of channel `ch` this thread owns, walking
/// (sample, position) without a division per step.
template <typename F>
__device__ void forEachInChannel(int64_t n, int64_t c, int64_t spatial,
                                 int64_t ch, F f) {
  const int64_t step = blockDim.x;
  const int64_t ds = step / spatial, dq = step - ds * spatial;
  int64_t s = threadIdx.x / spatial, q = threadIdx.x - s * spatial;
  while (s < n) {
    f((s * c + ch) * spatial + q);
    q += dq;
    s += ds;
    if (q >= spatial) {
      q -= spatial;
      ++s;
    }
  }
}

/// Channel ch's mean and sum of squared deviations over n samples, in two
/// passes in double, reduced over the block.
__device__ void channelMoments(const BatchNormParams &p, int64_t n, int64_t ch,
                               View x, double *scratch, double &mean,
                               double &sq) {
  double sum = 0;
  forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) { sum += x[i]; });
  mean = blockReduce(sum, SumOp(), 0.0, scratch) / double(n * p.spatial);
  double part = 0;
  forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) {
    double d = x[i] - mean;
    part += d * d;
  });
  sq = blockReduce(part, SumOp(), 0.0, scratch);
}

struct BnForwardKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t n, View x,
                             const float *scale, const float *bias,
                             float *runMean, float *runVar, View y,
                             float *saved, bool updateRunning) {
    __shared__ double scratch[32];
    const double count = double(n * p.spatial);
    for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
      double mean, sq;
      channelMoments(p, n, ch, x, scratch, mean, sq);
      const float fm = float(mean), fi = float(kernels::bnInvStd(p, count, sq));
      if (threadIdx.x == 0) {
        saved[ch] = fm;
        saved[p.c + ch] = fi;
        if (updateRunning)
          kernels::bnUpdateRunning(p, count, mean, sq, runMean[ch], runVar[ch]);
      }
      // y from the float-rounded saved statistics, as bnApplyKernel computes
      // it, so a recomputed forward is bit-identical.
      forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) {
        y[i] = kernels::bnNormalize(x[i], scale[ch], bias[ch], fm, fi);
      });
    }
  }
};

struct BnApplyKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t n, View x,
                             const float *scale, const float *bias,
                             const float *saved, View y) {
    for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
      forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) {
        y[i] = kernels::bnNormalize(x[i], scale[ch], bias[ch], saved[ch],
                                    saved[p.c + ch]);
      });
    }
  }
};

/// Per-channel sums of dy and dy * xhat (both BatchNorm backward tasks).
__device__ void bnSums(const BatchNormParams &p, int64_t n, int64_t ch, View x,
                       double mean, double invStd, View dy, double *scratch,
                       double &sumDy, double &sumDyXhat) {
  double a = 0, b = 0;
  forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) {
    a += dy[i];
    b += kernels::bnDyXhat(x[i], dy[i], mean, invStd);
  });
  sumDy = blockReduce(a, SumOp(), 0.0, scratch);
  sumDyXhat = blockReduce(b, SumOp(), 0.0, scratch);
}

struct BnBackwardDataKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t n, View x,
                             const float *scale, const float *saved, View dy,
                             View dx, bool acc) {
    __shared__ double scratch[32];
    const double count = double(n * p.spatial);
    for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
      const double mean = saved[ch], invStd = saved[p.c + ch];
      double sumDy, sumDyXhat;
      bnSums(p, n, ch, x, mean, invStd, dy, scratch, sumDy, sumDyXhat);
      const double meanDy = sumDy / count, meanDyXhat = sumDyXhat / count;
      forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) {
        put(dx[i],
            kernels::bnGrad(x[i], dy[i], scale[ch], mean, invStd, meanDy,
                            meanDyXhat),
            acc);
      });
    }
  }
};

struct BnBackwardWeightKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t n, View x,
                             const float *saved, View dy, float *dscale,
                             float *dbias, bool acc) {
    __shared__ double scratch[32];
    for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
      double sumDy, sumDyXhat;
      bnSums(p, n, ch, x, saved[ch], saved[p.c + ch], dy, scratch, sumDy,
             sumDyXhat);
      if (threadIdx.x == 0) {
        if (dscale)
          put(dscale[ch], float(sumDyXhat), acc);
        if (dbias)
          put(dbias[ch], float(sumDy), acc);
      }
    }
  }
};

// A batch split into chunks: one block per channel combines the chunk's
// mean and squared deviations into the stats block (thread 0, in the order
// the CPU emulation combines them); finalize and BP-data as above.
struct BnChunkStatisticsKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t n, View x, float *stats,
                             bool acc) {
    __shared__ double scratch[32];
    kernels::BnChunkState st = kernels::bnChunkState(p, stats);
    const double count = double(n * p.spatial);
    const double before = acc ? *st.count : 0;
    for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
      double mean, sq;
      channelMoments(p, n, ch, x, scratch, mean, sq);
      if (threadIdx.x == 0) {
        if (acc) {
          kernels::bnCombine(st.mean[ch], st.m2[ch], before, mean, sq, count);
        } else {
          st.mean[ch] = mean;
          st.m2[ch] = sq;
        }
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

struct BnBackwardDataBatchKernel {
  static constexpr int threads = kBnThreads;
  __device__ static void run(BatchNormParams p, int64_t n, double batchCount,
                             View x, const float *scale, const float *saved,
                             const float *sumDyXhat, const float *sumDy,
                             View dy, View dx, bool acc) {
    for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
      const double meanDy = double(sumDy[ch]) / batchCount,
                   meanDyXhat = double(sumDyXhat[ch]) / batchCount;
      forEachInChannel(n, p.c, p.spatial, ch, [&](int64_t i) {
        put(dx[i],
            kernels::bnGrad(x[i], dy[i], scale[ch], saved[ch], saved[p.c + ch],
                            meanDy, meanDyXhat),
            acc);
      });
    }
  }
};

// --- LRN: one thread per value ---

/// bias + alpha / size * (sum of x^2 over channel ch's window) at position q
/// of one sample.
struct LrnForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(LRNParams p, int64_t n, View x, View y) {
    MEMFIT_GRID_LOOP(t, n * p.c * p.spatial) { y[t] = kernels::lrnAt(p, x, t); }
  }
};

struct LrnBackwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(LRNParams p, int64_t n, View x, View y, View dy,
                             View dx, bool acc) {
    MEMFIT_GRID_LOOP(t, n * p.c * p.spatial) {
      put(dx[t], kernels::lrnGradAt(p, x, y, dy, t), acc);
    }
  }
};

} // namespace

void Exec::poolForward(const PoolParams &p, const float *x, float *y) {
  cuda::launch<PoolForwardKernel>(gridFor(n * p.c * p.hout * p.wout),
                                  impl->compute(), p, n, impl->view(x),
                                  impl->view(y));
  impl->done(*this, "pooling forward kernel");
}

void Exec::poolBackward(const PoolParams &p, const float *x, const float *,
                        const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  cuda::launch<PoolBackwardKernel>(gridFor(n * p.c * p.hin * p.win),
                                   impl->compute(), p, n, impl->view(x),
                                   impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "pooling backward kernel");
}

void Exec::gapForward(int64_t c, int64_t spatial, const float *x, float *y) {
  cuda::launch<GapForwardKernel>(gridFor(n * c * 32), impl->compute(), n * c,
                                 spatial, impl->view(x), impl->view(y));
  impl->done(*this, "global average pooling forward kernel");
}

void Exec::gapBackward(int64_t c, int64_t spatial, const float *dy, float *dx,
                       bool acc) {
  if (!dx)
    return;
  int64_t count = n * c * spatial;
  cuda::launch<GapBackwardKernel>(gridFor(count), impl->compute(), count,
                                  spatial, impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "global average pooling backward kernel");
}

void Exec::bnForward(const BatchNormParams &p, const float *x,
                     const float *scale, const float *bias, float *runMean,
                     float *runVar, float *y, float *saved,
                     bool updateRunning) {
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.c, 1 << 16));
  cuda::launch<BnForwardKernel>(blocks, impl->compute(), p, n, impl->view(x),
                                scale, bias, runMean, runVar, impl->view(y),
                                saved, updateRunning);
  impl->done(*this, "batch normalization forward kernel");
}

void Exec::bnApply(const BatchNormParams &p, const float *x, const float *scale,
                   const float *bias, const float *saved, float *y) {
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.c, 1 << 16));
  cuda::launch<BnApplyKernel>(blocks, impl->compute(), p, n, impl->view(x),
                              scale, bias, saved, impl->view(y));
  impl->done(*this, "batch normalization apply kernel");
}

void Exec::bnBackwardData(const BatchNormParams &p, const float *x,
                          const float *scale, const float *saved,
                          const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.c, 1 << 16));
  cuda::launch<BnBackwardDataKernel>(blocks, impl->compute(), p, n,
                                     impl->view(x), scale, saved,
                                     impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "batch normalization backward-data kernel");
}

void Exec::bnBackwardWeight(const BatchNormParams &p, const float *x,
                            const float *saved, const float *dy, float *dscale,
                            float *dbias, bool acc) {
  if (!dscale && !dbias)
    return;
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.c, 1 << 16));
  cuda::launch<BnBackwardWeightKernel>(blocks, impl->compute(), p, n,
                                       impl->view(x), saved, impl->view(dy),
                                       dscale, dbias, acc);
  impl->done(*this, "batch normalization backward-weight kernel");
}

void Exec::bnStatistics(const BatchNormParams &p, const float *x, float *stats,
                        bool acc) {
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.c, 1 << 16));
  cuda::launch<BnChunkStatisticsKernel>(blocks, impl->compute(), p, n,
                                        impl->view(x), stats, acc);
  // The count moves after every channel has read the one before.
  cuda::launch<BnChunkCountKernel>(1, impl->compute(), p, double(n * p.spatial),
                                   stats, acc);
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
                               const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.c, 1 << 16));
  cuda::launch<BnBackwardDataBatchKernel>(
      blocks, impl->compute(), p, n, double(prog.batch * p.spatial),
      impl->view(x), scale, saved, dscale, dbias, impl->view(dy),
      impl->view(dx), acc);
  impl->done(*this, "batch normalization backward-data kernel");
}

void Exec::lrnForward(const LRNParams &p, const float *x, float *y) {
  cuda::launch<LrnForwardKernel>(gridFor(n * p.c * p.spatial), impl->compute(),
                                 p, n, impl->view(x), impl->view(y));
  impl->done(*this, "LRN forward kernel");
}

void Exec::lrnBackward(const LRNParams &p, const float *x, const float *y,
                       const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  cuda::launch<LrnBackwardKernel>(gridFor(n * p.c * p.spatial), impl->compute(),
                                  p, n, impl->view(x), impl->view(y),
                                  impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "LRN backward kernel");
}

} // namespace memfit::rt
