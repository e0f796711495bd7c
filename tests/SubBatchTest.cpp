//===- SubBatchTest.cpp - moDNN Eq. 3 -------------------------------------===//
#include "passes/search/SubBatch.h"
#include "compiler/autodiff/Autodiff.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <map>

using namespace memfit;
using memfit::test::GraphLiteral;

namespace {
// x[N,256] -> fc (W[256,256]) : per-sample blocks of 1 KiB each.
struct Mlp {
  Graph g;
  TaskGraph tg;
  std::map<int64_t, CostTable> tables;
  int64_t fixedWorkspace = 0;

  Mlp() {
    GraphLiteral L(64);
    ValueId x = L.input("x", {256});
    OpAttrs gemm;
    gemm.transB = true;
    L.op(OpKind::Gemm, "fc", {x, L.weight("W", {256, 256})}, {256}, gemm);
    g = std::move(L.g);
    tg = std::move(*buildTaskGraph(g));
  }
  const CostTable &at(int64_t b) {
    CostTable &c = tables[b];
    c.subBatch = b;
    c.tasks.clear();
    for (size_t t = 0; t < tg.tasks.size(); ++t)
      c.tasks.push_back({{0, "default", 1e-3, fixedWorkspace, true}});
    return c;
  }
};
} // namespace

TEST_CASE("Eq. 3 gives the sub-batch whose largest task fills the budget",
          "[subbatch]") {
  Mlp m;
  // The largest task is the loss: fc_out (1 KiB) + labels (4 B) + dY
  // (1 KiB) per sample: 2052 b bytes (the loss value is resident).
  CHECK(maxTaskNeed(m.tg, m.at(1)) == 2052);
  int64_t room = 10 * 2056;
  int64_t budget = m.tg.weightSideBytes() + room;
  int64_t b = selectSubBatch(
      m.tg, [&](int64_t s) -> const CostTable & { return m.at(s); }, 64,
      budget);
  // Fixed point of b = room * b / (2052 b): the largest b with
  // 2052 b <= room.
  CHECK(b == 10);
  CHECK(2052 * b <= room);
  // Plenty of memory: the whole batch.
  CHECK(selectSubBatch(
            m.tg, [&](int64_t s) -> const CostTable & { return m.at(s); }, 64,
            budget * 100) == 64);
}

TEST_CASE("a fixed workspace shrinks the sub-batch", "[subbatch]") {
  Mlp m;
  m.fixedWorkspace = 5 * 2052;
  int64_t room = 10 * 2056;
  int64_t b = selectSubBatch(
      m.tg, [&](int64_t s) -> const CostTable & { return m.at(s); }, 64,
      m.tg.weightSideBytes() + room);
  CHECK(2052 * b + m.fixedWorkspace <= room);
  CHECK(2052 * (b + 1) + m.fixedWorkspace > room);
}

TEST_CASE("sub-batch candidates", "[subbatch]") {
  // Eq. 3's b; every count of sub-batches down to half of Eq. 3's b, each
  // as its most even split (leaner algorithms may fit larger sub-batches
  // than Eq. 3 allows); below, halvings down to an eighth of Eq. 3's b.
  CHECK(subBatchCandidates(64, 64) == std::vector<int64_t>{8, 16, 32, 64});
  CHECK(subBatchCandidates(24, 256) ==
        std::vector<int64_t>{3,  4,  6,  8,  12, 13, 14, 15, 16, 18, 19,  20,
                             22, 24, 26, 29, 32, 37, 43, 52, 64, 86, 128, 256});
  CHECK(subBatchCandidates(1, 8) == std::vector<int64_t>{1, 2, 3, 4, 8});
  // Three sub-batches of a batch of 64 (22, 22 and 20): no power of two.
  CHECK(subBatchCandidates(16, 64) ==
        std::vector<int64_t>{2, 4, 8, 10, 11, 13, 16, 22, 32, 64});
}
