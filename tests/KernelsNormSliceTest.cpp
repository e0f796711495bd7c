//===- KernelsNormSliceTest.cpp - BatchNorm's GPU reductions on the CPU ---===//
//
// The CUDA backend reduces BatchNorm over many blocks per channel
// (runtime/cuda/BatchNorm.cu): each block sums one slice of a channel into
// a float compensated kernels::BnPartial, and the channel's partials
// combine in slice order. The slicing and the partials' arithmetic are
// runtime/kernels/Norm.h; here they run on the CPU in the GPU's schedule
// (slices of kernels::bnSlices, 512 per-thread sums per slice) and are
// compared with the emulation's double two-pass kernels. The order within
// a block differs from the GPU's tree, so the comparison states float
// tolerances rather than bit equality.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/kernels/Norm.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit::rt;
using kernels::BnPartial;
using kernels::BnSlices;
using memfit::test::randomVector;

namespace {

constexpr int64_t kThreads = 512; // BatchNorm.cu's kBnThreads

/// Channel ch's partial over its slices as the GPU forms it: per slice,
/// one sum per thread over every 512th value, the threads' sums added,
/// then the slices' partials added in slice order. `f(partial, index)`
/// adds one value.
template <typename F>
BnPartial slicedSum(const BatchNormParams &p, BnSlices sl, int64_t count,
                    int64_t ch, F f) {
  BnPartial all;
  for (int64_t s = 0; s < sl.slices; ++s) {
    const int64_t begin = s * sl.per, end = std::min(begin + sl.per, count);
    BnPartial block;
    for (int64_t t = 0; t < kThreads; ++t) {
      BnPartial mine;
      for (int64_t j = begin + t; j < end; j += kThreads)
        f(mine, (j / p.spatial * p.c + ch) * p.spatial + j % p.spatial);
      block.add(mine);
    }
    all.add(block);
  }
  return all;
}

} // namespace

TEST_CASE("BatchNorm's slicing covers every value once and fills the GPU",
          "[kernels][batchnorm]") {
  // (channels, values per channel): ResNet-50's BatchNorms at batch 256
  // and 8, a huge channel count, and channels smaller than one slice.
  const int64_t shapes[][2] = {{64, 256 * 112 * 112},
                               {256, 256 * 56 * 56},
                               {2048, 256 * 7 * 7},
                               {64, 8 * 112 * 112},
                               {8192, 3},
                               {3, 100}};
  for (const auto &sh : shapes) {
    const int64_t c = sh[0], count = sh[1];
    const BnSlices sl = kernels::bnSlices(c, count);
    INFO("channels " << c << ", values " << count);
    REQUIRE(sl.slices >= 1);
    REQUIRE(sl.slices * sl.per >= count);
    REQUIRE((sl.slices - 1) * sl.per < count); // no empty slice
    REQUIRE(c * sl.slices <= kernels::kBnMaxPartials);
    // As many blocks as the target wants, unless the values run out first.
    REQUIRE(
        c * sl.slices >=
        std::min(kernels::kBnTargetBlocks,
                 c * std::max<int64_t>(1, count / kernels::kBnMinPerSlice)));
  }
  // One block per channel was 64 blocks here; the slicing gives 2048.
  REQUIRE(64 * kernels::bnSlices(64, 256 * 112 * 112).slices == 2048);
}

TEST_CASE("BatchNorm's slices in whole packs cover every value once",
          "[kernels][batchnorm]") {
  // (channels, values per channel): ResNet-50's stages at batch 64, and
  // one channel bnSlices cuts into slices of 4099 values.
  const int64_t shapes[][2] = {{64, 64 * 56 * 56},
                               {512, 64 * 28 * 28},
                               {3, 8 * 24},
                               {2048, 64 * 8},
                               {1, 4096 * 3 + 8}};
  for (const auto &sh : shapes) {
    const int64_t c = sh[0], count = sh[1];
    INFO("channels " << c << ", values " << count);
    const BnSlices plain = kernels::bnSlices(c, count);
    const BnSlices sl = kernels::bnSlicesAligned(c, count, 8);
    REQUIRE(sl.per % 8 == 0);
    REQUIRE(sl.slices >= 1);
    REQUIRE(sl.slices <= plain.slices); // never more partials
    REQUIRE(sl.slices * sl.per >= count);
    REQUIRE((sl.slices - 1) * sl.per < count); // no empty slice
  }
  REQUIRE(kernels::bnSlices(1, 4096 * 3 + 8).per == 4099);
  REQUIRE(kernels::bnSlicesAligned(1, 4096 * 3 + 8, 8).per == 4104);
  // 64 x 56 per channel over 32 slices is 6272, already whole packs.
  REQUIRE(kernels::bnSlicesAligned(64, 64 * 56 * 56, 8).per ==
          kernels::bnSlices(64, 64 * 56 * 56).per);
  // Alignment 1 is bnSlices.
  REQUIRE(kernels::bnSlicesAligned(3, 100, 1).per ==
          kernels::bnSlices(3, 100).per);
}

TEST_CASE("A compensated float sum keeps what a float sum loses",
          "[kernels][batchnorm]") {
  // 1e8 then 4096 ones: each one is half an ulp of 1e8 and rounds away in
  // a float sum; the compensation keeps all of them.
  kernels::CompensatedSum comp;
  float plain = 1e8f;
  comp.add(1e8f);
  for (int i = 0; i < 4096; ++i) {
    comp.add(1.0f);
    plain += 1.0f;
  }
  REQUIRE(comp.value() == 100004096.0f); // exact, and representable
  REQUIRE(plain == 1e8f);                // what it replaces
}

TEST_CASE("BatchNorm's sliced float statistics and sums match the double "
          "reference",
          "[kernels][batchnorm]") {
  std::mt19937 rng(5);
  // Two channels: one centred, one offset by 1000 with unit spread, where
  // unshifted float sums of squares would cancel to noise.
  const BatchNormParams p{2, 4096, 1e-5f, 0.9f};
  const int64_t n = 4, count = n * p.spatial, total = n * p.c * p.spatial;
  std::vector<float> x = randomVector(rng, total, -2, 2),
                     dy = randomVector(rng, total, -1, 1);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t q = 0; q < p.spatial; ++q)
      x[(s * p.c + 1) * p.spatial + q] += 1000.0f;
  std::vector<float> scale(2, 1.5f), bias(2, 0.25f), rm(2, 0), rv(2, 1),
      y(total), saved(2 * p.c), ds(2), db(2);
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm.data(),
                   rv.data(), y.data(), saved.data(), saved.data() + p.c,
                   false);
  batchNormBackwardWeight(p, n, x.data(), saved.data(), saved.data() + p.c,
                          dy.data(), ds.data(), db.data(), false);

  const BnSlices sl = kernels::bnSlices(p.c, count);
  REQUIRE(sl.slices == 4); // the test exercises the combination of slices
  for (int64_t ch = 0; ch < p.c; ++ch) {
    INFO("channel " << ch);
    const float shift = x[ch * p.spatial];
    const BnPartial st =
        slicedSum(p, sl, count, ch,
                  [&](BnPartial &s, int64_t i) { s.addValue(x[i], shift); });
    float mean, m2;
    kernels::bnMoments(st, shift, float(count), mean, m2);
    const float invStd = kernels::bnInvStdF(p, float(count), m2);
    const double sd = 1.0 / saved[p.c + ch];
    // Float statistics: the mean within a few ulps of the offset plus 1e-6
    // of the spread, 1/sd within 1e-5 relative.
    REQUIRE(std::abs(mean - saved[ch]) <=
            4e-7 * std::abs(saved[ch]) + 1e-6 * sd);
    REQUIRE(std::abs(invStd - saved[p.c + ch]) <= 1e-5 * saved[p.c + ch]);

    const BnPartial g =
        slicedSum(p, sl, count, ch, [&](BnPartial &s, int64_t i) {
          kernels::bnAddGrad(s, x[i], dy[i], saved[ch], saved[p.c + ch]);
        });
    // Sums of terms of magnitude about 1 over 16384 values: within 1e-6 of
    // the sum of magnitudes (the float per-term rounding of dy * xhat).
    const double mag = double(count);
    REQUIRE(std::abs(g.d.value() - db[ch]) <= 1e-6 * mag);
    REQUIRE(std::abs(g.dd.value() - ds[ch]) <= 1e-6 * mag);
  }
}

namespace {

/// A row's partial as a warp of the CUDA backend forms it
/// (runtime/cuda/LayerNorm.cu, rows not whole packs): lane l sums
/// elements l, l + 32, ..., then the lanes combine in the shuffle-down
/// tree (lane l adds lane l + o for o = 16, 8, 4, 2, 1).
template <typename F> BnPartial warpRowSum(int64_t d, F f) {
  BnPartial lane[32];
  for (int64_t j = 0; j < d; ++j)
    f(lane[j % 32], j);
  for (int o = 16; o > 0; o >>= 1)
    for (int l = 0; l < o; ++l)
      lane[l].add(lane[l + o]);
  return lane[0];
}

} // namespace

TEST_CASE("LayerNorm's float warp rows match the double reference",
          "[kernels][layernorm]") {
  std::mt19937 rng(9);
  // A centred row and one offset by 10 with unit spread; a width that is
  // not a multiple of the warp.
  for (float offset : {0.0f, 10.0f})
    for (int64_t d : {45, 768}) {
      INFO("d " << d << ", offset " << offset);
      const LayerNormParams p{1, d, 1e-5f};
      std::vector<float> x = randomVector(rng, d, -1, 1),
                         dy = randomVector(rng, d, -1, 1),
                         scale = randomVector(rng, d, -2, 2),
                         bias = randomVector(rng, d, -1, 1), y(d), dx(d);
      for (float &v : x)
        v += offset;
      layerNormForward(p, 1, x.data(), scale.data(), bias.data(), y.data());
      layerNormBackwardData(p, 1, x.data(), scale.data(), dy.data(), dx.data(),
                            false);
      const float shift = x[0];
      float mean, invStd, meanG, meanGX;
      kernels::lnMomentsF(
          warpRowSum(d,
                     [&](BnPartial &s, int64_t j) { s.addValue(x[j], shift); }),
          shift, d, p.epsilon, mean, invStd);
      kernels::lnGradMeans(warpRowSum(d,
                                      [&](BnPartial &s, int64_t j) {
                                        kernels::lnAddGrad(s, x[j], dy[j],
                                                           scale[j], shift);
                                      }),
                           shift, d, mean, invStd, meanG, meanGX);
      // The float row differs from the double one by the rounding of the
      // mean (about ulp(offset) / spread) and of each term: 1e-5 relative
      // to 1 + |value|, as the selfcheck states.
      for (int64_t j = 0; j < d; ++j) {
        INFO("feature " << j);
        const float gy =
            kernels::lnNormalizeF(x[j], mean, invStd, scale[j], bias[j]);
        const float gdx = kernels::lnGradF(x[j], dy[j], scale[j], mean, invStd,
                                           meanG, meanGX);
        REQUIRE(std::abs(gy - y[j]) <= 1e-5 * (1 + std::abs(y[j])));
        REQUIRE(std::abs(gdx - dx[j]) <= 1e-5 * (1 + std::abs(dx[j])));
      }
    }
}
