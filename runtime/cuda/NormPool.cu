//===- NormPool.cu - CUDA backend: pooling and LRN ------------------------===//
//
// Own kernels rather than cuDNN's, because the reference semantics are not
// cuDNN's (runtime/cpu/Pool.cpp, Norm.cpp):
//  - pooling: asymmetric and ceil-mode windows with PyTorch's divisor, and
//    max pooling's gradient to the FIRST maximum in row-major window order
//    (NaN wins, padding never does), which cuDNN does not promise. These
//    are the kernels of runtime/kernels/Pool.h, the emulation's own source;
//    the backward gathers per input position or tile, or writes per window
//    where windows cannot overlap, so nothing races;
//  - BatchNorm: BatchNorm.cu;
//  - LRN: ONNX's channel window for even sizes as well.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Norm.h"

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::Store;
using cuda::Typed;
using cuda::TypedIn;
using cuda::TypedOut;
using cuda::View;

namespace {

// --- pooling ---

/// One output per thread; operands of one storage S go through TypedIn
/// and Typed (no per-element switch), mixed ones through View.
template <Store S> struct PoolForwardTyped {
  static constexpr int threads = kThreads;
  __device__ static void run(PoolParams p, int64_t count, const char *x,
                             char *y) {
    const TypedIn<S> in{x};
    MEMFIT_GRID_LOOP(t, count) {
      Typed<S>::store(y, t, kernels::poolAt(p, in, t));
    }
  }
};

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

/// Max pooling's backward where windows cannot overlap
/// (kernels::maxPoolDisjoint): one thread per output window, which finds
/// its maximum and writes the cell of input positions it owns, so x and dy
/// are read once and dx written once. The gathering kernels below found
/// VGG-16's 2x2/2 windows' maxima per input position (1.9 ms a call on an
/// H200 for a 64 x 64 x 224 x 224 bf16 input, about ten times the memory
/// traffic's time).
template <typename In, typename Out> struct MaxPoolBackwardCellKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(PoolParams p, int64_t outputs, In x, In dy, Out dx,
                             bool acc) {
    const int64_t inPlane = p.hin * p.win, outPlane = p.hout * p.wout;
    MEMFIT_GRID_LOOP(t, outputs) {
      const int64_t pl = kernels::divNonNeg(t, outPlane);
      const int64_t q = t - pl * outPlane;
      const int64_t oh = kernels::divNonNeg(q, p.wout);
      kernels::maxPoolCellGrad(p, x + pl * inPlane, dy + pl * outPlane,
                               dx + pl * inPlane, oh, q - oh * p.wout, acc);
    }
  }
};

/// Max pooling's backward a tile of kMaxPoolTile^2 positions per block
/// (kernels::maxPoolTileAt) where windows overlap: the block first finds
/// the maximum of each window covering its tile into shared memory, then
/// each thread gathers the gradient of its positions from them, poolGradAt's
/// sum bit for bit. The per-position kernel found each window's maximum
/// once per position it covers (3.9 ms a call for ResNet-50 b64's on an
/// H200, gpu.md).
template <typename In, typename Out> struct MaxPoolBackwardTiledKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(PoolParams p, int64_t tiles, In x, In dy, Out dx,
                             bool acc) {
    __shared__ int32_t args[kernels::kMaxPoolTileArgs];
    const int64_t inPlane = p.hin * p.win, outPlane = p.hout * p.wout;
    constexpr int64_t positions = kernels::kMaxPoolTile * kernels::kMaxPoolTile;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const kernels::MaxPoolTile t = kernels::maxPoolTileAt(p, tile);
      const In plane = x + t.plane * inPlane;
      for (int64_t i = threadIdx.x; i < t.args(); i += threads)
        args[i] = kernels::maxPoolTileArg(p, t, plane, i);
      __syncthreads();
      const In dyPlane = dy + t.plane * outPlane;
      const Out dxPlane = dx + t.plane * inPlane;
      for (int64_t i = threadIdx.x; i < positions; i += threads) {
        int64_t ih, iw;
        if (!kernels::maxPoolTilePos(p, t, i, ih, iw))
          continue;
        const int64_t q = ih * p.win + iw;
        dxPlane[q] = kernels::maxPoolTileGrad(p, t, dyPlane, args, ih, iw,
                                              acc ? float(dxPlane[q]) : 0.0f);
      }
      // The next tile's maxima overwrite these.
      __syncthreads();
    }
  }
};

/// Max pooling's backward on operands x, dy and dx of types In and Out (a
/// View each, or TypedIn and TypedOut of one storage): per window where
/// windows are disjoint, else per tile; the name the profile gives it.
template <typename In, typename Out>
const char *maxPoolBackward(cudaStream_t s, const PoolParams &p, int64_t n,
                            In x, In dy, Out dx, bool acc) {
  if (kernels::maxPoolDisjoint(p)) {
    const int64_t outputs = n * p.c * p.hout * p.wout;
    cuda::launch<MaxPoolBackwardCellKernel<In, Out>>(gridFor(outputs), s, p,
                                                     outputs, x, dy, dx, acc);
    return "max pooling backward kernel (per window)";
  }
  const int64_t tiles = n * p.c * kernels::maxPoolTilesPerPlane(p);
  cuda::launch<MaxPoolBackwardTiledKernel<In, Out>>(gridFor(tiles, 1), s, p,
                                                    tiles, x, dy, dx, acc);
  return "max pooling backward kernel";
}

/// One warp per plane of `spatial` values.
struct GapForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t planes, int64_t spatial, View x, View y) {
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
    const int lane = threadIdx.x & 31;
    for (int64_t pl = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
         pl < planes; pl += warps) {
      // Float with compensation, not double (1/64 of float on most cards).
      cuda::CompensatedSum sum;
      for (int64_t q = lane; q < spatial; q += 32)
        sum.add(x[pl * spatial + q]);
      for (int o = 16; o > 0; o >>= 1)
        sum.add(cuda::shuffleDown(sum, o));
      if (lane == 0)
        y[pl] = sum.value() / float(spatial);
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
  const View vx = impl->view(x), vy = impl->view(y);
  const int64_t count = n * p.c * p.hout * p.wout;
  if (cuda::sameStore({vx, vy})) {
    cuda::withStore(vy.t, [&](auto s) {
      cuda::launch<PoolForwardTyped<decltype(s)::value>>(
          gridFor(count), impl->compute(), p, count,
          static_cast<const char *>(vx.p), vy.p);
    });
  } else {
    cuda::launch<PoolForwardKernel>(gridFor(count), impl->compute(), p, n, vx,
                                    vy);
  }
  impl->done(*this, "pooling forward kernel");
}

void Exec::poolBackward(const PoolParams &p, const float *x, const float *,
                        const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  const View vx = impl->view(x), vdy = impl->view(dy), vdx = impl->view(dx);
  if (kernels::maxPoolTiled(p) || kernels::maxPoolDisjoint(p)) {
    const char *name = nullptr;
    if (cuda::sameStore({vx, vdy, vdx})) {
      cuda::withStore(vdx.t, [&](auto s) {
        constexpr Store S = decltype(s)::value;
        name = maxPoolBackward(impl->compute(), p, n, TypedIn<S>{vx.p},
                               TypedIn<S>{vdy.p}, TypedOut<S>{vdx.p}, acc);
      });
    } else {
      name = maxPoolBackward(impl->compute(), p, n, vx, vdy, vdx, acc);
    }
    impl->done(*this, name);
    return;
  }
  cuda::launch<PoolBackwardKernel>(gridFor(n * p.c * p.hin * p.win),
                                   impl->compute(), p, n, vx, vdy, vdx, acc);
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
