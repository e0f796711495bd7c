//===- KernelsDenseTest.cpp - gemm, softmax, losses and SGD ---------------===//
#include "runtime/Kernels.h"
#include "runtime/kernels/Softmax.h"
#include "tests/KernelTestUtil.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace memfit::rt;
using memfit::test::checkGradient;
using memfit::test::GradOptions;
using memfit::test::randomVector;

namespace {
void checkGemm(GemmParams p, bool withBias) {
  const int64_t n = 3;
  std::mt19937 rng(47);
  auto x = randomVector(rng, n * p.k);
  auto w = randomVector(rng, p.k * p.m);
  auto b = randomVector(rng, p.m);
  auto dy = randomVector(rng, n * p.m);
  const float *bias = withBias ? b.data() : nullptr;
  auto forward = [&] {
    std::vector<float> y(dy.size());
    gemmForward(p, n, x.data(), w.data(), bias, y.data());
    return y;
  };
  SECTION("data") {
    checkGradient(x, forward, dy, [&](float *dx, bool acc) {
      gemmBackwardData(p, n, w.data(), dy.data(), dx, acc);
    });
  }
  SECTION("weight") {
    checkGradient(w, forward, dy, [&](float *dw, bool acc) {
      std::vector<float> db(p.m);
      gemmBackwardWeight(p, n, x.data(), dy.data(), dw,
                         withBias ? db.data() : nullptr, acc);
    });
  }
  if (withBias) {
    SECTION("bias") {
      checkGradient(b, forward, dy, [&](float *db, bool acc) {
        std::vector<float> dw(w.size());
        gemmBackwardWeight(p, n, x.data(), dy.data(), dw.data(), db, acc);
      });
    }
  }
}
} // namespace

TEST_CASE("gemm gradients", "[kernels]") {
  SECTION("linear (transB)") { checkGemm({5, 4, true, 1.0f, 1.0f}, true); }
  SECTION("matmul") { checkGemm({4, 6, false, 1.0f, 1.0f}, false); }
  SECTION("alpha and beta") { checkGemm({3, 5, true, 1.5f, 0.5f}, true); }
  SECTION("alpha and beta, W[k, m]") {
    checkGemm({3, 5, false, -0.5f, 2.0f}, true);
  }
}

TEST_CASE("gemm on a literal", "[kernels]") {
  // x [1, 2] * W^T with W = [[1, 2], [3, 4], [5, 6]] (Linear 2 -> 3).
  GemmParams p{2, 3, true, 2.0f, 0.5f};
  std::vector<float> x{1, 2}, w{1, 2, 3, 4, 5, 6}, b{2, 4, 6}, y(3);
  gemmForward(p, 1, x.data(), w.data(), b.data(), y.data());
  CHECK(y == std::vector<float>{2 * 5 + 1, 2 * 11 + 2, 2 * 17 + 3});
}

TEST_CASE("softmax gradients", "[kernels]") {
  for (bool log : {false, true}) {
    DYNAMIC_SECTION((log ? "log-softmax" : "softmax")) {
      const int64_t n = 3, f = 7;
      std::mt19937 rng(53);
      auto x = randomVector(rng, n * f, -3, 3);
      auto dy = randomVector(rng, n * f);
      auto forward = [&] {
        std::vector<float> y(dy.size());
        softmaxForward(n, f, log, x.data(), y.data());
        return y;
      };
      std::vector<float> y = forward();
      double rowSum = 0;
      for (int64_t j = 0; j < f; ++j)
        rowSum += log ? std::exp(double(y[j])) : y[j];
      CHECK(rowSum == Approx(1.0));
      GradOptions opt;
      opt.step = 1e-3;
      opt.rtol = 1e-2;
      opt.atol = 1e-3;
      checkGradient(
          x, forward, dy,
          [&](float *dx, bool acc) {
            softmaxBackward(n, f, log, y.data(), dy.data(), dx, acc);
          },
          opt);
    }
  }
}

TEST_CASE("softmax cross-entropy", "[kernels]") {
  const int64_t n = 4, classes = 5;
  std::mt19937 rng(59);
  auto logits = randomVector(rng, n * classes, -2, 2);
  std::vector<int32_t> labels{3, 0, 4, 3};
  REQUIRE(validateLabels(n, classes, labels.data(), -100));
  auto lossOf = [&](int64_t first, int64_t count) {
    std::vector<float> d(count * classes);
    float loss = 0;
    softmaxCrossEntropy({1, classes, 1}, count, double(n),
                        logits.data() + first * classes, labels.data() + first,
                        -100, &loss, d.data());
    return std::make_pair(loss, d);
  };
  auto [loss, dlogits] = lossOf(0, n);

  SECTION("value") {
    double want = 0;
    for (int64_t s = 0; s < n; ++s) {
      double sum = 0;
      for (int64_t j = 0; j < classes; ++j)
        sum += std::exp(double(logits[s * classes + j]));
      want += std::log(sum) - logits[s * classes + labels[s]];
    }
    CHECK(loss == Approx(want / n));
  }
  SECTION("gradient") {
    GradOptions opt;
    opt.step = 1e-2;
    opt.rtol = 1e-2;
    opt.atol = 1e-4;
    std::vector<float> one{1.0f};
    checkGradient(
        logits, [&] { return std::vector<float>{lossOf(0, n).first}; }, one,
        [&](float *d, bool acc) {
          for (size_t i = 0; i < dlogits.size(); ++i)
            d[i] = acc ? d[i] + dlogits[i] : dlogits[i];
        },
        opt);
  }
  SECTION("sub-batches add up to the batch") {
    float total = 0.25f;
    std::vector<float> d(n * classes);
    softmaxCrossEntropy({1, classes, 1}, 1, double(n), logits.data(),
                        labels.data(), -100, &total, d.data());
    softmaxCrossEntropy({1, classes, 1}, n - 1, double(n),
                        logits.data() + classes, labels.data() + 1, -100,
                        &total, d.data() + classes);
    CHECK(total == Approx(0.25 + loss));
    CHECK(d == dlogits);
  }
  SECTION("labels out of range") {
    std::vector<int32_t> bad{0, 5};
    CHECK_FALSE(validateLabels(2, classes, bad.data(), -100));
    bad = {-1, 0};
    CHECK_FALSE(validateLabels(2, classes, bad.data(), -100));
    bad = {-100, 0};
    CHECK(validateLabels(2, classes, bad.data(), -100));
    CHECK_FALSE(validateLabels(2, classes, bad.data(), -1));
  }
  SECTION("ignored labels add nothing; the mean runs over the others") {
    // torch.nn.functional.cross_entropy(ignore_index=-100): the positions
    // labelled -100 have no loss and a zero gradient, and the mean divides
    // by the 2 positions that count, not the 4 of the batch.
    std::vector<int32_t> some{3, -100, 4, -100};
    REQUIRE(kernels::countedLabels(n, some.data(), -100) == 2);
    std::vector<float> d(n * classes, NAN);
    float got = 0;
    softmaxCrossEntropy({1, classes, 1}, n, 2.0, logits.data(), some.data(),
                        -100, &got, d.data());
    double want = 0;
    for (int64_t s : {0, 2}) {
      double sum = 0;
      for (int64_t j = 0; j < classes; ++j)
        sum += std::exp(double(logits[s * classes + j]));
      want += std::log(sum) - logits[s * classes + some[s]];
    }
    CHECK(got == Approx(want / 2));
    for (int64_t j = 0; j < classes; ++j) {
      CHECK(d[1 * classes + j] == 0.0f);
      CHECK(d[3 * classes + j] == 0.0f);
      // Sample 0 counts: twice its share of the 4-position mean.
      CHECK(d[j] == Approx(2.0 * dlogits[j]));
    }
    // Nothing counted: nothing added, no gradient.
    std::vector<int32_t> none(n, -100);
    float zero = 0;
    softmaxCrossEntropy({1, classes, 1}, n, 0.0, logits.data(), none.data(),
                        -100, &zero, d.data());
    CHECK(zero == 0.0f);
    CHECK(std::all_of(d.begin(), d.end(), [](float v) { return v == 0; }));
  }
}

TEST_CASE("mean squared error", "[kernels]") {
  const int64_t n = 2, features = 3;
  std::vector<float> y{1, 2, 3, 4, 5, 6}, target{1, 0, 3, 5, 5, 3}, dy(6);
  float loss = 1.0f;
  meanSquaredError(n, features, n, y.data(), target.data(), &loss, dy.data());
  // Squared errors 0 4 0 1 0 9 over 6 elements, added to 1.
  CHECK(loss == Approx(1 + 14.0 / 6));
  CHECK(dy[1] == Approx(2.0 * 2 / 6));
  CHECK(dy[3] == Approx(2.0 * -1 / 6));
  CHECK(dy[0] == 0);
  // Half the batch: its share of the loss, the same gradient entries.
  float half = 0;
  std::vector<float> dyHalf(3);
  meanSquaredError(1, features, n, y.data() + 3, target.data() + 3, &half,
                   dyHalf.data());
  CHECK(half == Approx(10.0 / 6));
  CHECK(dyHalf[2] == dy[5]);
}

TEST_CASE("sgd", "[kernels]") {
  std::vector<float> w0{1.0f, -2.0f, 0.5f}, dw{0.1f, 0.2f, -0.3f};
  const float lr = 0.1f, wd = 0.01f;
  SECTION("the first momentum step is plain SGD with weight decay") {
    std::vector<float> plain = w0, withMomentum = w0, buf(3, NAN);
    sgdUpdate(3, lr, 0.0f, wd, true, plain.data(), dw.data(), nullptr);
    sgdUpdate(3, lr, 0.9f, wd, true, withMomentum.data(), dw.data(),
              buf.data());
    CHECK(plain == withMomentum);
    CHECK(plain[0] == Approx(1.0 - 0.1 * (0.1 + 0.01 * 1.0)));
    CHECK(buf[1] == Approx(0.2 + 0.01 * -2.0));
  }
  SECTION("later steps follow the buffer") {
    std::vector<float> w = w0, buf(3);
    sgdUpdate(3, lr, 0.9f, 0.0f, true, w.data(), dw.data(), buf.data());
    sgdUpdate(3, lr, 0.9f, 0.0f, false, w.data(), dw.data(), buf.data());
    // buf = 0.9 * g + g, w = w0 - lr * g - lr * 1.9 g.
    CHECK(buf[2] == Approx(1.9 * -0.3));
    CHECK(w[2] == Approx(0.5 - 0.1 * 2.9 * -0.3));
  }
}

TEST_CASE("evaluation sums: cross-entropy, torch.argmax's ties, squared error",
          "[kernels]") {
  // Two samples of 3 classes on axis 1 with 2 inner positions each:
  // logits [s][class][inner].
  const float logits[] = {1, 0,  //
                          3, 0,  //
                          3, 0,  // sample 0: (3, 3 tie at 1, 2), (0, 0, 0)
                          0, 5,  //
                          2, 1,  //
                          1, 1}; // sample 1: argmax 1, then 0
  const int32_t labels[] = {2, 0, 1, 0};
  double loss = 0, correct = 0, counted = 0;
  crossEntropySums({1, 3, 2}, 2, logits, labels, -100, loss, correct, counted);
  CHECK(counted == 4);
  // Position (0, 0): the tie goes to class 1, not the label 2. Position
  // (0, 1): all equal, class 0 as the label. (1, 0): class 1 right.
  // (1, 1): class 0 right.
  CHECK(correct == 3);
  auto ce = [](double a, double b, double c, double label) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c)) - label;
  };
  double want =
      ce(1, 3, 3, 3) + ce(0, 0, 0, 0) + ce(0, 2, 1, 2) + ce(5, 1, 1, 5);
  CHECK(loss == Approx(want).epsilon(1e-12));
  // The first sample alone adds its positions only.
  double one = 0, right = 0, two = 0;
  crossEntropySums({1, 3, 2}, 1, logits, labels, -100, one, right, two);
  CHECK(right == 1);
  CHECK(two == 2);
  CHECK(one == Approx(ce(1, 3, 3, 3) + ce(0, 0, 0, 0)).epsilon(1e-12));
  // Position (1, 0) ignored: neither its loss nor its right answer counts.
  const int32_t ignoring[] = {2, 0, -100, 0};
  double l3 = 0, c3 = 0, n3 = 0;
  crossEntropySums({1, 3, 2}, 2, logits, ignoring, -100, l3, c3, n3);
  CHECK(n3 == 3);
  CHECK(c3 == 2);
  CHECK(l3 == Approx(want - ce(0, 2, 1, 2)).epsilon(1e-12));
  const float y[] = {1, 2, 3}, t[] = {1, 0, 5};
  CHECK(sumSquaredError(3, y, t) == 8.0);
}

TEST_CASE("batched products with an operand shared by every sample",
          "[kernels]") {
  // 3 samples of 2 products [4 x 5] * [5 x 3]: B one per product but the
  // same for every sample (Funnel's einsum of the queries with a weight),
  // then A the shared one. Finite differences check the gradients, so the
  // shared operand's must sum over the samples.
  const int64_t n = 3;
  std::mt19937 rng(5);
  for (bool shareA : {false, true}) {
    INFO("shared operand " << (shareA ? "a" : "b"));
    BatchMatMulParams p{.batch = 2,
                        .m = 4,
                        .k = 5,
                        .cols = 3,
                        .aBatch = 2,
                        .bBatch = 2,
                        .aShared = shareA,
                        .bShared = !shareA};
    auto a = randomVector(rng, (shareA ? 1 : n) * 2 * 4 * 5);
    auto b = randomVector(rng, (shareA ? n : 1) * 2 * 5 * 3);
    auto dy = randomVector(rng, n * 2 * 4 * 3);
    auto forward = [&] {
      std::vector<float> y(dy.size());
      batchMatMulForward(p, n, a.data(), b.data(), y.data());
      return y;
    };
    // Sample 2's second product against a literal sum.
    std::vector<float> y = forward();
    const float *as = a.data() + (shareA ? 0 : 2 * 2 * 20) + 20;
    const float *bs = b.data() + (shareA ? 2 * 2 * 15 : 0) + 15;
    double want = 0;
    for (int j = 0; j < 5; ++j)
      want += double(as[3 * 5 + j]) * bs[j * 3 + 2];
    CHECK(y[((2 * 2 + 1) * 4 + 3) * 3 + 2] == Approx(want).epsilon(1e-5));
    checkGradient(a, forward, dy, [&](float *da, bool acc) {
      batchMatMulBackward(p, n, a.data(), b.data(), dy.data(), da, nullptr, acc,
                          false);
    });
    checkGradient(b, forward, dy, [&](float *db, bool acc) {
      batchMatMulBackward(p, n, a.data(), b.data(), dy.data(), nullptr, db,
                          false, acc);
    });
  }
}
