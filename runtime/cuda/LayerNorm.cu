//===- LayerNorm.cu - CUDA backend: layer normalization -------------------===//
//
// Every transformer block normalizes rows of d features. On x and y (dy,
// dx) of one storage the kernels are templated on it and give each row a
// warp: 16-byte packs when the rows are (d whole packs, aligned base),
// element by element otherwise, the row's sums in float with compensated
// adds (kernels::lnMomentsF and friends, runtime/kernels/Norm.h), combined
// in a warp tree fixed by the launch shape. A warp per row rather than a
// block: a row is a few KiB, a transformer has thousands of rows, and a
// warp needs no shared memory or block barrier between its passes.
//
// The order of the row's sums differs from the CPU emulation's (double, in
// order), so the typed kernels agree with it to float rounding, not bit
// for bit (the selfcheck allows 1e-5 relative); a rerun on the same launch
// shape gives the same bits. The weight gradient sums over rows in float
// (compensated) per feature, from row statistics the backend's reduction
// scratch holds, in chunks of rows side by side whose partials add in
// chunk order. Mixed storage keeps the one-thread-per-row View kernels
// (double, the CPU's order).
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
using cuda::View;
using kernels::BnPartial;

namespace {

// --- the View kernels: one thread per row, in double ---

struct LayerNormKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(LayerNormParams p, int64_t rows, View x,
                             const float *scale, const float *bias, View y) {
    MEMFIT_GRID_LOOP(r, rows) {
      kernels::lnForwardRow(p, x + r * p.d, scale, bias, y + r * p.d);
    }
  }
};

struct LayerNormGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(LayerNormParams p, int64_t rows, View x,
                             const float *scale, View dy, View dx, bool acc) {
    MEMFIT_GRID_LOOP(r, rows) {
      kernels::lnBackwardRow(p, x + r * p.d, scale, dy + r * p.d, dx + r * p.d,
                             acc);
    }
  }
};

/// One thread per feature, over the rows in order.
struct LayerNormWeightGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(LayerNormParams p, int64_t rows, View x, View dy,
                             float *dscale, float *dbias, bool acc) {
    MEMFIT_GRID_LOOP(j, p.d) {
      double ds = 0, dbs = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double mean, invStd;
        kernels::lnRowStats(p, x + r * p.d, mean, invStd);
        double g = dy[r * p.d + j];
        ds += g * ((double(x[r * p.d + j]) - mean) * invStd);
        dbs += g;
      }
      if (dscale)
        put(dscale[j], float(ds), acc);
      if (dbias)
        put(dbias[j], float(dbs), acc);
    }
  }
};

// --- the typed kernels: a warp per row, float ---

constexpr int kRowThreads = 256, kRowsPerBlock = kRowThreads / 32;

/// The sum of a warp's partials, in a tree fixed by the lane order, in
/// every lane (lane 0's, broadcast: the lanes' own trees would differ in
/// their last bits).
__device__ BnPartial warpTotal(BnPartial v) {
  for (int o = 16; o > 0; o >>= 1)
    v.add(cuda::shuffleDown(v, o));
  auto from0 = [](kernels::CompensatedSum c) {
    return kernels::CompensatedSum{__shfl_sync(0xffffffffu, c.s, 0),
                                   __shfl_sync(0xffffffffu, c.c, 0)};
  };
  return {from0(v.d), from0(v.dd)};
}

/// Calls f(j, x[j]) for the elements of a row of d that this lane owns:
/// packs lane, lane + 32, ... (when `packed`), then the elements past them.
template <Store S, typename F>
__device__ void forLane(const char *row, int64_t d, bool packed, F &&f) {
  using P = cuda::Pack<S>;
  const int lane = threadIdx.x & 31;
  const int64_t packs = packed ? d / P::width : 0;
  for (int64_t v = lane; v < packs; v += 32) {
    const P in = P::load(row, v);
#pragma unroll
    for (int k = 0; k < P::width; ++k)
      f(v * P::width + k, in.get(k));
  }
  for (int64_t j = packs * P::width + lane; j < d; j += 32)
    f(j, cuda::Typed<S>::load(row, j));
}

/// The row's mean and inverse deviation, in every lane.
template <Store S>
__device__ void rowStats(const LayerNormParams &p, const char *xr, bool packed,
                         float &mean, float &invStd) {
  const float shift = cuda::Typed<S>::load(xr, 0);
  BnPartial part{};
  forLane<S>(xr, p.d, packed,
             [&](int64_t, float x) { part.addValue(x, shift); });
  kernels::lnMomentsF(warpTotal(part), shift, p.d, p.epsilon, mean, invStd);
}

/// for (int64_t r = this warp's row; r < rows; r += warps in the grid)
#define MEMFIT_ROW_LOOP(r, rows)                                               \
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5);   \
       r < (rows); r += int64_t(gridDim.x) * kRowsPerBlock)

template <Store S> struct LayerNormTyped {
  static constexpr int threads = kRowThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(LayerNormParams p, int64_t rows, bool packed,
                             const char *x, const float *scale,
                             const float *bias, char *y) {
    const int lane = threadIdx.x & 31;
    MEMFIT_ROW_LOOP(r, rows) {
      const char *xr = x + r * p.d * T::bytes;
      char *yr = y + r * p.d * T::bytes;
      float mean, invStd;
      rowStats<S>(p, xr, packed, mean, invStd);
      auto norm = [&](int64_t j, float v) {
        return kernels::lnNormalizeF(v, mean, invStd, scale[j],
                                     bias ? bias[j] : 0.0f);
      };
      const int64_t packs = packed ? p.d / P::width : 0;
      for (int64_t v = lane; v < packs; v += 32) {
        const P in = P::load(xr, v);
        P out;
#pragma unroll
        for (int k = 0; k < P::width; ++k)
          out.set(k, norm(v * P::width + k, in.get(k)));
        out.store(yr, v);
      }
      for (int64_t j = packs * P::width + lane; j < p.d; j += 32)
        T::store(yr, j, norm(j, T::load(xr, j)));
    }
  }
};

template <Store S> struct LayerNormGradTyped {
  static constexpr int threads = kRowThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(LayerNormParams p, int64_t rows, bool packed,
                             const char *x, const float *scale, const char *dy,
                             char *dx, bool acc) {
    const int lane = threadIdx.x & 31;
    MEMFIT_ROW_LOOP(r, rows) {
      const int64_t at = r * p.d * T::bytes;
      const char *xr = x + at, *dyr = dy + at;
      char *dxr = dx + at;
      // One pass for the row's statistics and its gradient sums.
      const float shift = T::load(xr, 0);
      BnPartial stats{}, grads{};
      const int64_t packs = packed ? p.d / P::width : 0;
      auto add = [&](int64_t j, float xv, float dyv) {
        stats.addValue(xv, shift);
        kernels::lnAddGrad(grads, xv, dyv, scale[j], shift);
      };
      for (int64_t v = lane; v < packs; v += 32) {
        const P xs = P::load(xr, v), ds = P::load(dyr, v);
#pragma unroll
        for (int k = 0; k < P::width; ++k)
          add(v * P::width + k, xs.get(k), ds.get(k));
      }
      for (int64_t j = packs * P::width + lane; j < p.d; j += 32)
        add(j, T::load(xr, j), T::load(dyr, j));
      float mean, invStd, meanG, meanGX;
      kernels::lnMomentsF(warpTotal(stats), shift, p.d, p.epsilon, mean,
                          invStd);
      kernels::lnGradMeans(warpTotal(grads), shift, p.d, mean, invStd, meanG,
                           meanGX);
      auto grad = [&](int64_t j, float xv, float dyv) {
        return kernels::lnGradF(xv, dyv, scale[j], mean, invStd, meanG, meanGX);
      };
      for (int64_t v = lane; v < packs; v += 32) {
        const P xs = P::load(xr, v), ds = P::load(dyr, v);
        // Not read when overwritten, as put() does not read it.
        P out = acc ? P::load(dxr, v) : P{};
#pragma unroll
        for (int k = 0; k < P::width; ++k) {
          const float g = grad(v * P::width + k, xs.get(k), ds.get(k));
          out.set(k, acc ? out.get(k) + g : g);
        }
        out.store(dxr, v);
      }
      for (int64_t j = packs * P::width + lane; j < p.d; j += 32) {
        const float g = grad(j, T::load(xr, j), T::load(dyr, j));
        T::store(dxr, j, acc ? T::load(dxr, j) + g : g);
      }
    }
  }
};

/// The weight gradient's room in the backend's reduction scratch: the
/// statistics (mean, invStd) of a group of rows, then one partial (dscale,
/// dbias) per feature and chunk of the group's rows. One thread per feature
/// alone is d threads (768 for GPT-2: 3 blocks on a 132-SM GPU, 0.7-1.4 ms
/// a call on an H100); chunks of rows summed side by side fill the GPU.
constexpr int64_t kLnScratch =
    cuda::kBnPartialBytes * kernels::kBnMaxPartials / int64_t(sizeof(float2));
constexpr int64_t kLnMaxChunks = 32;

/// Chunks of rows per group: as many as half the scratch holds partials
/// for, at most kLnMaxChunks.
int64_t lnChunks(int64_t d) {
  return std::max<int64_t>(1, std::min(kLnMaxChunks, kLnScratch / 2 / d));
}
/// Rows per group: what the rest of the scratch holds statistics for.
int64_t lnGroupRows(int64_t d) { return kLnScratch - lnChunks(d) * d; }

/// stats[r] = (mean, invStd) of row r.
template <Store S> struct LayerNormStatsTyped {
  static constexpr int threads = kRowThreads;
  __device__ static void run(LayerNormParams p, int64_t rows, bool packed,
                             const char *x, float2 *stats) {
    MEMFIT_ROW_LOOP(r, rows) {
      float mean, invStd;
      rowStats<S>(p, x + r * p.d * cuda::Typed<S>::bytes, packed, mean, invStd);
      if ((threadIdx.x & 31) == 0)
        stats[r] = make_float2(mean, invStd);
    }
  }
};

/// One thread per feature and chunk of `per` rows, over the chunk's rows
/// in order (coalesced across the features), compensated float sums:
/// part[chunk * d + j] = (sum dy * xhat, sum dy). Blocks are chunk-major.
template <Store S> struct LayerNormWeightPartialTyped {
  static constexpr int threads = kThreads;
  using T = cuda::Typed<S>;
  __device__ static void run(LayerNormParams p, int64_t rows, int64_t per,
                             const char *x, const char *dy, const float2 *stats,
                             float2 *part) {
    const int64_t featureBlocks = (p.d + threads - 1) / threads;
    const int64_t chunk = blockIdx.x / featureBlocks;
    const int64_t j =
        (blockIdx.x - chunk * featureBlocks) * int64_t(threads) + threadIdx.x;
    if (j >= p.d)
      return;
    const int64_t first = chunk * per;
    const int64_t last = first + per < rows ? first + per : rows;
    kernels::CompensatedSum ds, dbs;
    for (int64_t r = first; r < last; ++r) {
      const float2 st = stats[r];
      const float g = T::load(dy, r * p.d + j);
      ds.add(g * ((T::load(x, r * p.d + j) - st.x) * st.y));
      dbs.add(g);
    }
    part[chunk * p.d + j] = make_float2(ds.value(), dbs.value());
  }
};

/// A feature's chunk partials added in chunk order into its gradients.
struct LayerNormWeightCombine {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t d, int64_t chunks, const float2 *part,
                             float *dscale, float *dbias, bool acc) {
    MEMFIT_GRID_LOOP(j, d) {
      kernels::CompensatedSum ds, dbs;
      for (int64_t c = 0; c < chunks; ++c) {
        ds.add(part[c * d + j].x);
        dbs.add(part[c * d + j].y);
      }
      if (dscale)
        put(dscale[j], ds.value(), acc);
      if (dbias)
        put(dbias[j], dbs.value(), acc);
    }
  }
};

/// Whether the typed kernels move a row of d by packs: every row starts on
/// a 16-byte boundary when the first does and d is whole packs.
template <Store S> bool rowsPacked(int64_t d, std::initializer_list<View> vs) {
  return d % cuda::Pack<S>::width == 0 && cuda::packsFor<S>(d, vs) > 0;
}

unsigned rowGrid(int64_t rows) { return gridFor(rows * 32, kRowThreads); }

} // namespace

void Exec::layerNormForward(const LayerNormParams &p, const float *x,
                            const float *scale, const float *bias, float *y) {
  const int64_t rows = n * p.rows;
  const View vx = impl->view(x), vy = impl->view(y);
  if (cuda::sameStore({vx, vy})) {
    cuda::withStore(vy.t, [&](auto s) {
      constexpr Store S = decltype(s)::value;
      cuda::launch<LayerNormTyped<S>>(rowGrid(rows), impl->compute(), p, rows,
                                      rowsPacked<S>(p.d, {vx, vy}), vx.p, scale,
                                      bias, vy.p);
    });
  } else {
    cuda::launch<LayerNormKernel>(gridFor(rows), impl->compute(), p, rows, vx,
                                  scale, bias, vy);
  }
  impl->done(*this, "layer norm kernel");
}

void Exec::layerNormBackwardData(const LayerNormParams &p, const float *x,
                                 const float *scale, const float *dy, float *dx,
                                 bool acc) {
  if (!dx)
    return;
  const int64_t rows = n * p.rows;
  const View vx = impl->view(x), vdy = impl->view(dy), vdx = impl->view(dx);
  if (cuda::sameStore({vx, vdy, vdx})) {
    cuda::withStore(vdx.t, [&](auto s) {
      constexpr Store S = decltype(s)::value;
      cuda::launch<LayerNormGradTyped<S>>(
          rowGrid(rows), impl->compute(), p, rows,
          rowsPacked<S>(p.d, {vx, vdy, vdx}), vx.p, scale, vdy.p, vdx.p, acc);
    });
  } else {
    cuda::launch<LayerNormGradKernel>(gridFor(rows), impl->compute(), p, rows,
                                      vx, scale, vdy, vdx, acc);
  }
  impl->done(*this, "layer norm backward kernel");
}

void Exec::layerNormBackwardWeight(const LayerNormParams &p, const float *x,
                                   const float *dy, float *dscale, float *dbias,
                                   bool acc) {
  const int64_t rows = n * p.rows;
  const View vx = impl->view(x), vdy = impl->view(dy);
  // Rows of more than about 20k features leave the scratch no room for a
  // useful group: the View kernel needs none.
  if (!cuda::sameStore({vx, vdy}) || lnGroupRows(p.d) < kRowsPerBlock * 32) {
    cuda::launch<LayerNormWeightGradKernel>(gridFor(p.d), impl->compute(), p,
                                            rows, vx, vdy, dscale, dbias, acc);
    impl->done(*this, "layer norm weight gradient kernel");
    return;
  }
  // A group of rows at a time: its statistics, then its chunks' partials,
  // in the reduction scratch (the compute stream orders its users), each
  // group's sums added to the previous groups'.
  auto *stats = reinterpret_cast<float2 *>(impl->bnPartials);
  const int64_t chunksMax = lnChunks(p.d), groupRows = lnGroupRows(p.d);
  float2 *part = stats + groupRows;
  cuda::withStore(vx.t, [&](auto s) {
    constexpr Store S = decltype(s)::value;
    for (int64_t first = 0; first < rows; first += groupRows) {
      const int64_t group = std::min(groupRows, rows - first);
      const View gx = vx + first * p.d, gdy = vdy + first * p.d;
      const int64_t per = (group + chunksMax - 1) / chunksMax;
      const int64_t chunks = (group + per - 1) / per;
      cuda::launch<LayerNormStatsTyped<S>>(rowGrid(group), impl->compute(), p,
                                           group, rowsPacked<S>(p.d, {gx}),
                                           gx.p, stats);
      const int64_t featureBlocks = (p.d + kThreads - 1) / kThreads;
      cuda::launch<LayerNormWeightPartialTyped<S>>(
          static_cast<unsigned>(featureBlocks * chunks), impl->compute(), p,
          group, per, gx.p, gdy.p, stats, part);
      cuda::launch<LayerNormWeightCombine>(gridFor(p.d), impl->compute(), p.d,
                                           chunks, part, dscale, dbias,
                                           acc || first > 0);
    }
  });
  impl->done(*this, "layer norm weight gradient kernel");
}

} // namespace memfit::rt
