//===- EpilogueFusionTest.cpp - A ReLU run inside its BatchNorm ----------===//
#include "compiler/autodiff/Autodiff.h"
#include "compiler/onnx/OnnxImport.h"
#include "passes/analysis/MemoryLowerBound.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <set>

using namespace memfit;
using memfit::test::conv3x3;
using memfit::test::findTask;
using memfit::test::GraphLiteral;
using memfit::test::names;

namespace {

ValueId batchNorm(GraphLiteral &L, const std::string &name, ValueId x) {
  return L.op(OpKind::BatchNorm, name,
              {x, L.weight(name + ".g", {4}), L.weight(name + ".b", {4}),
               L.weight(name + ".m", {4}, false),
               L.weight(name + ".v", {4}, false)},
              {4, 6, 6});
}

/// conv -> bn1 -> relu1 -> conv2 -> bn2 -> relu2, with bn2's output also
/// added to relu2's (a second reader), then bn3 -> relu3 -> head.
Graph threeNorms() {
  GraphLiteral L(2);
  ValueId x = L.input("x", {3, 6, 6});
  ValueId c1 = L.op(OpKind::Conv, "conv1", {x, L.weight("k1", {4, 3, 3, 3})},
                    {4, 6, 6}, conv3x3());
  ValueId r1 =
      L.op(OpKind::Relu, "relu1", {batchNorm(L, "bn1", c1)}, {4, 6, 6});
  ValueId c2 = L.op(OpKind::Conv, "conv2", {r1, L.weight("k2", {4, 4, 3, 3})},
                    {4, 6, 6}, conv3x3());
  ValueId b2 = batchNorm(L, "bn2", c2);
  ValueId r2 = L.op(OpKind::Relu, "relu2", {b2}, {4, 6, 6});
  ValueId s = L.op(OpKind::Add, "add", {r2, b2}, {4, 6, 6});
  ValueId r3 = L.op(OpKind::Relu, "relu3", {batchNorm(L, "bn3", s)}, {4, 6, 6});
  L.head4(r3);
  return L.g;
}

} // namespace

TEST_CASE("epilogues: a ReLU that alone reads a BatchNorm runs inside it",
          "[fusion]") {
  const Graph g = threeNorms();
  // bn1 and bn3 fuse; bn2's output has a second reader (the add).
  CHECK(countEpilogues(g) == 2);
  const Graph f = fuseEpilogues(g);
  REQUIRE(!verifyGraph(f));
  CHECK(f.ops.size() == g.ops.size() - 2);
  std::set<std::string> fused, kinds;
  for (const Op &op : f.ops) {
    if (op.attrs.fusedAct == OpKind::Relu)
      fused.insert(op.name);
    if (op.kind == OpKind::Relu)
      kinds.insert(op.name);
  }
  CHECK(fused == std::set<std::string>{"bn1", "bn3"});
  CHECK(kinds == std::set<std::string>{"relu2"});
  // The fused BatchNorm writes the ReLU's output value, which conv2 reads.
  for (const Op &op : f.ops)
    if (op.name == "bn1")
      CHECK(f.value(op.outputs[0]).name == "relu1_out");
  // Fusing twice changes nothing.
  CHECK(countEpilogues(f) == 0);
  CHECK(fuseEpilogues(f).ops.size() == f.ops.size());
}

TEST_CASE("epilogues: the fused backward reads the BatchNorm's input and "
          "weights, not the ReLU's output",
          "[fusion]") {
  const Graph g = threeNorms();
  const Graph f = fuseEpilogues(g);
  auto plain = buildTaskGraph(g, {LossKind::SoftmaxCrossEntropy, 0.9f});
  auto fusedTg = buildTaskGraph(f, {LossKind::SoftmaxCrossEntropy, 0.9f});
  REQUIRE(static_cast<bool>(plain));
  REQUIRE(static_cast<bool>(fusedTg));
  const TaskGraph &tg = *fusedTg;
  CHECK(names(tg, tg.tasks[findTask(tg, "BP-data(bn1)")].reads) ==
        std::set<std::string>{"conv1_out", "bn1.g", "bn1.b", "stats(bn1)",
                              "d(relu1_out)"});
  CHECK(names(tg, tg.tasks[findTask(tg, "BP-weight(bn1)")].reads) ==
        std::set<std::string>{"conv1_out", "stats(bn1)", "bn1.g", "bn1.b",
                              "d(relu1_out)"});
  // The plain pair: the ReLU's backward reads its output.
  const TaskGraph &p = *plain;
  CHECK(names(p, p.tasks[findTask(p, "BP-data(relu1)")].reads) ==
        std::set<std::string>{"relu1_out", "d(relu1_out)"});
  // Two tasks fewer per fused pair, and never more memory at any sub-batch.
  CHECK(tg.tasks.size() == p.tasks.size() - 4);
  for (int64_t b : {1, 2})
    CHECK(computeLowerBound(tg, b).bytes <= computeLowerBound(p, b).bytes);
}

TEST_CASE("epilogues: a Clip (ReLU6) after a BatchNorm fuses with its bounds",
          "[fusion]") {
  GraphLiteral L(2);
  ValueId x = L.input("x", {4, 6, 6});
  OpAttrs six;
  six.minValue = 0.0f;
  six.maxValue = 6.0f;
  ValueId c =
      L.op(OpKind::Clip, "relu6", {batchNorm(L, "bn", x)}, {4, 6, 6}, six);
  L.head4(c);
  const Graph f = fuseEpilogues(L.g);
  REQUIRE(!verifyGraph(f));
  REQUIRE(f.ops.size() == L.g.ops.size() - 1);
  const Op &bn = f.ops[0];
  CHECK(bn.kind == OpKind::BatchNorm);
  CHECK(bn.attrs.fusedAct == OpKind::Clip);
  CHECK(bn.attrs.minValue == 0.0f);
  CHECK(bn.attrs.maxValue == 6.0f);
  CHECK(f.value(bn.outputs[0]).name == "relu6_out");
}
