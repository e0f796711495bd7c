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
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"

#include <algorithm>
#include <string>

namespace memfit::rt {

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

/// Calls launch(firstChunk, chunks) once per maximal run of `ids` whose
/// chunks follow one another in the table.
template <typename F>
void forEachRun(const Exec &x, const Exec::Impl &im,
                std::initializer_list<int32_t> ids, F launch) {
  int32_t first = -1, end = -1;
  for (int32_t id : ids) {
    if (id < 0 || id >= (int32_t)im.updateFirst.size() || !im.g[id])
      x.fatal("weight " + std::to_string(id) + " has no gradient to apply");
    if (im.updateFirst[id] != end) {
      if (end > first)
        launch(first, end - first);
      first = im.updateFirst[id];
    }
    end = im.updateEnd[id];
  }
  if (end > first)
    launch(first, end - first);
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
  forEachRun(*this, *impl, weightIds, [&](int32_t first, int32_t chunks) {
    cuda::launch<SgdMultiKernel>(blocksFor(chunks), impl->compute(),
                                 impl->stateRead(), impl->updateTable + first,
                                 int64_t(chunks), lr, momentum, weightDecay,
                                 firstIteration, useBuf);
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
  const AdamParams p = adamParams();
  forEachRun(*this, *impl, weightIds, [&](int32_t first, int32_t chunks) {
    cuda::launch<AdamMultiKernel>(blocksFor(chunks), impl->compute(), p,
                                  impl->stateRead(), impl->updateTable + first,
                                  int64_t(chunks));
  });
  impl->done(*this, "multi-tensor adam kernel");
  for (int32_t id : weightIds)
    impl->copyStale[id] = true;
}

} // namespace memfit::rt
