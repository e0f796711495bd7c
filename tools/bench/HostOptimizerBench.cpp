//===- HostOptimizerBench.cpp - Time the host optimizer -------------------===//
//
// memfit_host_optimizer_bench PARAMS THREADS REPEATS
//
// Updates one tensor of PARAMS fp32 parameters with Adam (AdamW) and with
// SGD with momentum on THREADS threads (runtime/host/HostOptimizer.h),
// REPEATS times each after one warm-up step, and prints one JSON line per
// optimizer: the median and the fastest seconds per step, and at each the
// parameters/s and the bytes of host memory a step moves per second (28 B
// a parameter for Adam, 20 B for SGD with momentum: DeviceSpec.h's
// kHost*BytesPerParameter). On a shared machine the median is what other
// work left over and the fastest is the closest to the machine's own rate.
// tools/bench/host_optimizer.py runs it and writes the table.
//
//===----------------------------------------------------------------------===//
#include "runtime/host/HostOptimizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace memfit::rt;

namespace {

struct Timing {
  double median, best;
};

template <class Step> Timing timeSteps(int repeats, Step step) {
  step(); // warm-up: first touch of the pages, the threads' start
  std::vector<double> secs;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    secs.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  std::sort(secs.begin(), secs.end());
  return {secs[secs.size() / 2], secs.front()};
}

void report(const char *name, int64_t params, int threads, Timing t,
            double bytesPerParam) {
  const double n = double(params);
  std::printf("{\"optimizer\": \"%s\", \"params\": %lld, \"threads\": %d, "
              "\"median_s\": %.6f, \"best_s\": %.6f, "
              "\"median_params_per_s\": %.4e, \"best_params_per_s\": %.4e, "
              "\"median_gbps\": %.3f, \"best_gbps\": %.3f}\n",
              name, static_cast<long long>(params), threads, t.median, t.best,
              n / t.median, n / t.best, n * bytesPerParam / t.median / 1e9,
              n * bytesPerParam / t.best / 1e9);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PARAMS THREADS REPEATS\n", argv[0]);
    return 2;
  }
  const int64_t n = std::atoll(argv[1]);
  const int threads = std::atoi(argv[2]), repeats = std::atoi(argv[3]);
  if (n <= 0 || threads <= 0 || repeats <= 0) {
    std::fprintf(stderr, "PARAMS, THREADS and REPEATS must be positive\n");
    return 2;
  }
  std::vector<float> w(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    w[i] = float(i % 1000) * 1e-3f - 0.5f;
    g[i] = float(i % 777) * 1e-4f - 0.03f;
  }
  host::HostOptimizer opt(threads);
  AdamParams adam{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, true};
  Timing adamSecs = timeSteps(repeats, [&] {
    opt.wait(opt.submitAdam(adam, n, w.data(), g.data(), m.data(), v.data()));
    ++adam.step;
  });
  report("adamw", n, threads, adamSecs, 28);
  host::SgdParams sgd{1e-2f, 0.9f, 1e-4f, false};
  Timing sgdSecs = timeSteps(repeats, [&] {
    opt.wait(opt.submitSgd(sgd, n, w.data(), g.data(), m.data()));
  });
  report("sgd-momentum", n, threads, sgdSecs, 20);
  return 0;
}
