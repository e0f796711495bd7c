//===- MultiTensor.cu - CUDA backend: multi-tensor optimizer steps --------===//
//
// The optimizer step of many weights in one launch, as PyTorch's foreach
// and fused optimizers do: a ResNet-50 has 161 weight tensors, and one
// launch each costs more than the update of most of them moves.
//
// At start-up every trainable weight is cut into chunks of kUpdateChunk
// floats, in id order, and the table of (pointers, count) goes to device
// memory once. A group of updates (Exec::sgdGroup/adamGroup, the plan's
// consecutive update tasks) is one launch per run of weights adjacent in
// the table; block b updates chunk b of the run. Each element's step is
// kernels::sgdAt/adamAt, the function the emulation runs, on the same
// floats: the result equals Exec::sgd/adam of each weight, bit for bit
// (every element is its own, so no order of combination enters).
//
//===----------------------------------------------------------------------===//
#include "runtime/GradClip.h"
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::UpdateChunk;

namespace {

/// Blocks for `chunks` chunks: one each, a grid-stride loop past CUDA's
/// limit on the grid.
unsigned blocksFor(int64_t chunks) {
  return static_cast<unsigned>(std::clamp<int64_t>(chunks, 1, 1 << 16));
}

struct SgdMultiKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(const cuda::IterationState *state,
                             const UpdateChunk *table, int64_t chunks, float lr,
                             float momentum, float weightDecay, bool first,
                             bool useBuf) {
    if (state)
      lr = state->lr;
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
      const UpdateChunk k = table[c];
      float *buf = useBuf ? k.m : nullptr;
      for (int64_t i = threadIdx.x; i < k.count; i += blockDim.x)
        kernels::sgdAt(i, lr, momentum, weightDecay, first, k.w, k.g, buf);
    }
  }
};

/// In an iteration graph the step comes from device memory (written by
/// Exec::beginIteration), so that a replay applies the current one, as in
/// Elementwise.cu's AdamKernel.
struct AdamMultiKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(AdamParams p, const cuda::IterationState *state,
                             const UpdateChunk *table, int64_t chunks) {
    if (state) {
      p.step = state->step;
      p.lr = state->lr;
    }
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
      const UpdateChunk k = table[c];
      for (int64_t i = threadIdx.x; i < k.count; i += blockDim.x)
        kernels::adamAt(p, i, k.w, k.g, k.m, k.v);
    }
  }
};

/// Gradient clipping's norm: each chunk's sum of squares in double, reduced
/// in a fixed tree order (the same sums every run).
struct SumSquaresMultiKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(const UpdateChunk *table, int64_t chunks,
                             double *out) {
    __shared__ double part[kThreads];
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
      const UpdateChunk k = table[c];
      double acc = 0;
      for (int64_t i = threadIdx.x; i < k.count; i += blockDim.x) {
        const double v = k.g[i];
        acc += v * v;
      }
      part[threadIdx.x] = acc;
      __syncthreads();
      for (int w = kThreads / 2; w > 0; w /= 2) {
        if (static_cast<int>(threadIdx.x) < w)
          part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
      }
      if (threadIdx.x == 0)
        out[c] = part[0];
      __syncthreads();
    }
  }
};

/// Every gradient of the table times clipping's coefficient.
struct ScaleMultiKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(const UpdateChunk *table, int64_t chunks,
                             float coef) {
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
      const UpdateChunk k = table[c];
      for (int64_t i = threadIdx.x; i < k.count; i += blockDim.x)
        k.g[i] *= coef;
    }
  }
};

/// One gradient times clipping's coefficient (no update table: sharded).
struct ScaleKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, float coef, float *g) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
         i += int64_t(gridDim.x) * blockDim.x)
      g[i] *= coef;
  }
};

/// Calls launch(firstChunk, chunks, weightDecay) once per maximal run of
/// `ids` whose chunks follow one another in the table and whose weights
/// share their weight decay (--no-decay).
template <typename F>
void forEachRun(const Exec &x, const Exec::Impl &im,
                std::initializer_list<int32_t> ids, F launch) {
  int32_t first = -1, end = -1;
  float decay = 0;
  for (int32_t id : ids) {
    if (id < 0 || id >= (int32_t)im.updateFirst.size() || !im.g[id])
      x.fatal("weight " + std::to_string(id) + " has no gradient to apply");
    const float d = x.weightDecayOf(id);
    if (im.updateFirst[id] != end || d != decay) {
      if (end > first)
        launch(first, end - first, decay);
      first = im.updateFirst[id];
      decay = d;
    }
    end = im.updateEnd[id];
  }
  if (end > first)
    launch(first, end - first, decay);
}

} // namespace

void cuda::initUpdateTable(const Exec &x, Exec::Impl &im) {
  const std::vector<WeightInfo> &weights = x.weightInfo();
  im.updateFirst.assign(weights.size(), 0);
  im.updateEnd.assign(weights.size(), 0);
  if (x.info().shard >= 1)
    return; // sharded: Exec::sgd/adam per weight on this rank's slice
  std::vector<UpdateChunk> table;
  for (size_t id = 0; id < weights.size(); ++id) {
    im.updateFirst[id] = static_cast<int32_t>(table.size());
    // A weight homed on the host is updated there (Homes.cpp).
    if (im.g[id] && weights[id].home == Home::Gpu)
      for (int64_t at = 0; at < weights[id].count; at += kUpdateChunk)
        table.push_back({im.w[id] + at, im.g[id] + at,
                         im.m[id] ? im.m[id] + at : nullptr,
                         im.v[id] ? im.v[id] + at : nullptr,
                         std::min(kUpdateChunk, weights[id].count - at)});
    im.updateEnd[id] = static_cast<int32_t>(table.size());
  }
  if (table.empty())
    return;
  // A few KiB to tens of KiB (ResNet-50: about 1,700 chunks of 40 bytes),
  // which the plan does not count, as it does not count cuDNN's handle.
  im.updateTableBytes = static_cast<int64_t>(table.size() * sizeof table[0]);
  check(x, cudaMalloc(&im.updateTable, im.updateTableBytes),
        "cudaMalloc of the multi-tensor update table");
  check(x,
        cudaMemcpy(im.updateTable, table.data(), im.updateTableBytes,
                   cudaMemcpyHostToDevice),
        "cudaMemcpy of the multi-tensor update table");
}

void cuda::destroyUpdateTable(Exec::Impl &im) {
  if (im.updateTable)
    cudaFree(im.updateTable);
  im.updateTable = nullptr;
}

void Exec::sgdGroup(std::initializer_list<int32_t> weightIds) {
  if (!impl->updateTable) {
    for (int32_t id : weightIds)
      sgd(id);
    return;
  }
  bool useBuf = prog.hasMomentum && momentum != 0;
  forEachRun(*this, *impl, weightIds,
             [&](int32_t first, int32_t chunks, float decay) {
               cuda::launch<SgdMultiKernel>(
                   blocksFor(chunks), impl->compute(), impl->stateRead(),
                   impl->updateTable + first, int64_t(chunks), lr, momentum,
                   decay, firstIteration, useBuf);
             });
  impl->done(*this, "multi-tensor sgd kernel");
  for (int32_t id : weightIds)
    impl->copyStale[id] = true;
}

void Exec::adamGroup(std::initializer_list<int32_t> weightIds) {
  if (!impl->updateTable) {
    for (int32_t id : weightIds)
      adam(id);
    return;
  }
  for (int32_t id : weightIds)
    if (id < 0 || id >= (int32_t)wInfo.size() || !impl->m[id] || !impl->v[id])
      fatal("weight " + std::to_string(id) + " has no Adam state to update");
  AdamParams p = adamParams(-1);
  forEachRun(*this, *impl, weightIds,
             [&](int32_t first, int32_t chunks, float decay) {
               p.weightDecay = decay;
               cuda::launch<AdamMultiKernel>(
                   blocksFor(chunks), impl->compute(), p, impl->stateRead(),
                   impl->updateTable + first, int64_t(chunks));
             });
  impl->done(*this, "multi-tensor adam kernel");
  for (int32_t id : weightIds)
    impl->copyStale[id] = true;
}

float Exec::clipGradients(float maxNorm) {
  cudaStream_t s = impl->compute();
  const size_t n = wInfo.size();
  std::vector<float> norms(n, 0.0f);
  auto slice = [&](size_t id) {
    return prog.shard >= 1 ? comm->mySlice(wInfo[id].count)
                           : std::pair<int64_t, int64_t>{0, wInfo[id].count};
  };
  auto onDevice = [&](size_t id) {
    return impl->g[id] && wInfo[id].home == Home::Gpu;
  };
  const int64_t chunks =
      impl->updateTable && impl->chunkSquares
          ? impl->updateTableBytes / int64_t(sizeof(UpdateChunk))
          : 0;
  std::vector<double> squares(static_cast<size_t>(chunks));
  if (chunks > 0) {
    // Every device gradient in one launch, read back once.
    cuda::launch<SumSquaresMultiKernel>(blocksFor(chunks), s, impl->updateTable,
                                        chunks, impl->chunkSquares);
    MEMFIT_CHECK(cudaMemcpyAsync(squares.data(), impl->chunkSquares,
                                 squares.size() * sizeof(double),
                                 cudaMemcpyDeviceToHost, s));
  } else if (impl->gradNorms) {
    MEMFIT_CHECK(cudaMemsetAsync(impl->gradNorms, 0, n * sizeof(float), s));
    cublasPointerMode_t mode;
    MEMFIT_CHECK(cublasGetPointerMode(impl->cublas, &mode));
    MEMFIT_CHECK(
        cublasSetPointerMode(impl->cublas, CUBLAS_POINTER_MODE_DEVICE));
    for (size_t id = 0; id < n; ++id) {
      auto [lo, hi] = slice(id);
      if (onDevice(id) && hi > lo)
        MEMFIT_CHECK(cublasSnrm2_64(impl->cublas, hi - lo, impl->g[id] + lo, 1,
                                    impl->gradNorms + id));
    }
    MEMFIT_CHECK(cublasSetPointerMode(impl->cublas, mode));
    MEMFIT_CHECK(cudaMemcpyAsync(norms.data(), impl->gradNorms,
                                 n * sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  impl->done(*this, "gradient norm");
  // The rounds, the host gradients' copy-outs joined into the compute
  // stream, are done after this.
  MEMFIT_CHECK(cudaStreamSynchronize(s));
  for (size_t id = 0; id < n; ++id) {
    if (!impl->g[id])
      continue;
    auto [lo, hi] = slice(id);
    if (wInfo[id].home == Home::Host) {
      norms[id] = l2Norm(impl->g[id] + lo, hi - lo);
    } else if (chunks > 0) {
      double sum = 0;
      for (int32_t c = impl->updateFirst[id]; c < impl->updateEnd[id]; ++c)
        sum += squares[static_cast<size_t>(c)];
      norms[id] = static_cast<float>(std::sqrt(sum));
    }
  }
  const float norm = globalNorm(norms.data(), n, *comm, prog.shard);
  const float coef = clipCoefficient(maxNorm, norm);
  if (chunks > 0)
    cuda::launch<ScaleMultiKernel>(blocksFor(chunks), s, impl->updateTable,
                                   chunks, coef);
  for (size_t id = 0; id < n; ++id) {
    auto [lo, hi] = slice(id);
    if (!impl->g[id] || hi <= lo)
      continue;
    if (wInfo[id].home == Home::Host) {
      float *g = impl->g[id];
      for (int64_t i = lo; i < hi; ++i)
        g[i] *= coef;
    } else if (chunks == 0) {
      cuda::launch<ScaleKernel>(gridFor(hi - lo), s, hi - lo, coef,
                                impl->g[id] + lo);
    }
  }
  impl->done(*this, "gradient clipping");
  return norm;
}

} // namespace memfit::rt
