//===- DataParallel.cpp - The emulation's collectives ---------------------===//
//
// Data parallelism on the CPU emulation: gradient buckets averaged over the
// ranks (all-reduce) or reduce-scattered into per-rank slices, and the
// weight and optimizer-state gathers of a sharded update.
//
//===----------------------------------------------------------------------===//
#include "runtime/emu/EmuImpl.h"

namespace memfit::rt {

void Exec::gradientsReady(std::initializer_list<int32_t> weightIds) {
  impl->settle();
  if (prog.ranks <= 1)
    return;
  bool last = subBatchIndex + 1 == prog.numSubBatches;
  if (prog.shard < 2 && !last)
    return; // gradients accumulate whole over the sub-batches
  float scale = 1.0f / float(prog.ranks);
  for (int32_t id : weightIds) {
    std::vector<float> &g = impl->g[id];
    int64_t count = static_cast<int64_t>(g.size());
    if (prog.shard == 0) {
      comm->allReduceSum(g.data(), count);
      for (float &v : g)
        v *= scale;
      continue;
    }
    comm->reduceScatterSum(g.data(), count);
    auto [lo, hi] = comm->mySlice(count);
    if (prog.shard == 2) {
      // Slices accumulate over the sub-batches; the whole gradient starts
      // the next sub-batch from zero, as a fresh bucket would.
      std::vector<float> &acc = impl->gSlice[id];
      for (int64_t i = lo; i < hi; ++i)
        acc[i - lo] = (subBatchIndex ? acc[i - lo] : 0.0f) + g[i];
      std::fill(g.begin(), g.end(), 0.0f);
      if (!last)
        continue;
      std::copy(acc.begin(), acc.begin() + (hi - lo), g.begin() + lo);
    }
    for (int64_t i = lo; i < hi; ++i)
      g[i] *= scale;
  }
}

void Exec::gatherWeights() {
  if (prog.ranks <= 1 || prog.shard < 1)
    return;
  for (size_t id = 0; id < wInfo.size(); ++id)
    if (wInfo[id].trainable) {
      comm->allGather(impl->w[id].data(),
                      static_cast<int64_t>(impl->w[id].size()));
      impl->copyStale[id] = true;
    }
}

void Exec::gatherOptimizerState() {
  if (prog.ranks <= 1 || prog.shard < 1)
    return;
  for (size_t id = 0; id < wInfo.size(); ++id)
    for (auto *buf : {&impl->m[id], &impl->v[id]})
      if (!buf->empty())
        comm->allGather(buf->data(), static_cast<int64_t>(buf->size()));
}

} // namespace memfit::rt
