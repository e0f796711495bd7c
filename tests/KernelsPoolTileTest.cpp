//===- KernelsPoolTileTest.cpp - Max pooling's tiled backward on the CPU --===//
//
// The CUDA backend runs max pooling's backward a tile of input positions
// per block (runtime/cuda/NormPool.cu): each window covering the tile has
// its maximum found once into shared memory, then each position gathers
// from them. The tiling and both phases are runtime/kernels/Pool.h; here
// they run on the CPU in the GPU's schedule (every tile, phase one for all
// its windows, then phase two for all its positions) and must give the
// per-position gradient (kernels::poolGradAt, the emulation's) bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/kernels/Pool.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

using namespace memfit::rt;
using memfit::test::randomVector;

namespace {

PoolParams maxPool(int64_t c, int64_t hin, int64_t win, int64_t k, int64_t s,
                   int64_t pad, bool ceilMode = false) {
  PoolParams p{};
  p.kind = PoolKind::Max;
  p.c = c;
  p.hin = hin;
  p.win = win;
  p.kh = p.kw = k;
  p.sh = p.sw = s;
  p.padTop = p.padLeft = p.padBottom = p.padRight = pad;
  auto out = [&](int64_t in) {
    int64_t span = in + 2 * pad - k;
    return (ceilMode ? (span + s - 1) / s : span / s) + 1;
  };
  p.hout = out(hin);
  p.wout = out(win);
  return p;
}

/// Runs the tiled schedule over n planes, returning dx; `covered` counts
/// how often each position was written.
std::vector<float> tiledGrad(const PoolParams &p, int64_t n,
                             const std::vector<float> &x,
                             const std::vector<float> &dy,
                             const std::vector<float> &start,
                             std::vector<int> &covered) {
  const int64_t inPlane = p.hin * p.win, outPlane = p.hout * p.wout;
  std::vector<float> dx(start);
  covered.assign(dx.size(), 0);
  std::vector<int32_t> args(kernels::kMaxPoolTileArgs);
  const int64_t tiles = n * p.c * kernels::maxPoolTilesPerPlane(p);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const kernels::MaxPoolTile t = kernels::maxPoolTileAt(p, tile);
    REQUIRE(t.args() <= kernels::kMaxPoolTileArgs);
    // Poison what a tile does not fill, as shared memory holds the last
    // tile's maxima.
    std::fill(args.begin(), args.end(), int32_t(-7));
    const float *plane = x.data() + t.plane * inPlane;
    for (int64_t i = 0; i < t.args(); ++i)
      args[i] = kernels::maxPoolTileArg(p, t, plane, i);
    for (int64_t i = 0; i < kernels::kMaxPoolTile * kernels::kMaxPoolTile;
         ++i) {
      int64_t ih, iw;
      if (!kernels::maxPoolTilePos(p, t, i, ih, iw))
        continue;
      const int64_t at = t.plane * inPlane + ih * p.win + iw;
      dx[at] = kernels::maxPoolTileGrad(p, t, dy.data() + t.plane * outPlane,
                                        args.data(), ih, iw, dx[at]);
      ++covered[at];
    }
  }
  return dx;
}

void checkTiled(const PoolParams &p, int64_t n, std::mt19937 &rng, bool ties,
                bool nans) {
  REQUIRE(kernels::maxPoolTiled(p));
  std::vector<float> x = randomVector(rng, n * p.c * p.hin * p.win);
  if (ties) // few distinct values: many windows hold several maxima
    for (float &v : x)
      v = std::round(v * 2);
  if (nans)
    for (size_t i = 0; i < x.size(); i += 37)
      x[i] = NAN;
  std::vector<float> dy = randomVector(rng, n * p.c * p.hout * p.wout);
  std::vector<float> start = randomVector(rng, x.size());
  std::vector<int> covered;
  std::vector<float> tiled = tiledGrad(p, n, x, dy, start, covered);
  int64_t written = 0, differ = 0;
  for (size_t t = 0; t < x.size(); ++t) {
    float ref =
        kernels::poolGradAt(p, x.data(), dy.data(), int64_t(t), start[t]);
    written += covered[t] == 1;
    differ += std::memcmp(&ref, &tiled[t], sizeof(float)) != 0;
  }
  CHECK(written == int64_t(x.size()));
  CHECK(differ == 0);
}

/// Runs the per-window schedule of a disjoint pool over n planes (one call
/// of maxPoolCellGrad per output window, as the GPU's threads do) and
/// compares it with poolGradAt bit for bit. Without accumulation dx starts
/// as a poison no gradient equals, so a position no cell writes shows.
void checkCells(const PoolParams &p, int64_t n, std::mt19937 &rng, bool acc) {
  REQUIRE(kernels::maxPoolDisjoint(p));
  const int64_t inPlane = p.hin * p.win, outPlane = p.hout * p.wout;
  std::vector<float> x = randomVector(rng, n * p.c * inPlane);
  for (float &v : x) // ties
    v = std::round(v * 2);
  for (size_t i = 0; i < x.size(); i += 29)
    x[i] = NAN;
  std::vector<float> dy = randomVector(rng, n * p.c * outPlane);
  std::vector<float> start = randomVector(rng, x.size());
  start[1] = -0.0f; // -0 + 0 would be +0: an untouched position keeps -0
  std::vector<float> dx(x.size(), acc ? 0.0f : -12345.5f);
  if (acc)
    dx = start;
  for (int64_t pl = 0; pl < n * p.c; ++pl)
    for (int64_t oh = 0; oh < p.hout; ++oh)
      for (int64_t ow = 0; ow < p.wout; ++ow)
        kernels::maxPoolCellGrad(p, x.data() + pl * inPlane,
                                 dy.data() + pl * outPlane,
                                 dx.data() + pl * inPlane, oh, ow, acc);
  int64_t differ = 0;
  for (size_t t = 0; t < x.size(); ++t) {
    const float ref = kernels::poolGradAt(p, x.data(), dy.data(), int64_t(t),
                                          acc ? start[t] : 0.0f);
    differ += std::memcmp(&ref, &dx[t], sizeof(float)) != 0;
  }
  CHECK(differ == 0);
}

} // namespace

TEST_CASE("Max pooling's tiled backward is the per-position one bit for bit",
          "[kernels][pool]") {
  std::mt19937 rng(11);
  // ResNet's stem pool: 3x3, stride 2, pad 1, over planes of several tiles
  // with ragged edges.
  checkTiled(maxPool(3, 70, 45, 3, 2, 1), 2, rng, false, false);
  checkTiled(maxPool(3, 70, 45, 3, 2, 1), 2, rng, true, false);
  checkTiled(maxPool(2, 40, 33, 3, 2, 1), 1, rng, false, true);
  // VGG's 2x2 stride 2 (windows never overlap), and stride-1 overlap.
  checkTiled(maxPool(2, 64, 64, 2, 2, 0), 2, rng, true, false);
  checkTiled(maxPool(2, 35, 37, 3, 1, 1), 1, rng, true, false);
  // Ceil mode: the last windows reach past the end pad.
  checkTiled(maxPool(2, 33, 34, 3, 2, 0, true), 1, rng, false, false);
  // A window wider than its stride by far, and the widest the scratch
  // holds at stride 1 (17 wide: 32 + 17 - 1 = 48 covering outputs).
  checkTiled(maxPool(1, 50, 41, 7, 3, 3), 1, rng, true, false);
  checkTiled(maxPool(1, 40, 40, 17, 1, 8), 1, rng, false, false);
  // A plane smaller than one tile.
  checkTiled(maxPool(4, 7, 5, 3, 2, 1), 3, rng, true, true);
}

TEST_CASE("Max pooling is tiled only where a tile's windows fit the scratch",
          "[kernels][pool]") {
  CHECK(kernels::maxPoolTiled(maxPool(64, 112, 112, 3, 2, 1)));
  CHECK(kernels::maxPoolTiled(maxPool(1, 40, 40, 17, 1, 8)));
  // 18 wide at stride 1: 49 covering outputs a tile, one past the scratch.
  CHECK_FALSE(kernels::maxPoolTiled(maxPool(1, 40, 40, 18, 1, 8)));
  CHECK(kernels::maxPoolTiled(maxPool(1, 80, 80, 18, 2, 8)));
  PoolParams avg = maxPool(1, 8, 8, 2, 2, 0);
  avg.kind = PoolKind::Average;
  CHECK_FALSE(kernels::maxPoolTiled(avg));
}

TEST_CASE("Max pooling's per-window backward is the per-position one bit for "
          "bit where windows cannot overlap",
          "[kernels][pool]") {
  std::mt19937 rng(12);
  for (bool acc : {false, true}) {
    // VGG's 2x2/2 over odd planes: a last row and column in no window.
    checkCells(maxPool(3, 9, 7, 2, 2, 0), 2, rng, acc);
    // Gaps between windows (2 wide at stride 3), and a 1x1 at stride 2.
    checkCells(maxPool(2, 11, 10, 2, 3, 0), 1, rng, acc);
    checkCells(maxPool(2, 8, 9, 1, 2, 0), 1, rng, acc);
    // 3x3/3 with a pad: the first window half in the padding; ceil mode:
    // the last windows past the end.
    checkCells(maxPool(2, 10, 11, 3, 3, 1), 1, rng, acc);
    checkCells(maxPool(2, 10, 11, 3, 3, 1, true), 1, rng, acc);
    checkCells(maxPool(2, 13, 9, 2, 2, 1, true), 2, rng, acc);
  }
}

TEST_CASE("Max pooling goes per window only where windows are disjoint",
          "[kernels][pool]") {
  CHECK(kernels::maxPoolDisjoint(maxPool(64, 224, 224, 2, 2, 0)));
  CHECK(kernels::maxPoolDisjoint(maxPool(1, 9, 9, 3, 3, 1)));
  // ResNet's 3x3/2 overlaps; a pad as wide as the stride would put a whole
  // window in the padding.
  CHECK_FALSE(kernels::maxPoolDisjoint(maxPool(64, 112, 112, 3, 2, 1)));
  CHECK_FALSE(kernels::maxPoolDisjoint(maxPool(1, 9, 9, 2, 2, 2)));
  PoolParams avg = maxPool(1, 8, 8, 2, 2, 0);
  avg.kind = PoolKind::Average;
  CHECK_FALSE(kernels::maxPoolDisjoint(avg));
}
