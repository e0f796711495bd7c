//===- HostOptimizer.h - Adam/AdamW/SGD on host memory ----------*- C++ -*-===//
//
// The optimizer step of weight-side tensors homed in host memory, run on
// the host's cores while the GPU goes on with the backward pass (the way
// ZeRO-Offload and Fuyou/LoHan do it, with no delayed update: each tensor
// is updated exactly as torch.optim updates it).
//
// Each element runs kernels::adamAt / kernels::sgdAt, the function the CPU
// emulation and the CUDA multi-tensor kernel run, so a tensor updated here
// is bit-identical to the emulation's update of the same inputs, whatever
// the number of threads: elements are independent, and each element's
// float operations are the same in the same order. The loops are
// contiguous over restrict pointers so that the compiler vectorizes them
// (runtime/CMakeLists.txt builds this file with -fno-math-errno, which lets
// sqrt and the step's pow be vector instructions and hoisted, and
// -ffp-contract=off, which keeps every multiply and add apart as the
// emulation and the CUDA backend (--fmad=false) do).
//
// Updates are submitted per tensor as soon as its gradient is final and
// split into chunks that a fixed pool of threads takes in submission
// order, so one large tensor uses every core and a tensor submitted first
// finishes first. The caller waits for one tensor (before its weight is
// read again) or for all (before the iteration ends). The buffers of a
// submitted update belong to the optimizer until that wait returns.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_HOST_HOSTOPTIMIZER_H
#define MEMFIT_RUNTIME_HOST_HOSTOPTIMIZER_H

#include "runtime/Kernels.h"
#include "runtime/host/NvmeStore.h"
#include "runtime/host/ThreadPool.h"

#include <cstdint>
#include <functional>

namespace memfit::rt::host {

/// torch.optim.SGD's settings for one step (dampening 0, no Nesterov);
/// `first` on the first step with momentum, which sets the buffer to the
/// gradient.
struct SgdParams {
  float lr, momentum, weightDecay;
  bool first;
};

/// The element loops a chunk runs, exposed for the tests and the
/// benchmark: elements [lo, hi) of one tensor.
void adamRange(const AdamParams &p, int64_t lo, int64_t hi, float *w,
               const float *dw, float *m, float *v);
void sgdRange(const SgdParams &p, int64_t lo, int64_t hi, float *w,
              const float *dw, float *buf);

/// Threads for a trainer's host updates: MEMFIT_HOST_THREADS when set (a
/// positive count), else every core the process may use.
int defaultHostThreads();

class HostOptimizer {
public:
  /// Elements per chunk: 64K floats (256 KiB per operand) is large enough
  /// that taking a chunk costs nothing beside its update and small enough
  /// that a 1M-parameter tensor spreads over 16 cores.
  static constexpr int64_t kDefaultChunk = int64_t(1) << 16;

  explicit HostOptimizer(int threads, int64_t chunkElements = kDefaultChunk);
  /// Waits for every submitted update.
  ~HostOptimizer() = default;

  /// Adam/AdamW on `count` elements; `m` and `v` are the moments.
  JobId submitAdam(const AdamParams &p, int64_t count, float *w,
                   const float *dw, float *m, float *v);
  /// SGD on `count` elements; `buf` the momentum buffer, null without
  /// momentum.
  JobId submitSgd(const SgdParams &p, int64_t count, float *w, const float *dw,
                  float *buf);

  /// Where an NVMe job's tensors lie in the store: byte offsets of the
  /// fp32 master (-1: in memory, at the job's `w`), the momentum (-1: none,
  /// as SGD without momentum) and Adam's second moment (-1 for SGD), each a
  /// kAlign-aligned region of NvmeStore::regionBytes(count * 4).
  struct NvmeAt {
    int64_t w = -1, m = -1, v = -1;
  };
  /// Called by an NVMe job whose master is in the store with each chunk's
  /// updated elements [lo, hi) of it (`w` points at element lo), on the
  /// chunk's thread: the backend rounds them into its 16-bit working copy.
  using MasterOut = std::function<void(int64_t lo, int64_t hi, const float *w)>;

  /// The same with tensors in `store` (the NVMe tier) where `at` says.
  /// Each chunk reads its slice of them into buffers of its thread,
  /// updates them with the same element function, and writes them back, so
  /// threads overlap one chunk's transfer with another's arithmetic and the
  /// results are bit-identical to the in-memory updates.
  JobId submitAdamNvme(const AdamParams &p, int64_t count, float *w,
                       const float *dw, NvmeStore &store, NvmeAt at,
                       MasterOut out = {});
  JobId submitSgdNvme(const SgdParams &p, int64_t count, float *w,
                      const float *dw, NvmeStore &store, NvmeAt at,
                      MasterOut out = {});

  void wait(JobId id) { pool.wait(id); }
  void waitAll() { pool.waitAll(); }
  int threads() const { return pool.threads(); }

private:
  ThreadPool pool;
  int64_t chunk;
  /// Chunks of NVMe jobs: `chunk` rounded up to whole kAlign blocks of
  /// floats, so every chunk's slice starts on an aligned offset.
  int64_t nvmeChunk;
};

} // namespace memfit::rt::host

#endif
