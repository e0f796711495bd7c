//===- KernelsNormChunkTest.cpp - BatchNorm over chunks of the batch ------===//
//
// The split BatchNorm kernels (runtime/Kernels.h: chunk statistics combined
// pairwise, finalize, BP-data from the batch's sums) against the
// whole-batch kernels on the same 12 samples in three chunks of 4, the
// chunks with far apart means so that a wrong combination shows.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/kernels/Norm.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

using namespace memfit::rt;
using memfit::test::randomVector;

namespace {

void requireClose(const std::vector<float> &got, const std::vector<float> &want,
                  double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    REQUIRE(std::abs(double(got[i]) - want[i]) <=
            tol * (1 + std::abs(double(want[i]))));
}

} // namespace

TEST_CASE("BatchNorm in chunks equals BatchNorm over the batch",
          "[kernels][chunk]") {
  std::mt19937 rng(11);
  const BatchNormParams p{5, 9, 1e-5f, 0.9f};
  const int64_t n = 12, k = 3, part = n / k, per = part * p.c * p.spatial,
                count = n * p.c * p.spatial;
  std::vector<float> x = randomVector(rng, count), scale = randomVector(rng, 5),
                     bias = randomVector(rng, 5), dy = randomVector(rng, count);
  for (int64_t c = 0; c < k; ++c)
    for (int64_t i = 0; i < per; ++i)
      x[c * per + i] += 10.0f * float(c);
  std::vector<float> rm = randomVector(rng, 5), rv = randomVector(rng, 5, 0.5f);
  std::vector<float> rm2 = rm, rv2 = rv;

  std::vector<float> y(count), saved(2 * p.c), ds(p.c), db(p.c), dx(count);
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm.data(),
                   rv.data(), y.data(), saved.data(), saved.data() + p.c, true);
  batchNormBackwardWeight(p, n, x.data(), saved.data(), saved.data() + p.c,
                          dy.data(), ds.data(), db.data(), false);
  batchNormBackwardData(p, n, x.data(), scale.data(), saved.data(),
                        saved.data() + p.c, dy.data(), dx.data(), false);

  // The stats block: 2c floats, then 2c doubles and a count.
  std::vector<double> block(p.c + 2 * p.c + 1);
  float *stats = reinterpret_cast<float *>(block.data());
  std::vector<float> y2(count), ds2(p.c), db2(p.c), dx2(count);
  // Chunks in another order than their index: the combination is
  // order-free up to rounding.
  for (int64_t c : {2, 0, 1})
    batchNormChunkStatistics(p, part, x.data() + c * per, stats, c != 2);
  batchNormFinalize(p, stats, rm2.data(), rv2.data());
  for (int64_t c = 0; c < k; ++c)
    batchNormApply(p, part, x.data() + c * per, scale.data(), bias.data(),
                   stats, stats + p.c, y2.data() + c * per);
  for (int64_t c = 0; c < k; ++c)
    batchNormBackwardWeight(p, part, x.data() + c * per, stats, stats + p.c,
                            dy.data() + c * per, ds2.data(), db2.data(), c > 0);
  for (int64_t c = 0; c < k; ++c)
    batchNormBackwardDataBatch(p, part, double(n * p.spatial),
                               x.data() + c * per, scale.data(), stats,
                               ds2.data(), db2.data(), dy.data() + c * per,
                               dx2.data() + c * per, false);

  requireClose({stats, stats + 2 * p.c}, saved, 1e-6);
  requireClose(rm2, rm, 1e-6);
  requireClose(rv2, rv, 1e-6);
  requireClose(y2, y, 1e-5);
  requireClose(ds2, ds, 1e-5);
  requireClose(db2, db, 1e-5);
  requireClose(dx2, dx, 1e-4);
  // Per-chunk statistics would be far off: the chunks' means differ by 10.
  std::vector<float> y3(count), saved3(2 * p.c), rm3 = rm, rv3 = rv;
  batchNormForward(p, part, x.data(), scale.data(), bias.data(), rm3.data(),
                   rv3.data(), y3.data(), saved3.data(), saved3.data() + p.c,
                   false);
  CHECK(std::abs(saved3[0] - saved[0]) > 1.0f);
}

// A ReLU fused into the BatchNorm (BatchNormParams::relu): the forward
// writes ReLU(y), and the backward masks dy by the normalized value it
// recomputes from x, which is the forward's bit for bit. So every kernel
// must give exactly what the plain BatchNorm followed by a ReLU gives,
// whole batch and in chunks, with values at the ReLU's kink included.
TEST_CASE("BatchNorm with a fused ReLU equals BatchNorm then ReLU, bit for bit",
          "[kernels][chunk]") {
  std::mt19937 rng(5);
  BatchNormParams p{4, 6, 1e-5f, 0.9f};
  const int64_t n = 6, k = 2, part = n / k, per = part * p.c * p.spatial,
                count = n * p.c * p.spatial;
  std::vector<float> x = randomVector(rng, count), scale = randomVector(rng, 4),
                     bias = randomVector(rng, 4), dy = randomVector(rng, count);
  // A channel of one value: y is its bias exactly; a zero bias puts every
  // element of that channel on the kink (ReLU's derivative 0 there).
  for (int64_t s = 0; s < n; ++s)
    for (int64_t q = 0; q < p.spatial; ++q)
      x[(s * p.c + 2) * p.spatial + q] = 0.5f;
  bias[2] = 0.0f;
  std::vector<float> rm(4, 0.0f), rv(4, 1.0f);
  const ActParams relu{ActKind::Relu};

  // The plain pair.
  std::vector<float> y(count), z(count), saved(2 * p.c), dyn(count), ds(p.c),
      db(p.c), dx(count);
  std::vector<float> rmA = rm, rvA = rv;
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rmA.data(),
                   rvA.data(), y.data(), saved.data(), saved.data() + p.c,
                   true);
  activationForward(relu, count, y.data(), z.data());
  activationBackward(relu, count, z.data(), dy.data(), dyn.data(), false);
  batchNormBackwardWeight(p, n, x.data(), saved.data(), saved.data() + p.c,
                          dyn.data(), ds.data(), db.data(), false);
  batchNormBackwardData(p, n, x.data(), scale.data(), saved.data(),
                        saved.data() + p.c, dyn.data(), dx.data(), false);
  int64_t masked = 0;
  for (int64_t i = 0; i < count; ++i)
    masked += dyn[i] == 0.0f && dy[i] != 0.0f;
  REQUIRE(masked > count / 4); // the mask matters

  // Fused, whole batch.
  p.relu = true;
  std::vector<float> zf(count), savedF(2 * p.c), dsF(p.c), dbF(p.c), dxF(count);
  std::vector<float> rmB = rm, rvB = rv;
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rmB.data(),
                   rvB.data(), zf.data(), savedF.data(), savedF.data() + p.c,
                   true);
  batchNormBackwardWeight(p, n, x.data(), savedF.data(), savedF.data() + p.c,
                          dy.data(), dsF.data(), dbF.data(), false,
                          scale.data(), bias.data());
  batchNormBackwardData(p, n, x.data(), scale.data(), savedF.data(),
                        savedF.data() + p.c, dy.data(), dxF.data(), false,
                        bias.data());
  CHECK(zf == z);
  CHECK(dsF == ds);
  CHECK(dbF == db);
  CHECK(dxF == dx);

  // Fused, in chunks: apply, BP-weight and BP-data from the batch's sums.
  std::vector<double> block(p.c + 2 * p.c + 1);
  float *stats = reinterpret_cast<float *>(block.data());
  std::vector<float> zc(count), dsC(p.c), dbC(p.c), dxC(count);
  std::vector<float> rmC = rm, rvC = rv;
  for (int64_t c = 0; c < k; ++c)
    batchNormChunkStatistics(p, part, x.data() + c * per, stats, c > 0);
  batchNormFinalize(p, stats, rmC.data(), rvC.data());
  for (int64_t c = 0; c < k; ++c)
    batchNormApply(p, part, x.data() + c * per, scale.data(), bias.data(),
                   stats, stats + p.c, zc.data() + c * per);
  for (int64_t c = 0; c < k; ++c)
    batchNormBackwardWeight(p, part, x.data() + c * per, stats, stats + p.c,
                            dy.data() + c * per, dsC.data(), dbC.data(), c > 0,
                            scale.data(), bias.data());
  for (int64_t c = 0; c < k; ++c)
    batchNormBackwardDataBatch(p, part, double(n * p.spatial),
                               x.data() + c * per, scale.data(), stats,
                               dsC.data(), dbC.data(), dy.data() + c * per,
                               dxC.data() + c * per, false, bias.data());
  // The chunked statistics round differently from the whole batch's; the
  // mask is the forward's own, so the fused chunks agree with the plain
  // pair to rounding and zero exactly where it does.
  requireClose(zc, z, 1e-5);
  requireClose(dsC, ds, 1e-5);
  requireClose(dbC, db, 1e-5);
  requireClose(dxC, dx, 1e-4);
  for (int64_t i = 0; i < count; ++i)
    if (z[i] == 0.0f)
      REQUIRE(zc[i] == 0.0f);
}

// A Clip fused into the BatchNorm (ReLU6): the same property, with values
// on both bounds (the mask is open at each, as Clip's backward is).
TEST_CASE("BatchNorm with a fused Clip equals BatchNorm then Clip, bit for bit",
          "[kernels][chunk]") {
  std::mt19937 rng(9);
  BatchNormParams p{3, 8, 1e-5f, 0.9f};
  const int64_t n = 4, count = n * p.c * p.spatial;
  std::vector<float> x = randomVector(rng, count), scale = {3.0f, 4.0f, 1.0f},
                     bias = {0.5f, 1.0f, 0.0f}, dy = randomVector(rng, count);
  // Channel 2 of one value normalizes to its bias, 0: on the lower bound.
  for (int64_t s = 0; s < n; ++s)
    for (int64_t q = 0; q < p.spatial; ++q)
      x[(s * p.c + 2) * p.spatial + q] = 0.25f;
  const float lo = 0.0f, hi = 1.0f;
  ActParams clip{ActKind::Clip};
  clip.lo = lo;
  clip.hi = hi;
  std::vector<float> rm(3, 0.0f), rv(3, 1.0f), rm2 = rm, rv2 = rv;
  std::vector<float> y(count), z(count), saved(2 * p.c), dyn(count), ds(p.c),
      db(p.c), dx(count);
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm.data(),
                   rv.data(), y.data(), saved.data(), saved.data() + p.c, true);
  activationForward(clip, count, y.data(), z.data());
  activationBackward(clip, count, z.data(), dy.data(), dyn.data(), false);
  batchNormBackwardWeight(p, n, x.data(), saved.data(), saved.data() + p.c,
                          dyn.data(), ds.data(), db.data(), false);
  batchNormBackwardData(p, n, x.data(), scale.data(), saved.data(),
                        saved.data() + p.c, dyn.data(), dx.data(), false);
  int64_t below = 0, above = 0;
  for (float v : z) {
    below += v == lo;
    above += v == hi;
  }
  REQUIRE(below > count / 8);
  REQUIRE(above > count / 8);

  p.clip = true;
  p.lo = lo;
  p.hi = hi;
  std::vector<float> zf(count), savedF(2 * p.c), dsF(p.c), dbF(p.c), dxF(count);
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm2.data(),
                   rv2.data(), zf.data(), savedF.data(), savedF.data() + p.c,
                   true);
  batchNormBackwardWeight(p, n, x.data(), savedF.data(), savedF.data() + p.c,
                          dy.data(), dsF.data(), dbF.data(), false,
                          scale.data(), bias.data());
  batchNormBackwardData(p, n, x.data(), scale.data(), savedF.data(),
                        savedF.data() + p.c, dy.data(), dxF.data(), false,
                        bias.data());
  CHECK(zf == z);
  CHECK(dsF == ds);
  CHECK(dbF == db);
  CHECK(dxF == dx);
}
