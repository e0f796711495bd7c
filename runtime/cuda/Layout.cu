//===- Layout.cu - CUDA backend: transformer layers and layout changes ----===//
//
// Transposes, slices, broadcasts, masked fills, embeddings and batched
// matrix products (layer normalization is LayerNorm.cu). The element
// arithmetic is runtime/kernels (the emulation's source); on operands of
// one storage the gathers run as GatherTyped (Gather.cuh: 16-byte stores,
// one index computation per pack inside an innermost run), otherwise on
// Views. The products are cuBLAS's strided batched GEMM. Embedding
// gradients add with atomics, so their rounding order may differ between
// runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Gather.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/IntProgram.h"

#include <climits>

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::View;

namespace {

int64_t perSample(const int64_t *dims, int rank) {
  int64_t per = 1;
  for (int i = 0; i < rank; ++i)
    per *= dims[i];
  return per;
}

struct TransposeKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(TransposeParams p, int64_t n, int64_t count,
                             View x, View y) {
    MEMFIT_GRID_LOOP(t, count) { y[t] = x[kernels::transposeSource(p, n, t)]; }
  }
};

struct TransposeGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(TransposeParams p, int64_t n, int64_t count,
                             View dy, View dx, bool acc) {
    MEMFIT_GRID_LOOP(t, count) {
      put(dx[t], dy[kernels::transposeTarget(p, n, t)], acc);
    }
  }
};

struct SliceKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(SliceParams p, int64_t n, int64_t count, View x,
                             View y) {
    MEMFIT_GRID_LOOP(t, count) { y[t] = x[kernels::sliceSource(p, n, t)]; }
  }
};

struct SliceGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(SliceParams p, int64_t n, int64_t count, View dy,
                             View dx, bool acc) {
    MEMFIT_GRID_LOOP(t, count) {
      put(dx[t], kernels::sliceGradAt(p, n, dy, t), acc);
    }
  }
};

struct ExpandKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ExpandParams p, int64_t n, int64_t count, View x,
                             View y) {
    MEMFIT_GRID_LOOP(t, count) { y[t] = x[kernels::expandSource(p, n, t)]; }
  }
};

struct ExpandGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ExpandParams p, int64_t n, int64_t count, View dy,
                             View dx, bool acc) {
    MEMFIT_GRID_LOOP(t, count) {
      put(dx[t], kernels::expandGradAt(p, n, dy, t), acc);
    }
  }
};

struct WhereKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(WhereParams p, int64_t count, View mask, View x,
                             View y) {
    MEMFIT_GRID_LOOP(t, count) {
      y[t] = kernels::whereFilled(p, mask, t) ? p.value : x[t];
    }
  }
};

struct WhereGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(WhereParams p, int64_t count, View mask, View dy,
                             View dx, bool acc) {
    MEMFIT_GRID_LOOP(t, count) {
      put(dx[t], kernels::whereFilled(p, mask, t) ? 0.0f : dy[t], acc);
    }
  }
};

/// The layout kernels as GatherTyped's functions (runtime/cuda/Gather.cuh).
/// The index gathers carry their innermost run: `inner` outputs whose
/// sources lie `step` apart.
struct TransposeAt {
  TransposeParams p;
  int64_t n, inner, step;
  __device__ int64_t source(int64_t t) const {
    return kernels::transposeSource(p, n, t);
  }
  __device__ float operator()(auto x, int64_t t) const { return x[source(t)]; }
};
struct TransposeGradAt {
  TransposeParams p;
  int64_t n, inner, step;
  __device__ int64_t source(int64_t t) const {
    return kernels::transposeTarget(p, n, t);
  }
  __device__ float operator()(auto dy, int64_t t) const {
    return dy[source(t)];
  }
};
struct SliceAt {
  SliceParams p;
  int64_t n, inner, step;
  __device__ int64_t source(int64_t t) const {
    return kernels::sliceSource(p, n, t);
  }
  __device__ float operator()(auto x, int64_t t) const { return x[source(t)]; }
};
struct ExpandAt {
  ExpandParams p;
  int64_t n, inner, step;
  __device__ int64_t source(int64_t t) const {
    return kernels::expandSource(p, n, t);
  }
  __device__ float operator()(auto x, int64_t t) const { return x[source(t)]; }
};
struct SliceGradAt {
  SliceParams p;
  int64_t n;
  __device__ float operator()(auto dy, int64_t t) const {
    return kernels::sliceGradAt(p, n, dy, t);
  }
};
struct ExpandGradAt {
  ExpandParams p;
  int64_t n;
  __device__ float operator()(auto dy, int64_t t) const {
    return kernels::expandGradAt(p, n, dy, t);
  }
};
/// The mask keeps its View: it is broadcast (read per row, not per
/// element) and may be stored unlike the data.
struct WhereAt {
  WhereParams p;
  View mask;
  __device__ float operator()(auto x, int64_t t) const {
    return kernels::whereFilled(p, mask, t) ? p.value : x[t];
  }
};
struct WhereGradAt {
  WhereParams p;
  View mask;
  __device__ float operator()(auto dy, int64_t t) const {
    return kernels::whereFilled(p, mask, t) ? 0.0f : dy[t];
  }
};

/// An axis's extent over n samples.
int64_t extent(const int64_t *dims, int batchAxis, int64_t n, int axis) {
  return dims[axis] * (axis == batchAxis ? n : 1);
}

/// Stride of each axis of a row-major tensor over n samples.
void stridesOf(const int64_t *dims, int rank, int batchAxis, int64_t n,
               int64_t *stride) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    stride[i] = s;
    s *= extent(dims, batchAxis, n, i);
  }
}

__device__ int64_t idAt(const EmbeddingParams &p, const int32_t *ids,
                        const float *fixedIds, int64_t r) {
  return ids        ? ids[r]
         : fixedIds ? static_cast<int64_t>(fixedIds[r % p.rows])
                    : 0;
}

/// A row id outside the vocabulary writes NaN rather than read outside the
/// table (the driver checks the ids it loads).
// One thread per row: a CumSum runs along it in order. The programs are a
// few instructions over the token ids, far from the cost of what reads
// them.
struct IntProgramKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(IntProgramParams p, int64_t rows,
                             const int32_t *ids, int32_t *yInt, View yFloat) {
    MEMFIT_GRID_LOOP(r, rows) {
      if (yInt)
        kernels::intProgramRow(p, ids, r, [&](int64_t at, int64_t v) {
          yInt[at] = static_cast<int32_t>(v);
        });
      else
        kernels::intProgramRow(p, ids, r, [&](int64_t at, int64_t v) {
          yFloat[at] = static_cast<float>(v);
        });
    }
  }
};

struct EmbeddingKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(EmbeddingParams p, int64_t count,
                             const int32_t *ids, const float *fixedIds,
                             const float *table, View y) {
    MEMFIT_GRID_LOOP(t, count) {
      int64_t r = t / p.d, j = t - r * p.d, id = idAt(p, ids, fixedIds, r);
      y[t] = id >= 0 && id < p.vocab ? table[id * p.d + j] : NAN;
    }
  }
};

struct EmbeddingGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(EmbeddingParams p, int64_t count,
                             const int32_t *ids, const float *fixedIds, View dy,
                             float *dtable) {
    MEMFIT_GRID_LOOP(t, count) {
      int64_t r = t / p.d, j = t - r * p.d, id = idAt(p, ids, fixedIds, r);
      if (id >= 0 && id < p.vocab && id != p.frozenRow)
        atomicAdd(&dtable[id * p.d + j], dy[t]);
    }
  }
};

int dim(const Exec &x, int64_t v) {
  if (v <= 0 || v > INT_MAX)
    x.fatal("matrix dimension " + std::to_string(v) + " does not fit cuBLAS");
  return static_cast<int>(v);
}

} // namespace

void Exec::transposeForward(const TransposeParams &p, const float *x,
                            float *y) {
  int64_t count = n * perSample(p.dims, p.rank);
  // y's innermost axis is x's axis perm[rank - 1].
  const int last = p.perm[p.rank - 1];
  int64_t xStride[kMaxRank];
  stridesOf(p.dims, p.rank, p.batchAxis, n, xStride);
  const TransposeAt f{p, n, extent(p.dims, p.batchAxis, n, last),
                      xStride[last]};
  const View vx = impl->view(x), vy = impl->view(y);
  if (!cuda::gatherTyped(impl->compute(), f, count, vx, vy, false))
    cuda::launch<TransposeKernel>(gridFor(count), impl->compute(), p, n, count,
                                  vx, vy);
  impl->done(*this, "transpose kernel");
}

void Exec::transposeBackward(const TransposeParams &p, const float *dy,
                             float *dx, bool acc) {
  if (!dx)
    return;
  int64_t count = n * perSample(p.dims, p.rank);
  // x's innermost axis is y's axis i with perm[i] == rank - 1.
  int64_t yDims[kMaxRank], yStride[kMaxRank];
  int yBatch = -1, at = 0;
  for (int i = 0; i < p.rank; ++i) {
    yDims[i] = p.dims[p.perm[i]];
    if (p.perm[i] == p.batchAxis)
      yBatch = i;
    if (p.perm[i] == p.rank - 1)
      at = i;
  }
  stridesOf(yDims, p.rank, yBatch, n, yStride);
  const TransposeGradAt f{p, n, extent(p.dims, p.batchAxis, n, p.rank - 1),
                          yStride[at]};
  const View vdy = impl->view(dy), vdx = impl->view(dx);
  if (!cuda::gatherTyped(impl->compute(), f, count, vdy, vdx, acc))
    cuda::launch<TransposeGradKernel>(gridFor(count), impl->compute(), p, n,
                                      count, vdy, vdx, acc);
  impl->done(*this, "transpose backward kernel");
}

void Exec::sliceForward(const SliceParams &p, const float *x, float *y) {
  int64_t count = n * perSample(p.ydims, p.rank);
  const int last = p.rank - 1;
  const SliceAt f{p, n, extent(p.ydims, p.batchAxis, n, last), p.steps[last]};
  const View vx = impl->view(x), vy = impl->view(y);
  if (!cuda::gatherTyped(impl->compute(), f, count, vx, vy, false))
    cuda::launch<SliceKernel>(gridFor(count), impl->compute(), p, n, count, vx,
                              vy);
  impl->done(*this, "slice kernel");
}

void Exec::sliceBackward(const SliceParams &p, const float *dy, float *dx,
                         bool acc) {
  if (!dx)
    return;
  int64_t count = n * perSample(p.xdims, p.rank);
  const View vdy = impl->view(dy), vdx = impl->view(dx);
  if (!cuda::gatherTyped(impl->compute(), SliceGradAt{p, n}, count, vdy, vdx,
                         acc))
    cuda::launch<SliceGradKernel>(gridFor(count), impl->compute(), p, n, count,
                                  vdy, vdx, acc);
  impl->done(*this, "slice backward kernel");
}

void Exec::expandForward(const ExpandParams &p, const float *x, float *y) {
  int64_t count = n * perSample(p.ydims, p.rank);
  // Along a broadcast innermost axis every output of a run reads one x.
  const int last = p.rank - 1;
  const ExpandAt f{p, n, extent(p.ydims, p.batchAxis, n, last),
                   p.xdims[last] == p.ydims[last] ? 1 : 0};
  const View vx = impl->view(x), vy = impl->view(y);
  if (!cuda::gatherTyped(impl->compute(), f, count, vx, vy, false))
    cuda::launch<ExpandKernel>(gridFor(count), impl->compute(), p, n, count, vx,
                               vy);
  impl->done(*this, "expand kernel");
}

void Exec::expandBackward(const ExpandParams &p, const float *dy, float *dx,
                          bool acc) {
  if (!dx)
    return;
  int64_t count = n * perSample(p.xdims, p.rank);
  const View vdy = impl->view(dy), vdx = impl->view(dx);
  if (!cuda::gatherTyped(impl->compute(), ExpandGradAt{p, n}, count, vdy, vdx,
                         acc))
    cuda::launch<ExpandGradKernel>(gridFor(count), impl->compute(), p, n, count,
                                   vdy, vdx, acc);
  impl->done(*this, "expand backward kernel");
}

void Exec::whereForward(const WhereParams &p, const float *mask, const float *x,
                        float *y) {
  int64_t count = n * p.perSample;
  const View vm = impl->view(mask), vx = impl->view(x), vy = impl->view(y);
  if (!cuda::gatherTyped(impl->compute(), WhereAt{p, vm}, count, vx, vy, false))
    cuda::launch<WhereKernel>(gridFor(count), impl->compute(), p, count, vm, vx,
                              vy);
  impl->done(*this, "masked fill kernel");
}

void Exec::whereBackward(const WhereParams &p, const float *mask,
                         const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  int64_t count = n * p.perSample;
  const View vm = impl->view(mask), vdy = impl->view(dy), vdx = impl->view(dx);
  if (!cuda::gatherTyped(impl->compute(), WhereGradAt{p, vm}, count, vdy, vdx,
                         acc))
    cuda::launch<WhereGradKernel>(gridFor(count), impl->compute(), p, count, vm,
                                  vdy, vdx, acc);
  impl->done(*this, "masked fill backward kernel");
}

void Exec::intProgram(const IntProgramParams &p, const int32_t *ids,
                      int32_t *yInt, float *yFloat) {
  int64_t rows = n * p.perSample / p.inner;
  cuda::launch<IntProgramKernel>(gridFor(rows), impl->compute(), p, rows, ids,
                                 yInt, impl->view(yFloat));
  impl->done(*this, "integer program kernel");
}

void Exec::embeddingForward(const EmbeddingParams &p, const int32_t *ids,
                            const float *fixedIds, const float *table,
                            float *y) {
  int64_t count = n * p.rows * p.d;
  cuda::launch<EmbeddingKernel>(gridFor(count), impl->compute(), p, count, ids,
                                fixedIds, table, impl->view(y));
  impl->done(*this, "embedding kernel");
}

void Exec::embeddingBackward(const EmbeddingParams &p, const int32_t *ids,
                             const float *fixedIds, const float *dy,
                             float *dtable, bool acc) {
  if (!dtable)
    return;
  if (!acc)
    MEMFIT_CHECK(cudaMemsetAsync(dtable, 0, p.vocab * p.d * sizeof(float),
                                 impl->compute()));
  int64_t count = n * p.rows * p.d;
  cuda::launch<EmbeddingGradKernel>(gridFor(count), impl->compute(), p, count,
                                    ids, fixedIds, impl->view(dy), dtable);
  impl->done(*this, "embedding backward kernel");
}

// Column-major cuBLAS sees each row-major [r, c] matrix as its transpose:
// y^T = b^T a^T, so the product is called with b first.
void Exec::batchMatMulForward(const BatchMatMulParams &p, const float *a,
                              const float *b, float *y) {
  const int m = dim(*this, p.m), k = dim(*this, p.k), c = dim(*this, p.cols);
  const long long aStep = p.aBatch == 1 ? 0 : p.m * p.k;
  const long long bStep = p.bBatch == 1 ? 0 : p.k * p.cols;
  const int64_t aSample = p.aShared ? 0 : p.aBatch * p.m * p.k;
  const int64_t bSample = p.bShared ? 0 : p.bBatch * p.k * p.cols;
  const View va = impl->view(a), vb = impl->view(b), vy = impl->view(y);
  for (int64_t s = 0; s < n; ++s)
    cuda::gemm(*this, *impl, false, false, c, m, k, 1.0f, vb + s * bSample, c,
               bStep, va + s * aSample, k, aStep, 0.0f,
               vy + s * p.batch * p.m * p.cols, c, p.m * p.cols,
               dim(*this, p.batch));
  impl->done(*this, "batched matmul");
}

void Exec::batchMatMulBackward(const BatchMatMulParams &p, const float *a,
                               const float *b, const float *dy, float *da,
                               float *db, bool accA, bool accB) {
  const int m = dim(*this, p.m), k = dim(*this, p.k), c = dim(*this, p.cols);
  const long long aStep = p.aBatch == 1 ? 0 : p.m * p.k;
  const long long bStep = p.bBatch == 1 ? 0 : p.k * p.cols;
  const int64_t aSample = p.aShared ? 0 : p.aBatch * p.m * p.k;
  const int64_t bSample = p.bShared ? 0 : p.bBatch * p.k * p.cols;
  const View va = impl->view(a), vb = impl->view(b), vdy = impl->view(dy),
             vda = impl->view(da), vdb = impl->view(db);
  // A shared operand's gradient sums over its products (and over the
  // samples when it is one for all): those run one at a time, adding into
  // it.
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < (aStep && bStep ? 1 : p.batch); ++i) {
      int count = aStep && bStep ? dim(*this, p.batch) : 1;
      const View as = va + (s * aSample + i * aStep);
      const View bs = vb + (s * bSample + i * bStep);
      const View dys = vdy + (s * p.batch + i) * p.m * p.cols;
      if (da) { // da^T [k, m] = b^T... column-major: da^T = b * dy^T
        bool added = (i > 0 && !aStep) || (s > 0 && p.aShared);
        float beta = accA || added ? 1.0f : 0.0f;
        cuda::gemm(*this, *impl, true, false, k, m, c, 1.0f, bs, c, bStep, dys,
                   c, p.m * p.cols, beta, vda + (s * aSample + i * aStep), k,
                   aStep, count);
      }
      if (db) { // db^T [cols, k] = dy^T a, column-major
        bool added = (i > 0 && !bStep) || (s > 0 && p.bShared);
        float beta = accB || (da && a == b) || added ? 1.0f : 0.0f;
        cuda::gemm(*this, *impl, false, true, c, k, m, 1.0f, dys, c,
                   p.m * p.cols, as, k, aStep, beta,
                   vdb + (s * bSample + i * bStep), c, bStep, count);
      }
    }
  impl->done(*this, "batched matmul backward");
}

} // namespace memfit::rt

namespace memfit::rt {
namespace {

struct ResizeKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ResizeParams p, int64_t count, View x, View y) {
    MEMFIT_GRID_LOOP(t, count) { y[t] = kernels::resizeAt(p, x, t); }
  }
};

/// Scatters each output's gradient with atomics (the rounding order may
/// differ from the emulation's in-order sum).
struct ResizeGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ResizeParams p, int64_t count, View dy, View dx) {
    MEMFIT_GRID_LOOP(t, count) {
      int64_t at[4];
      float w[4];
      kernels::resizeGradTaps(p, t, at, w);
      for (int k = 0; k < 4; ++k)
        cuda::atomicPut(dx[at[k]], dy[t] * w[k]);
    }
  }
};

} // namespace

void Exec::resizeForward(const ResizeParams &p, const float *x, float *y) {
  int64_t count = n * p.c * p.hout * p.wout;
  cuda::launch<ResizeKernel>(gridFor(count), impl->compute(), p, count,
                             impl->view(x), impl->view(y));
  impl->done(*this, "resize kernel");
}

void Exec::resizeBackward(const ResizeParams &p, const float *dy, float *dx,
                          bool acc) {
  if (!dx)
    return;
  if (!acc)
    MEMFIT_CHECK(cudaMemsetAsync(
        dx, 0, n * p.c * p.hin * p.win * cuda::storeBytes(impl->view(dx).t),
        impl->compute()));
  int64_t count = n * p.c * p.hout * p.wout;
  cuda::launch<ResizeGradKernel>(gridFor(count), impl->compute(), p, count,
                                 impl->view(dy), impl->view(dx));
  impl->done(*this, "resize backward kernel");
}

} // namespace memfit::rt
