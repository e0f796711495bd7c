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
// first sub-batch resets. A loss reduces in two passes: up to kLossBlocks
// blocks each leave a compensated float sum of their terms in the
// backend's partial-sum scratch, then one block adds those in index order,
// so the sum's order is fixed by the shape and no atomics are used. Labels were
// validated by the driver when loaded; a label out of range still never reads
// outside the row: it makes the loss NaN, which the driver reports.
//
// The evaluation's loss (Exec::evalLoss) reduces the same way in double, as
// the emulation sums it, into the device's EvalSums, which stay there over
// the evaluation's batches until the trainer reads them once.
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

struct BiasAddKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t n, int64_t m, float beta, View bias,
                             View y) {
    MEMFIT_GRID_LOOP(t, n * m) { y[t] += beta * bias[t % m]; }
  }
};

/// db[j] (put) beta * sum over samples of dy[s, j].
struct BiasGradKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t n, int64_t m, float beta, View dy, View db,
                             bool acc) {
    MEMFIT_GRID_LOOP(j, m) {
      put(db[j], float(double(beta) * kernels::columnSum(dy, n, m, j)), acc);
    }
  }
};

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

struct SoftmaxForwardKernel {
  static constexpr int threads = kRowThreads;
  __device__ static void run(int64_t n, int64_t features, bool log, View x,
                             View y) {
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
};

// softmax:     dx = y * (dy - sum(dy * y))
// log-softmax: dx = dy - exp(y) * sum(dy)
struct SoftmaxBackwardKernel {
  static constexpr int threads = kRowThreads;
  __device__ static void run(int64_t n, int64_t features, bool log, View y,
                             View dy, View dx, bool acc) {
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
};

using cuda::CompensatedSum;
using cuda::kLossBlocks;
using cuda::kLossThreads;

/// Blocks of a loss's first pass over `items` items, `perBlock` to a block:
/// enough to fill any GPU, at most kLossBlocks (one partial sum each). The
/// count depends on the shape alone, so the sum's order does too.
unsigned lossBlocks(int64_t items, int64_t perBlock) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((items + perBlock - 1) / perBlock, 1, kLossBlocks));
}

/// First pass of the cross-entropy: warp w of the grid takes the labelled
/// positions w, w + (warps in the grid), ... of the [outer, classes, inner]
/// logits of each sample, writes their gradients, and block b leaves the
/// compensated sum of its positions' losses in partials[b].
struct CrossEntropyKernel {
  static constexpr int threads = kLossThreads;
  __device__ static void run(LossShape sh, int64_t n, double count,
                             int32_t ignore, View logits, const int32_t *labels,
                             CompensatedSum *partials, View dlogits,
                             float scale, const cuda::IterationState *state) {
    if (state) {
      scale = state->lossScale;
      count = state->lossCount;
    }
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (threads / 32);
    const int64_t classes = sh.classes, inner = sh.inner;
    CompensatedSum total;
    for (int64_t q = (blockIdx.x * int64_t(threads) + threadIdx.x) >> 5;
         q < n * sh.outer * inner; q += warps) {
      int64_t so = q / inner, r = q - so * inner;
      const View xs = logits + so * classes * inner + r;
      const int32_t label = labels[q];
      if (!kernels::countsLabel(label, ignore)) {
        // No loss, no gradient (the warp agrees: one label a position).
        if (dlogits) {
          const View ds = dlogits + so * classes * inner + r;
          for (int64_t j = lane; j < classes; j += 32)
            ds[j * inner] = 0.0f;
        }
        continue;
      }
      float mx = -INFINITY;
      for (int64_t j = lane; j < classes; j += 32)
        mx = MaxOp()(mx, float(xs[j * inner]));
      mx = warpAllReduce(mx, MaxOp());
      double sum = 0;
      for (int64_t j = lane; j < classes; j += 32)
        sum += kernels::expTerm(xs[j * inner], mx);
      const double logSum = log(warpAllReduce(sum, SumOp()));
      const bool valid = label >= 0 && label < classes;
      if (lane == 0)
        total.add(valid ? float(kernels::crossEntropyTerm(mx, logSum,
                                                          xs[label * inner]))
                        : NAN);
      if (!dlogits)
        continue;
      // The fused head's gradient overwrites the logits (Exec::headLoss):
      // lane 0's read of the label's logit comes first.
      __syncwarp();
      const View ds = dlogits + so * classes * inner + r;
      for (int64_t j = lane; j < classes; j += 32)
        // Scaled after rounding to fp32, as the emulation scales (fp16).
        ds[j * inner] = kernels::crossEntropyGrad(xs[j * inner], mx, logSum,
                                                  j == label, count) *
                        scale;
    }
    total = cuda::blockSum<threads>(total);
    if (threadIdx.x == 0)
      partials[blockIdx.x] = total;
  }
};

/// First pass of the mean squared error: a grid-stride loop over the
/// elements, writing their gradients; block b leaves the compensated sum
/// of its squared errors in partials[b].
struct MeanSquaredErrorKernel {
  static constexpr int threads = kLossThreads;
  __device__ static void run(int64_t count, int64_t features, int64_t batch,
                             View y, const float *target,
                             CompensatedSum *partials, View dy, float scale,
                             const cuda::IterationState *state) {
    if (state)
      scale = state->lossScale;
    const double all = double(batch) * double(features);
    CompensatedSum total;
    MEMFIT_GRID_LOOP(e, count) {
      float grad;
      total.add(float(kernels::squaredErrorAt(y[e], target[e], all, grad)));
      if (dy)
        dy[e] = grad * scale;
    }
    total = cuda::blockSum<threads>(total);
    if (threadIdx.x == 0)
      partials[blockIdx.x] = total;
  }
};

/// Second pass of a loss, one block: the `blocks` partial sums in index
/// order (thread t takes t, t + threads, ...; then the block's fixed tree),
/// divided by `count` (the cross-entropy's: `state`'s in a graph) and added
/// into the loss scalar, which the first sub-batch or chunk resets.
struct LossTotalKernel {
  static constexpr int threads = kLossThreads;
  __device__ static void run(const CompensatedSum *partials, int blocks,
                             double count, float *loss, bool reset,
                             const cuda::IterationState *state) {
    if (state)
      count = state->lossCount;
    CompensatedSum total;
    for (int b = threadIdx.x; b < blocks; b += threads)
      total.add(partials[b]);
    total = cuda::blockSum<threads>(total);
    if (threadIdx.x != 0)
      return;
    // One division in double, rounded once, as the emulation's.
    const double sum =
        isfinite(total.s) ? double(total.s) + double(total.c) : double(total.s);
    // No position counted: nothing to add (torch's mean would be NaN).
    *loss = (reset ? 0.0f : *loss) + (count > 0 ? float(sum / count) : 0.0f);
  }
};

/// The evaluation's sums of one block, in double: the loss and the
/// positions predicted right.
struct EvalPartial {
  double loss = 0, correct = 0;
  __device__ void add(EvalPartial o) {
    loss += o.loss;
    correct += o.correct;
  }
};
static_assert(sizeof(EvalPartial) == 2 * sizeof(double),
              "Exec::Impl::evalPartials holds two doubles a block");

// Found by cuda::blockSum through the argument's namespace.
__device__ EvalPartial shuffleDown(EvalPartial v, int o) {
  return {__shfl_down_sync(0xffffffffu, v.loss, o),
          __shfl_down_sync(0xffffffffu, v.correct, o)};
}

/// Whether (v, j) comes before (best, bestJ) in torch.argmax's choice: a
/// larger value, or the same value at a lower index.
__device__ bool precedes(float v, long long j, float best, long long bestJ) {
  return v > best || (v == best && j < bestJ);
}

/// First pass of the evaluation's cross-entropy over the first `valid`
/// samples: warps take positions as CrossEntropyKernel's do, with the same
/// max and log-sum-exp, and find the first index of the largest logit;
/// block b leaves the sum of its positions' losses (NaN for a label out of
/// range, as the training's loss) and of those whose index is the label in
/// partials[b].
struct EvalCrossEntropyKernel {
  static constexpr int threads = kLossThreads;
  __device__ static void run(LossShape sh, int64_t valid, int32_t ignore,
                             View logits, const int32_t *labels,
                             EvalPartial *partials) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (threads / 32);
    const int64_t classes = sh.classes, inner = sh.inner;
    EvalPartial total;
    for (int64_t q = (blockIdx.x * int64_t(threads) + threadIdx.x) >> 5;
         q < valid * sh.outer * inner; q += warps) {
      int64_t so = q / inner, r = q - so * inner;
      const View xs = logits + so * classes * inner + r;
      if (!kernels::countsLabel(labels[q], ignore))
        continue; // the warp agrees: one label a position
      float mx = -INFINITY, best = -INFINITY;
      long long bestJ = classes; // none yet: any logit precedes it
      for (int64_t j = lane; j < classes; j += 32) {
        const float v = xs[j * inner];
        mx = MaxOp()(mx, v);
        if (precedes(v, j, best, bestJ)) {
          best = v;
          bestJ = j;
        }
      }
      mx = warpAllReduce(mx, MaxOp());
      for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_down_sync(0xffffffffu, best, o);
        const long long j = __shfl_down_sync(0xffffffffu, bestJ, o);
        if (precedes(v, j, best, bestJ)) {
          best = v;
          bestJ = j;
        }
      }
      double sum = 0;
      for (int64_t j = lane; j < classes; j += 32)
        sum += kernels::expTerm(xs[j * inner], mx);
      const double logSum = log(warpAllReduce(sum, SumOp()));
      const int32_t label = labels[q];
      const bool inRange = label >= 0 && label < classes;
      if (lane == 0) {
        total.loss +=
            inRange ? kernels::crossEntropyTerm(mx, logSum, xs[label * inner])
                    : double(NAN);
        total.correct += bestJ == label ? 1.0 : 0.0;
      }
    }
    total = cuda::blockSum<threads>(total);
    if (threadIdx.x == 0)
      partials[blockIdx.x] = total;
  }
};

/// First pass of the evaluation's squared error over `count` elements:
/// block b leaves the sum of its (y - target)^2, each in double, in
/// partials[b].
struct EvalSquaredErrorKernel {
  static constexpr int threads = kLossThreads;
  __device__ static void run(int64_t count, View y, const float *target,
                             EvalPartial *partials) {
    EvalPartial total;
    MEMFIT_GRID_LOOP(e, count) {
      const double d = double(float(y[e])) - double(target[e]);
      total.loss += d * d;
    }
    total = cuda::blockSum<threads>(total);
    if (threadIdx.x == 0)
      partials[blockIdx.x] = total;
  }
};

/// Second pass of the evaluation's loss, one block: the `blocks` partials
/// in index order (thread t takes t, t + threads, ...; then the block's
/// fixed tree), added with the sub-batch's `count` positions into `sums`.
struct EvalTotalKernel {
  static constexpr int threads = kLossThreads;
  __device__ static void run(const EvalPartial *partials, int blocks,
                             double count, EvalSums *sums) {
    EvalPartial total;
    for (int b = threadIdx.x; b < blocks; b += threads)
      total.add(partials[b]);
    total = cuda::blockSum<threads>(total);
    if (threadIdx.x != 0)
      return;
    sums->loss += total.loss;
    sums->correct += total.correct;
    sums->count += count;
  }
};

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

namespace {
/// y [rows, m] = alpha x [rows, k] op(W).
void productRows(const Exec &ex, const Exec::Impl &im, const GemmParams &p,
                 int64_t rows, View vx, View vw, View vy) {
  const int nn = dim(ex, rows), k = dim(ex, p.k), m = dim(ex, p.m);
  // Column-major, y^T[m, n] = op(W)^T x^T. W [m, k] (transB) reads as W^T
  // [k, m] (ld k): transpose it; W [k, m] reads as W^T [m, k] (ld m).
  if (p.transB)
    cuda::gemm(ex, im, true, false, m, nn, k, p.alpha, vw, k, 0, vx, k, 0, 0.0f,
               vy, m, 0);
  else
    cuda::gemm(ex, im, false, false, m, nn, k, p.alpha, vw, m, 0, vx, k, 0,
               0.0f, vy, m, 0);
}

/// dx [rows, k] (+)= alpha dy [rows, m] op(W)^T.
void dataGradRows(const Exec &ex, const Exec::Impl &im, const GemmParams &p,
                  int64_t rows, View vw, View vdy, View vdx, bool acc) {
  const int nn = dim(ex, rows), k = dim(ex, p.k), m = dim(ex, p.m);
  const float beta = acc ? 1.0f : 0.0f;
  // Column-major dx^T[k, n] = op(W) dy^T.
  // transB: op(W) = W^T, the column-major reading of W [m, k] (ld k).
  // else:   op(W) = W [k, m], the transpose of its reading (ld m).
  if (p.transB)
    cuda::gemm(ex, im, false, false, k, nn, m, p.alpha, vw, k, 0, vdy, m, 0,
               beta, vdx, k, 0);
  else
    cuda::gemm(ex, im, true, false, k, nn, m, p.alpha, vw, m, 0, vdy, m, 0,
               beta, vdx, k, 0);
}

/// dW (+)= alpha over `rows` rows of x and dy.
void weightGradRows(const Exec &ex, const Exec::Impl &im, const GemmParams &p,
                    int64_t rows, View vx, View vdy, View vdw, bool acc) {
  const int nn = dim(ex, rows), k = dim(ex, p.k), m = dim(ex, p.m);
  const float beta = acc ? 1.0f : 0.0f;
  // transB: dW [m, k] = dy^T x; column-major dW^T[k, m] = x^T dy.
  // else:   dW [k, m] = x^T dy; column-major dW^T[m, k] = dy^T x.
  if (p.transB)
    cuda::gemm(ex, im, false, true, k, m, nn, p.alpha, vx, k, 0, vdy, m, 0,
               beta, vdw, k, 0);
  else
    cuda::gemm(ex, im, false, true, m, k, nn, p.alpha, vdy, m, 0, vx, k, 0,
               beta, vdw, m, 0);
}
} // namespace

void Exec::gemmForward(const GemmParams &p, const float *x, const float *w,
                       const float *b, float *y) {
  const int64_t rows = n * p.rows;
  const View vy = impl->view(y);
  productRows(*this, *impl, p, rows, impl->view(x), impl->view(w), vy);
  if (b) {
    cuda::launch<BiasAddKernel>(gridFor(rows * p.m), impl->compute(), rows, p.m,
                                p.beta, impl->view(b), vy);
  }
  impl->done(*this, "gemm forward");
}

void Exec::gemmBackwardData(const GemmParams &p, const float *w,
                            const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  dataGradRows(*this, *impl, p, n * p.rows, impl->view(w), impl->view(dy),
               impl->view(dx), acc);
  impl->done(*this, "gemm backward-data");
}

void Exec::gemmBackwardWeight(const GemmParams &p, const float *x,
                              const float *dy, float *dw, float *db, bool acc) {
  const View vdy = impl->view(dy);
  if (dw)
    weightGradRows(*this, *impl, p, n * p.rows, impl->view(x), vdy,
                   impl->view(dw), acc);
  if (db)
    cuda::launch<BiasGradKernel>(gridFor(p.m), impl->compute(), n * p.rows, p.m,
                                 p.beta, vdy, impl->view(db), acc);
  impl->done(*this, "gemm backward-weight");
}

void Exec::softmaxForward(int64_t features, bool log, const float *x, float *y,
                          int64_t rows) {
  const int64_t all = n * rows;
  cuda::launch<SoftmaxForwardKernel>(
      static_cast<unsigned>(std::min<int64_t>(all, 1 << 16)), impl->compute(),
      all, features, log, impl->view(x), impl->view(y));
  impl->done(*this, "softmax forward kernel");
}

void Exec::softmaxBackward(int64_t features, bool log, const float *y,
                           const float *dy, float *dx, bool acc, int64_t rows) {
  if (!dx)
    return;
  const int64_t all = n * rows;
  cuda::launch<SoftmaxBackwardKernel>(
      static_cast<unsigned>(std::min<int64_t>(all, 1 << 16)), impl->compute(),
      all, features, log, impl->view(y), impl->view(dy), impl->view(dx), acc);
  impl->done(*this, "softmax backward kernel");
}

void Exec::loss(const float *logits, const void *labels, float *loss,
                float *dlogits) {
  const bool reset = firstSample == 0; // the first sub-batch or chunk
  auto *partials = reinterpret_cast<CompensatedSum *>(impl->lossPartials);
  unsigned blocks;
  double count;
  if (prog.mseLoss) {
    const int64_t elements = n * prog.labelPerSample;
    blocks = lossBlocks(elements, kLossThreads);
    count = double(prog.batch) * double(prog.labelPerSample);
    cuda::launch<MeanSquaredErrorKernel>(
        blocks, impl->compute(), elements, prog.labelPerSample, prog.batch,
        impl->view(logits), static_cast<const float *>(labels), partials,
        impl->view(dlogits), lossScale, impl->stateRead());
  } else {
    const LossShape sh{prog.lossOuter, prog.classes, prog.lossInner};
    blocks = lossBlocks(n * sh.outer * sh.inner, kLossThreads / 32);
    count = lossPositions();
    cuda::launch<CrossEntropyKernel>(
        blocks, impl->compute(), sh, n, count, prog.ignoreIndex,
        impl->view(logits), static_cast<const int32_t *>(labels), partials,
        impl->view(dlogits), lossScale, impl->stateRead());
  }
  cuda::launch<LossTotalKernel>(1, impl->compute(), partials, int(blocks),
                                count, loss, reset,
                                prog.mseLoss ? nullptr : impl->stateRead());
  impl->done(*this, "loss kernel");
}

void Exec::headLoss(const GemmParams &p, int64_t chunkRows, const float *x,
                    const float *w, const void *labels, float *scratch,
                    float *loss, float *dx, bool accX, float *dw, bool accW) {
  const bool reset = firstSample == 0; // the first sub-batch or chunk
  auto *partials = reinterpret_cast<CompensatedSum *>(impl->lossPartials);
  const auto *lab = static_cast<const int32_t *>(labels);
  const View vx = impl->view(x), vw = impl->view(w), vs = impl->view(scratch),
             vdx = impl->view(dx), vdw = impl->view(dw);
  const int64_t rows = n * p.rows;
  const double count = lossPositions();
  for (int64_t r0 = 0; r0 < rows; r0 += chunkRows) {
    const int64_t rr = std::min(chunkRows, rows - r0);
    const View xc = vx + r0 * p.k;
    // The chunk's logits, then their gradient over them.
    productRows(*this, *impl, p, rr, xc, vw, vs);
    const unsigned blocks = lossBlocks(rr, kLossThreads / 32);
    cuda::launch<CrossEntropyKernel>(blocks, impl->compute(),
                                     LossShape{rr, p.m, 1}, int64_t(1), count,
                                     prog.ignoreIndex, vs, lab + r0, partials,
                                     vs, lossScale, impl->stateRead());
    cuda::launch<LossTotalKernel>(1, impl->compute(), partials, int(blocks),
                                  count, loss, reset && r0 == 0,
                                  impl->stateRead());
    if (dx)
      dataGradRows(*this, *impl, p, rr, vw, vs, vdx + r0 * p.k, accX);
    if (dw)
      weightGradRows(*this, *impl, p, rr, xc, vs, vdw, accW || r0 > 0);
  }
  impl->done(*this, "fused head loss");
}

void Exec::evalHeadLoss(const GemmParams &p, int64_t chunkRows, const float *x,
                        const float *w, const void *labels, float *scratch) {
  if (!impl->evalSums)
    fatal("an evaluation loss in a program without an evaluation round");
  impl->readsHostValue("the evaluation's count of real samples");
  const int64_t valid = std::clamp<int64_t>(evalValidEnd - firstSample, 0, n);
  auto *partials = reinterpret_cast<EvalPartial *>(impl->evalPartials);
  const auto *lab = static_cast<const int32_t *>(labels);
  const View vx = impl->view(x), vw = impl->view(w), vs = impl->view(scratch);
  const int64_t rows = valid * p.rows;
  for (int64_t r0 = 0; r0 < rows; r0 += chunkRows) {
    const int64_t rr = std::min(chunkRows, rows - r0);
    productRows(*this, *impl, p, rr, vx + r0 * p.k, vw, vs);
    const unsigned blocks = lossBlocks(rr, kLossThreads / 32);
    cuda::launch<EvalCrossEntropyKernel>(
        blocks, impl->compute(), LossShape{rr, p.m, 1}, int64_t(1),
        prog.ignoreIndex, vs, lab + r0, partials);
    const int64_t counted = kernels::countedLabels(
        rr,
        static_cast<const int32_t *>(hostLabels(impl->batch)) +
            firstSample * p.rows + r0,
        prog.ignoreIndex);
    cuda::launch<EvalTotalKernel>(1, impl->compute(), partials, int(blocks),
                                  double(counted), impl->evalSums);
  }
  impl->done(*this, "fused head evaluation loss");
}

void Exec::evalLoss(const float *logits, const void *labels) {
  if (!impl->evalSums)
    fatal("an evaluation loss in a program without an evaluation round");
  // The samples that count are the host's to say per batch: a captured
  // graph would replay this batch's count.
  impl->readsHostValue("the evaluation's count of real samples");
  const int64_t valid = std::clamp<int64_t>(evalValidEnd - firstSample, 0, n);
  if (valid == 0)
    return; // a sub-batch of padding only: nothing to add
  auto *partials = reinterpret_cast<EvalPartial *>(impl->evalPartials);
  int64_t positions = valid * prog.labelPerSample;
  unsigned blocks;
  if (prog.mseLoss) {
    blocks = lossBlocks(positions, kLossThreads);
    cuda::launch<EvalSquaredErrorKernel>(
        blocks, impl->compute(), positions, impl->view(logits),
        static_cast<const float *>(labels), partials);
  } else {
    const LossShape sh{prog.lossOuter, prog.classes, prog.lossInner};
    blocks = lossBlocks(valid * sh.outer * sh.inner, kLossThreads / 32);
    cuda::launch<EvalCrossEntropyKernel>(
        blocks, impl->compute(), sh, valid, prog.ignoreIndex,
        impl->view(logits), static_cast<const int32_t *>(labels), partials);
    // The positions that count, from the host's copy of the batch's labels
    // (this sub-batch's are at firstSample).
    positions = kernels::countedLabels(
        positions,
        static_cast<const int32_t *>(hostLabels(impl->batch)) +
            firstSample * prog.labelPerSample,
        prog.ignoreIndex);
  }
  cuda::launch<EvalTotalKernel>(1, impl->compute(), partials, int(blocks),
                                double(positions), impl->evalSums);
  impl->done(*this, "evaluation loss kernel");
}

} // namespace memfit::rt
