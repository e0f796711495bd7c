//===- FusedHeadTest.cpp - The head's product computed by the loss --------===//
#include "compiler/autodiff/FusedHead.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Liveness.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <set>

using namespace memfit;
using memfit::test::GraphLiteral;
using memfit::test::names;

namespace {

/// x [N, 8, 16] -> MatMul "act" by W0 [16, 16] -> MatMul "head" by
/// W [1000, 16] read transposed -> logits [N, 8, 1000], batch 4: 128,000
/// bytes of logits.
GraphLiteral decoder(bool softmax = false, bool trainable = true) {
  GraphLiteral L(4);
  ValueId x = L.input("x", {8, 16});
  ValueId a =
      L.op(OpKind::MatMul, "act", {x, L.weight("W0", {16, 16})}, {8, 16});
  OpAttrs t;
  t.transB = true;
  ValueId y = L.op(OpKind::MatMul, "head",
                   {a, L.weight("W", {1000, 16}, trainable)}, {8, 1000}, t);
  if (softmax) {
    OpAttrs ax;
    ax.axis = -1;
    L.op(OpKind::LogSoftmax, "lsm", {y}, {8, 1000}, ax);
  }
  return L;
}

TaskGraph build(const Graph &g, bool fuse, bool evaluation = false) {
  TrainingConfig cfg;
  cfg.classAxis = ClassAxis::Last;
  cfg.fuseHead = fuse;
  cfg.headChunkRows = 8;
  cfg.evaluation = evaluation;
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}

const Task &lossTask(const TaskGraph &tg) {
  for (const Task &t : tg.tasks)
    if (t.kind == TaskKind::Loss)
      return t;
  FAIL("no loss task");
  return tg.tasks.front();
}

} // namespace

TEST_CASE("fused head: the loss reads the head's input and weight, no "
          "block holds the logits",
          "[fusedhead]") {
  GraphLiteral L = decoder();
  REQUIRE(fusableHead(L.g, LossKind::SoftmaxCrossEntropy, 2).op == 1);
  TaskGraph tg = build(L.g, true);
  CHECK(tg.fusedHead == 1);
  CHECK(tg.headChunkRows == 8);
  const Task &loss = lossTask(tg);
  CHECK(loss.op == 1);
  CHECK(names(tg, loss.reads) ==
        std::set<std::string>{"act_out", "W", "labels"});
  CHECK(names(tg, loss.writes) == std::set<std::string>{"loss",
                                                        "logits chunk(head)",
                                                        "d(act_out)", "d(W)"});
  // 8 rows of 1000 fp32 logits.
  CHECK(tg.blocks[tg.headScratchBlock].bytesAt(4) == 8 * 1000 * 4);
  for (const Task &t : tg.tasks)
    CHECK(
        (t.op != 1 || t.kind == TaskKind::Loss || t.kind == TaskKind::Update));
  for (const Block &b : tg.blocks)
    CHECK((b.name != "head_out" && b.name != "d(head_out)"));
  CHECK(tg.valueBlock[L.g.output] < 0);

  // The liveness peak loses the logits and their gradient (2 x 128,000
  // bytes) and gains the 32,000-byte chunk.
  TaskGraph written = build(L.g, false);
  CHECK(written.fusedHead == kNoId);
  int64_t fused = computeLiveness(tg, builtOrder(tg), 4).peakBytes;
  int64_t asWritten =
      computeLiveness(written, builtOrder(written), 4).peakBytes;
  CHECK(asWritten - fused >= 2 * 128000 - 32000 - 2048);
}

TEST_CASE("fused head: a folded LogSoftmax, a frozen weight, evaluation",
          "[fusedhead]") {
  GraphLiteral L = decoder(/*softmax=*/true, /*trainable=*/true);
  TaskGraph tg = build(L.g, true);
  CHECK(tg.fusedHead == 1);
  for (const Task &t : tg.tasks)
    CHECK(t.op != 2); // the LogSoftmax runs nowhere

  GraphLiteral F = decoder(false, /*trainable=*/false);
  TaskGraph frozen = build(F.g, true);
  CHECK(names(frozen, lossTask(frozen).writes) ==
        std::set<std::string>{"loss", "logits chunk(head)", "d(act_out)"});

  TaskGraph ev = build(L.g, true, /*evaluation=*/true);
  CHECK(names(ev, lossTask(ev).writes) ==
        std::set<std::string>{"loss", "logits chunk(head)"});
}

TEST_CASE("fused head: what cannot be fused says why", "[fusedhead]") {
  // A classifier with a bias.
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {x, L.weight("W", {3, 4}), L.weight("b", {3})}, {3},
       gemm);
  HeadFusion h = fusableHead(L.g, LossKind::SoftmaxCrossEntropy, 1);
  CHECK(h.op == kNoId);
  CHECK(h.why == "the head's product adds a bias");
  // The fused flag then builds the graph as written.
  TrainingConfig cfg;
  cfg.fuseHead = true;
  auto tg = buildTaskGraph(L.g, cfg);
  REQUIRE(static_cast<bool>(tg));
  CHECK(tg->fusedHead == kNoId);

  GraphLiteral D = decoder();
  CHECK(fusableHead(D.g, LossKind::MSE, 2).why ==
        "the loss is not cross-entropy");
  CHECK(fusableHead(D.g, LossKind::SoftmaxCrossEntropy, 1).why ==
        "cross-entropy reads the classes on another axis than the "
        "product's last");
}

TEST_CASE("fused head: chunk rows fill 32 MiB, within a batch", "[fusedhead]") {
  // GPT-2's vocabulary in fp32: 166 rows of 50,304 logits.
  CHECK(headChunkRows(50304, 4, 8192) == 166);
  CHECK(headChunkRows(50304, 2, 8192) == 333);
  // Llama 3's in bf16: 130 rows; a small vocabulary: the whole batch.
  CHECK(headChunkRows(128256, 2, 8192) == 130);
  CHECK(headChunkRows(61, 4, 64) == 64);
  // A vocabulary past 32 MiB a row still takes one row.
  CHECK(headChunkRows(int64_t(1) << 24, 4, 10) == 1);
}
