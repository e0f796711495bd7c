//===- KernelsAttentionTest.cpp - Fused attention against the long way ----===//
//
// The fused kernels (online softmax, scores recomputed in the backward) must
// give what the materialized form gives: scores, mask, softmax, dropout,
// product with V, and the chain rule through each, computed here in double
// with the whole score matrix.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/kernels/Attention.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit::rt;
using memfit::test::randomVector;

namespace {

struct Grads {
  std::vector<double> o, dq, dk, dv;
};

/// The materialized computation, in double.
Grads reference(const AttentionParams &p, int64_t n, uint64_t key,
                const std::vector<float> &q, const std::vector<float> &k,
                const std::vector<float> &v, const std::vector<float> &mask,
                const std::vector<float> &dO) {
  Grads r;
  r.o.assign(n * p.heads * p.t * p.dv, 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  auto kAt = [&](int64_t i, int64_t h, int64_t s, int64_t j) -> int64_t {
    int64_t base = (i * p.kvHeads + (p.kvHeads == 1 ? 0 : h)) * p.s * p.d;
    return base + (p.kTransposed ? j * p.s + s : s * p.d + j);
  };
  auto vAt = [&](int64_t i, int64_t h, int64_t s, int64_t j) -> int64_t {
    return ((i * p.kvHeads + (p.kvHeads == 1 ? 0 : h)) * p.s + s) * p.dv + j;
  };
  DropoutParams dp{p.heads * p.t * p.s, p.dropout};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t t = 0; t < p.t; ++t) {
        std::vector<double> sc(p.s), pr(p.s), keep(p.s, 1.0);
        std::vector<bool> filled(p.s, false);
        double mx = -INFINITY;
        for (int64_t s = 0; s < p.s; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < p.d; ++j)
            dot += double(q[((i * p.heads + h) * p.t + t) * p.d + j]) *
                   k[kAt(i, h, s, j)];
          sc[s] = dot * p.scale;
          if (p.maskMode) {
            float m = mask[((h * p.t + t) * p.s + s) % p.maskSize];
            if (p.maskMode == 1)
              sc[s] += m;
            else if ((m != 0) == p.fillWhere) {
              sc[s] = p.fill;
              filled[s] = true;
            }
          }
          mx = std::max(mx, sc[s]);
          if (p.dropout > 0)
            keep[s] = kernels::dropoutAt(
                dp, key, 0, ((i * p.heads + h) * p.t + t) * p.s + s, 1.0f);
        }
        double sum = 0;
        for (int64_t s = 0; s < p.s; ++s)
          sum += pr[s] = std::exp(sc[s] - mx);
        for (int64_t s = 0; s < p.s; ++s)
          pr[s] /= sum;
        const float *dOrow = &dO[((i * p.heads + h) * p.t + t) * p.dv];
        double *orow = &r.o[((i * p.heads + h) * p.t + t) * p.dv];
        std::vector<double> dp(p.s);
        double dsum = 0;
        for (int64_t s = 0; s < p.s; ++s) {
          double g = 0;
          for (int64_t j = 0; j < p.dv; ++j) {
            orow[j] += pr[s] * keep[s] * v[vAt(i, h, s, j)];
            g += double(dOrow[j]) * v[vAt(i, h, s, j)];
            r.dv[vAt(i, h, s, j)] += pr[s] * keep[s] * dOrow[j];
          }
          dp[s] = g * keep[s];
          dsum += pr[s] * dp[s];
        }
        for (int64_t s = 0; s < p.s; ++s) {
          if (filled[s])
            continue;
          double ds = pr[s] * (dp[s] - dsum) * p.scale;
          for (int64_t j = 0; j < p.d; ++j) {
            r.dq[((i * p.heads + h) * p.t + t) * p.d + j] +=
                ds * k[kAt(i, h, s, j)];
            r.dk[kAt(i, h, s, j)] +=
                ds * q[((i * p.heads + h) * p.t + t) * p.d + j];
          }
        }
      }
  return r;
}

void checkClose(const std::vector<float> &got, const std::vector<double> &want,
                double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
  }
}

void checkAgainstReference(AttentionParams p, std::vector<float> mask,
                           unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t n = 2;
  const uint64_t key = 12345;
  auto q = randomVector(rng, n * p.heads * p.t * p.d);
  auto k = randomVector(rng, n * p.kvHeads * p.s * p.d);
  auto v = randomVector(rng, n * p.kvHeads * p.s * p.dv);
  auto dO = randomVector(rng, n * p.heads * p.t * p.dv);
  std::vector<float> o(dO.size()), lse(n * p.heads * p.t);
  attentionForward(p, n, key, 0, q.data(), k.data(), v.data(), mask.data(),
                   o.data(), lse.data());
  Grads want = reference(p, n, key, q, k, v, mask, dO);
  checkClose(o, want.o, 1e-5);
  // Accumulating onto 1s adds exactly the gradient.
  std::vector<float> dq(q.size(), 1.0f), dk(k.size(), 1.0f), dv(v.size(), 1.0f);
  attentionBackward(p, n, key, 0, q.data(), k.data(), v.data(), mask.data(),
                    o.data(), lse.data(), dO.data(), dq.data(), dk.data(),
                    dv.data(), true, true, true);
  for (auto *g : {&dq, &dk, &dv})
    for (float &x : *g)
      x -= 1.0f;
  checkClose(dq, want.dq, 1e-5);
  checkClose(dk, want.dk, 1e-5);
  checkClose(dv, want.dv, 1e-5);
}

AttentionParams base() {
  return {.heads = 3,
          .kvHeads = 3,
          .t = 5,
          .s = 5,
          .d = 4,
          .dv = 6,
          .kTransposed = false,
          .scale = 0.5f,
          .maskMode = 0,
          .maskSize = 1,
          .fill = 0,
          .fillWhere = true,
          .dropout = 0,
          .nanToZero = false};
}

} // namespace

TEST_CASE("fused attention: no mask, shared key/value heads, K transposed",
          "[kernels][attention]") {
  checkAgainstReference(base(), {0.0f}, 1);
  AttentionParams shared = base();
  shared.kvHeads = 1;
  checkAgainstReference(shared, {0.0f}, 2);
  AttentionParams tr = base();
  tr.kTransposed = true;
  tr.s = 7;
  checkAgainstReference(tr, {0.0f}, 3);
}

TEST_CASE("fused attention: causal fill, additive and padding masks",
          "[kernels][attention]") {
  // Causal: fill -inf where the lower-triangular mask is 0 (GPT's
  // masked_fill), and with a finite fill (Hugging Face's finfo.min).
  std::vector<float> lower(25);
  for (int t = 0; t < 5; ++t)
    for (int s = 0; s < 5; ++s)
      lower[t * 5 + s] = s <= t;
  AttentionParams causal = base();
  causal.maskMode = 2;
  causal.maskSize = 25;
  causal.fill = -INFINITY;
  causal.fillWhere = false;
  checkAgainstReference(causal, lower, 4);
  causal.fill = -3.0f;
  checkAgainstReference(causal, lower, 5);
  // An additive bias per head [3, 5, 5] and a key padding mask [5].
  std::mt19937 rng(6);
  AttentionParams add = base();
  add.maskMode = 1;
  add.maskSize = 75;
  checkAgainstReference(add, randomVector(rng, 75), 6);
  add.maskSize = 5;
  checkAgainstReference(add, {0, 0, -1e9f, 0, -1e9f}, 7);
}

TEST_CASE("fused attention: dropout inside, and a fully masked row",
          "[kernels][attention]") {
  AttentionParams drop = base();
  drop.dropout = 0.3f;
  checkAgainstReference(drop, {0.0f}, 8);

  // Every key of row 0 masked: NaN as softmax gives it, or 0 when the
  // model guards it.
  AttentionParams p = base();
  p.heads = p.kvHeads = 1;
  p.t = p.s = 2;
  p.maskMode = 2;
  p.maskSize = 4;
  p.fill = -INFINITY;
  p.fillWhere = true;
  std::vector<float> mask = {1, 1, 0, 0};
  std::mt19937 rng(9);
  auto q = randomVector(rng, 2 * 4), k = randomVector(rng, 2 * 4),
       v = randomVector(rng, 2 * 6);
  std::vector<float> o(12), lse(2);
  attentionForward(p, 1, 0, 0, q.data(), k.data(), v.data(), mask.data(),
                   o.data(), lse.data());
  CHECK(std::isnan(o[0]));
  CHECK(std::isfinite(o[6]));
  p.nanToZero = true;
  attentionForward(p, 1, 0, 0, q.data(), k.data(), v.data(), mask.data(),
                   o.data(), lse.data());
  CHECK(o[0] == 0.0f);
  CHECK(lse[0] == -INFINITY);
}

TEST_CASE("fused attention across tiles: long rows, wide heads",
          "[kernels][attention]") {
  // More query and key rows than one tile holds (64), not a multiple of it,
  // and heads so wide that a key tile holds 16 rows: every row's online
  // softmax and every key row's sums carry across tile boundaries.
  AttentionParams p = base();
  p.heads = 2;
  p.kvHeads = 1;
  p.t = 150;
  p.s = 133;
  p.d = p.dv = 256;
  p.scale = 1.0f / 16;
  p.kTransposed = true;
  REQUIRE(kernels::attnKeyTile(p) == 16);
  REQUIRE(kernels::attnQueryTileOfKV(p) == 16);
  std::vector<float> causal(p.t * p.s);
  for (int64_t t = 0; t < p.t; ++t)
    for (int64_t s = 0; s < p.s; ++s)
      causal[t * p.s + s] = s <= t;
  p.maskMode = 2;
  p.maskSize = p.t * p.s;
  p.fill = -INFINITY;
  p.fillWhere = false;
  checkAgainstReference(p, causal, 11);
  AttentionParams narrow = base();
  narrow.t = 70;
  narrow.s = 129;
  REQUIRE(kernels::attnKeyTile(narrow) == 64);
  checkAgainstReference(narrow, {0.0f}, 12);
}

namespace {

struct Run {
  std::vector<float> o, lse, dq, dk, dv;
};

Run runAttention(const AttentionParams &p, const std::vector<float> *mask,
                 unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t n = 2;
  auto q = randomVector(rng, n * p.heads * p.t * p.d);
  auto k = randomVector(rng, n * p.kvHeads * p.s * p.d);
  auto v = randomVector(rng, n * p.kvHeads * p.s * p.dv);
  auto dO = randomVector(rng, n * p.heads * p.t * p.dv);
  Run r;
  r.o.resize(dO.size());
  r.lse.resize(n * p.heads * p.t);
  r.dq.resize(q.size());
  r.dk.resize(k.size());
  r.dv.resize(v.size());
  const float *m = mask ? mask->data() : nullptr;
  attentionForward(p, n, 99, 3, q.data(), k.data(), v.data(), m, r.o.data(),
                   r.lse.data());
  attentionBackward(p, n, 99, 3, q.data(), k.data(), v.data(), m, r.o.data(),
                    r.lse.data(), dO.data(), r.dq.data(), r.dk.data(),
                    r.dv.data(), false, false, false);
  return r;
}

} // namespace

TEST_CASE("a band mask gives every bit the materialized mask gives",
          "[kernels][attention]") {
  // Rows past one tile, not a multiple of it; the band as a rule against the
  // same band written out as a [T, S] mask, with tiles skipped where the
  // fill is negligible and run where it is not.
  struct Case {
    const char *what;
    int64_t lo, hi;
    int32_t mode;
    float fill;
    float dropout;
  };
  const float fmin = -3.4028234663852886e38f; // torch.finfo(float32).min
  Case cases[] = {
      {"causal, -inf filled", -1000, 0, 2, -INFINITY, 0},
      {"causal, finfo.min filled, dropout", -1000, 0, 2, fmin, 0.2f},
      {"causal, finfo.min added", -1000, 0, 1, fmin, 0},
      {"17 keys of look-ahead", -1000, 17, 2, -INFINITY, 0},
      {"a window of 40 keys", -39, 0, 2, -INFINITY, 0},
      {"causal, -1e4 added: not negligible, nothing skipped", -1000, 0, 1,
       -1e4f, 0},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    AttentionParams p = base();
    p.heads = 2;
    p.kvHeads = 1;
    p.t = 150;
    p.s = 133;
    p.d = p.dv = 8;
    p.scale = 0.3f;
    p.maskMode = c.mode;
    p.fill = c.fill;
    p.fillWhere = false; // mode 2: filled where the mask is 0
    p.dropout = c.dropout;
    std::vector<float> mask(p.t * p.s);
    for (int64_t t = 0; t < p.t; ++t)
      for (int64_t s = 0; s < p.s; ++s) {
        bool in = s - t >= c.lo && s - t <= c.hi;
        mask[t * p.s + s] = c.mode == 2 ? float(in) : in ? 0.0f : c.fill;
      }
    p.maskSize = p.t * p.s;
    Run written = runAttention(p, &mask, 21);
    p.band = true;
    p.bandLo = c.lo;
    p.bandHi = c.hi;
    p.maskSize = 1;
    Run band = runAttention(p, nullptr, 21);
    CHECK(band.o == written.o);
    CHECK(band.lse == written.lse);
    CHECK(band.dq == written.dq);
    CHECK(band.dk == written.dk);
    CHECK(band.dv == written.dv);
  }
}

TEST_CASE("which tiles a band mask skips", "[kernels][attention]") {
  AttentionParams p = base();
  p.t = p.s = 256;
  p.maskMode = 2;
  p.fill = -INFINITY;
  p.band = true;
  p.bandLo = -256;
  p.bandHi = 0;
  // Causal: keys wholly after the tile's last query are skipped; the
  // diagonal tile and those before it run.
  CHECK(kernels::attnSkipTile(p, 0, 64, 64, 64));
  CHECK(!kernels::attnSkipTile(p, 0, 64, 0, 64));
  CHECK(!kernels::attnSkipTile(p, 64, 64, 127, 1));
  CHECK(kernels::attnSkipTile(p, 64, 64, 128, 1));
  // A window of 64 keys also skips keys wholly before it.
  p.bandLo = -63;
  CHECK(kernels::attnSkipTile(p, 128, 64, 0, 64));
  CHECK(!kernels::attnSkipTile(p, 128, 64, 64, 64));
  // A fill whose probability is not exactly 0 runs everything.
  p.fill = -1e4f;
  CHECK(!kernels::attnSkipTile(p, 0, 64, 64, 64));
  // Neither does a materialized mask, nor a band without the flag.
  p.fill = -INFINITY;
  p.band = false;
  CHECK(!kernels::attnSkipTile(p, 0, 64, 64, 64));
}
