//===- OnnxImportShapeTest.cpp - ONNX importer: folding, batch, weights ---===//
//
// Reshape targets folded from shape arithmetic, Flatten, Identity, the batch
// dimension and how weights are read or declared. Each test states the
// whole model and the exact dims the importer must produce.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "compiler/ir/Graph.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

TEST_CASE("Reshape target folded from Shape, Gather, Unsqueeze and Concat",
          "[onnx][import][fold]") {
  // x.view(x.size(0), -1) as PyTorch exports it.
  for (int64_t opset : {11, 13}) {
    INFO("opset " << opset);
    OnnxBuilder b(opset);
    b.input("x", {-1, 3, 4, 5})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i0", {}, {0})
        .node("Gather", {"s", "i0"}, {"n"}, {attrInt("axis", 0)});
    if (opset >= 13)
      b.constInt64("ax", {1}, {0}).node("Unsqueeze", {"n", "ax"}, {"n1"});
    else
      b.node("Unsqueeze", {"n"}, {"n1"}, {attrInts("axes", {0})});
    b.constInt64("m1", {1}, {-1})
        .node("Concat", {"n1", "m1"}, {"shape"}, {attrInt("axis", 0)})
        .node("Reshape", {"x", "shape"}, {"y"}, {}, "flatten")
        .node("Relu", {"y"}, {"z"})
        .output("z", 2);
    Graph g = importOk(b, batchOf(7));
    CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Reshape, OpKind::Relu});
    CHECK(g.ops[0].name == "flatten");
    CHECK(g.ops[0].attrs.shape == std::vector<int64_t>{7, 60});
    CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{7, 60});
    CHECK(g.ops[0].inputs == std::vector<ValueId>{g.input});
  }
}

TEST_CASE("Reshape target folded through Slice and Cast keeps the batch",
          "[onnx][import][fold]") {
  // x.view(*x.shape[:2], -1)
  OnnxBuilder b;
  b.input("x", {-1, 3, 4, 5})
      .node("Shape", {"x"}, {"s"})
      .constInt64("st", {1}, {0})
      .constInt64("en", {1}, {2})
      .node("Slice", {"s", "st", "en"}, {"s2"})
      .node("Cast", {"s2"}, {"s3"}, {attrInt("to", 7)})
      .constInt64("m1", {1}, {-1})
      .node("Concat", {"s3", "m1"}, {"shape"}, {attrInt("axis", 0)})
      .node("Reshape", {"x", "shape"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(4));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].attrs.shape == std::vector<int64_t>{4, 3, 20});
}

TEST_CASE("Reshape literals and batch", "[onnx][import][fold]") {
  SECTION("a fixed-batch model spells the batch as a literal") {
    OnnxBuilder b;
    b.input("x", {2, 3, 4, 5})
        .initInt64("t", {2}, {2, -1})
        .node("Reshape", {"x", "t"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b, batchOf(5));
    CHECK(g.ops[0].attrs.shape == std::vector<int64_t>{5, 60});
  }
  SECTION("0 copies and -1 infers") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4, 5})
        .initInt64("t", {3}, {0, -1, 5})
        .node("Reshape", {"x", "t"}, {"y"})
        .output("y", 3);
    Graph g = importOk(b, batchOf(2));
    CHECK(g.ops[0].attrs.shape == std::vector<int64_t>{2, 12, 5});
  }
  SECTION("-1 on axis 0 is the batch when the rest is one sample") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4, 5})
        .initInt64("t", {2}, {-1, 60})
        .node("Reshape", {"x", "t"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b, batchOf(2));
    CHECK(g.ops[0].attrs.shape == std::vector<int64_t>{2, 60});
  }
}

TEST_CASE("Flatten", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 2, 3, 4})
      .node("Flatten", {"x"}, {"y"}, {attrInt("axis", 1)})
      .output("y", 2);
  Graph g = importOk(b, batchOf(3));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Flatten);
  CHECK(g.ops[0].attrs.axis == 1);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{3, 24});

  // Axis 2 merges only a unit axis with the batch: allowed.
  OnnxBuilder b2;
  b2.input("x", {-1, 1, 3, 4})
      .node("Flatten", {"x"}, {"y"}, {attrInt("axis", 2)})
      .output("y", 2);
  Graph g2 = importOk(b2, batchOf(3));
  CHECK(g2.ops[0].attrs.axis == 2);
  CHECK(g2.values[g2.output].dims == std::vector<int64_t>{3, 12});
}

TEST_CASE("Identity nodes disappear", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {2, 3})
      .node("Identity", {"x"}, {"a"})
      .node("Relu", {"a"}, {"r"})
      .node("Identity", {"r"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b);
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Relu);
  CHECK(g.ops[0].inputs == std::vector<ValueId>{g.input});
  CHECK(g.output == g.ops[0].outputs[0]);
  CHECK(g.values.size() == 2);
}

TEST_CASE("Identity of an initializer is a weight of its own",
          "[onnx][import]") {
  // PyTorch's eval-mode export stores equal parameters once and recreates
  // the others with Identity; in training they are separate parameters.
  OnnxBuilder b;
  b.input("x", {-1, 3, 2, 2})
      .init("s", {3}, {1, 1, 1})
      .init("bb", {3}, {0, 0, 0})
      .node("Identity", {"s"}, {"s2"})
      .node("Identity", {"bb"}, {"m"})
      .node("Identity", {"s"}, {"v"})
      .node("BatchNormalization", {"x", "s", "bb", "m", "v"}, {"y"})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  std::vector<ValueId> ws = g.weights();
  REQUIRE(ws.size() == 4);
  CHECK(g.values[ws[0]].name == "s");
  CHECK(g.values[ws[2]].name == "m");
  CHECK(g.values[ws[3]].name == "v");
  CHECK(g.values[ws[3]].data == std::vector<float>{1, 1, 1});
  CHECK(g.values[ws[0]].trainable);
  CHECK_FALSE(g.values[ws[3]].trainable);
}

TEST_CASE("Batch: symbolic, fixed, or overridden", "[onnx][import][batch]") {
  auto model = [](int64_t batchDim) {
    OnnxBuilder b;
    b.input("x", {batchDim, 3, 8, 8})
        .init("w", {4, 3, 3, 3})
        .node("Conv", {"x", "w"}, {"c"}, {attrInts("pads", {1, 1, 1, 1})})
        .node("Relu", {"c"}, {"r"})
        .node("Flatten", {"r"}, {"y"})
        .output("y", 2);
    return b;
  };
  auto batches = [](const Graph &g) {
    std::vector<int64_t> out;
    for (const Value &v : g.values)
      if (v.batched)
        out.push_back(v.dims[0]);
    return out;
  };
  SECTION("symbolic with a batch size") {
    Graph g = importOk(model(-1), batchOf(3));
    CHECK(g.batch == 3);
    CHECK(batches(g) == std::vector<int64_t>{3, 3, 3, 3});
    CHECK(g.values[g.output].dims == std::vector<int64_t>{3, 256});
  }
  SECTION("fixed") {
    Graph g = importOk(model(5));
    CHECK(g.batch == 5);
    CHECK(batches(g) == std::vector<int64_t>{5, 5, 5, 5});
  }
  SECTION("fixed, overridden") {
    Graph g = importOk(model(5), batchOf(2));
    CHECK(g.batch == 2);
    CHECK(batches(g) == std::vector<int64_t>{2, 2, 2, 2});
  }
  SECTION("symbolic without a batch size is an error") {
    std::string err = errorText(model(-1).import());
    CHECK_THAT(err, Catch::Contains("'test.onnx'") &&
                        Catch::Contains("symbolic batch dimension ('N')") &&
                        Catch::Contains("give a batch size"));
  }
}

TEST_CASE("Weights declared without data get an initialization",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 3, 8, 8})
      .input("conv.w", {4, 3, 3, 3})
      .input("conv.b", {4})
      .input("bn.s", {4})
      .input("bn.b", {4})
      .input("bn.m", {4})
      .input("bn.v", {4})
      .input("fc.w", {144, 10})
      .input("fc.b", {10})
      .node("Conv", {"x", "conv.w", "conv.b"}, {"c"})
      .node("BatchNormalization", {"c", "bn.s", "bn.b", "bn.m", "bn.v"}, {"n"})
      .node("Flatten", {"n"}, {"f"})
      .node("Gemm", {"f", "fc.w", "fc.b"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  auto check = [&](const char *name, WeightInit init, bool trainable) {
    INFO(name);
    const Value &v = valueNamed(g, name);
    CHECK(v.kind == ValueKind::Weight);
    CHECK(v.init == init);
    CHECK(v.trainable == trainable);
    CHECK(v.data.empty());
  };
  check("conv.w", WeightInit::HeNormal, true);
  check("conv.b", WeightInit::Zeros, true);
  check("bn.s", WeightInit::Ones, true);
  check("bn.b", WeightInit::Zeros, true);
  check("bn.m", WeightInit::Zeros, false);
  check("bn.v", WeightInit::Ones, false);
  check("fc.w", WeightInit::GlorotUniform, true);
  check("fc.b", WeightInit::Zeros, true);
  CHECK(g.input == 0);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 10});
}

TEST_CASE("keepWeightData=false drops initializer contents", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {1, 3, 4, 4})
      .init("w", {2, 3, 1, 1})
      .node("Conv", {"x", "w"}, {"y"})
      .output("y", 4);
  ImportOptions o;
  o.keepWeightData = false;
  Graph g = importOk(b, o);
  const Value &w = valueNamed(g, "w");
  CHECK(w.data.empty());
  CHECK(w.init == WeightInit::FromData);
  CHECK(w.bytesAt(1) == 24);
}

TEST_CASE("float_data initializers and initializers listed as inputs",
          "[onnx][import]") {
  // keep_initializers_as_inputs style: the weight is also a graph input, and
  // listed before the data input.
  OnnxBuilder b;
  b.input("w", {2, 3}).input("x", {-1, 3});
  pb::TensorProto *t = b.model.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(pb::TensorProto::FLOAT);
  t->add_dims(2);
  t->add_dims(3);
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f})
    t->add_float_data(v);
  b.node("Gemm", {"x", "w"}, {"y"}, {attrInt("transB", 1)}).output("y", 2);
  Graph g = importOk(b, batchOf(2));
  CHECK(g.values[g.input].name == "x");
  const Value &w = valueNamed(g, "w");
  CHECK(w.kind == ValueKind::Weight);
  CHECK(w.data == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 2});
}

TEST_CASE("ConvTranspose: output size from stride, pads and output_padding",
          "[onnx][import]") {
  auto convT = [](std::vector<pb::AttributeProto> attrs,
                  std::vector<int64_t> w = {4, 3, 3, 3}) {
    OnnxBuilder b;
    b.input("x", {-1, 4, 5, 5})
        .init("w", w)
        .init("b", {w[1] * 2})
        .node("ConvTranspose", {"x", "w", "b"}, {"y"}, attrs, "ct")
        .output("y", 4);
    return b;
  };
  // 2 * (5 - 1) + 1 + (3 - 1) + 1 - 1 - 1 = 10; two groups of 3 channels.
  Graph g = importOk(
      convT({attrInts("strides", {2, 2}), attrInts("pads", {1, 1, 1, 1}),
             attrInts("output_padding", {1, 1}), attrInt("group", 2)}),
      batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::ConvTranspose);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 6, 10, 10});
  CHECK(g.ops[0].inputs.size() == 3);

  CHECK_THAT(
      errorText(convT({attrInts("strides", {2, 2}),
                       attrInts("output_padding", {2, 0}), attrInt("group", 2)})
                    .import(batchOf(2))),
      Contains("'ct' (ConvTranspose)") &&
          Contains("output_padding must be below the stride"));
  CHECK_THAT(
      errorText(convT({attrInts("output_shape", {9, 9}), attrInt("group", 2)})
                    .import(batchOf(2))),
      Contains("output_shape [9, 9] differs"));
  // The bias has 2 * 3 entries but one group gives 3 output channels.
  CHECK_THAT(errorText(convT({}).import(batchOf(2))),
             Contains("bias of shape [6] must be [3]"));
}

TEST_CASE("Resize: scales and sizes", "[onnx][import]") {
  auto resize = [](std::vector<float> scales,
                   std::vector<pb::AttributeProto> attrs) {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4, 6})
        .init("scales", {4}, scales)
        .node("Resize", {"x", "", "scales"}, {"y"}, attrs, "rs")
        .output("y", 4);
    return b;
  };
  Graph g = importOk(resize({1, 1, 2, 1.5f}, {attrStr("mode", "linear")}),
                     batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Resize);
  CHECK(g.ops[0].attrs.linear);
  CHECK(g.ops[0].attrs.coordMode == 0); // half_pixel, opset 11+'s default
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3, 8, 9});

  CHECK_THAT(errorText(resize({2, 1, 1, 1}, {}).import(batchOf(2))),
             Contains("'rs' (Resize)") &&
                 Contains("scales must be 1 on the batch and the channels"));
  CHECK_THAT(
      errorText(
          resize({1, 1, 2, 2}, {attrStr("mode", "cubic")}).import(batchOf(2))),
      Contains("mode 'cubic' is not supported"));

  // torch writes the sizes of F.interpolate(size=...) from the input's
  // shape: the batch stays symbolic.
  OnnxBuilder b;
  b.input("x", {-1, 3, 4, 6})
      .node("Shape", {"x"}, {"s"})
      .constInt64("st", {1}, {0})
      .constInt64("en", {1}, {2})
      .node("Slice", {"s", "st", "en"}, {"nc"})
      .constInt64("hw", {2}, {5, 7})
      .node("Concat", {"nc", "hw"}, {"sizes"}, {attrInt("axis", 0)})
      .node("Resize", {"x", "", "", "sizes"}, {"y"},
            {attrStr("mode", "linear"),
             attrStr("coordinate_transformation_mode", "align_corners")})
      .output("y", 4);
  Graph g2 = importOk(b, batchOf(3));
  CHECK(g2.values[g2.output].dims == std::vector<int64_t>{3, 3, 5, 7});
  CHECK(g2.ops.back().attrs.coordMode == 2);
}

// A GPT-2-style block as torch.onnx.export writes it with and without
// export_params: Linear on a 3-D input is MatMul(x, Transpose(W)) + b, and
// the embedding is a Gather from a table. Declared weights must plan exactly
// like initializers: the same ops, the same weight dims and bytes, no data.
static OnnxBuilder gptBlock(bool declared) {
  const int64_t vocab = 11, t = 5, d = 8, f = 16;
  OnnxBuilder b(17); // LayerNormalization is opset 17
  b.input("ids", {-1, t}, pb::TensorProto::INT64);
  auto weight = [&](const std::string &name, std::vector<int64_t> dims) {
    if (declared)
      b.input(name, dims);
    else
      b.init(name, dims);
  };
  weight("wte", {vocab, d});
  weight("ln.g", {d});
  weight("ln.b", {d});
  weight("fc.w", {f, d});
  weight("fc.b", {f});
  weight("proj.w", {d, f});
  b.node("Gather", {"wte", "ids"}, {"h"})
      .node("LayerNormalization", {"h", "ln.g", "ln.b"}, {"n"},
            {attrInt("axis", -1)})
      .node("Transpose", {"fc.w"}, {"fc.wt"}, {attrInts("perm", {1, 0})})
      .node("MatMul", {"n", "fc.wt"}, {"m"})
      .node("Add", {"m", "fc.b"}, {"a"})
      .node("Relu", {"a"}, {"r"})
      .node("Transpose", {"proj.w"}, {"proj.wt"})
      .node("MatMul", {"r", "proj.wt"}, {"y"})
      .output("y", 3);
  return b;
}

TEST_CASE("Weights declared as graph inputs plan like initializers",
          "[onnx][import]") {
  ImportOptions o = batchOf(4);
  o.keepWeightData = false;
  Graph withInit = importOk(gptBlock(false), o);
  Graph declared = importOk(gptBlock(true), o);
  CHECK(opKinds(declared) == opKinds(withInit));
  int64_t initBytes = 0, declaredBytes = 0, weights = 0;
  for (const Value &v : withInit.values) {
    if (v.kind != ValueKind::Weight)
      continue;
    ++weights;
    INFO(v.name);
    const Value &w = valueNamed(declared, v.name);
    CHECK(w.kind == ValueKind::Weight);
    CHECK(w.dims == v.dims);
    CHECK(w.trainable == v.trainable);
    CHECK(w.data.empty());
    CHECK(w.init != WeightInit::FromData);
    initBytes += v.bytesAt(4);
    declaredBytes += w.bytesAt(4);
  }
  CHECK(weights == 6);
  // 11*8 + 8 + 8 + 16*8 + 16 + 8*16 floats.
  CHECK(initBytes == (88 + 16 + 128 + 16 + 128) * 4);
  CHECK(declaredBytes == initBytes);
  CHECK(declared.values[declared.output].dims == std::vector<int64_t>{4, 5, 8});
}

TEST_CASE("A declared weight transposed other than as a 2-D matrix",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 2, 3})
      .input("w", {3, 3, 3})
      .node("Transpose", {"w"}, {"wt"}, {attrInts("perm", {2, 1, 0})}, "t")
      .node("MatMul", {"x", "wt"}, {"y"})
      .output("y", 3);
  // Permuted as a value, it is no MatMul weight operand, and it has no
  // batch to multiply the activation's by.
  CHECK_THAT(errorText(b.import(batchOf(2))),
             Contains("by 'wt' of shape [3, 3, 3] (computed from weights") &&
                 Contains("do not multiply as batched matrices"));
}

TEST_CASE("Slice reads its operands alike folded and translated",
          "[onnx][import][fold]") {
  // The same operands slice a constant shape vector (folded) and an
  // activation (translated): axis -1 from 1 to 3 of [N, 6, 4, 5] keeps
  // [N, 6, 4, 2] one way and the elements [6, 4] of Shape the other.
  auto model = [](bool folded, std::vector<int64_t> axes) {
    OnnxBuilder b;
    b.input("x", {-1, 6, 4, 5})
        .constInt64("st", {1}, {1})
        .constInt64("en", {1}, {3})
        .constInt64("ax", {static_cast<int64_t>(axes.size())}, axes);
    if (folded)
      b.node("Shape", {"x"}, {"s"})
          .node("Slice", {"s", "st", "en", "ax"}, {"s2"}, {}, "sl")
          .constInt64("m1", {2}, {0, -1})
          .node("Concat", {"m1", "s2"}, {"shape"}, {attrInt("axis", 0)})
          .node("Reshape", {"x", "shape"}, {"y"})
          .output("y", 4);
    else
      b.node("Slice", {"x", "st", "en", "ax"}, {"y"}, {}, "sl").output("y", 4);
    return b;
  };
  Graph folded = importOk(model(true, {-1}), batchOf(2));
  CHECK(folded.ops.back().attrs.shape == std::vector<int64_t>{2, 5, 6, 4});
  Graph translated = importOk(model(false, {-1}), batchOf(2));
  CHECK(valueNamed(translated, "y").dims == std::vector<int64_t>{2, 6, 4, 2});
  // Two axes for one start and end: the same error either way.
  for (bool f : {true, false})
    CHECK_THAT(errorText(model(f, {0, 1}).import(batchOf(2))),
               Contains("'sl' (Slice)") &&
                   Contains("starts, ends, axes and steps differ in length"));
}

TEST_CASE("Gather of an activation by a one-element index keeps the axis",
          "[onnx][import]") {
  // Falcon's fused_qkv[..., [-2], :]: x [N, 2, 3, 4] at index [-2] on axis 2.
  OnnxBuilder b;
  b.input("x", {-1, 2, 3, 4})
      .constInt64("i", {1}, {-2})
      .node("Gather", {"x", "i"}, {"y"}, {attrInt("axis", 2)})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Slice});
  CHECK(g.ops[0].attrs.starts == std::vector<int64_t>{0, 0, 1, 0});
  CHECK(g.ops[0].attrs.extents == std::vector<int64_t>{2, 2, 1, 4});
  CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{2, 2, 1, 4});
}
