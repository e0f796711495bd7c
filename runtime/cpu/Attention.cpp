//===- Attention.cpp - Fused attention on the CPU -------------------------===//
//
// Runs the tiles of runtime/kernels/Attention.h in order, one lane: per
// sample and head, each tile of query rows meets every key tile (the
// forward, dQ), and each key row meets every query tile (dK, dV).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Attention.h"

#include <algorithm>
#include <vector>

namespace memfit::rt {

using kernels::AttnSample;

namespace {

AttnSample sampleOf(const AttentionParams &p, int64_t i, const float *q,
                    const float *k, const float *v, const float *mask) {
  return {q + i * p.heads * p.t * p.d, k + i * p.kvHeads * p.s * p.d,
          v + i * p.kvHeads * p.s * p.dv, mask, i};
}

/// K and V tiles of one head.
struct KeyTiles {
  int64_t size;
  std::vector<float> k, v;
  explicit KeyTiles(const AttentionParams &p)
      : size(kernels::attnKeyTile(p)), k(size * p.d), v(size * p.dv) {}
  /// Loads head h's key tiles one after another; `step(s0, count)` runs on
  /// each that query rows [t0, t0 + tc) do not skip.
  template <typename Step>
  void walk(const AttentionParams &p, const AttnSample &a, int64_t h,
            int64_t t0, int64_t tc, Step step) {
    for (int64_t s0 = 0; s0 < p.s; s0 += size) {
      int64_t sc = std::min(size, p.s - s0);
      if (kernels::attnSkipTile(p, t0, tc, s0, sc))
        continue;
      kernels::attnLoadKeys(p, a, kernels::attnKVHead(p, h), s0, sc, k.data(),
                            v.data(), 0, 1);
      step(s0, sc);
    }
  }
};

} // namespace

void attentionForward(const AttentionParams &p, int64_t n, uint64_t key,
                      int64_t firstSample, const float *q, const float *k,
                      const float *v, const float *mask, float *o, float *lse) {
  KeyTiles tiles(p);
  std::vector<kernels::AttnRow<>> rows(kernels::kAttnQueryTile);
  for (int64_t i = 0; i < n; ++i) {
    AttnSample a = sampleOf(p, i, q, k, v, mask);
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t t0 = 0; t0 < p.t; t0 += kernels::kAttnQueryTile) {
        int64_t tc = std::min(kernels::kAttnQueryTile, p.t - t0);
        for (int64_t r = 0; r < tc; ++r)
          kernels::attnRowBegin(p, rows[r]);
        tiles.walk(p, a, h, t0, tc, [&](int64_t s0, int64_t sc) {
          for (int64_t r = 0; r < tc; ++r)
            kernels::attnForwardKeys(p, a, key, firstSample, h, t0 + r, s0, sc,
                                     tiles.k.data(), tiles.v.data(), rows[r]);
        });
        for (int64_t r = 0; r < tc; ++r) {
          int64_t row = (i * p.heads + h) * p.t + t0 + r;
          kernels::attnRowEnd(p, rows[r], o + row * p.dv, lse + row);
        }
      }
  }
}

void attentionBackward(const AttentionParams &p, int64_t n, uint64_t key,
                       int64_t firstSample, const float *q, const float *k,
                       const float *v, const float *mask, const float *o,
                       const float *lse, const float *dO, float *dq, float *dk,
                       float *dv, bool accQ, bool accK, bool accV) {
  KeyTiles tiles(p);
  std::vector<kernels::AttnQGrad<>> rows(kernels::kAttnQueryTile);
  int64_t qt = kernels::attnQueryTileOfKV(p);
  std::vector<float> qTile(qt * p.d), dOTile(qt * p.dv), lseTile(qt),
      dDotTile(qt);
  // Key rows per tile of dK and dV (the CUDA block size there too).
  std::vector<kernels::AttnKVGrad<>> kv(kernels::kAttnQueryTile);
  for (int64_t i = 0; i < n; ++i) {
    AttnSample a = sampleOf(p, i, q, k, v, mask);
    const float *oS = o + i * p.heads * p.t * p.dv;
    const float *dOS = dO + i * p.heads * p.t * p.dv;
    const float *lseS = lse + i * p.heads * p.t;
    if (dq)
      for (int64_t h = 0; h < p.heads; ++h)
        for (int64_t t0 = 0; t0 < p.t; t0 += kernels::kAttnQueryTile) {
          int64_t tc = std::min(kernels::kAttnQueryTile, p.t - t0);
          for (int64_t r = 0; r < tc; ++r) {
            int64_t row = h * p.t + t0 + r;
            kernels::attnGradQBegin(p, oS + row * p.dv, dOS + row * p.dv,
                                    rows[r]);
          }
          tiles.walk(p, a, h, t0, tc, [&](int64_t s0, int64_t sc) {
            for (int64_t r = 0; r < tc; ++r) {
              int64_t row = h * p.t + t0 + r;
              kernels::attnGradQKeys(p, a, key, firstSample, h, t0 + r,
                                     dOS + row * p.dv, lseS[row], s0, sc,
                                     tiles.k.data(), tiles.v.data(), rows[r]);
            }
          });
          for (int64_t r = 0; r < tc; ++r)
            kernels::attnGradQEnd(p, rows[r],
                                  dq + ((i * p.heads + h) * p.t + t0 + r) * p.d,
                                  accQ);
        }
    if (!dk && !dv)
      continue;
    // A tile of key rows against every query tile of every head that reads
    // them, in head order: each key row sums as its CUDA thread does.
    for (int64_t hk = 0; hk < p.kvHeads; ++hk) {
      int64_t head = i * p.kvHeads + hk;
      int64_t h0 = p.kvHeads == 1 ? 0 : hk;
      int64_t h1 = p.kvHeads == 1 ? p.heads : hk + 1;
      for (int64_t s0 = 0; s0 < p.s; s0 += kernels::kAttnQueryTile) {
        int64_t sc = std::min(kernels::kAttnQueryTile, p.s - s0);
        for (int64_t r = 0; r < sc; ++r)
          kernels::attnGradKVBegin(p, kv[r]);
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t t0 = 0; t0 < p.t; t0 += qt) {
            int64_t tc = std::min(qt, p.t - t0);
            if (kernels::attnSkipTile(p, t0, tc, s0, sc))
              continue;
            kernels::attnLoadQueries(p, a, oS, dOS, lseS, h, t0, tc,
                                     qTile.data(), dOTile.data(),
                                     lseTile.data(), dDotTile.data(), 0, 1);
            for (int64_t r = 0; r < sc; ++r)
              kernels::attnGradKVQueries(
                  p, a, key, firstSample, h, s0 + r, t0, tc, qTile.data(),
                  dOTile.data(), lseTile.data(), dDotTile.data(), kv[r]);
          }
        for (int64_t r = 0; r < sc; ++r)
          kernels::attnGradKVEnd(
              p, s0 + r, kv[r], dk ? dk + head * p.s * p.d : nullptr,
              dv ? dv + head * p.s * p.dv : nullptr, accK, accV);
      }
    }
  }
}

} // namespace memfit::rt
