//===- KernelsTest.cpp - conv, pooling and normalization kernels ----------===//
//
// Gradient checks of every backward kernel against finite differences of
// its forward (which also check the accumulate flag), and small literal
// cases for the semantics finite differences cannot see: tie-breaking,
// padding, divisors, running statistics.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit::rt;
using memfit::test::checkGradient;
using memfit::test::distinctVector;
using memfit::test::GradOptions;
using memfit::test::randomVector;

namespace {

/// PyTorch's output size, ceil mode included (the last window must start
/// inside the input or its begin padding).
int64_t outSize(int64_t in, int64_t padBegin, int64_t padEnd, int64_t k,
                int64_t stride, int64_t dilation, bool ceil) {
  int64_t span = in + padBegin + padEnd - dilation * (k - 1) - 1;
  int64_t out = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

struct ConvCase {
  int64_t n, cin, hin, win, cout, kh, kw, sh, sw;
  int64_t pt, pl, pb, pr, dh, dw, group;
  bool bias;
};

void checkConv(const ConvCase &c) {
  ConvParams p{c.cin, c.hin, c.win, c.cout, 0,    0,    c.kh,   c.kw,
               c.sh,  c.sw,  c.pt,  c.pl,   c.dh, c.dw, c.group};
  p.hout = outSize(c.hin, c.pt, c.pb, c.kh, c.sh, c.dh, false);
  p.wout = outSize(c.win, c.pl, c.pr, c.kw, c.sw, c.dw, false);
  std::mt19937 rng(11);
  auto x = randomVector(rng, c.n * c.cin * c.hin * c.win);
  auto w = randomVector(rng, c.cout * (c.cin / c.group) * c.kh * c.kw);
  auto b = randomVector(rng, c.cout);
  auto dy = randomVector(rng, c.n * c.cout * p.hout * p.wout);
  const float *bias = c.bias ? b.data() : nullptr;
  auto forward = [&] {
    std::vector<float> y(dy.size());
    convForward(p, c.n, x.data(), w.data(), bias, y.data());
    return y;
  };
  SECTION("data") {
    checkGradient(x, forward, dy, [&](float *dx, bool acc) {
      convBackwardData(p, c.n, w.data(), dy.data(), dx, acc);
    });
  }
  SECTION("filter") {
    checkGradient(w, forward, dy, [&](float *dw, bool acc) {
      std::vector<float> db(c.cout);
      convBackwardFilter(p, c.n, x.data(), dy.data(), dw,
                         c.bias ? db.data() : nullptr, acc);
    });
  }
  if (c.bias) {
    SECTION("bias") {
      checkGradient(b, forward, dy, [&](float *db, bool acc) {
        std::vector<float> dw(w.size());
        convBackwardFilter(p, c.n, x.data(), dy.data(), dw.data(), db, acc);
      });
    }
  }
}

} // namespace

TEST_CASE("conv gradients", "[kernels]") {
  // n cin hin win cout kh kw sh sw pt pl pb pr dh dw group bias
  SECTION("3x3 same padding") {
    checkConv({2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});
  }
  SECTION("strided, odd sizes, asymmetric pads, 3x2 kernel") {
    checkConv({2, 2, 9, 7, 3, 3, 2, 2, 3, 1, 0, 2, 1, 1, 1, 1, true});
  }
  SECTION("dilated") {
    checkConv({2, 2, 8, 8, 3, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, false});
  }
  SECTION("two groups, strided") {
    checkConv({3, 4, 7, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true});
  }
  SECTION("depthwise") {
    checkConv({2, 4, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, true});
  }
  SECTION("pointwise") {
    checkConv({2, 5, 4, 5, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true});
  }
  SECTION("1x1 stride 2") {
    checkConv({2, 3, 5, 5, 2, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, false});
  }
}

TEST_CASE("conv forward on a literal", "[kernels]") {
  // One 3x3 channel 1..9, 2x2 kernel [1 0; 0 -1], stride 1, pad 1 begin
  // only: output 3x3, y[i][j] = x[i-1][j-1] - x[i][j] (0 outside).
  ConvParams p{1, 3, 3, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1};
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 0, 0, -1}, y(9);
  float bias = 10;
  convForward(p, 1, x.data(), w.data(), &bias, y.data());
  std::vector<float> want{10 - 1,     10 - 2, 10 - 3,     10 - 4,    10 + 1 - 5,
                          10 + 2 - 6, 10 - 7, 10 + 4 - 8, 10 + 5 - 9};
  CHECK(y == want);
}

namespace {
struct PoolCase {
  PoolKind kind;
  int64_t n, c, hin, win, kh, kw, sh, sw, pt, pl, pb, pr;
  bool ceil, includePad;
};

PoolParams poolParams(const PoolCase &c) {
  PoolParams p{c.kind, c.c,  c.hin, c.win, 0,    0,    c.kh,        c.kw,
               c.sh,   c.sw, c.pt,  c.pl,  c.pb, c.pr, c.includePad};
  p.hout = outSize(c.hin, c.pt, c.pb, c.kh, c.sh, 1, c.ceil);
  p.wout = outSize(c.win, c.pl, c.pr, c.kw, c.sw, 1, c.ceil);
  return p;
}

void checkPool(const PoolCase &c) {
  PoolParams p = poolParams(c);
  std::mt19937 rng(5);
  // Max pooling is piecewise linear: distinct values keep every window's
  // maximum in place under the perturbation.
  auto x = distinctVector(rng, c.n * c.c * c.hin * c.win);
  auto dy = randomVector(rng, c.n * c.c * p.hout * p.wout);
  auto forward = [&] {
    std::vector<float> y(dy.size());
    poolForward(p, c.n, x.data(), y.data());
    return y;
  };
  std::vector<float> y = forward();
  GradOptions opt;
  opt.step = 0.01;
  checkGradient(
      x, forward, dy,
      [&](float *dx, bool acc) {
        poolBackward(p, c.n, x.data(), y.data(), dy.data(), dx, acc);
      },
      opt);
}
} // namespace

TEST_CASE("pooling gradients", "[kernels]") {
  using K = PoolKind;
  // kind n c hin win kh kw sh sw pt pl pb pr ceil includePad
  SECTION("max 3x3/2 pad 1 ceil") {
    checkPool({K::Max, 2, 2, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, true, false});
  }
  SECTION("max 2x2/2 ceil, odd input") {
    checkPool({K::Max, 2, 2, 5, 5, 2, 2, 2, 2, 0, 0, 0, 0, true, false});
  }
  SECTION("max 3x2/1 asymmetric pads") {
    checkPool({K::Max, 1, 3, 5, 4, 3, 2, 1, 1, 1, 0, 0, 1, false, false});
  }
  SECTION("avg 3x3/2 pad 1 ceil, including pad") {
    checkPool({K::Average, 2, 2, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, true, true});
  }
  SECTION("avg 3x3/2 pad 1 ceil, excluding pad") {
    checkPool({K::Average, 2, 2, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, true, false});
  }
  SECTION("avg 2x3/1 asymmetric pads, including pad") {
    checkPool({K::Average, 2, 2, 5, 4, 2, 3, 1, 1, 1, 0, 0, 1, false, true});
  }
  SECTION("avg 2x3/1 asymmetric pads, excluding pad") {
    checkPool({K::Average, 2, 2, 5, 4, 2, 3, 1, 1, 1, 0, 0, 1, false, false});
  }
  SECTION("avg 3x3/3 floor mode") {
    checkPool({K::Average, 2, 1, 8, 7, 3, 3, 3, 3, 0, 0, 0, 0, false, false});
  }
}

TEST_CASE("max pooling ties and padding", "[kernels]") {
  SECTION("the first maximum in row-major window order takes the gradient") {
    // 3x3 window over [5 1 5; 2 5 0; 5 3 4]: four maxima, the first wins.
    PoolParams p{PoolKind::Max, 1, 3, 3, 1, 1, 3, 3, 1, 1, 0, 0, 0, 0, false};
    std::vector<float> x{5, 1, 5, 2, 5, 0, 5, 3, 4}, y(1), dx(9, 7.0f);
    poolForward(p, 1, x.data(), y.data());
    CHECK(y[0] == 5);
    float dy = 2;
    poolBackward(p, 1, x.data(), y.data(), &dy, dx.data(), false);
    CHECK(dx == std::vector<float>{2, 0, 0, 0, 0, 0, 0, 0, 0});
  }
  SECTION("padding never wins over negative inputs") {
    // 2x2 input of negatives, 2x2 windows, stride 2, pad 1 on every side:
    // each window holds one real value.
    PoolParams p{PoolKind::Max, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, false};
    std::vector<float> x{-4, -3, -2, -1}, y(4);
    poolForward(p, 1, x.data(), y.data());
    CHECK(y == x);
  }
}

TEST_CASE("average pooling divisors", "[kernels]") {
  // All-ones 6x6, 3x3 windows, stride 2, pad 1, ceil mode: 4x4 outputs, the
  // last row and column of windows reach one position past the end pad.
  PoolParams p{PoolKind::Average, 1, 6, 6, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, true};
  std::vector<float> x(36, 1.0f), y(16);
  poolForward(p, 1, x.data(), y.data());
  // Corner (0,0): 2x2 real of a 3x3 window; (0,1): 2x3 of 3x3; (3,3): the
  // window is clipped to the end pad, 1x1 real of 2x2; (1,1): all real.
  CHECK(y[0] == Approx(4.0 / 9));
  CHECK(y[1] == Approx(6.0 / 9));
  CHECK(y[15] == Approx(1.0 / 4));
  CHECK(y[5] == Approx(1.0));
  p.countIncludePad = false;
  poolForward(p, 1, x.data(), y.data());
  CHECK(y == std::vector<float>(16, 1.0f));
}

TEST_CASE("global average pooling", "[kernels]") {
  std::vector<float> x{1, 2, 3, 4, 10, 20, 30, 40}, y(2);
  globalAvgPoolForward(1, 2, 4, x.data(), y.data());
  CHECK(y == std::vector<float>{2.5f, 25.0f});
  std::mt19937 rng(3);
  auto in = randomVector(rng, 2 * 3 * 5);
  auto dy = randomVector(rng, 2 * 3);
  checkGradient(
      in,
      [&] {
        std::vector<float> out(6);
        globalAvgPoolForward(2, 3, 5, in.data(), out.data());
        return out;
      },
      dy,
      [&](float *dx, bool acc) {
        globalAvgPoolBackward(2, 3, 5, dy.data(), dx, acc);
      });
}

TEST_CASE("batch norm gradients", "[kernels]") {
  const int64_t n = 3, c = 2, spatial = 5;
  BatchNormParams p{c, spatial, 1e-5f, 0.9f};
  std::mt19937 rng(17);
  auto x = randomVector(rng, n * c * spatial, -2, 2);
  auto scale = randomVector(rng, c, 0.5, 1.5);
  auto bias = randomVector(rng, c);
  auto dy = randomVector(rng, n * c * spatial);
  std::vector<float> mean(c), invStd(c), runMean(c, 0), runVar(c, 1);
  auto forward = [&] {
    std::vector<float> y(dy.size()), m(c), is(c);
    batchNormForward(p, n, x.data(), scale.data(), bias.data(), runMean.data(),
                     runVar.data(), y.data(), m.data(), is.data(), false);
    return y;
  };
  std::vector<float> y(dy.size());
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), runMean.data(),
                   runVar.data(), y.data(), mean.data(), invStd.data(), false);
  SECTION("data") {
    GradOptions opt;
    opt.step = 3e-3;
    opt.rtol = 1e-2;
    opt.atol = 2e-3;
    checkGradient(
        x, forward, dy,
        [&](float *dx, bool acc) {
          batchNormBackwardData(p, n, x.data(), scale.data(), mean.data(),
                                invStd.data(), dy.data(), dx, acc);
        },
        opt);
  }
  SECTION("scale") {
    checkGradient(scale, forward, dy, [&](float *ds, bool acc) {
      std::vector<float> db(c);
      batchNormBackwardWeight(p, n, x.data(), mean.data(), invStd.data(),
                              dy.data(), ds, db.data(), acc);
    });
  }
  SECTION("bias") {
    checkGradient(bias, forward, dy, [&](float *db, bool acc) {
      std::vector<float> ds(c);
      batchNormBackwardWeight(p, n, x.data(), mean.data(), invStd.data(),
                              dy.data(), ds.data(), db, acc);
    });
  }
}

TEST_CASE("batch norm statistics", "[kernels]") {
  // One channel holding 1, 2 | 3, 6 over two samples: mean 3, biased
  // variance 3.5, unbiased 14/3.
  BatchNormParams p{1, 2, 0.0f, 0.9f};
  std::vector<float> x{1, 2, 3, 6}, y(4);
  float scale = 2, bias = 1, runMean = 0.5f, runVar = 2, mean, invStd;
  batchNormForward(p, 2, x.data(), &scale, &bias, &runMean, &runVar, y.data(),
                   &mean, &invStd, true);
  CHECK(mean == Approx(3));
  CHECK(invStd == Approx(1 / std::sqrt(3.5)));
  CHECK(y[3] == Approx(2 * 3 / std::sqrt(3.5) + 1));
  CHECK(runMean == Approx(0.5 * 0.9 + 3 * 0.1));
  CHECK(runVar == Approx(2 * 0.9 + 14.0 / 3 * 0.1));
  // A recomputation leaves the running statistics alone.
  batchNormForward(p, 2, x.data(), &scale, &bias, &runMean, &runVar, y.data(),
                   &mean, &invStd, false);
  CHECK(runMean == Approx(0.5 * 0.9 + 3 * 0.1));
  CHECK(runVar == Approx(2 * 0.9 + 14.0 / 3 * 0.1));
}

TEST_CASE("lrn channel window", "[kernels]") {
  // size 2, alpha/size = 1, beta 1, bias 1: channel c sums squares of c and
  // c+1 (ONNX: c - floor(1/2) .. c + ceil(1/2)).
  LRNParams p{4, 1, 2, 2.0f, 1.0f, 1.0f};
  std::vector<float> x{1, 2, 3, 4}, y(4);
  lrnForward(p, 1, x.data(), y.data());
  CHECK(y[0] == Approx(1.0 / (1 + 1 + 4)));
  CHECK(y[1] == Approx(2.0 / (1 + 4 + 9)));
  CHECK(y[3] == Approx(4.0 / (1 + 16)));
}

TEST_CASE("lrn gradients", "[kernels]") {
  auto check = [](int64_t c, int64_t size, float beta) {
    const int64_t n = 2, spatial = 6;
    LRNParams p{c, spatial, size, 2.0f, beta, 1.5f};
    std::mt19937 rng(23);
    auto x = randomVector(rng, n * c * spatial);
    auto dy = randomVector(rng, n * c * spatial);
    auto forward = [&] {
      std::vector<float> y(dy.size());
      lrnForward(p, n, x.data(), y.data());
      return y;
    };
    std::vector<float> y = forward();
    GradOptions opt;
    opt.step = 3e-3;
    opt.rtol = 1e-2;
    opt.atol = 1e-3;
    checkGradient(
        x, forward, dy,
        [&](float *dx, bool acc) {
          lrnBackward(p, n, x.data(), y.data(), dy.data(), dx, acc);
        },
        opt);
  };
  SECTION("size 5") { check(7, 5, 0.75f); }
  SECTION("even size") { check(6, 4, 0.75f); }
  SECTION("window wider than the channels") { check(2, 3, 0.5f); }
}
