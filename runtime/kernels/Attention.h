//===- Attention.h - Memory-efficient attention of both backends -*- C++
//-*-===//
//
// Exact scaled dot-product attention without the T x S score matrix
// (FlashAttention's algorithm, Dao et al. 2022): the forward runs an online
// softmax over the keys of each query row and keeps the output and one
// log-sum-exp per row; the backward recomputes each score from Q and K.
// Every function computes what one thread owns: a query row (the forward,
// dQ) or a key row (dK and dV, summed over the query rows and the heads
// sharing it), so the CUDA kernels need no atomics and both backends
// accumulate in the same order. Masks and dropout act where the
// materialized form would: a filled score takes the fill value and passes
// no gradient; an additive mask adds; dropout scales the probabilities by
// the same counter-based mask as the Dropout operator.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_ATTENTION_H
#define MEMFIT_RUNTIME_KERNELS_ATTENTION_H

#include "runtime/kernels/Elementwise.h"

namespace memfit::rt::kernels {

/// One sample's operands; the score of (head h, query t, key s).
struct AttnSample {
  const float *q, *k, *v, *mask;
  int64_t sample; // index among the n samples of the call
};

MEMFIT_HD const float *attnQ(const AttentionParams &p, const AttnSample &a,
                             int64_t h, int64_t t) {
  return a.q + (h * p.t + t) * p.d;
}

/// Element j of key row s of head h's K.
MEMFIT_HD float attnK(const AttentionParams &p, const AttnSample &a, int64_t h,
                      int64_t s, int64_t j) {
  const float *k = a.k + (p.kvHeads == 1 ? 0 : h) * p.s * p.d;
  return p.kTransposed ? k[j * p.s + s] : k[s * p.d + j];
}

MEMFIT_HD const float *attnV(const AttentionParams &p, const AttnSample &a,
                             int64_t h, int64_t s) {
  return a.v + ((p.kvHeads == 1 ? 0 : h) * p.s + s) * p.dv;
}

/// The element of the probabilities [heads, T, S] of all n samples.
MEMFIT_HD int64_t attnAt(const AttentionParams &p, const AttnSample &a,
                         int64_t h, int64_t t, int64_t s) {
  return (a.sample * p.heads + h) * p.t * p.s + t * p.s + s;
}

/// The score after scale and mask; `filled` when a fill mask replaced it.
MEMFIT_HD float attnScore(const AttentionParams &p, const AttnSample &a,
                          int64_t h, int64_t t, int64_t s, bool &filled) {
  const float *q = attnQ(p, a, h, t);
  float dot = 0;
  for (int64_t j = 0; j < p.d; ++j)
    dot += q[j] * attnK(p, a, h, s, j);
  float sc = dot * p.scale;
  filled = false;
  if (p.maskMode != 0) {
    float m = a.mask[((h * p.t + t) * p.s + s) % p.maskSize];
    if (p.maskMode == 1) {
      sc += m;
    } else if ((m != 0) == p.fillWhere) {
      sc = p.fill;
      filled = true;
    }
  }
  return sc;
}

/// The dropout factor of a probability (1 without dropout).
MEMFIT_HD float attnKeep(const AttentionParams &p, uint64_t key,
                         int64_t firstSample, int64_t at) {
  if (p.dropout == 0.0f)
    return 1.0f;
  DropoutParams dp{p.heads * p.t * p.s, p.dropout};
  return dropoutAt(dp, key, firstSample, at, 1.0f);
}

/// Output row t of head h and its log-sum-exp.
MEMFIT_HD void attnForwardRow(const AttentionParams &p, const AttnSample &a,
                              uint64_t key, int64_t firstSample, int64_t h,
                              int64_t t, float *o, float *lse) {
  float acc[kMaxAttentionWidth];
  for (int64_t j = 0; j < p.dv; ++j)
    acc[j] = 0;
  float m = -INFINITY, l = 0;
  for (int64_t s = 0; s < p.s; ++s) {
    bool filled;
    float sc = attnScore(p, a, h, t, s, filled);
    if (sc == -INFINITY)
      continue;
    if (sc > m) {
      float corr = ::expf(m - sc);
      l *= corr;
      for (int64_t j = 0; j < p.dv; ++j)
        acc[j] *= corr;
      m = sc;
    }
    float e = ::expf(sc - m);
    l += e;
    float w = e * attnKeep(p, key, firstSample, attnAt(p, a, h, t, s));
    const float *v = attnV(p, a, h, s);
    for (int64_t j = 0; j < p.dv; ++j)
      acc[j] += w * v[j];
  }
  // A row without a finite score: softmax's 0/0 (NaN), or 0 where the
  // model guards it (torch.export's Where(IsNaN(p), 0, p)).
  float empty = p.nanToZero ? 0.0f : NAN;
  for (int64_t j = 0; j < p.dv; ++j)
    o[j] = l > 0 ? acc[j] / l : empty;
  *lse = l > 0 ? m + ::logf(l) : -INFINITY;
}

/// dL/dscore of (h, t, s) given D = dO_t . O_t; 0 for a filled score.
MEMFIT_HD float attnScoreGrad(const AttentionParams &p, const AttnSample &a,
                              uint64_t key, int64_t firstSample, int64_t h,
                              int64_t t, int64_t s, const float *dO, float lse,
                              float dDot, float &prob) {
  bool filled;
  float sc = attnScore(p, a, h, t, s, filled);
  prob = 0;
  if (sc == -INFINITY || lse == -INFINITY)
    return 0;
  float keep = attnKeep(p, key, firstSample, attnAt(p, a, h, t, s));
  float pr = ::expf(sc - lse);
  prob = pr * keep;
  if (filled)
    return 0;
  const float *v = attnV(p, a, h, s);
  float g = 0;
  for (int64_t j = 0; j < p.dv; ++j)
    g += dO[j] * v[j];
  return pr * (g * keep - dDot);
}

/// dQ row t of head h.
MEMFIT_HD void attnGradQRow(const AttentionParams &p, const AttnSample &a,
                            uint64_t key, int64_t firstSample, int64_t h,
                            int64_t t, const float *o, const float *dO,
                            float lse, float *dq, bool accumulate) {
  float dDot = 0;
  for (int64_t j = 0; j < p.dv; ++j)
    dDot += dO[j] * o[j];
  float acc[kMaxAttentionWidth];
  for (int64_t j = 0; j < p.d; ++j)
    acc[j] = 0;
  for (int64_t s = 0; s < p.s; ++s) {
    float prob;
    float ds =
        attnScoreGrad(p, a, key, firstSample, h, t, s, dO, lse, dDot, prob);
    if (ds == 0)
      continue;
    for (int64_t j = 0; j < p.d; ++j)
      acc[j] += ds * attnK(p, a, h, s, j);
  }
  for (int64_t j = 0; j < p.d; ++j)
    put(dq[j], acc[j] * p.scale, accumulate);
}

/// dK and dV of key row s of key/value head hk (every query head sharing
/// it), over all query rows. `o`, `dO` and `lse` are the sample's.
MEMFIT_HD void attnGradKVRow(const AttentionParams &p, const AttnSample &a,
                             uint64_t key, int64_t firstSample, int64_t hk,
                             int64_t s, const float *o, const float *dO,
                             const float *lse, float *dk, float *dv, bool accK,
                             bool accV) {
  float gk[kMaxAttentionWidth], gv[kMaxAttentionWidth];
  for (int64_t j = 0; j < p.d; ++j)
    gk[j] = 0;
  for (int64_t j = 0; j < p.dv; ++j)
    gv[j] = 0;
  int64_t h0 = p.kvHeads == 1 ? 0 : hk, h1 = p.kvHeads == 1 ? p.heads : hk + 1;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t t = 0; t < p.t; ++t) {
      const float *oRow = o + (h * p.t + t) * p.dv;
      const float *dORow = dO + (h * p.t + t) * p.dv;
      float dDot = 0;
      for (int64_t j = 0; j < p.dv; ++j)
        dDot += dORow[j] * oRow[j];
      float prob;
      float ds = attnScoreGrad(p, a, key, firstSample, h, t, s, dORow,
                               lse[h * p.t + t], dDot, prob);
      for (int64_t j = 0; j < p.dv; ++j)
        gv[j] += prob * dORow[j];
      const float *q = attnQ(p, a, h, t);
      for (int64_t j = 0; j < p.d; ++j)
        gk[j] += ds * q[j];
    }
  if (dk)
    for (int64_t j = 0; j < p.d; ++j) {
      // K read transposed ([d, S]) takes its gradient in the same layout.
      float *at = p.kTransposed ? dk + j * p.s + s : dk + s * p.d + j;
      put(*at, gk[j] * p.scale, accK);
    }
  if (dv)
    for (int64_t j = 0; j < p.dv; ++j)
      put(dv[s * p.dv + j], gv[j], accV);
}

} // namespace memfit::rt::kernels

#endif
