//===- HostOptimizerTest.cpp - The host optimizer and its thread pool -----===//
//
// The host optimizer (runtime/host/HostOptimizer.h) against the
// emulation's element loops over kernels::adamAt / sgdAt: bit for bit, on
// any number of threads and chunk sizes, odd sizes included. Its match
// with torch.optim over three steps is KernelReferenceTest's.
//
//===----------------------------------------------------------------------===//
#include "runtime/host/HostOptimizer.h"
#include "runtime/kernels/Elementwise.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

using namespace memfit::rt;
using memfit::rt::host::HostOptimizer;
using memfit::rt::host::SgdParams;
using memfit::rt::host::ThreadPool;

namespace {

using Vec = std::vector<float>;

Vec randomVec(int64_t n, std::mt19937 &rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

bool sameBits(const Vec &a, const Vec &b) {
  // memcmp may not be given the null data of an empty vector.
  return a.size() == b.size() &&
         (a.empty() ||
          std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct AdamState {
  Vec w, g, m, v;
};

AdamState adamState(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  // Moments of earlier steps, v non-negative as Adam keeps it.
  AdamState s{randomVec(n, rng, 1), randomVec(n, rng, 0.1f),
              randomVec(n, rng, 0.01f), randomVec(n, rng, 0.01f)};
  for (float &x : s.v)
    x *= x;
  return s;
}

} // namespace

TEST_CASE("host Adam/AdamW is bit-identical to the emulation's element loop",
          "[host]") {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(100003)})
    for (int threads : {1, 2, 5})
      for (int64_t chunk : {int64_t(1) << 16, int64_t(97)})
        for (bool decoupled : {false, true}) {
          INFO("n " << n << ", threads " << threads << ", chunk " << chunk
                    << ", decoupled " << decoupled);
          AdamState ref = adamState(n, 17 + uint32_t(n)), got = ref;
          const Vec w0 = ref.w;
          HostOptimizer opt(threads, chunk);
          for (uint64_t step = 1; step <= 3; ++step) {
            AdamParams p{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, decoupled};
            for (int64_t i = 0; i < n; ++i)
              kernels::adamAt(p, i, ref.w.data(), ref.g.data(), ref.m.data(),
                              ref.v.data());
            opt.wait(opt.submitAdam(p, n, got.w.data(), got.g.data(),
                                    got.m.data(), got.v.data()));
          }
          CHECK(sameBits(got.w, ref.w));
          CHECK(sameBits(got.m, ref.m));
          CHECK(sameBits(got.v, ref.v));
          CHECK_FALSE(sameBits(got.w, w0)); // the steps did move the weight
        }
}

TEST_CASE("host SGD is bit-identical to the emulation's element loop",
          "[host]") {
  for (int64_t n : {int64_t(1), int64_t(13), int64_t(65537)})
    for (int threads : {1, 2, 4})
      for (float momentum : {0.0f, 0.9f}) {
        INFO("n " << n << ", threads " << threads << ", momentum " << momentum);
        std::mt19937 rng(5 + uint32_t(n));
        Vec refW = randomVec(n, rng, 1), g = randomVec(n, rng, 0.1f);
        Vec refBuf(momentum != 0 ? n : 0), gotW = refW, gotBuf = refBuf;
        HostOptimizer opt(threads, 1000);
        for (int step = 0; step < 3; ++step) {
          SgdParams p{0.05f, momentum, 1e-4f, step == 0};
          float *rb = refBuf.empty() ? nullptr : refBuf.data();
          float *gb = gotBuf.empty() ? nullptr : gotBuf.data();
          for (int64_t i = 0; i < n; ++i)
            kernels::sgdAt(i, p.lr, p.momentum, p.weightDecay, p.first,
                           refW.data(), g.data(), rb);
          opt.wait(opt.submitSgd(p, n, gotW.data(), g.data(), gb));
        }
        CHECK(sameBits(gotW, refW));
        CHECK(sameBits(gotBuf, refBuf));
      }
}

TEST_CASE("host updates of many tensors, waited for one by one or all",
          "[host]") {
  // Many small tensors submitted back to back, as a backward pass hands
  // them over; each waited for out of order, then all.
  const int64_t tensors = 2000, n = 5;
  AdamState ref = adamState(tensors * n, 3), got = ref;
  AdamParams p{1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, true};
  for (int64_t i = 0; i < tensors * n; ++i)
    kernels::adamAt(p, i, ref.w.data(), ref.g.data(), ref.m.data(),
                    ref.v.data());
  HostOptimizer opt(3, 2);
  std::vector<host::JobId> ids;
  for (int64_t t = 0; t < tensors; ++t)
    ids.push_back(opt.submitAdam(p, n, got.w.data() + t * n,
                                 got.g.data() + t * n, got.m.data() + t * n,
                                 got.v.data() + t * n));
  CHECK(ids.front() == 0);
  CHECK(ids.back() == tensors - 1); // dense ids in submission order
  opt.wait(ids[tensors / 2]);
  for (int64_t i = tensors / 2 * n; i < (tensors / 2 + 1) * n; ++i)
    CHECK(got.w[i] == ref.w[i]); // that tensor is done once its wait returns
  opt.wait(ids.front());
  opt.waitAll();
  CHECK(sameBits(got.w, ref.w));
  CHECK(sameBits(got.m, ref.m));
  CHECK(sameBits(got.v, ref.v));
}

TEST_CASE("the thread pool: every chunk once, empty jobs, shutdown", "[host]") {
  const int64_t count = 10007, chunk = 64;
  std::vector<std::atomic<int>> hits(count);
  // Counted, not CHECKed, on the pool's threads: Catch's assertions are
  // for the test's own thread.
  std::atomic<int64_t> late{0}, emptyRuns{0}, oversized{0};
  {
    ThreadPool pool(4);
    CHECK(pool.threads() == 4);
    host::JobId empty =
        pool.submit(0, 8, [&](int64_t, int64_t) { ++emptyRuns; });
    pool.wait(empty); // done at once
    pool.submit(count, chunk, [&](int64_t lo, int64_t hi) {
      oversized += hi - lo > chunk;
      for (int64_t i = lo; i < hi; ++i)
        ++hits[i];
    });
    // Left to the destructor: it waits for these before it stops the
    // threads.
    for (int j = 0; j < 50; ++j)
      pool.submit(3, 1, [&](int64_t lo, int64_t hi) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        late += hi - lo;
      });
  }
  for (int64_t i = 0; i < count; ++i)
    REQUIRE(hits[i] == 1);
  CHECK(late == 150);
  CHECK(emptyRuns == 0);
  CHECK(oversized == 0);
}

TEST_CASE("one large tensor spreads over the pool's threads", "[host]") {
  // Chunks that take a while, so that every thread is awake to take one.
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> seen;
  pool.wait(pool.submit(60, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(std::this_thread::get_id());
  }));
  CHECK(seen.size() >= 2);
  CHECK(seen.count(std::this_thread::get_id()) == 0); // the pool's own
}
