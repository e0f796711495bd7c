//===- OnnxFoldBatchFillTest.cpp - Constants filled over the batch --------===//
//
// A model called without an attention mask builds one of ones the size of
// the batch (ConstantOfShape of [N, T]), tiles a causal mask over it, or
// expands its positions over it. Such a constant is stored with extent 1 on
// the batch's axis and followed through elementwise ops, Unsqueeze,
// Expand, Slice, Gather and MatMul; anything that would compute across
// the batch is an error. max(x, c) is a one-sided Clip.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

TEST_CASE("an attention mask of ones over the batch folds to one row",
          "[onnx][fold]") {
  // mask = ones(N, 3); y = x + (1 - mask[:, None, :]) * -100, x [N, 2, 3].
  OnnxBuilder b;
  b.input("x", {-1, 2, 3})
      .node("Shape", {"x"}, {"s"})
      .constInt64("i0", {1}, {0})
      .node("Gather", {"s", "i0"}, {"n"})
      .constInt64("three", {1}, {3})
      .node("Concat", {"n", "three"}, {"shape"}, {attrInt("axis", 0)})
      .node("ConstantOfShape", {"shape"}, {"mask"}, {floatValue({1}, {1.0f})})
      .constInt64("ax1", {1}, {1})
      .node("Unsqueeze", {"mask", "ax1"}, {"m3"})
      .constFloat("one", 1.0f)
      .node("Sub", {"one", "m3"}, {"inv"})
      .constFloat("big", -100.0f)
      .node("Mul", {"inv", "big"}, {"bias"})
      .node("Add", {"x", "bias"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(4));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Add);
  const Value &bias = g.values[g.ops[0].inputs[1]];
  CHECK(bias.dims == std::vector<int64_t>{1, 1, 3});
  CHECK(bias.data == std::vector<float>{0.0f, 0.0f, 0.0f});
}

TEST_CASE("a constant filled over the batch is refused where the batch "
          "would count",
          "[onnx][fold]") {
  // CumSum along the batch's own axis would sum N ones: not stored.
  OnnxBuilder b;
  b.input("x", {-1, 3})
      .node("Shape", {"x"}, {"s"})
      .node("ConstantOfShape", {"s"}, {"ones"})
      .constInt64("ax0", {}, {0})
      .node("CumSum", {"ones", "ax0"}, {"c"}, {}, "sum_over_batch")
      .node("Add", {"x", "c"}, {"y"})
      .output("y", 2);
  CHECK_THAT(errorText(b.import(batchOf(4))),
             Contains("'sum_over_batch'") &&
                 Contains("on a constant filled over the batch"));
}

TEST_CASE("Tile of a causal mask over the batch, MatMul of constants",
          "[onnx][fold]") {
  // tri [1, 1, 2, 2] tiled [N, 1, 1, 1]; pos [1, 2, 1] @ f [1, 1, 2].
  OnnxBuilder b;
  b.input("x", {-1, 1, 2, 2})
      .node("Shape", {"x"}, {"s"})
      .constInt64("i0", {1}, {0})
      .node("Gather", {"s", "i0"}, {"n"})
      .constInt64("ones3", {3}, {1, 1, 1})
      .node("Concat", {"n", "ones3"}, {"reps"}, {attrInt("axis", 0)})
      .node("Constant", {}, {"tri"}, {floatValue({1, 1, 2, 2}, {0, -9, 0, 0})})
      .node("Tile", {"tri", "reps"}, {"mask"})
      .node("Add", {"x", "mask"}, {"y"})
      .output("y", 4);
  Graph g = importOk(b, batchOf(3));
  REQUIRE(g.ops.size() == 1);
  const Value &mask = g.values[g.ops[0].inputs[1]];
  CHECK(mask.dims == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(mask.data == std::vector<float>{0, -9, 0, 0});

  OnnxBuilder m;
  m.input("x", {-1, 2, 2})
      .node("Constant", {}, {"p"}, {floatValue({1, 2, 1}, {1, 2})})
      .node("Constant", {}, {"f"}, {floatValue({1, 1, 2}, {3, 5})})
      .node("MatMul", {"p", "f"}, {"pf"})
      .node("Mul", {"x", "pf"}, {"y"})
      .output("y", 3);
  Graph gm = importOk(m, batchOf(2));
  REQUIRE(gm.ops.size() == 1);
  CHECK(gm.values[gm.ops[0].inputs[1]].data == std::vector<float>{3, 5, 6, 10});
}

TEST_CASE("max of scores and a constant clips them", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 4})
      .constFloat("lo", -3.0f)
      .node("Max", {"x", "lo"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Clip);
  CHECK(g.ops[0].attrs.minValue == -3.0f);
  CHECK(g.ops[0].attrs.maxValue > 1e38f);
  OnnxBuilder two;
  two.input("x", {-1, 4})
      .node("Relu", {"x"}, {"r"})
      .node("Min", {"x", "r"}, {"y"}, {}, "min2")
      .output("y", 2);
  CHECK_THAT(errorText(two.import(batchOf(2))),
             Contains("'min2'") && Contains("of an activation and a scalar "
                                            "constant"));
}

TEST_CASE("a mask filled over the batch reshaped to [N, 1, 1, T] keeps it "
          "on axis 0",
          "[onnx][fold]") {
  // DistilBERT: mask = ones(N, 3); (mask == 0).view(N, 1, 1, 3) fills
  // scores x [N, 2, 3, 3] where true; a target that moves the batch fails.
  auto build = [](bool moveBatch) {
    OnnxBuilder b;
    b.input("x", {-1, 2, 3, 3})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i0", {1}, {0})
        .node("Gather", {"s", "i0"}, {"n"})
        .constInt64("three", {1}, {3})
        .node("Concat", {"n", "three"}, {"shape"}, {attrInt("axis", 0)})
        .node("ConstantOfShape", {"shape"}, {"mask"}, {floatValue({1}, {1.0f})})
        .constFloat("zero", 0.0f)
        .node("Equal", {"mask", "zero"}, {"pad"})
        .constInt64("ones", {2}, {1, 1})
        .node("Concat", {"n", moveBatch ? "three" : "ones", "three"},
              {"target"}, {attrInt("axis", 0)});
    if (moveBatch)
      b.constInt64("last", {1}, {1})
          .node("Concat", {"last", "target"}, {"t4"}, {attrInt("axis", 0)});
    b.node("Reshape", {"pad", moveBatch ? "t4" : "target"}, {"m4"})
        .constFloat("fill", -5.0f)
        .node("Where", {"m4", "fill", "x"}, {"y"})
        .output("y", 4);
    return b;
  };
  Graph g = importOk(build(false), batchOf(4));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Where);
  const Value &mask = g.values[g.ops[0].inputs[1]];
  CHECK(mask.dims == std::vector<int64_t>{1, 1, 1, 3});
  CHECK(mask.data == std::vector<float>{0.0f, 0.0f, 0.0f});
  std::string err = errorText(build(true).import(batchOf(4)));
  CHECK_THAT(err, Contains("(Reshape)") &&
                      Contains("keep the batch alone on axis 0"));
}

TEST_CASE("Split of a constant folds into its parts", "[onnx][fold]") {
  // table [2, 4] = 0..7 split along axis 1 as [1, 3] (GPT-J's sin and cos
  // from one table): y = (x + table[:, 1:]) * table[:, :1], x [N, 2, 3].
  OnnxBuilder b;
  b.input("x", {-1, 2, 3})
      .node("Constant", {}, {"table"},
            {floatValue({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})})
      .constInt64("sizes", {2}, {1, 3})
      .node("Split", {"table", "sizes"}, {"head", "rest"}, {attrInt("axis", 1)})
      .node("Add", {"x", "rest"}, {"h"})
      .node("Mul", {"h", "head"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Add, OpKind::Mul});
  const Value &rest = g.values[g.ops[0].inputs[1]];
  CHECK(rest.dims == std::vector<int64_t>{2, 3});
  CHECK(rest.data == std::vector<float>{1, 2, 3, 5, 6, 7});
  const Value &head = g.values[g.ops[1].inputs[1]];
  CHECK(head.dims == std::vector<int64_t>{2, 1});
  CHECK(head.data == std::vector<float>{0, 4});

  // Filled over the batch ([N, 4] of ones), split along the other axis in
  // equal parts: each part keeps the batch's axis, stored as 1.
  auto filled = [](int64_t axis) {
    OnnxBuilder f;
    f.input("x", {-1, 2})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i0", {1}, {0})
        .node("Gather", {"s", "i0"}, {"n"})
        .constInt64("four", {1}, {4})
        .node("Concat", {"n", "four"}, {"shape"}, {attrInt("axis", 0)})
        .node("ConstantOfShape", {"shape"}, {"ones"}, {floatValue({1}, {1.0f})})
        .node("Split", {"ones"}, {"p", "q"}, {attrInt("axis", axis)},
              "split_ones")
        .node("Add", {"x", "q"}, {"y"})
        .output("y", 2);
    return f;
  };
  Graph gf = importOk(filled(1), batchOf(4));
  REQUIRE(opKinds(gf) == std::vector<OpKind>{OpKind::Add});
  CHECK(gf.values[gf.ops[0].inputs[1]].dims == std::vector<int64_t>{1, 2});
  CHECK(gf.values[gf.ops[0].inputs[1]].data == std::vector<float>{1, 1});
  // Along the batch it would split samples that are not stored.
  CHECK_THAT(errorText(filled(0).import(batchOf(4))),
             Contains("'split_ones'") && Contains("splits the batch's axis"));
}

TEST_CASE("Split of a parameter is a value without a batch", "[onnx][fold]") {
  OnnxBuilder b;
  b.input("x", {-1, 2, 2})
      .init("w", {2, 4})
      .node("Split", {"w"}, {"w0", "w1"}, {attrInt("axis", 1)})
      .node("Add", {"x", "w1"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  CHECK(opKinds(g) ==
        std::vector<OpKind>{OpKind::Embedding, OpKind::Slice, OpKind::Add});
  CHECK(!valueNamed(g, "w1").batched);
  CHECK(valueNamed(g, "w1").dims == std::vector<int64_t>{2, 2});
  CHECK(valueNamed(g, "w").trainable);
}

TEST_CASE("a large mask read twice outlives the steps that built it",
          "[onnx][fold]") {
  // bias = (rows < cols) * -100 over 1024 positions, added to x and,
  // doubled, to its Relu: each step's 1M elements are let go after their
  // last reader (Importer::run), the bias only once the Mul has folded it
  // again after the first Add read it.
  OnnxBuilder b;
  b.input("x", {-1, 1024, 1024})
      .constInt64("zero", {}, {0})
      .constInt64("len", {}, {1024})
      .constInt64("step", {}, {1})
      .node("Range", {"zero", "len", "step"}, {"pos"})
      .constInt64("ax1", {1}, {1})
      .node("Unsqueeze", {"pos", "ax1"}, {"rows"})
      .constInt64("ax0", {1}, {0})
      .node("Unsqueeze", {"pos", "ax0"}, {"cols"})
      .node("Less", {"rows", "cols"}, {"above"})
      .node("Cast", {"above"}, {"abovef"}, {attrInt("to", 1)})
      .constFloat("big", -100.0f)
      .node("Mul", {"abovef", "big"}, {"bias"})
      .node("Add", {"x", "bias"}, {"h"})
      .node("Relu", {"h"}, {"r"})
      .constFloat("two", 2.0f)
      .node("Mul", {"bias", "two"}, {"bias2"})
      .node("Add", {"r", "bias2"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 3);
  for (int k : {0, 2}) {
    CHECK(g.ops[k].kind == OpKind::Add);
    const Value &bias = g.values[g.ops[k].inputs[1]];
    const float above = k == 0 ? -100.0f : -200.0f;
    REQUIRE(bias.dims == std::vector<int64_t>{1024, 1024});
    CHECK(bias.data[0] == 0.0f);    // the diagonal
    CHECK(bias.data[1] == above);   // above it
    CHECK(bias.data[1024] == 0.0f); // below it
    CHECK(bias.data[1024 * 1024 - 1] == 0.0f);
  }
}
