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
using cuda::View;

namespace {

__global__ void biasAddKernel(int64_t n, int64_t m, float beta, View bias,
                              View y) {
  MEMFIT_GRID_LOOP(t, n * m) { y[t] += beta * bias[t % m]; }
}

/// db[j] (put) beta * sum over samples of dy[s, j].
__global__ void biasGradKernel(int64_t n, int64_t m, float beta, View dy,
                               View db, bool acc) {
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
__device__ void rowLogSumExp(int64_t features, View xs, double *scratchD,
                             float *scratchF, float &max, double &logSum) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
    mx = MaxOp()(mx, float(xs[j]));
  max = blockReduce(mx, MaxOp(), -INFINITY, scratchF);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < features; j += blockDim.x)
    sum += kernels::expTerm(xs[j], max);
  logSum = log(blockReduce(sum, SumOp(), 0.0, scratchD));
}

__global__ void softmaxForwardKernel(int64_t n, int64_t features, bool log,
                                     View x, View y) {
  __shared__ double scratchD[32];
  __shared__ float scratchF[32];
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const View xs = x + s * features;
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
                                      View y, View dy, View dx, bool acc) {
  __shared__ double scratch[32];
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const View ys = y + s * features, dys = dy + s * features;
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
                                   View logits, const int32_t *labels,
                                   float *loss, View dlogits, float scale,
                                   bool reset) {
  __shared__ double scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  const int64_t classes = sh.classes, inner = sh.inner;
  const int64_t count = batch * sh.outer * inner;
  double total = 0;
  for (int64_t q = warp; q < n * sh.outer * inner; q += warps) {
    int64_t so = q / inner, r = q - so * inner;
    const View xs = logits + so * classes * inner + r;
    float mx = -INFINITY;
    for (int64_t j = lane; j < classes; j += 32)
      mx = MaxOp()(mx, float(xs[j * inner]));
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
    const View ds = dlogits + so * classes * inner + r;
    for (int64_t j = lane; j < classes; j += 32)
      // Scaled after rounding to fp32, as the emulation scales (fp16).
      ds[j * inner] = kernels::crossEntropyGrad(xs[j * inner], mx, logSum,
                                                j == label, count) *
                      scale;
  }
  total = blockReduce(total, SumOp(), 0.0, scratch);
  if (threadIdx.x == 0)
    *loss = (reset ? 0.0f : *loss) + float(total / double(count));
}

__global__ void meanSquaredErrorKernel(int64_t count, int64_t features,
                                       int64_t batch, View y,
                                       const float *target, float *loss,
                                       View dy, float scale, bool reset) {
  __shared__ double scratch[32];
  const double all = double(batch) * double(features);
  double total = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    float grad;
    total += kernels::squaredErrorAt(y[e], target[e], all, grad);
    if (dy)
      dy[e] = grad * scale;
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

cudaDataType_t typeOf(View v) {
  switch (v.t) {
  case cuda::Store::BF16:
    return CUDA_R_16BF;
  case cuda::Store::FP16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}
} // namespace

void cuda::gemm(const Exec &x, const Exec::Impl &im, bool transA, bool transB,
                int m, int n, int k, float alpha, View a, int lda,
                long long strideA, View b, int ldb, long long strideB,
                float beta, View c, int ldc, long long strideC, int batch) {
  // cuBLAS multiplies inputs of one type; a 16-bit product may write fp32
  // (a weight gradient into its fp32 master gradient).
  if (a.t != b.t || (a.t == Store::F32 && c.t != Store::F32))
    x.fatal("a matrix product of mixed storage (inputs " +
            std::to_string(int(a.t)) + " and " + std::to_string(int(b.t)) +
            ", result " + std::to_string(int(c.t)) +
            ") is not supported by cuBLAS");
  // fp32 as the plan priced it: FMA units (pedantic math on the handle),
  // or TF32 tensor cores in a TF32 program; 16-bit inputs run on tensor
  // cores with fp32 accumulation.
  cublasComputeType_t compute = x.info().precision == Precision::TF32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  check(x,
        cublasGemmStridedBatchedEx(
            im.cublas, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
            transB ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a.p, typeOf(a),
            lda, strideA, b.p, typeOf(b), ldb, strideB, &beta, c.p, typeOf(c),
            ldc, strideC, batch, compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

void Exec::gemmForward(const GemmParams &p, const float *x, const float *w,
                       const float *b, float *y) {
  const int64_t rows = n * p.rows;
  const int nn = dim(*this, rows), k = dim(*this, p.k), m = dim(*this, p.m);
  const View vx = impl->view(x), vw = impl->view(w), vy = impl->view(y);
  // Column-major, y^T[m, n] = op(W)^T x^T. W [m, k] (transB) reads as W^T
  // [k, m] (ld k): transpose it; W [k, m] reads as W^T [m, k] (ld m).
  if (p.transB)
    cuda::gemm(*this, *impl, true, false, m, nn, k, p.alpha, vw, k, 0, vx, k, 0,
               0.0f, vy, m, 0);
  else
    cuda::gemm(*this, *impl, false, false, m, nn, k, p.alpha, vw, m, 0, vx, k,
               0, 0.0f, vy, m, 0);
  if (b) {
    biasAddKernel<<<gridFor(rows * p.m), kThreads, 0, impl->compute()>>>(
        rows, p.m, p.beta, impl->view(b), vy);
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
  const View vw = impl->view(w), vdy = impl->view(dy), vdx = impl->view(dx);
  // dx = alpha dy op(W)^T; column-major dx^T[k, n] = op(W) dy^T.
  // transB: op(W) = W^T, the column-major reading of W [m, k] (ld k).
  // else:   op(W) = W [k, m], the transpose of its reading (ld m).
  if (p.transB)
    cuda::gemm(*this, *impl, false, false, k, nn, m, p.alpha, vw, k, 0, vdy, m,
               0, beta, vdx, k, 0);
  else
    cuda::gemm(*this, *impl, true, false, k, nn, m, p.alpha, vw, m, 0, vdy, m,
               0, beta, vdx, k, 0);
  impl->done(*this, "gemm backward-data");
}

void Exec::gemmBackwardWeight(const GemmParams &p, const float *x,
                              const float *dy, float *dw, float *db, bool acc) {
  const int nn = dim(*this, n * p.rows), k = dim(*this, p.k),
            m = dim(*this, p.m);
  const float beta = acc ? 1.0f : 0.0f;
  const View vx = impl->view(x), vdy = impl->view(dy), vdw = impl->view(dw);
  if (dw) {
    // transB: dW [m, k] = dy^T x; column-major dW^T[k, m] = x^T dy.
    // else:   dW [k, m] = x^T dy; column-major dW^T[m, k] = dy^T x.
    if (p.transB)
      cuda::gemm(*this, *impl, false, true, k, m, nn, p.alpha, vx, k, 0, vdy, m,
                 0, beta, vdw, k, 0);
    else
      cuda::gemm(*this, *impl, false, true, m, k, nn, p.alpha, vdy, m, 0, vx, k,
                 0, beta, vdw, m, 0);
  }
  if (db)
    biasGradKernel<<<gridFor(p.m), kThreads, 0, impl->compute()>>>(
        n * p.rows, p.m, p.beta, vdy, impl->view(db), acc);
  impl->done(*this, "gemm backward-weight");
}

void Exec::softmaxForward(int64_t features, bool log, const float *x, float *y,
                          int64_t rows) {
  const int64_t all = n * rows;
  softmaxForwardKernel<<<static_cast<unsigned>(std::min<int64_t>(all, 1 << 16)),
                         kRowThreads, 0, impl->compute()>>>(
      all, features, log, impl->view(x), impl->view(y));
  impl->done(*this, "softmax forward kernel");
}

void Exec::softmaxBackward(int64_t features, bool log, const float *y,
                           const float *dy, float *dx, bool acc, int64_t rows) {
  if (!dx)
    return;
  const int64_t all = n * rows;
  softmaxBackwardKernel<<<static_cast<unsigned>(
                              std::min<int64_t>(all, 1 << 16)),
                          kRowThreads, 0, impl->compute()>>>(
      all, features, log, impl->view(y), impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "softmax backward kernel");
}

void Exec::loss(const float *logits, const void *labels, float *loss,
                float *dlogits) {
  const bool reset = firstSample == 0; // the first sub-batch or chunk
  if (prog.mseLoss)
    meanSquaredErrorKernel<<<1, kLossThreads, 0, impl->compute()>>>(
        n * prog.labelPerSample, prog.labelPerSample, prog.batch,
        impl->view(logits), static_cast<const float *>(labels), loss,
        impl->view(dlogits), lossScale, reset);
  else
    crossEntropyKernel<<<1, kLossThreads, 0, impl->compute()>>>(
        LossShape{prog.lossOuter, prog.classes, prog.lossInner}, n, prog.batch,
        impl->view(logits), static_cast<const int32_t *>(labels), loss,
        impl->view(dlogits), lossScale, reset);
  impl->done(*this, "loss kernel");
}

} // namespace memfit::rt
