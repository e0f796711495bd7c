//===- Pool.h - Pooling kernels of both backends ----------------*- C++ -*-===//
//
// Max and average pooling, one output (forward) or one input gradient
// (backward, gathered from the outputs whose windows cover it) per call,
// compiled into the CPU emulation and the CUDA backend alike. Windows start
// at o * stride - padBegin and cover `kernel` positions. Max pooling takes
// the first maximum in row-major window order over the real input positions
// only (padding never wins; a NaN counts as larger than any number, as in
// PyTorch); its backward finds the same position again from x (per
// position, per tile of positions with each window's maximum found once, or,
// where windows cannot overlap, per window over the cell it owns).
// Average
// pooling divides by the real positions, or with countIncludePad by the
// window clipped to the model's end pads (PyTorch's divisor, which differs
// from the full kernel only for ceil-mode windows). A gradient adds its
// contributions in row-major output order onto its start value, the same
// order on both backends.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_POOL_H
#define MEMFIT_RUNTIME_KERNELS_POOL_H

#include "runtime/kernels/Elementwise.h"

namespace memfit::rt::kernels {

/// One pooling window: rows [h0, h1) and columns [w0, w1) of real input
/// positions, and the divisor an average uses.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

MEMFIT_HD int64_t minOf(int64_t a, int64_t b) { return a < b ? a : b; }

MEMFIT_HD int64_t maxOf(int64_t a, int64_t b) { return a > b ? a : b; }

MEMFIT_HD Window windowAt(const PoolParams &p, int64_t oh, int64_t ow) {
  int64_t hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  int64_t he = minOf(hs + p.kh, p.hin + p.padBottom);
  int64_t we = minOf(ws + p.kw, p.win + p.padRight);
  Window win;
  win.h0 = maxOf(hs, 0);
  win.w0 = maxOf(ws, 0);
  win.h1 = minOf(he, p.hin);
  win.w1 = minOf(we, p.win);
  int64_t real = maxOf(win.h1 - win.h0, 0) * maxOf(win.w1 - win.w0, 0);
  win.divisor = p.countIncludePad ? (he - hs) * (we - ws) : real;
  return win;
}

/// Index in the plane of the window's first maximum, or -1 when the window
/// holds no real position.
MEMFIT_HD int64_t argmaxOf(const PoolParams &p, const Window &win, auto plane) {
  int64_t best = -1;
  float bestValue = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) {
      float v = plane[ih * p.win + iw];
      bool nan = v != v, bestNan = bestValue != bestValue;
      if (best < 0 || v > bestValue || (nan && !bestNan)) {
        best = ih * p.win + iw;
        bestValue = v;
      }
    }
  return best;
}

/// Output element t of n * c planes.
MEMFIT_HD float poolAt(const PoolParams &p, auto x, int64_t t) {
  const int64_t outPlane = p.hout * p.wout, inPlane = p.hin * p.win;
  int64_t pl = divNonNeg(t, outPlane), q = t - pl * outPlane;
  int64_t oh = divNonNeg(q, p.wout), ow = q - oh * p.wout;
  auto plane = x + pl * inPlane;
  Window win = windowAt(p, oh, ow);
  if (p.kind == PoolKind::Max) {
    int64_t at = argmaxOf(p, win, plane);
    return at < 0 ? -HUGE_VALF : plane[at];
  }
  double sum = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw)
      sum += plane[ih * p.win + iw];
  // An empty window (only possible with degenerate pads) averages to 0.
  return win.divisor > 0 ? float(sum / double(win.divisor)) : 0.0f;
}

MEMFIT_HD int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? divNonNeg(a, b) : -divNonNeg(-a + b - 1, b);
}
MEMFIT_HD int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// Outputs [lo, hi] of one axis whose kernel extent covers input positions
/// [first, last] of that axis (none when hi < lo); windowAt decides which
/// of them really hold a position.
struct Cover {
  int64_t lo, hi;
};
MEMFIT_HD Cover coverOf(int64_t first, int64_t last, int64_t pad, int64_t k,
                        int64_t s, int64_t out) {
  return {maxOf(ceilDiv(first + pad - k + 1, s), 0),
          minOf(floorDiv(last + pad, s), out - 1)};
}

/// Max pooling's input gradient at (ih, iw) of one plane, added onto
/// `start`, given argOf(oh, ow): the plane index of window (oh, ow)'s first
/// maximum (-1 for none). A window whose maximum is the position holds it,
/// so no other test is needed; contributions add in row-major output order.
MEMFIT_HD float maxPoolGradFrom(const PoolParams &p, auto dyPlane, int64_t ih,
                                int64_t iw, auto argOf, float start) {
  const int64_t q = ih * p.win + iw;
  const Cover rows = coverOf(ih, ih, p.padTop, p.kh, p.sh, p.hout);
  const Cover cols = coverOf(iw, iw, p.padLeft, p.kw, p.sw, p.wout);
  float v = start;
  for (int64_t oh = rows.lo; oh <= rows.hi; ++oh)
    for (int64_t ow = cols.lo; ow <= cols.hi; ++ow)
      if (argOf(oh, ow) == q)
        v += float(dyPlane[oh * p.wout + ow]);
  return v;
}

/// Input gradient element t, added onto `start` (the gradient there when
/// accumulating, else 0). x is read by max pooling only, so average
/// pooling may be called with x null.
MEMFIT_HD float poolGradAt(const PoolParams &p, auto x, auto dy, int64_t t,
                           float start) {
  const int64_t outPlane = p.hout * p.wout, inPlane = p.hin * p.win;
  int64_t pl = divNonNeg(t, inPlane), q = t - pl * inPlane;
  int64_t ih = divNonNeg(q, p.win), iw = q - ih * p.win;
  auto dyPlane = dy + pl * outPlane;
  if (p.kind == PoolKind::Max) {
    auto plane = x + pl * inPlane;
    return maxPoolGradFrom(
        p, dyPlane, ih, iw,
        [&](int64_t oh, int64_t ow) {
          return argmaxOf(p, windowAt(p, oh, ow), plane);
        },
        start);
  }
  const Cover rows = coverOf(ih, ih, p.padTop, p.kh, p.sh, p.hout);
  const Cover cols = coverOf(iw, iw, p.padLeft, p.kw, p.sw, p.wout);
  float v = start;
  for (int64_t oh = rows.lo; oh <= rows.hi; ++oh)
    for (int64_t ow = cols.lo; ow <= cols.hi; ++ow) {
      Window win = windowAt(p, oh, ow);
      if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1)
        continue;
      if (win.divisor > 0)
        v += float(dyPlane[oh * p.wout + ow]) / float(win.divisor);
    }
  return v;
}

/// Max pooling's backward by tiles, so that each window's maximum is found
/// once rather than once per position it covers (up to kh x kw times): a
/// tile is kMaxPoolTile x kMaxPoolTile input positions of one plane; the
/// argmax of every window covering it is found first (maxPoolTileArg, into
/// a scratch of at most kMaxPoolTileArgs), then each position's gradient
/// gathers from them (maxPoolTileGrad) in poolGradAt's order, so the
/// result is poolGradAt's bit for bit.
constexpr int64_t kMaxPoolTile = 32;
constexpr int64_t kMaxPoolTileCover = 48; // outputs per axis of one tile
constexpr int64_t kMaxPoolTileArgs = kMaxPoolTileCover * kMaxPoolTileCover;

struct MaxPoolTile {
  int64_t plane;    // which of the n * c planes
  int64_t ih, iw;   // the tile's first input row and column
  Cover rows, cols; // the outputs covering it
  MEMFIT_HD int64_t coverCols() const { return cols.hi - cols.lo + 1; }
  MEMFIT_HD int64_t args() const {
    return rows.hi < rows.lo || cols.hi < cols.lo
               ? 0
               : (rows.hi - rows.lo + 1) * coverCols();
  }
};

MEMFIT_HD int64_t maxPoolTilesPerPlane(const PoolParams &p) {
  return ceilDiv(p.hin, kMaxPoolTile) * ceilDiv(p.win, kMaxPoolTile);
}

/// Whether every tile's covering outputs fit the scratch (kernels up to
/// kMaxPoolTileCover - kMaxPoolTile + 1 wide at stride 1, wider at larger
/// strides) and plane indices fit 32 bits; else the per-position kernel.
MEMFIT_HD bool maxPoolTiled(const PoolParams &p) {
  auto fits = [](int64_t k, int64_t s) {
    return (kMaxPoolTile - 1 + k - 1) / s + 1 <= kMaxPoolTileCover;
  };
  return p.kind == PoolKind::Max && fits(p.kh, p.sh) && fits(p.kw, p.sw) &&
         p.hin * p.win < (int64_t(1) << 31);
}

MEMFIT_HD MaxPoolTile maxPoolTileAt(const PoolParams &p, int64_t tile) {
  const int64_t perPlane = maxPoolTilesPerPlane(p);
  const int64_t across = ceilDiv(p.win, kMaxPoolTile);
  MaxPoolTile t;
  t.plane = tile / perPlane;
  const int64_t r = tile - t.plane * perPlane;
  t.ih = (r / across) * kMaxPoolTile;
  t.iw = (r - (r / across) * across) * kMaxPoolTile;
  const int64_t lastH = minOf(t.ih + kMaxPoolTile, p.hin) - 1;
  const int64_t lastW = minOf(t.iw + kMaxPoolTile, p.win) - 1;
  t.rows = coverOf(t.ih, lastH, p.padTop, p.kh, p.sh, p.hout);
  t.cols = coverOf(t.iw, lastW, p.padLeft, p.kw, p.sw, p.wout);
  return t;
}

/// The i-th covering window's first maximum (plane index, -1 for none),
/// for i < t.args(): x is the tile's plane.
MEMFIT_HD int32_t maxPoolTileArg(const PoolParams &p, const MaxPoolTile &t,
                                 auto plane, int64_t i) {
  const int64_t across = divNonNeg(i, t.coverCols());
  const int64_t oh = t.rows.lo + across;
  const int64_t ow = t.cols.lo + (i - across * t.coverCols());
  return int32_t(argmaxOf(p, windowAt(p, oh, ow), plane));
}

/// The gradient of the tile's i-th position (i < kMaxPoolTile^2; false when
/// it lies past the plane's edge), added onto *start* as poolGradAt does.
/// `args` holds maxPoolTileArg for every i < t.args().
MEMFIT_HD bool maxPoolTilePos(const PoolParams &p, const MaxPoolTile &t,
                              int64_t i, int64_t &ih, int64_t &iw) {
  ih = t.ih + i / kMaxPoolTile;
  iw = t.iw + i % kMaxPoolTile;
  return ih < p.hin && iw < p.win;
}
MEMFIT_HD float maxPoolTileGrad(const PoolParams &p, const MaxPoolTile &t,
                                auto dyPlane, const int32_t *args, int64_t ih,
                                int64_t iw, float start) {
  return maxPoolGradFrom(
      p, dyPlane, ih, iw,
      [&](int64_t oh, int64_t ow) {
        return int64_t(
            args[(oh - t.rows.lo) * t.coverCols() + (ow - t.cols.lo)]);
      },
      start);
}

/// Max pooling whose windows cannot overlap: kernel at most the stride on
/// both axes and the leading pad under it. Every input position then lies
/// in at most one window, and the backward can go a window at a time, each
/// writing the cell it owns (maxPoolCellGrad): one read of x and dy, one
/// write of dx, no gathering (VGG's 2x2/2, most 2x2 and 3x3/3 pools).
MEMFIT_HD bool maxPoolDisjoint(const PoolParams &p) {
  return p.kind == PoolKind::Max && p.kh <= p.sh && p.kw <= p.sw &&
         p.padTop < p.sh && p.padLeft < p.sw && p.hout > 0 && p.wout > 0;
}

/// The input positions [lo, hi) of one axis that output o's cell owns: its
/// window and the gap after it up to the next window, the first cell from
/// the axis' start and the last to its end, so that the cells of a
/// disjoint pool partition the axis (windowAt's real positions lie inside).
struct Span {
  int64_t lo, hi;
};
MEMFIT_HD Span cellOf(int64_t o, int64_t pad, int64_t s, int64_t out,
                      int64_t in) {
  const int64_t lo = o == 0 ? 0 : o * s - pad;
  const int64_t hi = o == out - 1 ? in : (o + 1) * s - pad;
  return {minOf(lo, in), minOf(hi, in)};
}

/// Max pooling's input gradient over output (oh, ow)'s cell of one plane,
/// for a disjoint pool (maxPoolDisjoint): the window's first maximum gets
/// its start plus dy, every other position of the cell its start (the
/// gradient there when accumulating, else 0). poolGradAt adds the same one
/// term or none onto the same start, so the bits are its.
MEMFIT_HD void maxPoolCellGrad(const PoolParams &p, auto xPlane, auto dyPlane,
                               auto dxPlane, int64_t oh, int64_t ow, bool acc) {
  const int64_t at = argmaxOf(p, windowAt(p, oh, ow), xPlane);
  const float g = dyPlane[oh * p.wout + ow];
  const Span rows = cellOf(oh, p.padTop, p.sh, p.hout, p.hin);
  const Span cols = cellOf(ow, p.padLeft, p.sw, p.wout, p.win);
  for (int64_t ih = rows.lo; ih < rows.hi; ++ih)
    for (int64_t iw = cols.lo; iw < cols.hi; ++iw) {
      const int64_t q = ih * p.win + iw;
      float v = acc ? float(dxPlane[q]) : 0.0f;
      if (q == at)
        v += g;
      dxPlane[q] = v;
    }
}

/// Global average pooling's input gradient element t.
MEMFIT_HD float gapGradAt(int64_t spatial, auto dy, int64_t t) {
  return dy[t / spatial] / float(spatial);
}

} // namespace memfit::rt::kernels

#endif
