//===- OnnxImportReduceTest.cpp - Reductions over axes but the batch's ----===//
//
// ReduceMean, ReduceSum, ReduceSumSquare, ReduceL1, ReduceL2 and
// ReduceLogSumExp over any axes other than the batch's import as the ops
// memfit has: the axes moved last, a global average pool, the count as a
// factor, Abs, Sqrt, a row maximum, Exp and Log, a view to ONNX's shape.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

namespace {

OnnxBuilder reduce(const std::string &op, std::vector<int64_t> axes,
                   int64_t keep) {
  // ReduceSum takes its axes as an operand from opset 13 on.
  OnnxBuilder b(op == "ReduceSum" ? 11 : 13);
  b.input("x", {-1, 2, 3, 5})
      .node(op, {"x"}, {"y"},
            {attrInts("axes", axes), attrInt("keepdims", keep)})
      .output("y", keep ? 4 : 4 - static_cast<int>(axes.size()));
  return b;
}

} // namespace

TEST_CASE("ReduceL2 over middle axes: moved last, squared, pooled, summed, "
          "rooted, viewed",
          "[onnx][import][reduce]") {
  // torch.norm(x, dim=(1, 2), keepdim=True) of NHWC: ConvNeXt V2's GRN.
  Graph g = importOk(reduce("ReduceL2", {1, 2}, 1), batchOf(2));
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Transpose, OpKind::Pow,
                                          OpKind::GlobalAveragePool,
                                          OpKind::Mul, OpKind::Sqrt,
                                          OpKind::Reshape});
  CHECK(g.ops[0].attrs.perm == std::vector<int64_t>{0, 3, 1, 2});
  CHECK(g.ops[1].attrs.alpha == 2.0f);
  CHECK(valueNamed(g, "y#mean").dims == std::vector<int64_t>{2, 5, 1, 1});
  // The mean times the 2 x 3 elements it averaged.
  const Value &count = g.values[g.ops[3].inputs[1]];
  CHECK(count.kind == ValueKind::Weight);
  CHECK(!count.trainable);
  CHECK(count.data == std::vector<float>{6.0f});
  // The root's derivative is 0 at a zero norm (ActParams::lo).
  CHECK(g.ops[4].attrs.minValue == 1.0f);
  CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{2, 1, 1, 5});
}

TEST_CASE("ReduceMean over the last axes stays one pool; over the channels it "
          "moves them",
          "[onnx][import][reduce]") {
  Graph last = importOk(reduce("ReduceMean", {-1}, 1), batchOf(2));
  CHECK(opKinds(last) == std::vector<OpKind>{OpKind::GlobalAveragePool});
  // x.mean(1, keepdim=True) of NCHW: ConvNeXt's channels-first LayerNorm.
  Graph chan = importOk(reduce("ReduceMean", {1}, 1), batchOf(2));
  CHECK(opKinds(chan) == std::vector<OpKind>{OpKind::Transpose,
                                             OpKind::GlobalAveragePool,
                                             OpKind::Reshape});
  CHECK(valueNamed(chan, "y").dims == std::vector<int64_t>{2, 1, 3, 5});
  Graph sum = importOk(reduce("ReduceSum", {2, 3}, 0), batchOf(2));
  CHECK(opKinds(sum) == std::vector<OpKind>{OpKind::GlobalAveragePool,
                                            OpKind::Mul, OpKind::Reshape});
  CHECK(valueNamed(sum, "y").dims == std::vector<int64_t>{2, 2});
}

TEST_CASE("a reduction over the batch is refused, named",
          "[onnx][import][reduce]") {
  std::string err =
      errorText(reduce("ReduceSum", {0, 1}, 1).import(batchOf(2)));
  CHECK_THAT(err, Contains("ReduceSum over axes after the batch's"));
}

TEST_CASE("reductions of constants fold", "[onnx][import][reduce]") {
  // x [N, 2] * ReduceSum(c, axes=[1], keepdims=0) + ReduceMax(c, axes=[0]),
  // c = [[1, 2], [3, 4]]: x * [3, 7] + [3, 4].
  OnnxBuilder b(11);
  b.input("x", {-1, 2})
      .node("Constant", {}, {"c"}, {floatValue({2, 2}, {1, 2, 3, 4})})
      .node("ReduceSum", {"c"}, {"s"},
            {attrInts("axes", {1}), attrInt("keepdims", 0)})
      .node("ReduceMax", {"c"}, {"m"},
            {attrInts("axes", {0}), attrInt("keepdims", 0)})
      .node("Mul", {"x", "s"}, {"xs"})
      .node("Add", {"xs", "m"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Mul, OpKind::Add});
  CHECK(g.values[g.ops[0].inputs[1]].data == std::vector<float>{3, 7});
  CHECK(g.values[g.ops[1].inputs[1]].data == std::vector<float>{3, 4});
}

TEST_CASE("ReduceL1 takes the absolute values before the sum",
          "[onnx][import][reduce]") {
  // x.norm(p=1, dim=-1) of [N, 2, 3, 5].
  Graph g = importOk(reduce("ReduceL1", {3}, 0), batchOf(2));
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Abs,
                                          OpKind::GlobalAveragePool,
                                          OpKind::Mul, OpKind::Reshape});
  CHECK(g.values[g.ops[2].inputs[1]].data == std::vector<float>{5.0f});
  CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{2, 2, 3});
}

TEST_CASE("ReduceLogSumExp: the rows' maximum, exp of the shifted rows "
          "summed, Log, plus the maximum",
          "[onnx][import][reduce]") {
  // torch.logsumexp(x, dim=1, keepdim=True) of [N, 2, 3, 5]: the channels
  // move last, 15 rows of 2 per sample.
  Graph g = importOk(reduce("ReduceLogSumExp", {1}, 1), batchOf(2));
  CHECK(opKinds(g) ==
        std::vector<OpKind>{OpKind::Transpose, OpKind::Reshape, OpKind::MaxPool,
                            OpKind::Sub, OpKind::Exp, OpKind::GlobalAveragePool,
                            OpKind::Mul, OpKind::Log, OpKind::Add,
                            OpKind::Reshape});
  CHECK(valueNamed(g, "y#rows").dims == std::vector<int64_t>{2, 15, 1, 2});
  CHECK(valueNamed(g, "y#max").dims == std::vector<int64_t>{2, 15, 1, 1});
  // The shift and the final sum read the same maximum.
  CHECK(g.ops[3].inputs[1] == g.ops[2].outputs[0]);
  CHECK(g.ops[8].inputs[1] == g.ops[2].outputs[0]);
  CHECK(g.values[g.ops[6].inputs[1]].data == std::vector<float>{2.0f});
  CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{2, 1, 3, 5});
}

TEST_CASE("norms and log-sum-exps of constants fold",
          "[onnx][import][reduce]") {
  // c = [[3, -4], [1000, 1000]]: L1 over axis 1 [7, 2000], L2 [5, 1414.2],
  // sum of squares [25, 2e6], log-sum-exp [3 + ln(1 + e^-7), 1000 + ln 2] (no
  // overflow at 1000).
  auto folded = [](const char *op) {
    OnnxBuilder b(13);
    b.input("x", {-1, 2})
        .node("Constant", {}, {"c"}, {floatValue({2, 2}, {3, -4, 1000, 1000})})
        .node(op, {"c"}, {"r"}, {attrInts("axes", {1}), attrInt("keepdims", 0)})
        .node("Mul", {"x", "r"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Mul});
    return g.values[g.ops[0].inputs[1]].data;
  };
  CHECK(folded("ReduceL1") == std::vector<float>{7, 2000});
  std::vector<float> l2 = folded("ReduceL2");
  CHECK(l2[0] == 5.0f);
  CHECK(l2[1] == Approx(1414.2136f));
  CHECK(folded("ReduceSumSquare") == std::vector<float>{25, 2e6f});
  std::vector<float> lse = folded("ReduceLogSumExp");
  CHECK(lse[0] == Approx(3.0 + std::log1p(std::exp(-7.0))));
  CHECK(lse[1] == Approx(1000.0 + std::log(2.0)));
}

TEST_CASE("a reduction of a value whose batch is on axis 1 keeps it there",
          "[onnx][import][reduce]") {
  // [N, T, C] transposed to [T, N, C] (sequence-first): the mean over C
  // keeps T and the batch; over the batch's axis, or over T before it, it
  // is refused (T before the batch would move the batch).
  auto model = [](std::vector<int64_t> axes) {
    OnnxBuilder b(17);
    b.input("x", {-1, 3, 4})
        .node("Transpose", {"x"}, {"t"}, {attrInts("perm", {1, 0, 2})})
        .node("ReduceMean", {"t"}, {"y"}, {attrInts("axes", axes)}, "rm")
        .output("y", 3);
    return b;
  };
  Graph g = importOk(model({2}), batchOf(2));
  const Value &y = g.values[g.output];
  CHECK(y.dims == std::vector<int64_t>{3, 2, 1});
  CHECK(y.batchAxis == 1);
  for (std::vector<int64_t> axes :
       {std::vector<int64_t>{1}, std::vector<int64_t>{0}})
    CHECK_THAT(errorText(model(axes).import(batchOf(2))),
               Contains("'rm'") && Contains("over axes after the batch's"));
}
