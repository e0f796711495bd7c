//===- Layout.cu - CUDA backend: transformer layers and layout changes ----===//
//
// Transposes, slices, masked fills, embeddings, layer normalization and
// batched matrix products. The element arithmetic is runtime/kernels (the
// emulation's source); the products are cuBLAS's strided batched GEMM.
// Layer normalization takes one thread per row (its reductions run in
// double in row order, as on the CPU). Embedding gradients add with
// atomics, so their rounding order may differ between runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Norm.h"

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

__device__ int64_t idAt(const EmbeddingParams &p, const int32_t *ids,
                        const float *fixedIds, int64_t r) {
  return ids        ? ids[r]
         : fixedIds ? static_cast<int64_t>(fixedIds[r % p.rows])
                    : 0;
}

/// A row id outside the vocabulary writes NaN rather than read outside the
/// table (the driver checks the ids it loads).
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
      if (id >= 0 && id < p.vocab)
        atomicAdd(&dtable[id * p.d + j], dy[t]);
    }
  }
};

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

int dim(const Exec &x, int64_t v) {
  if (v <= 0 || v > INT_MAX)
    x.fatal("matrix dimension " + std::to_string(v) + " does not fit cuBLAS");
  return static_cast<int>(v);
}

} // namespace

void Exec::transposeForward(const TransposeParams &p, const float *x,
                            float *y) {
  int64_t count = n * perSample(p.dims, p.rank);
  cuda::launch<TransposeKernel>(gridFor(count), impl->compute(), p, n, count,
                                impl->view(x), impl->view(y));
  impl->done(*this, "transpose kernel");
}

void Exec::transposeBackward(const TransposeParams &p, const float *dy,
                             float *dx, bool acc) {
  if (!dx)
    return;
  int64_t count = n * perSample(p.dims, p.rank);
  cuda::launch<TransposeGradKernel>(gridFor(count), impl->compute(), p, n,
                                    count, impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "transpose backward kernel");
}

void Exec::sliceForward(const SliceParams &p, const float *x, float *y) {
  int64_t count = n * perSample(p.ydims, p.rank);
  cuda::launch<SliceKernel>(gridFor(count), impl->compute(), p, n, count,
                            impl->view(x), impl->view(y));
  impl->done(*this, "slice kernel");
}

void Exec::sliceBackward(const SliceParams &p, const float *dy, float *dx,
                         bool acc) {
  if (!dx)
    return;
  int64_t count = n * perSample(p.xdims, p.rank);
  cuda::launch<SliceGradKernel>(gridFor(count), impl->compute(), p, n, count,
                                impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "slice backward kernel");
}

void Exec::expandForward(const ExpandParams &p, const float *x, float *y) {
  int64_t count = n * perSample(p.ydims, p.rank);
  cuda::launch<ExpandKernel>(gridFor(count), impl->compute(), p, n, count,
                             impl->view(x), impl->view(y));
  impl->done(*this, "expand kernel");
}

void Exec::expandBackward(const ExpandParams &p, const float *dy, float *dx,
                          bool acc) {
  if (!dx)
    return;
  int64_t count = n * perSample(p.xdims, p.rank);
  cuda::launch<ExpandGradKernel>(gridFor(count), impl->compute(), p, n, count,
                                 impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "expand backward kernel");
}

void Exec::whereForward(const WhereParams &p, const float *mask, const float *x,
                        float *y) {
  int64_t count = n * p.perSample;
  cuda::launch<WhereKernel>(gridFor(count), impl->compute(), p, count,
                            impl->view(mask), impl->view(x), impl->view(y));
  impl->done(*this, "masked fill kernel");
}

void Exec::whereBackward(const WhereParams &p, const float *mask,
                         const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  int64_t count = n * p.perSample;
  cuda::launch<WhereGradKernel>(gridFor(count), impl->compute(), p, count,
                                impl->view(mask), impl->view(dy),
                                impl->view(dx), acc);
  impl->done(*this, "masked fill backward kernel");
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

void Exec::layerNormForward(const LayerNormParams &p, const float *x,
                            const float *scale, const float *bias, float *y) {
  int64_t rows = n * p.rows;
  cuda::launch<LayerNormKernel>(gridFor(rows), impl->compute(), p, rows,
                                impl->view(x), scale, bias, impl->view(y));
  impl->done(*this, "layer norm kernel");
}

void Exec::layerNormBackwardData(const LayerNormParams &p, const float *x,
                                 const float *scale, const float *dy, float *dx,
                                 bool acc) {
  if (!dx)
    return;
  int64_t rows = n * p.rows;
  cuda::launch<LayerNormGradKernel>(gridFor(rows), impl->compute(), p, rows,
                                    impl->view(x), scale, impl->view(dy),
                                    impl->view(dx), acc);
  impl->done(*this, "layer norm backward kernel");
}

void Exec::layerNormBackwardWeight(const LayerNormParams &p, const float *x,
                                   const float *dy, float *dscale, float *dbias,
                                   bool acc) {
  cuda::launch<LayerNormWeightGradKernel>(gridFor(p.d), impl->compute(), p,
                                          n * p.rows, impl->view(x),
                                          impl->view(dy), dscale, dbias, acc);
  impl->done(*this, "layer norm weight gradient kernel");
}

// Column-major cuBLAS sees each row-major [r, c] matrix as its transpose:
// y^T = b^T a^T, so the product is called with b first.
void Exec::batchMatMulForward(const BatchMatMulParams &p, const float *a,
                              const float *b, float *y) {
  const int m = dim(*this, p.m), k = dim(*this, p.k), c = dim(*this, p.cols);
  const long long aStep = p.aBatch == 1 ? 0 : p.m * p.k;
  const long long bStep = p.bBatch == 1 ? 0 : p.k * p.cols;
  const View va = impl->view(a), vb = impl->view(b), vy = impl->view(y);
  for (int64_t s = 0; s < n; ++s)
    cuda::gemm(*this, *impl, false, false, c, m, k, 1.0f,
               vb + s * p.bBatch * p.k * p.cols, c, bStep,
               va + s * p.aBatch * p.m * p.k, k, aStep, 0.0f,
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
  const View va = impl->view(a), vb = impl->view(b), vdy = impl->view(dy),
             vda = impl->view(da), vdb = impl->view(db);
  // A shared operand's gradient sums over its products: those run one at
  // a time, adding into it.
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < (aStep && bStep ? 1 : p.batch); ++i) {
      int count = aStep && bStep ? dim(*this, p.batch) : 1;
      const View as = va + (s * p.aBatch * p.m * p.k + i * aStep);
      const View bs = vb + (s * p.bBatch * p.k * p.cols + i * bStep);
      const View dys = vdy + (s * p.batch + i) * p.m * p.cols;
      if (da) { // da^T [k, m] = b^T... column-major: da^T = b * dy^T
        float beta = accA || (i > 0 && !aStep) ? 1.0f : 0.0f;
        cuda::gemm(*this, *impl, true, false, k, m, c, 1.0f, bs, c, bStep, dys,
                   c, p.m * p.cols, beta,
                   vda + (s * p.aBatch * p.m * p.k + i * aStep), k, aStep,
                   count);
      }
      if (db) { // db^T [cols, k] = dy^T a, column-major
        float beta = accB || (da && a == b) || (i > 0 && !bStep) ? 1.0f : 0.0f;
        cuda::gemm(*this, *impl, false, true, c, k, m, 1.0f, dys, c,
                   p.m * p.cols, as, k, aStep, beta,
                   vdb + (s * p.bBatch * p.k * p.cols + i * bStep), c, bStep,
                   count);
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
