//===- KernelsElementwiseTest.cpp - activations, binary, concat, pad, dropout //
//
// Gradient checks (with the accumulate convention), the derivative chosen at
// activation kinks, broadcasting, and the properties the dropout mask must
// have for recomputation: determinism per key, independence across keys,
// the kept fraction and the scaling.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit::rt;
using memfit::test::checkGradient;
using memfit::test::GradOptions;
using memfit::test::randomVector;

namespace {

/// Finite differences of an op on n = 2 samples of c x hin x win planes
/// (to c x hout x wout), with the accumulate convention.
template <typename P, typename Fwd, typename Bwd>
void checkPlaneGradient(const P &p, unsigned seed, Fwd forward, Bwd backward) {
  std::mt19937 rng(seed);
  const int64_t n = 2;
  auto x = randomVector(rng, n * p.c * p.hin * p.win);
  auto dy = randomVector(rng, n * p.c * p.hout * p.wout);
  checkGradient(
      x,
      [&] {
        std::vector<float> y(dy.size());
        forward(p, n, x.data(), y.data());
        return y;
      },
      dy, [&](float *dx, bool acc) { backward(p, n, dy.data(), dx, acc); });
}

} // namespace

TEST_CASE("activation gradients", "[kernels]") {
  // Every kind of Activations.def, its backward given what the entry says
  // it reads (a kind that reads Nothing gets NaN there, which would show).
  auto check = [](ActParams p) {
    INFO(activationName(p.kind));
    std::mt19937 rng(29);
    auto x = randomVector(rng, 40, -2, 2);
    // Keep inputs away from the kinks (0, and Clip's bounds) so that the
    // finite difference does not straddle one.
    for (float &v : x) {
      for (float kink : {0.0f, p.lo, p.hi})
        if (std::abs(v - kink) < 0.05f)
          v = kink + (v < kink ? -0.1f : 0.1f);
      if (p.kind == ActKind::Sqrt || p.kind == ActKind::Log)
        v = std::abs(v) + 0.1f;
    }
    auto dy = randomVector(rng, 40);
    auto forward = [&] {
      std::vector<float> y(x.size());
      activationForward(p, int64_t(x.size()), x.data(), y.data());
      return y;
    };
    std::vector<float> y = forward();
    GradReads reads = activationGradReads(p.kind);
    std::vector<float> src = reads == GradReads::Input ? x
                             : reads == GradReads::Output
                                 ? y
                                 : std::vector<float>(x.size(), NAN);
    GradOptions opt;
    opt.step = 1e-2;
    opt.rtol = 1e-2;
    checkGradient(
        x, forward, dy,
        [&](float *dx, bool acc) {
          activationBackward(p, int64_t(y.size()), src.data(), dy.data(), dx,
                             acc);
        },
        opt);
  };
#define MEMFIT_ACTIVATION(K, R)                                                \
  SECTION(#K) {                                                                \
    ActParams p{ActKind::K, 0.2f, -0.5f, 0.6f, 0.5f};                          \
    if (p.kind == ActKind::Pow)                                                \
      p.alpha = 3.0f;                                                          \
    if (p.kind == ActKind::Celu)                                               \
      p.alpha = 0.7f;                                                          \
    check(p);                                                                  \
  }
#include "runtime/kernels/Activations.def"
}

TEST_CASE("the activation kinds' names and reads come from their .def",
          "[kernels]") {
  CHECK(std::string(activationName(ActKind::Softplus)) == "Softplus");
  CHECK(std::string(activationName(ActKind::LogSigmoid)) == "LogSigmoid");
  CHECK(activationGradReads(ActKind::Relu) == GradReads::Output);
  CHECK(activationGradReads(ActKind::Erf) == GradReads::Input);
  CHECK(activationGradReads(ActKind::Neg) == GradReads::Nothing);
  CHECK(activationGradReads(ActKind::Mish) == GradReads::Input);
  CHECK(binaryGradReads(BinaryKind::Add) == GradReads::Nothing);
  CHECK(binaryGradReads(BinaryKind::RDiv) == GradReads::Operands);
}

TEST_CASE("softplus, mish and logsigmoid stay finite far from 0", "[kernels]") {
  // PyTorch's forms: softplus is x past 20, logsigmoid min(x, 0) -
  // log1p(exp(-|x|)); the naive log(1 + exp(x)) and log(sigmoid(x)) give
  // inf and -inf at these inputs.
  std::vector<float> x = {-100.0f, -30.0f, 30.0f, 100.0f}, y(4), dx(4);
  std::vector<float> dy(4, 1.0f);
  ActParams sp{ActKind::Softplus};
  activationForward(sp, 4, x.data(), y.data());
  CHECK(y[0] == Approx(0.0f).margin(1e-30));
  CHECK(y[2] == 30.0f);
  CHECK(y[3] == 100.0f);
  activationBackward(sp, 4, x.data(), dy.data(), dx.data(), false);
  CHECK(dx[3] == 1.0f);
  CHECK(dx[0] == Approx(0.0f).margin(1e-30));
  ActParams mish{ActKind::Mish};
  activationForward(mish, 4, x.data(), y.data());
  CHECK(y[3] == 100.0f);
  CHECK(std::abs(y[0]) < 1e-30f);
  activationBackward(mish, 4, x.data(), dy.data(), dx.data(), false);
  CHECK(dx[3] == 1.0f);
  ActParams ls{ActKind::LogSigmoid};
  activationForward(ls, 4, x.data(), y.data());
  CHECK(y[0] == -100.0f);
  CHECK(y[1] == Approx(-30.0f));
  CHECK(y[3] == Approx(0.0f).margin(1e-30));
  activationBackward(ls, 4, x.data(), dy.data(), dx.data(), false);
  CHECK(dx[0] == 1.0f);
  CHECK(dx[3] == Approx(0.0f).margin(1e-30));
  ActParams celu{ActKind::Celu, 2.0f};
  activationForward(celu, 4, x.data(), y.data());
  CHECK(y[0] == Approx(-2.0f)); // alpha * (exp(x / alpha) - 1) -> -alpha
  CHECK(y[3] == 100.0f);
}

TEST_CASE("activations at their kinks, in place", "[kernels]") {
  std::vector<float> v{-1, 0, 0.5f, 6, 7}, dy{1, 1, 1, 1, 1}, dx(5);
  ActParams relu6{ActKind::Clip, 0, 0, 6};
  activationForward(relu6, 5, v.data(), v.data());
  CHECK(v == std::vector<float>{0, 0, 0.5f, 6, 6});
  activationBackward(relu6, 5, v.data(), dy.data(), dx.data(), false);
  CHECK(dx == std::vector<float>{0, 0, 1, 0, 0});

  std::vector<float> r{-2, 0, 3}, dr(3);
  ActParams leaky{ActKind::LeakyRelu, 0.1f};
  activationForward(leaky, 3, r.data(), r.data());
  CHECK(r == std::vector<float>{-0.2f, 0, 3});
  activationBackward(leaky, 3, r.data(), dy.data(), dr.data(), false);
  CHECK(dr == std::vector<float>{0.1f, 0.1f, 1});
  ActParams relu{ActKind::Relu};
  activationBackward(relu, 3, std::vector<float>{0, 0, 3}.data(), dy.data(),
                     dr.data(), false);
  CHECK(dr == std::vector<float>{0, 0, 1});
}

namespace {
void checkBinary(BinaryParams p, int64_t n) {
  std::mt19937 rng(31);
  auto a = randomVector(rng, n * p.perSample);
  auto b = randomVector(rng, p.bBatched ? n * p.bSize : p.bSize);
  auto dy = randomVector(rng, n * p.perSample);
  auto forward = [&] {
    std::vector<float> y(dy.size());
    binaryForward(p, n, a.data(), b.data(), y.data());
    return y;
  };
  // Every kind is linear in a and in b separately.
  SECTION("a") {
    checkGradient(a, forward, dy, [&](float *da, bool acc) {
      binaryBackward(p, n, a.data(), b.data(), dy.data(), da, nullptr, acc,
                     false);
    });
  }
  SECTION("b") {
    checkGradient(b, forward, dy, [&](float *db, bool acc) {
      binaryBackward(p, n, a.data(), b.data(), dy.data(), nullptr, db, false,
                     acc);
    });
  }
  SECTION("both at once, with different flags") {
    std::vector<float> da(a.size()), db(b.size());
    binaryBackward(p, n, a.data(), b.data(), dy.data(), da.data(), db.data(),
                   false, false);
    std::vector<float> da2(a.size(), NAN), db2 = db;
    binaryBackward(p, n, a.data(), b.data(), dy.data(), da2.data(), db2.data(),
                   false, true);
    CHECK(da2 == da);
    for (size_t j = 0; j < db.size(); ++j)
      CHECK(db2[j] == Approx(2 * db[j]));
  }
}
} // namespace

TEST_CASE("binary op gradients", "[kernels]") {
  for (BinaryKind kind : {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul}) {
    DYNAMIC_SECTION("kind " << int(kind)) {
      // perSample = 3 channels x 2x2.
      SECTION("batched") { checkBinary({kind, 12, true, 12, 1}, 2); }
      // A squeeze-and-excitation scale: [N, 3, 1, 1] over [N, 3, 2, 2].
      SECTION("batched per channel") { checkBinary({kind, 12, true, 3, 4}, 2); }
      SECTION("per channel") { checkBinary({kind, 12, false, 3, 4}, 2); }
      SECTION("scalar") { checkBinary({kind, 12, false, 1, 12}, 3); }
      SECTION("per feature") { checkBinary({kind, 12, false, 12, 1}, 2); }
    }
  }
}

TEST_CASE("Div and its gradients on a literal", "[kernels]") {
  // a / b with b per channel: d/da = 1/b, d/db = -sum(dy * a) / b^2.
  BinaryParams p{BinaryKind::Div, 4, false, 2, 2};
  std::vector<float> a{1, 2, 3, 4}, b{2, 4}, y(4), dy{1, 1, 1, 1}, da(4), db(2);
  binaryForward(p, 1, a.data(), b.data(), y.data());
  CHECK(y == std::vector<float>{0.5f, 1.0f, 0.75f, 1.0f});
  binaryBackward(p, 1, a.data(), b.data(), dy.data(), da.data(), db.data(),
                 false, false);
  CHECK(da == std::vector<float>{0.5f, 0.5f, 0.25f, 0.25f});
  CHECK(db[0] == Approx(-(1.0 + 2.0) / 4));
  CHECK(db[1] == Approx(-(3.0 + 4.0) / 16));
}

TEST_CASE("binary broadcast on a literal", "[kernels]") {
  // a: one sample, 2 channels x 2 positions; b per channel.
  BinaryParams p{BinaryKind::Sub, 4, false, 2, 2};
  std::vector<float> a{1, 2, 3, 4}, b{10, 20}, y(4), db(2);
  binaryForward(p, 1, a.data(), b.data(), y.data());
  CHECK(y == std::vector<float>{-9, -8, -17, -16});
  std::vector<float> dy{1, 2, 3, 4};
  binaryBackward(p, 1, a.data(), b.data(), dy.data(), nullptr, db.data(), false,
                 false);
  CHECK(db == std::vector<float>{-3, -7});
}

TEST_CASE("concat of three inputs", "[kernels]") {
  const int64_t n = 2;
  const int64_t parts[3] = {6, 3, 12}; // channels 2, 1, 4 x 3 positions
  std::mt19937 rng(37);
  std::vector<std::vector<float>> in;
  for (int64_t part : parts)
    in.push_back(randomVector(rng, n * part));
  auto dy = randomVector(rng, n * 21);
  auto forward = [&] {
    std::vector<float> y(dy.size());
    const float *ptrs[3] = {in[0].data(), in[1].data(), in[2].data()};
    concatForward(n, 3, parts, ptrs, y.data());
    return y;
  };
  std::vector<float> y = forward();
  CHECK(y[6] == in[1][0]);
  CHECK(y[21] == in[0][6]);
  for (int k = 0; k < 3; ++k) {
    DYNAMIC_SECTION("input " << k) {
      checkGradient(in[k], forward, dy, [&](float *d, bool acc) {
        // The other inputs get no gradient (null), or an overwritten one.
        std::vector<float> other(n * 12, NAN);
        float *outs[3] = {nullptr, other.data(), nullptr};
        if (k == 1)
          outs[0] = other.data();
        outs[k] = d;
        bool flags[3] = {false, false, false};
        flags[k] = acc;
        concatBackward(n, 3, parts, dy.data(), outs, flags);
      });
    }
  }
}

TEST_CASE("pad", "[kernels]") {
  SECTION("literal: constant value around, crop on the right") {
    // 1x2x3 -> pads top 1, left 1, bottom 0, right -1: 3x3.
    PadParams p{1, 2, 3, 3, 3, 1, 1, 9.0f};
    std::vector<float> x{1, 2, 3, 4, 5, 6}, y(9);
    padForward(p, 1, x.data(), y.data());
    CHECK(y == std::vector<float>{9, 9, 9, 9, 1, 2, 9, 4, 5});
    std::vector<float> dy{0, 0, 0, 0, 1, 2, 0, 3, 4}, dx(6, NAN);
    padBackward(p, 1, dy.data(), dx.data(), false);
    CHECK(dx == std::vector<float>{1, 2, 0, 3, 4, 0});
  }
  auto check = [](PadParams p) {
    checkPlaneGradient(p, 41, padForward, padBackward);
  };
  SECTION("grow") { check({2, 3, 4, 6, 5, 1, 0, 0.5f}); }
  SECTION("crop") { check({2, 5, 4, 3, 3, -1, -1, 0.0f}); }
}

TEST_CASE("resize", "[kernels]") {
  // .c, .hin, .win, .hout, .wout, .linear, .coordMode, .nearestMode,
  // .scaleH, .scaleW
  std::vector<float> x{1, 2, 3, 4}; // one 2x2 plane
  SECTION("nearest, asymmetric, floor (F.interpolate's nearest)") {
    ResizeParams p{1, 2, 2, 2, 4, false, 3, 2, 1.0f, 2.0f};
    std::vector<float> y(8);
    resizeForward(p, 1, x.data(), y.data());
    CHECK(y == std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4});
    std::vector<float> dy{1, 2, 3, 4, 5, 6, 7, 8}, dx(4, NAN);
    resizeBackward(p, 1, dy.data(), dx.data(), false);
    CHECK(dx == std::vector<float>{3, 7, 11, 15});
  }
  SECTION("linear, align_corners: 2 -> 3 takes the midpoint") {
    ResizeParams p{1, 2, 2, 3, 3, true, 2, 0, 1.5f, 1.5f};
    std::vector<float> y(9);
    resizeForward(p, 1, x.data(), y.data());
    CHECK(y == std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
  }
  SECTION("linear, half_pixel: edges clamp") {
    // Output 0 of 2 -> 4 maps to -0.25 (clamped to 0), output 1 to 0.25.
    ResizeParams p{1, 1, 2, 1, 4, true, 0, 0, 1.0f, 2.0f};
    std::vector<float> y(4);
    resizeForward(p, 1, x.data(), y.data());
    CHECK(y == std::vector<float>{1, 1.25f, 1.75f, 2});
  }
  SECTION("nearest, half_pixel, round_prefer_ceil: 3 -> 2") {
    // Outputs map to 0.25 and 1.75: rows 0 and 2.
    std::vector<float> x3{1, 2, 3};
    ResizeParams p{1, 1, 3, 1, 2, false, 0, 1, 1.0f, 2.0f / 3.0f};
    std::vector<float> y(2);
    resizeForward(p, 1, x3.data(), y.data());
    CHECK(y == std::vector<float>{1, 3});
  }
  auto check = [](ResizeParams p) {
    checkPlaneGradient(p, 43, resizeForward, resizeBackward);
  };
  SECTION("bilinear gradients, pytorch_half_pixel") {
    check({3, 3, 5, 7, 8, true, 1, 0, 7.0f / 3, 8.0f / 5});
  }
  SECTION("bilinear gradients, downscaling with corners aligned") {
    check({2, 6, 5, 4, 3, true, 2, 0, 4.0f / 6, 3.0f / 5});
  }
  SECTION("nearest gradients") {
    check({2, 3, 3, 6, 7, false, 3, 2, 2.0f, 7.0f / 3});
  }
}

TEST_CASE("accumulate helper", "[kernels]") {
  std::vector<float> x{1, 2, 3}, y{10, 20, 30};
  accumulate(3, x.data(), y.data());
  CHECK(y == std::vector<float>{11, 22, 33});
}

TEST_CASE("dropout mask", "[kernels]") {
  const uint64_t seed = 1234;
  const int64_t perSample = 25000, n = 4;
  DropoutParams p{perSample, 0.3f};
  std::vector<float> x(n * perSample);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 1.0f + float(i % 7);
  auto run = [&](uint64_t key, int64_t first, int64_t count) {
    std::vector<float> y(count * perSample);
    dropoutForward(p, count, key, first, x.data() + first * perSample,
                   y.data());
    return y;
  };
  uint64_t key = dropoutKey(seed, 5, 17);
  std::vector<float> y = run(key, 0, n);

  SECTION("the same key gives the same mask, whatever the sub-batching") {
    CHECK(dropoutKey(seed, 5, 17) == key);
    CHECK(run(key, 0, n) == y);
    std::vector<float> halves = run(key, 0, 1);
    std::vector<float> rest = run(key, 1, n - 1);
    halves.insert(halves.end(), rest.begin(), rest.end());
    CHECK(halves == y);
  }
  SECTION("kept fraction and scaling") {
    int64_t kept = 0, wrongScale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i] == 0)
        continue;
      ++kept;
      wrongScale += y[i] != x[i] * (1.0f / (1.0f - 0.3f));
    }
    CHECK(wrongScale == 0);
    double fraction = double(kept) / double(y.size());
    CHECK(fraction == Approx(0.7).margin(0.01));
  }
  SECTION("another iteration, task or seed gives another mask") {
    auto agreement = [&](uint64_t other) {
      std::vector<float> z = run(other, 0, n);
      int64_t same = 0;
      for (size_t i = 0; i < y.size(); ++i)
        same += (y[i] == 0) == (z[i] == 0);
      return double(same) / double(y.size());
    };
    // Independent masks agree on 0.7^2 + 0.3^2 = 58% of the elements.
    CHECK(agreement(dropoutKey(seed, 6, 17)) == Approx(0.58).margin(0.02));
    CHECK(agreement(dropoutKey(seed, 5, 18)) == Approx(0.58).margin(0.02));
    CHECK(agreement(dropoutKey(seed + 1, 5, 17)) == Approx(0.58).margin(0.02));
  }
  SECTION("samples are independent") {
    int64_t same = 0;
    for (int64_t i = 0; i < perSample; ++i)
      same += (y[i] == 0) == (y[perSample + i] == 0);
    CHECK(double(same) / double(perSample) == Approx(0.58).margin(0.02));
  }
  SECTION("uniform values lie in [0, 1) on a 2^-24 grid") {
    for (uint64_t e = 0; e < 1000; ++e) {
      float u = dropoutUniform(key, 3, e);
      REQUIRE(u >= 0.0f);
      REQUIRE(u < 1.0f);
      REQUIRE(std::ldexp(u, 24) == std::floor(std::ldexp(u, 24)));
    }
  }
  SECTION("ratio 0 keeps everything, ratio 1 drops everything") {
    DropoutParams none{perSample, 0.0f}, all{perSample, 1.0f};
    std::vector<float> z(perSample);
    dropoutForward(none, 1, key, 0, x.data(), z.data());
    CHECK(std::equal(z.begin(), z.end(), x.begin()));
    dropoutForward(all, 1, key, 0, x.data(), z.data());
    CHECK(z == std::vector<float>(perSample, 0.0f));
  }
  SECTION("backward uses the forward's mask") {
    const int64_t small = 50;
    DropoutParams q{small, 0.5f};
    std::mt19937 rng(43);
    auto in = randomVector(rng, 2 * small);
    auto dy = randomVector(rng, 2 * small);
    checkGradient(
        in,
        [&] {
          std::vector<float> out(in.size());
          dropoutForward(q, 2, key, 3, in.data(), out.data());
          return out;
        },
        dy,
        [&](float *dx, bool acc) {
          dropoutBackward(q, 2, key, 3, dy.data(), dx, acc);
        });
  }
}

TEST_CASE("dropout formula is pinned", "[kernels]") {
  // The CUDA backend reproduces this hash bit for bit; these values guard
  // against an accidental change of the formula documented in Dropout.cpp.
  auto mix = [](uint64_t z) {
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  auto step = [&](uint64_t z) { return mix(z + 0x9e3779b97f4a7c15ULL); };
  // splitmix64 seeded with 0 starts 0xe220a8397b1dcdaf.
  CHECK(step(0) == 0xe220a8397b1dcdafULL);
  uint64_t key = dropoutKey(42, 3, 9);
  CHECK(key == step(step(step(42) + 3) + 9));
  uint64_t h = step(step(key + 5) + 77);
  CHECK(dropoutUniform(key, 5, 77) == float(h >> 40) * 0x1.0p-24f);
}

TEST_CASE("strided slice on a literal", "[kernels]") {
  // Per sample a 3 x 4 grid (x = 10 * row + col); rows 0 and 2 (step 2),
  // columns 1 and 3 (start 1, step 2): Swin's patch merging takes these.
  SliceParams p{.rank = 3,
                .xdims = {1, 3, 4},
                .ydims = {1, 2, 2},
                .starts = {0, 0, 1},
                .batchAxis = 0,
                .steps = {1, 2, 2}};
  std::vector<float> x;
  for (int s = 0; s < 2; ++s)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        x.push_back(float(100 * s + 10 * r + c));
  std::vector<float> y(8);
  sliceForward(p, 2, x.data(), y.data());
  CHECK(y == std::vector<float>{1, 3, 21, 23, 101, 103, 121, 123});

  std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8}, dx(24, 9.0f);
  sliceBackward(p, 2, dy.data(), dx.data(), false);
  std::vector<float> want(24, 0.0f);
  const int64_t at[] = {1, 3, 9, 11};
  for (int s = 0; s < 2; ++s)
    for (int k = 0; k < 4; ++k)
      want[12 * s + at[k]] = dy[4 * s + k];
  CHECK(dx == want);
  // Unset steps are 1: a plain window.
  SliceParams plain{.rank = 3,
                    .xdims = {1, 3, 4},
                    .ydims = {1, 1, 2},
                    .starts = {0, 2, 2},
                    .batchAxis = 0};
  std::vector<float> w(4);
  sliceForward(plain, 2, x.data(), w.data());
  CHECK(w == std::vector<float>{22, 23, 122, 123});
}

TEST_CASE("expand on a literal", "[kernels]") {
  // Per sample [2, 1] repeated to [2, 3] (grouped-query attention repeats
  // each key/value head this way); the backward sums the three copies.
  ExpandParams p{
      .rank = 3, .xdims = {1, 2, 1}, .ydims = {1, 2, 3}, .batchAxis = 0};
  std::vector<float> x = {1, 2, 10, 20}, y(12);
  expandForward(p, 2, x.data(), y.data());
  CHECK(y == std::vector<float>{1, 1, 1, 2, 2, 2, 10, 10, 10, 20, 20, 20});
  std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<float> dx = {100, 100, 100, 100};
  expandBackward(p, 2, dy.data(), dx.data(), true);
  CHECK(dx == std::vector<float>{106, 115, 124, 133});
  expandBackward(p, 2, dy.data(), dx.data(), false);
  CHECK(dx == std::vector<float>{6, 15, 24, 33});
}

TEST_CASE("NaN replaced by a constant, and its gradient", "[kernels]") {
  const float nan = std::nanf("");
  ActParams p{.kind = ActKind::NanTo, .alpha = -1.0f};
  std::vector<float> x = {0.5f, nan, -2.0f}, y(3);
  activationForward(p, 3, x.data(), y.data());
  CHECK(y == std::vector<float>{0.5f, -1.0f, -2.0f});
  std::vector<float> dy = {1, 2, 3}, dx(3);
  activationBackward(p, 3, x.data(), dy.data(), dx.data(), false);
  CHECK(dx == std::vector<float>{1, 0, 3});
}

TEST_CASE("drop path keeps or drops whole samples", "[kernels]") {
  // One draw per sample (element 0's): every element of a sample is kept
  // and scaled by 1 / keep, or every one is zero.
  const int64_t n = 400, perSample = 6;
  DropoutParams p{.perSample = perSample, .ratio = 0.25f, .wholeSample = true};
  std::vector<float> x(n * perSample, 2.0f), y(x.size());
  uint64_t key = dropoutKey(7, 3, 11);
  dropoutForward(p, n, key, 0, x.data(), y.data());
  int64_t kept = 0;
  for (int64_t s = 0; s < n; ++s) {
    float first = y[s * perSample];
    CHECK((first == 0.0f || first == 2.0f / 0.75f));
    for (int64_t i = 1; i < perSample; ++i)
      CHECK(y[s * perSample + i] == first);
    kept += first != 0.0f;
  }
  // 300 expected of 400; 5 standard deviations is about 43.
  CHECK(std::abs(kept - 300) < 45);
  // The backward drops the same samples.
  std::vector<float> dx(x.size());
  dropoutBackward(p, n, key, 0, x.data(), dx.data(), false);
  CHECK(dx == y);
}

TEST_CASE("a norm's square root has derivative 0 at zero", "[kernels]") {
  // ReduceL2 of a zero vector: torch.norm's subgradient, not 0 * inf. A
  // plain Sqrt keeps its infinite derivative there.
  ActParams norm{ActKind::Sqrt};
  norm.lo = 1.0f;
  float y = 0.0f, dy = 3.0f, dx = -1.0f;
  activationBackward(norm, 1, &y, &dy, &dx, false);
  CHECK(dx == 0.0f);
  ActParams plain{ActKind::Sqrt};
  activationBackward(plain, 1, &y, &dy, &dx, false);
  CHECK(std::isinf(dx));
  float y4 = 2.0f;
  activationBackward(norm, 1, &y4, &dy, &dx, false);
  CHECK(dx == 0.75f);
}
