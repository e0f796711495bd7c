//===- AutodiffTest.cpp - TDFG construction -------------------------------===//
#include "compiler/autodiff/Autodiff.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

using namespace memfit;
using memfit::test::GraphLiteral;
using memfit::test::names;

namespace {

const Task &findTask(const TaskGraph &tg, const std::string &name) {
  for (const Task &t : tg.tasks)
    if (t.name == name)
      return t;
  FAIL("no task " << name);
  return tg.tasks.front();
}

TaskGraph build(const Graph &g, TrainingConfig cfg = {}) {
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}

} // namespace

TEST_CASE("mlp: tasks, minimal reads, no gradient for the data input",
          "[autodiff]") {
  // x[N,4] -> fc1 (W1[8,4], b1[8]) -> relu -> fc2 (W2[3,8], b2[3])
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId h = L.op(OpKind::Gemm, "fc1",
                   {x, L.weight("W1", {8, 4}), L.weight("b1", {8})}, {8}, gemm);
  ValueId r = L.op(OpKind::Relu, "relu", {h}, {8});
  L.op(OpKind::Gemm, "fc2", {r, L.weight("W2", {3, 8}), L.weight("b2", {3})},
       {3}, gemm);
  TaskGraph tg = build(L.g);

  // 3 FP + loss + BP-data(fc2), BP-weight(fc2), BP-data(relu),
  // BP-weight(fc1) + 4 updates; no BP-data(fc1): x needs no gradient.
  REQUIRE(tg.tasks.size() == 12);
  for (const Task &t : tg.tasks)
    CHECK(t.name != "BP-data(fc1)");

  const Task &bd2 = findTask(tg, "BP-data(fc2)");
  CHECK(names(tg, bd2.reads) == std::set<std::string>{"W2", "d(fc2_out)"});
  CHECK(names(tg, bd2.writes) == std::set<std::string>{"d(relu_out)"});
  const Task &bw2 = findTask(tg, "BP-weight(fc2)");
  CHECK(names(tg, bw2.reads) ==
        std::set<std::string>{"relu_out", "d(fc2_out)"});
  CHECK(names(tg, bw2.writes) == std::set<std::string>{"d(W2)", "d(b2)"});
  // Relu backward reads Y and dY, never X.
  const Task &br = findTask(tg, "BP-data(relu)");
  CHECK(names(tg, br.reads) ==
        std::set<std::string>{"relu_out", "d(relu_out)"});
  CHECK(findTask(tg, "FP(relu)").mayRunInPlace);
  CHECK(findTask(tg, "FP(relu)").inPlaceRead == 0);
  CHECK_FALSE(findTask(tg, "FP(fc1)").mayRunInPlace);
  // dX over dY: reads are Y then dY.
  CHECK(br.mayRunInPlace);
  CHECK(br.inPlaceRead == 1);
  CHECK_FALSE(findTask(tg, "BP-data(fc2)").mayRunInPlace);

  const Task &loss = findTask(tg, "loss(loss)");
  CHECK(names(tg, loss.reads) == std::set<std::string>{"fc2_out", "labels"});
  CHECK(names(tg, loss.writes) == std::set<std::string>{"loss", "d(fc2_out)"});

  const Task &up = findTask(tg, "update(W1)");
  CHECK(names(tg, up.reads) == std::set<std::string>{"W1", "d(W1)", "m(W1)"});
  CHECK(names(tg, up.writes) == std::set<std::string>{"W1", "m(W1)"});

  // Sizes perSampleBytes * b + fixedBytes: activations scale with b,
  // weights do not.
  const Block &h1 = tg.blocks[tg.valueBlock[h]];
  CHECK(h1.perSampleBytes == 8 * 4);
  CHECK(h1.fixedBytes == 0);
  const Block &w1 = tg.blocks[tg.valueBlock[1]];
  CHECK(w1.perSampleBytes == 0);
  CHECK(w1.fixedBytes == 8 * 4 * 4);
  // Labels: one int32 class id per sample.
  CHECK(tg.blocks[tg.labelBlock].perSampleBytes == 4);
  // Weight side: W, dW and momentum for 32+8+24+3 = 67 floats, and the loss.
  CHECK(tg.weightSideBytes() == 3 * 67 * 4 + 4);
  CHECK(tg.keepAllBytes(2) == 2 * (8 + 8 + 3) * 4);
}

TEST_CASE("without momentum no optimizer state is allocated", "[autodiff]") {
  GraphLiteral L(1);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {x, L.weight("W", {2, 4})}, {2}, gemm);
  TrainingConfig cfg;
  cfg.momentum = 0;
  TaskGraph tg = build(L.g, cfg);
  for (const Block &b : tg.blocks)
    CHECK(b.kind != BlockKind::Momentum);
  CHECK(tg.weightSideBytes() == 2 * 8 * 4 + 4);
}

TEST_CASE("fan-out: one gradient block accumulated by every consumer",
          "[autodiff]") {
  // x -> conv1 -> r=relu -> conv2 -> add(conv2, r) -> gap -> flatten -> fc
  GraphLiteral L(4);
  ValueId x = L.input("x", {3, 8, 8});
  OpAttrs conv;
  conv.kernel = {3, 3};
  conv.pads = {1, 1, 1, 1};
  conv.strides = {1, 1};
  conv.dilations = {1, 1};
  ValueId c1 = L.op(OpKind::Conv, "conv1", {x, L.weight("k1", {4, 3, 3, 3})},
                    {4, 8, 8}, conv);
  ValueId r = L.op(OpKind::Relu, "relu", {c1}, {4, 8, 8});
  ValueId c2 = L.op(OpKind::Conv, "conv2", {r, L.weight("k2", {4, 4, 3, 3})},
                    {4, 8, 8}, conv);
  ValueId s = L.op(OpKind::Add, "add", {c2, r}, {4, 8, 8});
  ValueId p = L.op(OpKind::GlobalAveragePool, "gap", {s}, {4, 1, 1});
  ValueId f = L.op(OpKind::Flatten, "flat", {p}, {4});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {f, L.weight("W", {10, 4})}, {10}, gemm);
  TaskGraph tg = build(L.g);

  BlockId dr = tg.gradBlock[r];
  REQUIRE(dr >= 0);
  std::set<std::string> writers;
  for (TaskId t : tg.blocks[dr].writers)
    writers.insert(tg.tasks[t].name);
  CHECK(writers == std::set<std::string>{"BP-data(conv2)", "BP-data(add)"});
  for (TaskId t : tg.blocks[dr].writers) {
    const Task &task = tg.tasks[t];
    auto it = std::find(task.writes.begin(), task.writes.end(), dr);
    CHECK(task.accumulates[it - task.writes.begin()]);
  }
  // Conv BP-data reads W and dY; BP-weight reads X and dY.
  CHECK(names(tg, findTask(tg, "BP-data(conv2)").reads) ==
        std::set<std::string>{"k2", "d(conv2_out)"});
  CHECK(names(tg, findTask(tg, "BP-weight(conv2)").reads) ==
        std::set<std::string>{"relu_out", "d(conv2_out)"});
  // Add and pooling backward read only dY.
  CHECK(names(tg, findTask(tg, "BP-data(add)").reads) ==
        std::set<std::string>{"d(add_out)"});
  CHECK(names(tg, findTask(tg, "BP-data(gap)").reads) ==
        std::set<std::string>{"d(gap_out)"});
  // conv1's input is the data: no BP-data(conv1).
  for (const Task &t : tg.tasks)
    CHECK(t.name != "BP-data(conv1)");
  // Flatten is a view of its input, in both directions.
  CHECK(tg.blocks[tg.valueBlock[f]].viewOf == tg.valueBlock[p]);
  CHECK(tg.blocks[tg.gradBlock[f]].viewOf == tg.gradBlock[p]);
  // Views are not counted in keep-all bytes: conv1, relu, conv2 and add
  // maps (4x8x8 each), then gap (4) and fc (10).
  CHECK(tg.keepAllBytes(4) == 4 * (4 * 4 * 64 + 4 + 10) * 4);
}

TEST_CASE("batchnorm: saved statistics, running statistics, minimal reads",
          "[autodiff]") {
  GraphLiteral L(2);
  ValueId x = L.input("x", {3, 4, 4});
  OpAttrs conv;
  conv.kernel = {1, 1};
  conv.pads = {0, 0, 0, 0};
  ValueId c = L.op(OpKind::Conv, "conv", {x, L.weight("k", {6, 3, 1, 1})},
                   {6, 4, 4}, conv);
  ValueId bn = L.op(OpKind::BatchNorm, "bn",
                    {c, L.weight("gamma", {6}), L.weight("beta", {6}),
                     L.weight("mean", {6}, false), L.weight("var", {6}, false)},
                    {6, 4, 4});
  ValueId p = L.op(OpKind::GlobalAveragePool, "gap", {bn}, {6, 1, 1});
  L.op(OpKind::Flatten, "flat", {p}, {6});
  TaskGraph tg = build(L.g, {LossKind::MSE, 0.9f});

  const Task &fp = findTask(tg, "FP(bn)");
  CHECK(names(tg, fp.writes) ==
        std::set<std::string>{"bn_out", "stats(bn)", "mean", "var"});
  CHECK(names(tg, findTask(tg, "BP-data(bn)").reads) ==
        std::set<std::string>{"conv_out", "gamma", "stats(bn)", "d(bn_out)"});
  CHECK(names(tg, findTask(tg, "BP-weight(bn)").reads) ==
        std::set<std::string>{"conv_out", "stats(bn)", "d(bn_out)"});
  CHECK(names(tg, findTask(tg, "BP-weight(bn)").writes) ==
        std::set<std::string>{"d(gamma)", "d(beta)"});
  // Running statistics are state: no gradient, no update.
  for (const Task &t : tg.tasks) {
    CHECK(t.name != "update(mean)");
    CHECK(t.name != "update(var)");
  }
  // Saved statistics: mean and inverse std per channel, independent of b.
  const Block &stats = tg.blocks[fp.writes[1]];
  CHECK(stats.kind == BlockKind::Stats);
  CHECK(stats.perSampleBytes == 0);
  CHECK(stats.fixedBytes == 2 * 6 * 4);
  // MSE labels have the output's shape.
  CHECK(tg.blocks[tg.labelBlock].perSampleBytes == 6 * 4);
}

TEST_CASE("softmax head folds into the cross-entropy loss", "[autodiff]") {
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId logits =
      L.op(OpKind::Gemm, "fc", {x, L.weight("W", {5, 4})}, {5}, gemm);
  L.op(OpKind::Softmax, "prob", {logits}, {5});
  TaskGraph tg = build(L.g);
  const Task &loss = findTask(tg, "loss(loss)");
  CHECK(names(tg, loss.reads) == std::set<std::string>{"fc_out", "labels"});
  CHECK(names(tg, loss.writes) == std::set<std::string>{"loss", "d(fc_out)"});
  for (const Task &t : tg.tasks)
    CHECK(t.name != "BP-data(prob)");
}

TEST_CASE("dropout backward reads only dY (mask from the counter RNG)",
          "[autodiff]") {
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId h = L.op(OpKind::Gemm, "fc1", {x, L.weight("W1", {4, 4})}, {4}, gemm);
  ValueId d = L.op(OpKind::Dropout, "drop", {h}, {4});
  L.op(OpKind::Gemm, "fc2", {d, L.weight("W2", {2, 4})}, {2}, gemm);
  TaskGraph tg = build(L.g);
  CHECK(names(tg, findTask(tg, "BP-data(drop)").reads) ==
        std::set<std::string>{"d(drop_out)"});
  CHECK(findTask(tg, "FP(drop)").mayRunInPlace);
}

TEST_CASE("cross-entropy reads classes on axis 1 or the last axis",
          "[autodiff]") {
  // Per-pixel labels on a [N, 2, 4, 4] output: 2 classes at 16 positions,
  // or (--class-axis last) 4 classes at 2 x 4 positions.
  GraphLiteral L(2);
  ValueId x = L.input("x", {3, 4, 4});
  OpAttrs conv;
  conv.kernel = {1, 1};
  L.op(OpKind::Conv, "conv", {x, L.weight("k", {2, 3, 1, 1})}, {2, 4, 4}, conv);
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));
  CHECK(tg->lossGeometry.outer == 1);
  CHECK(tg->lossGeometry.classes == 2);
  CHECK(tg->lossGeometry.inner == 16);
  CHECK(tg->blocks[tg->labelBlock].perSampleBytes == 16 * 4);
  TrainingConfig last;
  last.classAxis = ClassAxis::Last;
  auto tl = buildTaskGraph(L.g, last);
  REQUIRE(static_cast<bool>(tl));
  CHECK(tl->lossGeometry.outer == 8);
  CHECK(tl->lossGeometry.classes == 4);
  CHECK(tl->lossGeometry.inner == 1);
}

TEST_CASE("16-bit precisions: every byte follows the block's type",
          "[autodiff][precision]") {
  // x[N,3,4,4] -> conv (k[6,3,1,1]) -> bn -> gap -> flatten -> fc (W[5,6])
  GraphLiteral L(2);
  ValueId x = L.input("x", {3, 4, 4});
  OpAttrs conv;
  conv.kernel = {1, 1};
  conv.pads = {0, 0, 0, 0};
  ValueId k = L.weight("k", {6, 3, 1, 1});
  ValueId c = L.op(OpKind::Conv, "conv", {x, k}, {6, 4, 4}, conv);
  ValueId gamma = L.weight("gamma", {6});
  ValueId bn = L.op(OpKind::BatchNorm, "bn",
                    {c, gamma, L.weight("beta", {6}),
                     L.weight("mean", {6}, false), L.weight("var", {6}, false)},
                    {6, 4, 4});
  ValueId p = L.op(OpKind::GlobalAveragePool, "gap", {bn}, {6, 1, 1});
  ValueId f = L.op(OpKind::Flatten, "flat", {p}, {6});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId W = L.weight("W", {5, 6});
  ValueId out = L.op(OpKind::Gemm, "fc", {f, W}, {5}, gemm);

  TaskGraph fp32 = build(L.g);
  for (Precision prec : {Precision::BF16, Precision::FP16}) {
    TrainingConfig cfg;
    cfg.precision = prec;
    TaskGraph tg = build(L.g, cfg);
    DType low = prec == Precision::BF16 ? DType::BF16 : DType::F16;
    CHECK(tg.precision == prec);
    // The input batch, activations and their gradients: 2 bytes.
    const Block &xb = tg.blocks[tg.inputBlock];
    CHECK(xb.dtype == low);
    CHECK(xb.perSampleBytes == 3 * 4 * 4 * 2);
    for (ValueId v : {c, bn, p, out}) {
      const Block &y = tg.blocks[tg.valueBlock[v]];
      CHECK(y.dtype == low);
      CHECK(y.perSampleBytes ==
            fp32.blocks[fp32.valueBlock[v]].perSampleBytes / 2);
      const Block &dy = tg.blocks[tg.gradBlock[v]];
      CHECK(dy.dtype == low);
      CHECK(dy.perSampleBytes == y.perSampleBytes);
    }
    CHECK(tg.keepAllBytes(2) * 2 == fp32.keepAllBytes(2));
    // Master weights, their gradients, momentum, BatchNorm statistics,
    // labels and the loss: 4 bytes.
    for (ValueId w : {k, gamma, W}) {
      CHECK(tg.blocks[tg.valueBlock[w]].dtype == DType::F32);
      CHECK(tg.blocks[tg.valueBlock[w]].fixedBytes ==
            fp32.blocks[fp32.valueBlock[w]].fixedBytes);
      CHECK(tg.blocks[tg.gradBlock[w]].dtype == DType::F32);
    }
    const Task &fpBn = findTask(tg, "FP(bn)");
    CHECK(tg.blocks[fpBn.writes[1]].fixedBytes == 2 * 6 * 4);
    CHECK(tg.blocks[tg.labelBlock].dtype == DType::I32);
    CHECK(tg.blocks[tg.labelBlock].perSampleBytes == 4);
    CHECK(tg.blocks[tg.lossBlock].fixedBytes == 4);

    // Working copies: only for the weights of convolutions and products.
    std::string name = prec == Precision::BF16 ? "bf16" : "f16";
    REQUIRE(tg.weightCopyBlock[k] >= 0);
    REQUIRE(tg.weightCopyBlock[W] >= 0);
    CHECK(tg.weightCopyBlock[gamma] < 0);
    const Block &k16 = tg.blocks[tg.weightCopyBlock[k]];
    CHECK(k16.kind == BlockKind::WeightCopy);
    CHECK(k16.name == name + "(k)");
    CHECK(k16.dtype == low);
    CHECK(k16.perSampleBytes == 0);
    CHECK(k16.fixedBytes == 6 * 3 * 2);
    CHECK(isWeightSide(k16.kind));
    // The products read the copy, the update writes the master and
    // refreshes the copy; BatchNorm reads the fp32 master.
    CHECK(names(tg, findTask(tg, "FP(conv)").reads) ==
          std::set<std::string>{"x", name + "(k)"});
    CHECK(names(tg, findTask(tg, "BP-data(fc)").reads) ==
          std::set<std::string>{name + "(W)", "d(fc_out)"});
    CHECK(names(tg, findTask(tg, "BP-weight(conv)").writes) ==
          std::set<std::string>{"d(k)"});
    CHECK(names(tg, findTask(tg, "update(k)").writes) ==
          std::set<std::string>{"k", "m(k)", name + "(k)"});
    CHECK(names(tg, findTask(tg, "BP-data(bn)").reads) ==
          std::set<std::string>{"conv_out", "gamma", "stats(bn)", "d(bn_out)"});
    // Weight side: the fp32 side plus 2 bytes per product weight element.
    CHECK(tg.weightSideBytes() == fp32.weightSideBytes() + (18 + 30) * 2);
  }

  // TF32 changes the arithmetic, not the storage.
  TrainingConfig tf;
  tf.precision = Precision::TF32;
  TaskGraph tg = build(L.g, tf);
  REQUIRE(tg.blocks.size() == fp32.blocks.size());
  for (size_t i = 0; i < tg.blocks.size(); ++i) {
    CHECK(tg.blocks[i].dtype == fp32.blocks[i].dtype);
    CHECK(tg.blocks[i].bytesAt(3) == fp32.blocks[i].bytesAt(3));
  }
}

TEST_CASE("evaluation graph: forward and a measuring loss, running statistics "
          "read only",
          "[autodiff]") {
  // x[N,3,4,4] -> conv -> bn -> gap -> flatten -> fc -> dropout
  GraphLiteral L(2);
  ValueId x = L.input("x", {3, 4, 4});
  OpAttrs conv;
  conv.kernel = {1, 1};
  conv.pads = {0, 0, 0, 0};
  ValueId c = L.op(OpKind::Conv, "conv", {x, L.weight("k", {6, 3, 1, 1})},
                   {6, 4, 4}, conv);
  ValueId bn = L.op(OpKind::BatchNorm, "bn",
                    {c, L.weight("gamma", {6}), L.weight("beta", {6}),
                     L.weight("mean", {6}, false), L.weight("var", {6}, false)},
                    {6, 4, 4});
  ValueId p = L.op(OpKind::GlobalAveragePool, "gap", {bn}, {6, 1, 1});
  ValueId f = L.op(OpKind::Flatten, "flat", {p}, {6});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId h = L.op(OpKind::Gemm, "fc", {f, L.weight("W", {5, 6})}, {5}, gemm);
  L.op(OpKind::Dropout, "drop", {h}, {5});
  TrainingConfig cfg;
  cfg.optimizer = OptimizerKind::AdamW;
  cfg.clipGradNorm = 1;
  cfg.evaluation = true;
  TaskGraph tg = build(L.g, cfg);
  TaskGraph trained = build(L.g, {});

  // Expected: FP of the 6 ops and the loss, nothing else.
  CHECK(tg.evaluation);
  CHECK(tg.clipGradNorm == 0);
  REQUIRE(tg.tasks.size() == 7);
  for (const Task &t : tg.tasks)
    CHECK((t.kind == TaskKind::Forward || t.kind == TaskKind::Loss));
  // BatchNorm normalizes with the running statistics: no saved statistics,
  // nothing written but its output.
  const Task &fp = findTask(tg, "FP(bn)");
  CHECK(names(tg, fp.writes) == std::set<std::string>{"bn_out"});
  CHECK(names(tg, fp.reads) ==
        std::set<std::string>{"conv_out", "gamma", "beta", "mean", "var"});
  CHECK(names(tg, findTask(tg, "loss(loss)").writes) ==
        std::set<std::string>{"loss"});
  // No gradient, optimizer state or statistics block anywhere; the weight
  // side is the weights alone, under the training graph's names.
  std::set<std::string> weights;
  for (const Block &b : tg.blocks) {
    CHECK(b.kind != BlockKind::Gradient);
    CHECK(b.kind != BlockKind::WeightGrad);
    CHECK(b.kind != BlockKind::Momentum);
    CHECK(b.kind != BlockKind::SecondMoment);
    CHECK(b.kind != BlockKind::Stats);
    if (b.kind == BlockKind::Weight)
      weights.insert(b.name);
  }
  CHECK(weights ==
        std::set<std::string>{"k", "gamma", "beta", "mean", "var", "W"});
  CHECK(tg.weightSideBytes() == (18 + 6 * 4 + 30) * 4 + 4);
  CHECK(tg.weightSideBytes() < trained.weightSideBytes());
}
