//===- Dense.cu - CUDA backend: gemm, softmax and losses ------------------===//
//
// Gemm runs on cuBLAS (fp32, pedantic math: no TF32), which is column-major:
// a row-major [r, c] matrix is its column-major transpose, so each product
// below is written for the transposed result (derivations inline). The bias
// is a small kernel; accumulating gradients blend with beta = 1.
//
// Softmax rows and the losses run runtime/kernels/Softmax.h (the emulation's
// source) inside own reductions:
// a stable log-sum-exp per row, sums in double. The loss adds this
// sub-batch's share (sum / batch) into the resident loss scalar, which the
// first sub-batch resets. One block computes the whole loss so its sum has
// a fixed order. Labels were validated by the driver when loaded; a label
// out of range still never reads outside the row: it makes the loss NaN,
// which the driver reports.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Softmax.h"

#include <climits>

namespace memfit::rt {

using cuda::blockReduce;
using cuda::gridFor;
using cuda::kThreads;
using cuda::MaxOp;
using cuda::put;
using cuda::SumOp;

namespace {

__global__ void biasAddKernel(int64_t n, int64_t m, float beta,
                              const float *bias, float *y) {
  MEMFIT_GRID_LOOP(t, n * m) { y[t] += beta * bias[t % m]; }
}

/// db[j] (put) beta * sum over samples of dy[s, j].
__global__ void biasGradKernel(int64_t n, int64_t m, float beta,
                               const float *dy, float *db, bool acc) {
  MEMFIT_GRID_LOOP(j, m) {
    put(db[j], float(double(beta) * kernels::columnSum(dy, n, m, j)), acc);
  }
}

template <typename T, typename Op> __device__ T warpAllReduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

constexpr int kRowThreads = 256;

/// Row max and log(sum(exp(x - max))) over the block.
__device__ void rowLogSumExp(int64_t features, const float *xs,
                             double *scratchD, float *scratchF, float &max,
                             double &logSum) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
    mx = MaxOp()(mx, xs[j]);
  max = blockReduce(mx, MaxOp(), -INFINITY, scratchF);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
    sum += kernels::expTerm(xs[j], max);
  logSum = log(blockReduce(sum, SumOp(), 0.0, scratchD));
}

__global__ void softmaxForwardKernel(int64_t n, int64_t features, bool log,
                                     const float *x, float *y) {
  __shared__ double scratchD[32];
  __shared__ float scratchF[32];
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const float *xs = x + s * features;
    float max;
    double logSum;
    rowLogSumExp(features, xs, scratchD, scratchF, max, logSum);
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
      y[s * features + j] = kernels::softmaxAt(xs[j], max, logSum, log);
  }
}

// softmax:     dx = y * (dy - sum(dy * y))
// log-softmax: dx = dy - exp(y) * sum(dy)
__global__ void softmaxBackwardKernel(int64_t n, int64_t features, bool log,
                                      const float *y, const float *dy,
                                      float *dx, bool acc) {
  __shared__ double scratch[32];
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const float *ys = y + s * features, *dys = dy + s * features;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
      sum += kernels::softmaxGradTerm(ys[j], dys[j], log);
    sum = blockReduce(sum, SumOp(), 0.0, scratch);
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
      put(dx[s * features + j], kernels::softmaxGrad(ys[j], dys[j], sum, log),
          acc);
  }
}

constexpr int kLossThreads = 1024;

/// One block; warp w takes the labelled positions w, w + 32, ... of the
/// [outer, classes, inner] logits of each sample.
__global__ void crossEntropyKernel(LossShape sh, int64_t n, int64_t batch,
                                   const float *logits, const int32_t *labels,
                                   float *loss, float *dlogits, bool reset) {
  __shared__ double scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  const int64_t classes = sh.classes, inner = sh.inner;
  const int64_t count = batch * sh.outer * inner;
  double total = 0;
  for (int64_t q = warp; q < n * sh.outer * inner; q += warps) {
    int64_t so = q / inner, r = q - so * inner;
    const float *xs = logits + so * classes * inner + r;
    float mx = -INFINITY;
    for (int64_t j = lane; j < classes; j += 32)
      mx = MaxOp()(mx, xs[j * inner]);
    mx = warpAllReduce(mx, MaxOp());
    double sum = 0;
    for (int64_t j = lane; j < classes; j += 32)
      sum += kernels::expTerm(xs[j * inner], mx);
    const double logSum = log(warpAllReduce(sum, SumOp()));
    const int32_t label = labels[q];
    const bool valid = label >= 0 && label < classes;
    if (lane == 0)
      total += valid ? kernels::crossEntropyTerm(mx, logSum, xs[label * inner])
                     : NAN;
    if (!dlogits)
      continue;
    float *ds = dlogits + so * classes * inner + r;
    for (int64_t j = lane; j < classes; j += 32)
      ds[j * inner] = kernels::crossEntropyGrad(xs[j * inner], mx, logSum,
                                                j == label, count);
  }
  total = blockReduce(total, SumOp(), 0.0, scratch);
  if (threadIdx.x == 0)
    *loss = (reset ? 0.0f : *loss) + float(total / double(count));
}

__global__ void meanSquaredErrorKernel(int64_t count, int64_t features,
                                       int64_t batch, const float *y,
                                       const float *target, float *loss,
                                       float *dy, bool reset) {
  __shared__ double scratch[32];
  const double all = double(batch) * double(features);
  double total = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    float grad;
    total += kernels::squaredErrorAt(y[e], target[e], all, grad);
    if (dy)
      dy[e] = grad;
  }
  total = blockReduce(total, SumOp(), 0.0, scratch);
  if (threadIdx.x == 0)
    *loss = (reset ? 0.0f : *loss) + float(total / all);
}

} // namespace

namespace {
int dim(const Exec &x, int64_t v) {
  if (v <= 0 || v > INT_MAX)
    x.fatal("gemm dimension " + std::to_string(v) + " does not fit cuBLAS");
  return static_cast<int>(v);
}
} // namespace

void Exec::gemmForward(const GemmParams &p, const float *x, const float *w,
                       const float *b, float *y) {
  const int64_t rows = n * p.rows;
  const int nn = dim(*this, rows), k = dim(*this, p.k), m = dim(*this, p.m);
  const float zero = 0;
  // Column-major, y^T[m, n] = op(W)^T x^T. W [m, k] (transB) reads as W^T
  // [k, m] (ld k): transpose it; W [k, m] reads as W^T [m, k] (ld m).
  if (p.transB)
    MEMFIT_CHECK(cublasSgemm(impl->cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k,
                             &p.alpha, w, k, x, k, &zero, y, m));
  else
    MEMFIT_CHECK(cublasSgemm(impl->cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, nn, k,
                             &p.alpha, w, m, x, k, &zero, y, m));
  if (b) {
    biasAddKernel<<<gridFor(rows * p.m), kThreads, 0, impl->compute()>>>(
        rows, p.m, p.beta, b, y);
  }
  impl->done(*this, "gemm forward");
}

void Exec::gemmBackwardData(const GemmParams &p, const float *w,
                            const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  const int nn = dim(*this, n * p.rows), k = dim(*this, p.k),
            m = dim(*this, p.m);
  const float beta = acc ? 1.0f : 0.0f;
  // dx = alpha dy op(W)^T; column-major dx^T[k, n] = op(W) dy^T.
  // transB: op(W) = W^T, the column-major reading of W [m, k] (ld k).
  // else:   op(W) = W [k, m], the transpose of its reading (ld m).
  if (p.transB)
    MEMFIT_CHECK(cublasSgemm(impl->cublas, CUBLAS_OP_N, CUBLAS_OP_N, k, nn, m,
                             &p.alpha, w, k, dy, m, &beta, dx, k));
  else
    MEMFIT_CHECK(cublasSgemm(impl->cublas, CUBLAS_OP_T, CUBLAS_OP_N, k, nn, m,
                             &p.alpha, w, m, dy, m, &beta, dx, k));
  impl->done(*this, "gemm backward-data");
}

void Exec::gemmBackwardWeight(const GemmParams &p, const float *x,
                              const float *dy, float *dw, float *db, bool acc) {
  const int nn = dim(*this, n * p.rows), k = dim(*this, p.k),
            m = dim(*this, p.m);
  const float beta = acc ? 1.0f : 0.0f;
  if (dw) {
    // transB: dW [m, k] = dy^T x; column-major dW^T[k, m] = x^T dy.
    // else:   dW [k, m] = x^T dy; column-major dW^T[m, k] = dy^T x.
    if (p.transB)
      MEMFIT_CHECK(cublasSgemm(impl->cublas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, nn,
                               &p.alpha, x, k, dy, m, &beta, dw, k));
    else
      MEMFIT_CHECK(cublasSgemm(impl->cublas, CUBLAS_OP_N, CUBLAS_OP_T, m, k, nn,
                               &p.alpha, dy, m, x, k, &beta, dw, m));
  }
  if (db)
    biasGradKernel<<<gridFor(p.m), kThreads, 0, impl->compute()>>>(
        n * p.rows, p.m, p.beta, dy, db, acc);
  impl->done(*this, "gemm backward-weight");
}

void Exec::softmaxForward(int64_t features, bool log, const float *x, float *y,
                          int64_t rows) {
  const int64_t all = n * rows;
  softmaxForwardKernel<<<static_cast<unsigned>(std::min<int64_t>(all, 1 << 16)),
                         kRowThreads, 0, impl->compute()>>>(all, features, log,
                                                            x, y);
  impl->done(*this, "softmax forward kernel");
}

void Exec::softmaxBackward(int64_t features, bool log, const float *y,
                           const float *dy, float *dx, bool acc, int64_t rows) {
  if (!dx)
    return;
  const int64_t all = n * rows;
  softmaxBackwardKernel<<<static_cast<unsigned>(
                              std::min<int64_t>(all, 1 << 16)),
                          kRowThreads, 0, impl->compute()>>>(all, features, log,
                                                             y, dy, dx, acc);
  impl->done(*this, "softmax backward kernel");
}

void Exec::loss(const float *logits, const void *labels, float *loss,
                float *dlogits) {
  const bool reset = firstSample == 0; // the first sub-batch or chunk
  if (prog.mseLoss)
    meanSquaredErrorKernel<<<1, kLossThreads, 0, impl->compute()>>>(
        n * prog.labelPerSample, prog.labelPerSample, prog.batch, logits,
        static_cast<const float *>(labels), loss, dlogits, reset);
  else
    crossEntropyKernel<<<1, kLossThreads, 0, impl->compute()>>>(
        LossShape{prog.lossOuter, prog.classes, prog.lossInner}, n, prog.batch,
        logits, static_cast<const int32_t *>(labels), loss, dlogits, reset);
  impl->done(*this, "loss kernel");
}

} // namespace memfit::rt
