//===- Attention.cu - CUDA backend: fused attention -----------------------===//
//
// memfit's own memory-efficient attention for any precision and head size
// up to kMaxAttentionWidth: one thread per query row (forward, dQ) or per
// key row (dK, dV), running the row functions of runtime/kernels/
// Attention.h, the emulation's source. It is exact and needs no T x S
// memory, but it is not tiled through shared memory; cuDNN's fused
// attention is the faster path where it applies (not wired yet).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Attention.h"

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using kernels::AttnSample;

namespace {

__device__ AttnSample sampleOf(const AttentionParams &p, int64_t i,
                               const float *q, const float *k, const float *v,
                               const float *mask) {
  return {q + i * p.heads * p.t * p.d, k + i * p.kvHeads * p.s * p.d,
          v + i * p.kvHeads * p.s * p.dv, mask, i};
}

__global__ void attentionKernel(AttentionParams p, int64_t rows, uint64_t key,
                                int64_t firstSample, const float *q,
                                const float *k, const float *v,
                                const float *mask, float *o, float *lse) {
  MEMFIT_GRID_LOOP(r, rows) {
    int64_t i = r / (p.heads * p.t), h = r / p.t % p.heads, t = r % p.t;
    kernels::attnForwardRow(p, sampleOf(p, i, q, k, v, mask), key, firstSample,
                            h, t, o + r * p.dv, lse + r);
  }
}

__global__ void attentionGradQKernel(AttentionParams p, int64_t rows,
                                     uint64_t key, int64_t firstSample,
                                     const float *q, const float *k,
                                     const float *v, const float *mask,
                                     const float *o, const float *lse,
                                     const float *dO, float *dq, bool acc) {
  MEMFIT_GRID_LOOP(r, rows) {
    int64_t i = r / (p.heads * p.t), h = r / p.t % p.heads, t = r % p.t;
    kernels::attnGradQRow(p, sampleOf(p, i, q, k, v, mask), key, firstSample, h,
                          t, o + r * p.dv, dO + r * p.dv, lse[r], dq + r * p.d,
                          acc);
  }
}

__global__ void attentionGradKVKernel(AttentionParams p, int64_t rows,
                                      uint64_t key, int64_t firstSample,
                                      const float *q, const float *k,
                                      const float *v, const float *mask,
                                      const float *o, const float *lse,
                                      const float *dO, float *dk, float *dv,
                                      bool accK, bool accV) {
  MEMFIT_GRID_LOOP(r, rows) {
    int64_t i = r / (p.kvHeads * p.s), hk = r / p.s % p.kvHeads, s = r % p.s;
    int64_t head = i * p.kvHeads + hk;
    int64_t rowsPerSample = p.heads * p.t;
    kernels::attnGradKVRow(
        p, sampleOf(p, i, q, k, v, mask), key, firstSample, hk, s,
        o + i * rowsPerSample * p.dv, dO + i * rowsPerSample * p.dv,
        lse + i * rowsPerSample, dk ? dk + head * p.s * p.d : nullptr,
        dv ? dv + head * p.s * p.dv : nullptr, accK, accV);
  }
}

} // namespace

void Exec::attentionForward(const AttentionParams &p, uint64_t taskKey,
                            const float *q, const float *k, const float *v,
                            const float *mask, float *o, float *lse) {
  int64_t rows = n * p.heads * p.t;
  attentionKernel<<<gridFor(rows), kThreads, 0, impl->compute()>>>(
      p, rows, dropoutKey(seed, iteration, taskKey), firstSample, q, k, v, mask,
      o, lse);
  impl->done(*this, "attention kernel");
}

void Exec::attentionBackward(const AttentionParams &p, uint64_t taskKey,
                             const float *q, const float *k, const float *v,
                             const float *mask, const float *o,
                             const float *lse, const float *dO, float *dq,
                             float *dk, float *dv, bool accQ, bool accK,
                             bool accV) {
  uint64_t key = dropoutKey(seed, iteration, taskKey);
  if (dq) {
    int64_t rows = n * p.heads * p.t;
    attentionGradQKernel<<<gridFor(rows), kThreads, 0, impl->compute()>>>(
        p, rows, key, firstSample, q, k, v, mask, o, lse, dO, dq, accQ);
    impl->done(*this, "attention dQ kernel");
  }
  if (dk || dv) {
    int64_t rows = n * p.kvHeads * p.s;
    attentionGradKVKernel<<<gridFor(rows), kThreads, 0, impl->compute()>>>(
        p, rows, key, firstSample, q, k, v, mask, o, lse, dO, dk, dv, accK,
        accV);
    impl->done(*this, "attention dK/dV kernel");
  }
}

} // namespace memfit::rt
