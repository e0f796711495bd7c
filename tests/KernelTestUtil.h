//===- KernelTestUtil.h - Gradient checks for the reference kernels -*- C++
//-*-//
//
// checkGradient compares a backward kernel with central differences of the
// scalar f(in) = sum(dy * forward(in)) evaluated in double, and checks the
// kernel's accumulate convention on the way: with accumulate=false it must
// overwrite NaN-poisoned contents, with accumulate=true add to them.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_KERNELTESTUTIL_H
#define MEMFIT_TESTS_KERNELTESTUTIL_H

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace memfit::test {

inline std::vector<float> randomVector(std::mt19937 &rng, int64_t count,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Values spread at least `gap` apart in random order, so that a small
/// perturbation never changes which element of a window is the largest.
inline std::vector<float> distinctVector(std::mt19937 &rng, int64_t count,
                                         float gap = 0.1f) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i)
    v[i] = (float(i) - float(count) / 2) * gap;
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

struct GradOptions {
  /// Finite-difference step. Functions linear in the input are checked with a
  /// large step (the difference quotient is then exact up to rounding).
  double step = 0.5;
  double rtol = 1e-3, atol = 1e-4;
};

using Forward = std::function<std::vector<float>()>;
using Backward = std::function<void(float *out, bool accumulate)>;

/// `in` is what `forward` reads; it is perturbed in place and restored.
/// `backward(out, accumulate)` writes (or adds) df/din into out.
inline void checkGradient(std::vector<float> &in, const Forward &forward,
                          const std::vector<float> &dy,
                          const Backward &backward, GradOptions opt = {}) {
  const int64_t count = int64_t(in.size());
  std::vector<float> grad(count, std::numeric_limits<float>::quiet_NaN());
  backward(grad.data(), false);

  // accumulate=true adds to what is there.
  std::mt19937 rng(7);
  std::vector<float> base = randomVector(rng, count, -3, 3);
  std::vector<float> summed = base;
  backward(summed.data(), true);
  int64_t accumulateErrors = 0;
  for (int64_t i = 0; i < count; ++i) {
    double want = double(base[i]) + grad[i];
    if (!(std::abs(summed[i] - want) <=
          1e-5 * (std::abs(base[i]) + std::abs(grad[i])) + 1e-6))
      ++accumulateErrors;
  }
  CHECK(accumulateErrors == 0);

  auto objective = [&] {
    std::vector<float> y = forward();
    REQUIRE(y.size() == dy.size());
    double f = 0;
    for (size_t j = 0; j < y.size(); ++j)
      f += double(dy[j]) * double(y[j]);
    return f;
  };
  int64_t mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    float saved = in[i];
    float plus = float(saved + opt.step), minus = float(saved - opt.step);
    in[i] = plus;
    double fPlus = objective();
    in[i] = minus;
    double fMinus = objective();
    in[i] = saved;
    double numeric = (fPlus - fMinus) / (double(plus) - double(minus));
    double analytic = grad[i];
    double tol =
        opt.atol + opt.rtol * std::max(std::abs(numeric), std::abs(analytic));
    if (!(std::abs(numeric - analytic) <= tol)) {
      if (mismatches == 0) {
        INFO("first mismatch at element " << i << ": analytic " << analytic
                                          << ", numeric " << numeric);
        CHECK(false);
      }
      ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

} // namespace memfit::test

#endif
