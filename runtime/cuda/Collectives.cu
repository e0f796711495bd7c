//===- Collectives.cu - Data-parallel collectives through NCCL ------------===//
//
// The CUDA backend's side of docs/data-parallel.md: each gradient bucket's
// collective on a stream of its own once the compute stream has made its
// gradients final, the update waiting for them, and the sharded weights and
// optimizer state gathered. Weight-side buffers hold `ranks` equal slices
// (ExecCore.cpp pads them), so NCCL's in-place reduce-scatter and
// all-gather apply. The ranks bootstrap NCCL through the trainer's MPI
// communicator. Compiled here; no multi-GPU machine has run it yet.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"

#include <string>

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;

namespace {

struct SliceAccumulateKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(int64_t count, const float *x, float *y,
                             bool first) {
    MEMFIT_GRID_LOOP(i, count) { y[i] = first ? x[i] : y[i] + x[i]; }
  }
};

void ncclCheck(const Exec &x, ncclResult_t r, const char *call) {
  if (r != ncclSuccess)
    x.fatal(std::string(call) + ": " + ncclGetErrorString(r));
}
#define MEMFIT_NCCL(call) ncclCheck(*this, (call), #call)

int64_t sliceOf(const Exec &x, int64_t count) {
  int64_t r = x.info().ranks;
  return (count + r - 1) / r;
}

} // namespace

void cuda::destroyCollectives(Exec::Impl &im) {
  if (im.nccl)
    ncclCommDestroy(im.nccl);
  if (im.coll)
    cudaStreamDestroy(im.coll);
  for (cudaEvent_t ev : {im.computeMark, im.collDone})
    if (ev)
      cudaEventDestroy(ev);
}

/// NCCL, its stream and events, made at the first collective (the
/// communicator is set after the Exec is built).
static void ensureNccl(Exec &x, Exec::Impl &im) {
  if (im.nccl)
    return;
  ncclUniqueId id;
  if (x.comm->rank() == 0)
    ncclCheck(x, ncclGetUniqueId(&id), "ncclGetUniqueId");
  x.comm->broadcastBytes(&id, sizeof id, 0);
  ncclCheck(x, ncclCommInitRank(&im.nccl, x.comm->size(), id, x.comm->rank()),
            "ncclCommInitRank");
  cuda::check(x, cudaStreamCreateWithFlags(&im.coll, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  for (cudaEvent_t *ev : {&im.computeMark, &im.collDone})
    cuda::check(x, cudaEventCreateWithFlags(ev, cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
}

/// The collective stream waits for the compute stream's work so far.
static void afterCompute(Exec &x, Exec::Impl &im) {
  ensureNccl(x, im);
  cuda::check(x, cudaEventRecord(im.computeMark, im.compute()),
              "cudaEventRecord");
  cuda::check(x, cudaStreamWaitEvent(im.coll, im.computeMark, 0),
              "cudaStreamWaitEvent");
}

void Exec::gradientsReady(std::initializer_list<int32_t> weightIds) {
  if (prog.ranks <= 1)
    return;
  bool last = subBatchIndex + 1 == prog.numSubBatches;
  if (prog.shard < 2 && !last)
    return;
  Impl &im = *impl;
  afterCompute(*this, im);
  const int rank = comm->rank();
  MEMFIT_NCCL(ncclGroupStart());
  for (int32_t id : weightIds) {
    int64_t per = sliceOf(*this, wInfo[id].count);
    float *g = im.g[id];
    if (prog.shard == 0)
      MEMFIT_NCCL(ncclAllReduce(g, g, wInfo[id].count, ncclFloat, ncclAvg,
                                im.nccl, im.coll));
    else // in place: rank r's slice lands at g + r * per
      MEMFIT_NCCL(ncclReduceScatter(g, g + rank * per, per, ncclFloat, ncclAvg,
                                    im.nccl, im.coll));
  }
  MEMFIT_NCCL(ncclGroupEnd());
  if (prog.shard == 2)
    for (int32_t id : weightIds) {
      // Slices accumulate over the sub-batches; the whole buffer starts the
      // next sub-batch from zero.
      int64_t per = sliceOf(*this, wInfo[id].count);
      float *g = im.g[id], *acc = im.gSlice[id];
      cuda::launch<SliceAccumulateKernel>(
          gridFor(per), im.coll, per, g + rank * per, acc, subBatchIndex == 0);
      MEMFIT_CHECK(cudaGetLastError());
      MEMFIT_CHECK(cudaMemsetAsync(g, 0, per * comm->size() * 4, im.coll));
      if (last)
        MEMFIT_CHECK(cudaMemcpyAsync(g + rank * per, acc, per * 4,
                                     cudaMemcpyDeviceToDevice, im.coll));
    }
  MEMFIT_CHECK(cudaEventRecord(im.collDone, im.coll));
}

void Exec::waitCollectives() {
  if (prog.ranks <= 1 || !impl->coll)
    return;
  MEMFIT_CHECK(cudaStreamWaitEvent(impl->compute(), impl->collDone, 0));
}

static void gatherAll(Exec &x, Exec::Impl &im,
                      const std::vector<float *> &bufs) {
  afterCompute(x, im);
  const int rank = x.comm->rank();
  ncclCheck(x, ncclGroupStart(), "ncclGroupStart");
  for (size_t id = 0; id < bufs.size(); ++id)
    if (bufs[id] && x.weightInfo()[id].trainable) {
      int64_t per = sliceOf(x, x.weightInfo()[id].count);
      ncclCheck(x,
                ncclAllGather(bufs[id] + rank * per, bufs[id], per, ncclFloat,
                              im.nccl, im.coll),
                "ncclAllGather");
    }
  ncclCheck(x, ncclGroupEnd(), "ncclGroupEnd");
  cuda::check(x, cudaEventRecord(im.collDone, im.coll), "cudaEventRecord");
  // The next forward pass reads the weights.
  cuda::check(x, cudaStreamWaitEvent(im.compute(), im.collDone, 0),
              "cudaStreamWaitEvent");
}

void Exec::gatherWeights() {
  if (prog.ranks > 1 && prog.shard >= 1) {
    gatherAll(*this, *impl, impl->w);
    impl->copyStale.assign(impl->copyStale.size(), true);
  }
}

void Exec::gatherOptimizerState() {
  if (prog.ranks <= 1 || prog.shard < 1)
    return;
  gatherAll(*this, *impl, impl->m);
  gatherAll(*this, *impl, impl->v);
}

} // namespace memfit::rt
