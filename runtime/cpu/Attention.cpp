//===- Attention.cpp - Fused attention on the CPU -------------------------===//
//
// Loops over the rows runtime/kernels/Attention.h computes one at a time:
// query rows for the forward and dQ, key rows for dK and dV.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Attention.h"

namespace memfit::rt {

using kernels::AttnSample;

namespace {

AttnSample sampleOf(const AttentionParams &p, int64_t i, const float *q,
                    const float *k, const float *v, const float *mask) {
  return {q + i * p.heads * p.t * p.d, k + i * p.kvHeads * p.s * p.d,
          v + i * p.kvHeads * p.s * p.dv, mask, i};
}

} // namespace

void attentionForward(const AttentionParams &p, int64_t n, uint64_t key,
                      int64_t firstSample, const float *q, const float *k,
                      const float *v, const float *mask, float *o, float *lse) {
  for (int64_t i = 0; i < n; ++i) {
    AttnSample a = sampleOf(p, i, q, k, v, mask);
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t t = 0; t < p.t; ++t) {
        int64_t row = (i * p.heads + h) * p.t + t;
        kernels::attnForwardRow(p, a, key, firstSample, h, t, o + row * p.dv,
                                lse + row);
      }
  }
}

void attentionBackward(const AttentionParams &p, int64_t n, uint64_t key,
                       int64_t firstSample, const float *q, const float *k,
                       const float *v, const float *mask, const float *o,
                       const float *lse, const float *dO, float *dq, float *dk,
                       float *dv, bool accQ, bool accK, bool accV) {
  for (int64_t i = 0; i < n; ++i) {
    AttnSample a = sampleOf(p, i, q, k, v, mask);
    const float *oS = o + i * p.heads * p.t * p.dv;
    const float *dOS = dO + i * p.heads * p.t * p.dv;
    const float *lseS = lse + i * p.heads * p.t;
    if (dq)
      for (int64_t h = 0; h < p.heads; ++h)
        for (int64_t t = 0; t < p.t; ++t) {
          int64_t r = h * p.t + t;
          kernels::attnGradQRow(p, a, key, firstSample, h, t, oS + r * p.dv,
                                dOS + r * p.dv, lseS[r],
                                dq + ((i * p.heads + h) * p.t + t) * p.d, accQ);
        }
    if (!dk && !dv)
      continue;
    for (int64_t hk = 0; hk < p.kvHeads; ++hk) {
      int64_t head = i * p.kvHeads + hk;
      for (int64_t s = 0; s < p.s; ++s)
        kernels::attnGradKVRow(p, a, key, firstSample, hk, s, oS, dOS, lseS,
                               dk ? dk + head * p.s * p.d : nullptr,
                               dv ? dv + head * p.s * p.dv : nullptr, accK,
                               accV);
    }
  }
}

} // namespace memfit::rt
