//===- Attention.h - Memory-efficient attention of both backends -*- C++
//-*-===//
//
// Exact scaled dot-product attention without the T x S score matrix
// (FlashAttention's algorithm, Dao et al. 2022): the forward runs an online
// softmax over the keys of each query row and keeps the output and one
// log-sum-exp per row; the backward recomputes each score from Q and K.
//
// The work is tiled as FlashAttention tiles it: a tile of query rows meets
// the keys one tile at a time (the forward, dQ), and a tile of key rows meets
// the queries one tile at a time (dK, dV). The loaders copy a tile into a
// buffer (shared memory on CUDA, where the threads of a block split the
// copy; a local buffer on the CPU), and the step functions advance one row's
// state over a tile. Every row is owned by one thread, so the CUDA kernels
// need no atomics, and each row sums its terms in the same order on both
// backends whatever the tile sizes. Masks and dropout act where the
// materialized form would: a filled score takes the fill value and passes
// no gradient; an additive mask adds; dropout scales the probabilities by
// the same counter-based mask as the Dropout operator.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_ATTENTION_H
#define MEMFIT_RUNTIME_KERNELS_ATTENTION_H

#include "runtime/kernels/Elementwise.h"

namespace memfit::rt::kernels {

/// One sample's operands.
/// P is a pointer (the CPU emulation) or a typed device buffer (the CUDA
/// backend's View, 16-bit in bf16 and fp16 programs).
template <class P> struct AttnSampleT {
  P q, k, v, mask;
  int64_t sample; // index among the n samples of the call
};
using AttnSample = AttnSampleT<const float *>;

/// Query rows per tile of the forward and dQ (the CUDA block size).
constexpr int64_t kAttnQueryTile = 64;
/// Bytes a tile may take (CUDA's static shared memory per block).
constexpr int64_t kAttnTileBytes = 48 * 1024;

/// Tiles of kAttnQueryTile rows over `rows` rows (of one head).
MEMFIT_HD int64_t attnTiles(int64_t rows) {
  return (rows + kAttnQueryTile - 1) / kAttnQueryTile;
}

/// Key rows per tile: K and V rows in kAttnTileBytes.
MEMFIT_HD int64_t attnKeyTile(const AttentionParams &p) {
  int64_t c = 64;
  while (c > 1 && c * (p.d + p.dv) * 4 > kAttnTileBytes)
    c /= 2;
  return c;
}

/// Query rows per tile of dK and dV: Q and dO rows, log-sum-exp and
/// dO . O in kAttnTileBytes.
MEMFIT_HD int64_t attnQueryTileOfKV(const AttentionParams &p) {
  int64_t c = 64;
  while (c > 1 && c * (p.d + p.dv + 2) * 4 > kAttnTileBytes)
    c /= 2;
  return c;
}

/// The K/V head query head h reads.
MEMFIT_HD int64_t attnKVHead(const AttentionParams &p, int64_t h) {
  return p.kvHeads == 1 ? 0 : h;
}

MEMFIT_HD auto attnQ(const AttentionParams &p, const auto &a, int64_t h,
                     int64_t t) {
  return a.q + (h * p.t + t) * p.d;
}

/// The element of the probabilities [heads, T, S] of all n samples.
MEMFIT_HD int64_t attnAt(const AttentionParams &p, const auto &a, int64_t h,
                         int64_t t, int64_t s) {
  return (a.sample * p.heads + h) * p.t * p.s + t * p.s + s;
}

/// Element j of key row s of K/V head hk, in either layout.
MEMFIT_HD float attnKAt(const AttentionParams &p, const auto &a, int64_t hk,
                        int64_t s, int64_t j) {
  auto k = a.k + hk * p.s * p.d;
  return p.kTransposed ? k[j * p.s + s] : k[s * p.d + j];
}

/// Copies key rows [s0, s0 + count) of K/V head hk: K into kDst [count, d]
/// and V into vDst [count, dv]. Lane `lane` of `lanes` copies its share.
MEMFIT_HD void attnLoadKeys(const AttentionParams &p, const auto &a, int64_t hk,
                            int64_t s0, int64_t count, auto kDst, auto vDst,
                            int64_t lane, int64_t lanes) {
  for (int64_t e = lane; e < count * p.d; e += lanes)
    kDst[e] = attnKAt(p, a, hk, s0 + e / p.d, e % p.d);
  auto v = a.v + (hk * p.s + s0) * p.dv;
  for (int64_t e = lane; e < count * p.dv; e += lanes)
    vDst[e] = v[e];
}

/// Whether a band mask masks score (t, s).
MEMFIT_HD bool attnOutsideBand(const AttentionParams &p, int64_t t, int64_t s) {
  return s - t < p.bandLo || s - t > p.bandHi;
}

/// A masked score at or below this has probability exactly 0 in fp32 beside
/// any finite score a model computes (exp underflows past -104), so its
/// terms add exactly nothing and a tile of them need not run.
constexpr float kAttnNegligibleScore = -1e30f;

/// Whether every score of query rows [t0, t0 + tc) against key rows
/// [s0, s0 + sc) lies outside the band with a negligible fill: skipping
/// the tile changes no bit of any result, since each row keeps a key in
/// the band and the row's other terms sum in the same order.
MEMFIT_HD bool attnSkipTile(const AttentionParams &p, int64_t t0, int64_t tc,
                            int64_t s0, int64_t sc) {
  if (!p.band || !(p.fill <= kAttnNegligibleScore))
    return false;
  return s0 - (t0 + tc - 1) > p.bandHi || (s0 + sc - 1) - t0 < p.bandLo;
}

/// The score of (h, t, s) from query row q and key row k, after scale and
/// mask; `filled` when a fill mask replaced it.
MEMFIT_HD float attnScore(const AttentionParams &p, auto mask, auto q, auto k,
                          int64_t h, int64_t t, int64_t s, bool &filled) {
  float dot = 0;
  for (int64_t j = 0; j < p.d; ++j)
    dot += q[j] * k[j];
  float sc = dot * p.scale;
  filled = false;
  if (p.band) {
    if (attnOutsideBand(p, t, s)) {
      filled = p.maskMode == 2;
      sc = filled ? p.fill : sc + p.fill;
    }
  } else if (p.maskMode != 0) {
    float m = mask[((h * p.t + t) * p.s + s) % p.maskSize];
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

// --- forward ----------------------------------------------------------------

/// One query row's online softmax: running maximum, sum and output. W, a
/// bound of the head widths (kMaxAttentionWidth on the host; the CUDA
/// kernels take the smallest of 64, 128 and 256 that holds them, so that
/// the row's state fits its registers or the default local memory).
template <int W = kMaxAttentionWidth> struct AttnRow {
  float m, l;
  float acc[W];
};

template <int W>
MEMFIT_HD void attnRowBegin(const AttentionParams &p, AttnRow<W> &r) {
  r.m = -INFINITY;
  r.l = 0;
  forLanes<W>(p.dv, [&](int64_t j) { r.acc[j] = 0; });
}

/// Advances row t of head h over the key tile [s0, s0 + count).
template <int W>
MEMFIT_HD void attnForwardKeys(const AttentionParams &p, const auto &a,
                               uint64_t key, int64_t firstSample, int64_t h,
                               int64_t t, int64_t s0, int64_t count, auto kTile,
                               auto vTile, AttnRow<W> &r) {
  auto q = attnQ(p, a, h, t);
  for (int64_t i = 0; i < count; ++i) {
    int64_t s = s0 + i;
    bool filled;
    float sc = attnScore(p, a.mask, q, kTile + i * p.d, h, t, s, filled);
    if (sc == -INFINITY)
      continue;
    if (sc > r.m) {
      float corr = ::expf(r.m - sc);
      r.l *= corr;
      forLanes<W>(p.dv, [&](int64_t j) { r.acc[j] *= corr; });
      r.m = sc;
    }
    float e = ::expf(sc - r.m);
    r.l += e;
    float w = e * attnKeep(p, key, firstSample, attnAt(p, a, h, t, s));
    auto v = vTile + i * p.dv;
    forLanes<W>(p.dv, [&](int64_t j) { r.acc[j] += w * v[j]; });
  }
}

/// The output row and its log-sum-exp.
template <int W>
MEMFIT_HD void attnRowEnd(const AttentionParams &p, const AttnRow<W> &r, auto o,
                          auto lse) {
  // A row without a finite score: softmax's 0/0 (NaN), or 0 where the
  // model guards it (torch.export's Where(IsNaN(p), 0, p)).
  float empty = p.nanToZero ? 0.0f : NAN;
  forLanes<W>(p.dv,
              [&](int64_t j) { o[j] = r.l > 0 ? r.acc[j] / r.l : empty; });
  lse[0] = r.l > 0 ? r.m + ::logf(r.l) : -INFINITY;
}

// --- backward ---------------------------------------------------------------

/// dL/dscore of (h, t, s) from query row q, key row k, value row v, dO row
/// dO, the row's log-sum-exp and D = dO . O; 0 for a filled score.
/// `prob` is the probability after dropout.
MEMFIT_HD float attnScoreGrad(const AttentionParams &p, const auto &a,
                              uint64_t key, int64_t firstSample, int64_t h,
                              int64_t t, int64_t s, auto q, auto k, auto v,
                              auto dO, float lse, float dDot, float &prob) {
  bool filled;
  float sc = attnScore(p, a.mask, q, k, h, t, s, filled);
  prob = 0;
  if (sc == -INFINITY || lse == -INFINITY)
    return 0;
  float keep = attnKeep(p, key, firstSample, attnAt(p, a, h, t, s));
  float pr = ::expf(sc - lse);
  prob = pr * keep;
  if (filled)
    return 0;
  float g = 0;
  for (int64_t j = 0; j < p.dv; ++j)
    g += dO[j] * v[j];
  return pr * (g * keep - dDot);
}

MEMFIT_HD float attnDot(auto x, auto y, int64_t n) {
  float d = 0;
  for (int64_t j = 0; j < n; ++j)
    d += x[j] * y[j];
  return d;
}

/// One query row's dQ and its D = dO . O (W as for AttnRow).
template <int W = kMaxAttentionWidth> struct AttnQGrad {
  float dDot;
  float acc[W];
};

template <int W>
MEMFIT_HD void attnGradQBegin(const AttentionParams &p, auto o, auto dO,
                              AttnQGrad<W> &r) {
  r.dDot = attnDot(dO, o, p.dv);
  forLanes<W>(p.d, [&](int64_t j) { r.acc[j] = 0; });
}

/// Advances dQ of row t of head h over the key tile [s0, s0 + count).
template <int W>
MEMFIT_HD void attnGradQKeys(const AttentionParams &p, const auto &a,
                             uint64_t key, int64_t firstSample, int64_t h,
                             int64_t t, auto dO, float lse, int64_t s0,
                             int64_t count, auto kTile, auto vTile,
                             AttnQGrad<W> &r) {
  auto q = attnQ(p, a, h, t);
  for (int64_t i = 0; i < count; ++i) {
    auto k = kTile + i * p.d;
    float prob;
    float ds = attnScoreGrad(p, a, key, firstSample, h, t, s0 + i, q, k,
                             vTile + i * p.dv, dO, lse, r.dDot, prob);
    if (ds == 0)
      continue;
    forLanes<W>(p.d, [&](int64_t j) { r.acc[j] += ds * k[j]; });
  }
}

template <int W>
MEMFIT_HD void attnGradQEnd(const AttentionParams &p, const AttnQGrad<W> &r,
                            auto dq, bool accumulate) {
  forLanes<W>(p.d,
              [&](int64_t j) { put(dq[j], r.acc[j] * p.scale, accumulate); });
}

/// Copies query rows [t0, t0 + count) of head h for dK and dV: Q into
/// qDst [count, d], dO into dODst [count, dv], the log-sum-exps, and
/// D = dO . O per row. `o`, `dO` and `lse` are the sample's. Lane `lane`
/// of `lanes` copies its share.
MEMFIT_HD void attnLoadQueries(const AttentionParams &p, const auto &a, auto o,
                               auto dO, auto lse, int64_t h, int64_t t0,
                               int64_t count, auto qDst, auto dODst,
                               auto lseDst, auto dDotDst, int64_t lane,
                               int64_t lanes) {
  auto q = attnQ(p, a, h, t0);
  for (int64_t e = lane; e < count * p.d; e += lanes)
    qDst[e] = q[e];
  int64_t row0 = h * p.t + t0;
  for (int64_t e = lane; e < count * p.dv; e += lanes)
    dODst[e] = dO[row0 * p.dv + e];
  for (int64_t i = lane; i < count; i += lanes) {
    lseDst[i] = lse[row0 + i];
    dDotDst[i] = attnDot(dO + (row0 + i) * p.dv, o + (row0 + i) * p.dv, p.dv);
  }
}

/// Key row s of K/V head hk, indexable by j in either layout.
template <class P> struct AttnKRow {
  P base;
  int64_t stride;
  MEMFIT_HD float operator[](int64_t j) const { return base[j * stride]; }
};

MEMFIT_HD auto attnKRow(const AttentionParams &p, const auto &a, int64_t hk,
                        int64_t s) {
  auto k = a.k + hk * p.s * p.d;
  using P = decltype(k);
  return p.kTransposed ? AttnKRow<P>{k + s, p.s} : AttnKRow<P>{k + s * p.d, 1};
}

/// One key row's dK and dV (W as for AttnRow). Its K and V rows are read
/// where they lie: a copy would double the thread's state.
template <int W = kMaxAttentionWidth> struct AttnKVGrad { float gk[W], gv[W]; };

// compiler/ops/Attention.cpp (attentionLocalBytes) plans this much local
// memory a thread for heads wider than 128.
static_assert(sizeof(AttnKVGrad<256>) == 2048);

template <int W>
MEMFIT_HD void attnGradKVBegin(const AttentionParams &p, AttnKVGrad<W> &r) {
  forLanes<W>(p.d, [&](int64_t j) { r.gk[j] = 0; });
  forLanes<W>(p.dv, [&](int64_t j) { r.gv[j] = 0; });
}

/// Advances dK and dV of key row s over the query tile [t0, t0 + count) of
/// head h.
template <int W>
MEMFIT_HD void attnGradKVQueries(const AttentionParams &p, const auto &a,
                                 uint64_t key, int64_t firstSample, int64_t h,
                                 int64_t s, int64_t t0, int64_t count,
                                 auto qTile, auto dOTile, auto lseTile,
                                 auto dDotTile, AttnKVGrad<W> &r) {
  const int64_t hk = attnKVHead(p, h);
  const auto k = attnKRow(p, a, hk, s);
  const auto v = a.v + (hk * p.s + s) * p.dv;
  for (int64_t i = 0; i < count; ++i) {
    auto q = qTile + i * p.d, dO = dOTile + i * p.dv;
    float prob;
    float ds = attnScoreGrad(p, a, key, firstSample, h, t0 + i, s, q, k, v, dO,
                             lseTile[i], dDotTile[i], prob);
    forLanes<W>(p.dv, [&](int64_t j) { r.gv[j] += prob * dO[j]; });
    forLanes<W>(p.d, [&](int64_t j) { r.gk[j] += ds * q[j]; });
  }
}

/// Writes dK and dV of key row s (the head's blocks).
template <int W>
MEMFIT_HD void attnGradKVEnd(const AttentionParams &p, int64_t s,
                             const AttnKVGrad<W> &r, auto dk, auto dv,
                             bool accK, bool accV) {
  if (dk)
    forLanes<W>(p.d, [&](int64_t j) {
      // K read transposed ([d, S]) takes its gradient in the same layout.
      auto at = p.kTransposed ? dk + j * p.s + s : dk + s * p.d + j;
      put(at[0], r.gk[j] * p.scale, accK);
    });
  if (dv)
    forLanes<W>(p.dv, [&](int64_t j) { put(dv[s * p.dv + j], r.gv[j], accV); });
}

} // namespace memfit::rt::kernels

#endif
