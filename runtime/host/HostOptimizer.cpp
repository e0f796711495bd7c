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

/// A thread's staging for NVMe chunks: two operands of `elements` floats,
/// kept across chunks and jobs (the pool's threads live as long as the
/// optimizer).
float *staging(int which, int64_t elements) {
  thread_local AlignedBuffer bufs[2];
  thread_local int64_t size = 0;
  if (size < elements) {
    bufs[0] = alignedFloats(elements);
    bufs[1] = alignedFloats(elements);
    size = elements;
  }
  return bufs[which].get();
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
                                    int64_t m, int64_t v) {
  const int64_t cap = nvmeChunk;
  return pool.submit(
      count, cap, [p, w, dw, &store, m, v, cap](int64_t lo, int64_t hi) {
        const int64_t bytes = NvmeStore::regionBytes((hi - lo) * 4);
        float *mb = staging(0, cap), *vb = staging(1, cap);
        if (!store.read(m + lo * 4, mb, bytes) ||
            !store.read(v + lo * 4, vb, bytes))
          return; // the trainer reports store.error() when it joins
        adamRange(p, 0, hi - lo, w + lo, dw + lo, mb, vb);
        store.write(m + lo * 4, mb, bytes);
        store.write(v + lo * 4, vb, bytes);
      });
}

JobId HostOptimizer::submitSgdNvme(const SgdParams &p, int64_t count, float *w,
                                   const float *dw, NvmeStore &store,
                                   int64_t buf) {
  assert(buf >= 0 && "only a momentum buffer lives on NVMe");
  const int64_t cap = nvmeChunk;
  return pool.submit(
      count, cap, [p, w, dw, &store, buf, cap](int64_t lo, int64_t hi) {
        const int64_t bytes = NvmeStore::regionBytes((hi - lo) * 4);
        float *b = staging(0, cap);
        if (!store.read(buf + lo * 4, b, bytes))
          return;
        sgdRange(p, 0, hi - lo, w + lo, dw + lo, b);
        store.write(buf + lo * 4, b, bytes);
      });
}

} // namespace memfit::rt::host
