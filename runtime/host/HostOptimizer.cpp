//===- HostOptimizer.cpp - Adam/AdamW/SGD on host memory ------------------===//
//
// Built with -O3 -fno-math-errno -ffp-contract=off (runtime/CMakeLists.txt):
// the two loops below vectorize (GCC's -fopt-info-vec-optimized reports
// both; docs/benchmarks/offload.md, "Host optimizer").
//
//===----------------------------------------------------------------------===//
#include "runtime/host/HostOptimizer.h"

#include "runtime/kernels/Elementwise.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <thread>

namespace memfit::rt::host {

// The element function is the emulation's; `restrict` tells the compiler
// that the operands do not overlap, which a tensor's weight, gradient and
// state never do, so it may load and store whole vectors. Not inlined into
// the jobs' lambdas: GCC 12 inlined there keeps the step's two pow calls
// inside a scalar loop (40 times slower), while this body hoists them and
// vectorizes.
[[gnu::noinline]] void adamRange(const AdamParams &p, int64_t lo, int64_t hi,
                                 float *__restrict w,
                                 const float *__restrict dw,
                                 float *__restrict m, float *__restrict v) {
  for (int64_t i = lo; i < hi; ++i)
    kernels::adamAt(p, i, w, dw, m, v);
}

[[gnu::noinline]] void sgdRange(const SgdParams &p, int64_t lo, int64_t hi,
                                float *__restrict w, const float *__restrict dw,
                                float *__restrict buf) {
  if (buf) {
    for (int64_t i = lo; i < hi; ++i)
      kernels::sgdAt(i, p.lr, p.momentum, p.weightDecay, p.first, w, dw, buf);
  } else {
    for (int64_t i = lo; i < hi; ++i)
      kernels::sgdAt(i, p.lr, p.momentum, p.weightDecay, p.first, w, dw,
                     nullptr);
  }
}

int defaultHostThreads() {
  if (const char *v = std::getenv("MEMFIT_HOST_THREADS"); v && *v) {
    int n = std::atoi(v);
    if (n >= 1)
      return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

constexpr int64_t kFloatsPerBlock = NvmeStore::kAlign / 4;

/// A thread's staging for NVMe chunks: three operands (master, momentum,
/// second moment) of `elements` floats, kept across chunks and jobs (the
/// pool's threads live as long as the optimizer).
float *staging(int which, int64_t elements) {
  thread_local AlignedBuffer bufs[3];
  thread_local int64_t size = 0;
  if (size < elements) {
    for (AlignedBuffer &b : bufs)
      b = alignedFloats(elements);
    size = elements;
  }
  return bufs[which].get();
}

/// One chunk [lo, hi) of an NVMe job: the tensors `at` names in the store
/// are read into this thread's staging, `step` updates the chunk given the
/// master, momentum and second moment (null where absent), and what was
/// read is written back. False on an I/O error (the store keeps it).
template <typename Step>
bool streamChunk(NvmeStore &store, const HostOptimizer::NvmeAt &at, int64_t cap,
                 int64_t lo, int64_t hi, float *w,
                 const HostOptimizer::MasterOut &out, Step step) {
  const int64_t bytes = NvmeStore::regionBytes((hi - lo) * 4);
  const int64_t offs[3] = {at.w, at.m, at.v};
  float *ops[3] = {w ? w + lo : nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i)
    if (offs[i] >= 0) {
      ops[i] = staging(i, cap);
      if (!store.read(offs[i] + lo * 4, ops[i], bytes))
        return false;
    }
  step(ops[0], ops[1], ops[2]);
  for (int i = 0; i < 3; ++i)
    if (offs[i] >= 0 && !store.write(offs[i] + lo * 4, ops[i], bytes))
      return false;
  if (at.w >= 0 && out)
    out(lo, hi, ops[0]);
  return true;
}

} // namespace

HostOptimizer::HostOptimizer(int threads, int64_t chunkElements)
    : pool(threads), chunk(chunkElements),
      nvmeChunk((chunkElements + kFloatsPerBlock - 1) / kFloatsPerBlock *
                kFloatsPerBlock) {
  assert(chunkElements >= 1 && "a chunk holds elements");
}

JobId HostOptimizer::submitAdam(const AdamParams &p, int64_t count, float *w,
                                const float *dw, float *m, float *v) {
  return pool.submit(count, chunk, [p, w, dw, m, v](int64_t lo, int64_t hi) {
    adamRange(p, lo, hi, w, dw, m, v);
  });
}

JobId HostOptimizer::submitSgd(const SgdParams &p, int64_t count, float *w,
                               const float *dw, float *buf) {
  assert((buf || p.momentum == 0.0f) && "momentum needs a buffer");
  return pool.submit(count, chunk, [p, w, dw, buf](int64_t lo, int64_t hi) {
    sgdRange(p, lo, hi, w, dw, buf);
  });
}

JobId HostOptimizer::submitAdamNvme(const AdamParams &p, int64_t count,
                                    float *w, const float *dw, NvmeStore &store,
                                    NvmeAt at, MasterOut out) {
  assert((w != nullptr) != (at.w >= 0) && "the master is in memory or stored");
  assert(at.m >= 0 && at.v >= 0 && "Adam's moments share the master's tier");
  const int64_t cap = nvmeChunk;
  return pool.submit(
      count, cap, [p, w, dw, &store, at, cap, out](int64_t lo, int64_t hi) {
        // An I/O error stops the chunk; the trainer reports
        // store.error() when it joins.
        streamChunk(store, at, cap, lo, hi, w, out,
                    [&](float *wc, float *mc, float *vc) {
                      adamRange(p, 0, hi - lo, wc, dw + lo, mc, vc);
                    });
      });
}

JobId HostOptimizer::submitSgdNvme(const SgdParams &p, int64_t count, float *w,
                                   const float *dw, NvmeStore &store, NvmeAt at,
                                   MasterOut out) {
  assert((w != nullptr) != (at.w >= 0) && "the master is in memory or stored");
  assert((at.m >= 0 || p.momentum == 0.0f) && "momentum needs a buffer");
  assert(at.v < 0 && "SGD keeps no second moment");
  const int64_t cap = nvmeChunk;
  return pool.submit(count, cap,
                     [p, w, dw, &store, at, cap, out](int64_t lo, int64_t hi) {
                       streamChunk(store, at, cap, lo, hi, w, out,
                                   [&](float *wc, float *bc, float *) {
                                     sgdRange(p, 0, hi - lo, wc, dw + lo, bc);
                                   });
                     });
}

} // namespace memfit::rt::host
