//===- OnnxImportTest.cpp - ONNX importer: operators ----------------------===//
//
// Each test writes a small model with OnnxBuilder and states the exact ops,
// dims and attributes the importer must produce. Folding, batch and weight
// handling are in OnnxImportShapeTest.cpp, error cases in
// OnnxImportErrorTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "compiler/ir/Graph.h"
#include "compiler/ops/OpDef.h"

#include <catch2/catch.hpp>

#include <limits>

using namespace memfit;
using namespace memfit::test;

TEST_CASE("Conv with groups, strides, pads, dilations and bias",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 4, 10, 12})
      .init("w", {6, 2, 3, 3})
      .init("bias", {6})
      .node("Conv", {"x", "w", "bias"}, {"y"},
            {attrInt("group", 2), attrInts("strides", {2, 1}),
             attrInts("pads", {1, 0, 2, 1}), attrInts("dilations", {1, 2})},
            "conv1")
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Op &op = g.ops[0];
  CHECK(op.kind == OpKind::Conv);
  CHECK(op.name == "conv1");
  CHECK(op.onnxOp == "Conv");
  CHECK(op.attrs.kernel == std::vector<int64_t>{3, 3});
  CHECK(op.attrs.strides == std::vector<int64_t>{2, 1});
  CHECK(op.attrs.pads == std::vector<int64_t>{1, 0, 2, 1});
  CHECK(op.attrs.dilations == std::vector<int64_t>{1, 2});
  CHECK(op.attrs.group == 2);
  // Dense ids: the data input, then weights in operand order, then y.
  CHECK(op.inputs == std::vector<ValueId>{0, 1, 2});
  CHECK(op.outputs == std::vector<ValueId>{3});
  CHECK(g.input == 0);
  CHECK(g.output == 3);
  CHECK(g.batch == 2);
  // H: (10 + 1 + 2 - 3) / 2 + 1 = 6; W: (12 + 0 + 1 - 5) / 1 + 1 = 9.
  CHECK(g.values[3].dims == std::vector<int64_t>{2, 6, 6, 9});
  CHECK(g.values[3].batched);
  const Value &w = g.values[1];
  CHECK(w.kind == ValueKind::Weight);
  CHECK(w.dims == std::vector<int64_t>{6, 2, 3, 3});
  CHECK_FALSE(w.batched);
  CHECK(w.trainable);
  CHECK(w.init == WeightInit::FromData);
  REQUIRE(w.data.size() == 108);
  CHECK(w.data[0] == 0.5f);
  CHECK(w.data[107] == ramp({108})[107]);
  CHECK(g.values[2].dims == std::vector<int64_t>{6});
  CHECK(g.weightBytes() == (108 + 6) * 4);
}

TEST_CASE("Conv auto_pad resolves to explicit pads", "[onnx][import]") {
  struct Case {
    const char *mode;
    std::vector<int64_t> pads;
    int64_t out;
  };
  // 5 wide, kernel 2, stride 2: SAME gives ceil(5/2) = 3 outputs and one
  // pad, at the end (UPPER) or the beginning (LOWER); VALID gives 2.
  for (const Case &c :
       {Case{"SAME_UPPER", {0, 0, 1, 1}, 3},
        Case{"SAME_LOWER", {1, 1, 0, 0}, 3}, Case{"VALID", {0, 0, 0, 0}, 2},
        Case{"NOTSET", {0, 0, 0, 0}, 2}}) {
    INFO(c.mode);
    OnnxBuilder b;
    b.input("x", {1, 1, 5, 5})
        .init("w", {1, 1, 2, 2})
        .node("Conv", {"x", "w"}, {"y"},
              {attrStr("auto_pad", c.mode), attrInts("strides", {2, 2})})
        .output("y", 4);
    Graph g = importOk(b);
    REQUIRE(g.ops.size() == 1);
    CHECK(g.ops[0].attrs.pads == c.pads);
    CHECK(g.ops[0].attrs.strides == std::vector<int64_t>{2, 2});
    CHECK(g.ops[0].attrs.dilations == std::vector<int64_t>{1, 1});
    CHECK(g.values[g.output].dims == std::vector<int64_t>{1, 1, c.out, c.out});
  }
}

TEST_CASE("MaxPool with ceil_mode", "[onnx][import]") {
  SECTION("ceil keeps a partial last window") {
    OnnxBuilder b;
    b.input("x", {-1, 1, 6, 6})
        .node("MaxPool", {"x"}, {"y"},
              {attrInts("kernel_shape", {3, 3}), attrInts("strides", {2, 2}),
               attrInt("ceil_mode", 1)})
        .output("y", 4);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(g.ops.size() == 1);
    const Op &op = g.ops[0];
    CHECK(op.kind == OpKind::MaxPool);
    CHECK(op.attrs.ceilMode);
    CHECK(op.attrs.kernel == std::vector<int64_t>{3, 3});
    CHECK(op.attrs.pads == std::vector<int64_t>{0, 0, 0, 0});
    // floor((6 - 3) / 2) + 1 = 2; with ceil_mode 3.
    CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 1, 3, 3});
  }
  SECTION("ceil drops a window that would start in the end padding") {
    // 5 wide, pads 1+1, kernel 2, stride 2: ceil((5 + 2 - 2) / 2) + 1 = 4,
    // but the 4th window would start at padded index 6 >= 5 + 1, so
    // PyTorch (and memfit) produce 3.
    OnnxBuilder b;
    b.input("x", {1, 1, 5, 5})
        .node("MaxPool", {"x"}, {"y"},
              {attrInts("kernel_shape", {2, 2}), attrInts("strides", {2, 2}),
               attrInts("pads", {1, 1, 1, 1}), attrInt("ceil_mode", 1)})
        .node("Relu", {"y"}, {"z"})
        .output("z", 4);
    Graph g = importOk(b);
    CHECK(g.values[g.output].dims == std::vector<int64_t>{1, 1, 3, 3});
  }
}

TEST_CASE("AveragePool count_include_pad", "[onnx][import]") {
  for (int include : {0, 1}) {
    OnnxBuilder b;
    b.input("x", {1, 2, 4, 4})
        .node("AveragePool", {"x"}, {"y"},
              {attrInts("kernel_shape", {3, 3}), attrInts("pads", {1, 1, 1, 1}),
               attrInt("count_include_pad", include)})
        .output("y", 4);
    Graph g = importOk(b);
    REQUIRE(g.ops.size() == 1);
    CHECK(g.ops[0].kind == OpKind::AveragePool);
    CHECK(g.ops[0].attrs.countIncludePad == (include == 1));
    CHECK_FALSE(g.ops[0].attrs.ceilMode);
    CHECK(g.ops[0].attrs.strides == std::vector<int64_t>{1, 1});
    CHECK(g.values[g.output].dims == std::vector<int64_t>{1, 2, 4, 4});
  }
}

TEST_CASE("Gemm with transB, alpha and beta", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 8})
      .init("fc.w", {4, 8})
      .init("fc.b", {4})
      .node("Gemm", {"x", "fc.w", "fc.b"}, {"y"},
            {attrInt("transB", 1), attrFloat("alpha", 0.5f),
             attrFloat("beta", 2.0f)})
      .output("y", 2);
  Graph g = importOk(b, batchOf(3));
  REQUIRE(g.ops.size() == 1);
  const Op &op = g.ops[0];
  CHECK(op.kind == OpKind::Gemm);
  CHECK(op.attrs.transB);
  CHECK_FALSE(op.attrs.transA);
  CHECK(op.attrs.alpha == 0.5f);
  CHECK(op.attrs.beta == 2.0f);
  CHECK(op.inputs.size() == 3);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{3, 4});
}

TEST_CASE("MatMul with a weight behaves like Gemm without bias",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 5, 8})
      .init("w", {8, 3})
      .node("MatMul", {"x", "w"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::MatMul);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 5, 3});
}

TEST_CASE("Dropout: inference form disappears, training form stays",
          "[onnx][import]") {
  SECTION("opset 13 without training_mode") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .constFloat("r", 0.3f)
        .node("Dropout", {"x", "r"}, {"d"})
        .node("Relu", {"d"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b);
    CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Relu});
    CHECK(g.ops[0].inputs == std::vector<ValueId>{g.input});
  }
  SECTION("opset 13 with training_mode false") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .constFloat("r", 0.3f)
        .constBool("t", false)
        .node("Dropout", {"x", "r", "t"}, {"d"})
        .node("Relu", {"d"}, {"y"})
        .output("y", 2);
    CHECK(opKinds(importOk(b)) == std::vector<OpKind>{OpKind::Relu});
  }
  SECTION("opset 13 training") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .constFloat("r", 0.3f)
        .constBool("t", true)
        .node("Dropout", {"x", "r", "t"}, {"d", "mask"})
        .node("Relu", {"d"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b);
    REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Dropout, OpKind::Relu});
    CHECK(g.ops[0].attrs.ratio == 0.3f);
  }
  SECTION("opset 10 ratio attribute") {
    OnnxBuilder b(10);
    b.input("x", {2, 3})
        .node("Dropout", {"x"}, {"d"}, {attrFloat("ratio", 0.2f)})
        .output("d", 2);
    Graph g = importOk(b);
    REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Dropout});
    CHECK(g.ops[0].attrs.ratio == 0.2f);
  }
}

TEST_CASE("BatchNormalization in inference form becomes training BatchNorm",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 3, 4, 4})
      .init("scale", {3})
      .init("bias", {3})
      .init("mean", {3})
      .init("var", {3})
      .node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"},
            {attrFloat("epsilon", 1e-3f), attrFloat("momentum", 0.8f)})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Op &op = g.ops[0];
  CHECK(op.kind == OpKind::BatchNorm);
  CHECK(op.attrs.epsilon == 1e-3f);
  CHECK(op.attrs.momentum == 0.8f);
  REQUIRE(op.inputs.size() == 5);
  CHECK(g.values[op.inputs[1]].trainable);
  CHECK(g.values[op.inputs[2]].trainable);
  CHECK_FALSE(g.values[op.inputs[3]].trainable);
  CHECK_FALSE(g.values[op.inputs[4]].trainable);
  for (int i = 1; i < 5; ++i) {
    CHECK(g.values[op.inputs[i]].kind == ValueKind::Weight);
    CHECK(g.values[op.inputs[i]].data.size() == 3);
  }
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3, 4, 4});
}

TEST_CASE("BatchNormalization in training form with unused statistics",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {2, 3, 4, 4})
      .init("scale", {3})
      .init("bias", {3})
      .init("mean", {3})
      .init("var", {3})
      .node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
            {"y", "rm", "rv", "sm", "sv"})
      .output("y", 4);
  Graph g = importOk(b);
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::BatchNorm});
}

TEST_CASE("Clip bounds from inputs (opset 11+) and attributes (before)",
          "[onnx][import]") {
  SECTION("ReLU6 from constant inputs") {
    OnnxBuilder b(11);
    b.input("x", {2, 3})
        .constFloat("lo", 0.0f)
        .constFloat("hi", 6.0f)
        .node("Clip", {"x", "lo", "hi"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b);
    REQUIRE(g.ops.size() == 1);
    CHECK(g.ops[0].kind == OpKind::Clip);
    CHECK(g.ops[0].attrs.minValue == 0.0f);
    CHECK(g.ops[0].attrs.maxValue == 6.0f);
  }
  SECTION("absent min is unbounded") {
    OnnxBuilder b(13);
    b.input("x", {2, 3})
        .constFloat("hi", 1.5f)
        .node("Clip", {"x", "", "hi"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b);
    CHECK(g.ops[0].attrs.minValue == std::numeric_limits<float>::lowest());
    CHECK(g.ops[0].attrs.maxValue == 1.5f);
  }
  SECTION("opset 10 attributes") {
    OnnxBuilder b(10);
    b.input("x", {2, 3})
        .node("Clip", {"x"}, {"y"},
              {attrFloat("min", -1.0f), attrFloat("max", 2.0f)})
        .output("y", 2);
    Graph g = importOk(b);
    CHECK(g.ops[0].attrs.minValue == -1.0f);
    CHECK(g.ops[0].attrs.maxValue == 2.0f);
  }
}

TEST_CASE("Elementwise ops: same-shape activations or per-channel weights",
          "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 3, 4, 4})
      .init("bias", {3, 1, 1})
      .init("scale", {1, 3, 1, 1})
      .constFloat("half", 0.5f)
      .node("Add", {"x", "bias"}, {"a"})
      .node("Sub", {"bias", "a"}, {"s"})
      .node("Mul", {"s", "scale"}, {"m"})
      .node("Mul", {"half", "m"}, {"h"})
      .node("Relu", {"h"}, {"r"})
      .node("Add", {"r", "h"}, {"y"})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Add, OpKind::Sub,
                                            OpKind::Mul, OpKind::Mul,
                                            OpKind::Relu, OpKind::Add});
  ValueId bias = g.ops[0].inputs[1];
  CHECK(g.values[bias].name == "bias");
  CHECK(g.values[bias].trainable);
  // Operands keep the ONNX order: Sub(bias, a) is bias - a.
  CHECK(g.ops[1].inputs == std::vector<ValueId>{bias, g.ops[0].outputs[0]});
  const Value &half = g.values[g.ops[3].inputs[0]];
  CHECK(half.kind == ValueKind::Weight);
  CHECK_FALSE(half.trainable);
  CHECK(half.data == std::vector<float>{0.5f});
  CHECK(g.values[g.ops[5].inputs[0]].name == "r");
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3, 4, 4});
}

TEST_CASE("ReduceMean over spatial axes is a global average pool",
          "[onnx][import]") {
  SECTION("keepdims=0 adds the flatten") {
    OnnxBuilder b;
    b.input("x", {-1, 8, 5, 5})
        .node("ReduceMean", {"x"}, {"y"},
              {attrInts("axes", {2, -1}), attrInt("keepdims", 0)}, "mean")
        .output("y", 2);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(opKinds(g) ==
            std::vector<OpKind>{OpKind::GlobalAveragePool, OpKind::Reshape});
    CHECK(g.values[g.ops[0].outputs[0]].dims ==
          std::vector<int64_t>{2, 8, 1, 1});
    CHECK(g.ops[1].attrs.shape == std::vector<int64_t>{2, 8});
    CHECK(g.ops[0].onnxOp == "ReduceMean");
    CHECK(g.ops[0].name == "mean");
    CHECK(g.values[g.output].name == "y");
    CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 8});
  }
  SECTION("keepdims=1") {
    OnnxBuilder b;
    b.input("x", {2, 8, 5, 5})
        .node("ReduceMean", {"x"}, {"y"}, {attrInts("axes", {2, 3})})
        .output("y", 4);
    Graph g = importOk(b);
    REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::GlobalAveragePool});
    CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 8, 1, 1});
  }
  SECTION("the batch's axis is refused") {
    OnnxBuilder b;
    b.input("x", {2, 8, 5, 5})
        .node("ReduceMean", {"x"}, {"y"}, {attrInts("axes", {0, 1})}, "rm")
        .output("y", 4);
    CHECK_THAT(errorText(b.import()),
               Catch::Contains("'rm'") &&
                   Catch::Contains("over axes after the batch's"));
  }
}

TEST_CASE("Concat, Pad, Softmax, LRN, LeakyRelu, Sum", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {-1, 2, 3, 3})
      .node("Sigmoid", {"x"}, {"s"})
      .node("Tanh", {"x"}, {"t"})
      .node("Concat", {"s", "t", "x"}, {"c"}, {attrInt("axis", 1)})
      .constInt64("p", {8}, {0, 0, 1, 2, 0, 0, 1, 0})
      .constFloat("pv", 0.5f)
      .node("Pad", {"c", "p", "pv"}, {"pd"})
      .node("LRN", {"pd"}, {"l"},
            {attrInt("size", 3), attrFloat("alpha", 2e-4f)})
      .node("LeakyRelu", {"l"}, {"lr"}, {attrFloat("alpha", 0.2f)})
      .node("Sum", {"lr", "l", "pd"}, {"sm"})
      .node("Softmax", {"sm"}, {"y"}, {attrInt("axis", 1)})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Sigmoid, OpKind::Tanh,
                                            OpKind::Concat, OpKind::Pad,
                                            OpKind::LRN, OpKind::LeakyRelu,
                                            OpKind::Sum, OpKind::Softmax});
  CHECK(g.ops[2].attrs.axis == 1);
  CHECK(g.values[g.ops[2].outputs[0]].dims == std::vector<int64_t>{2, 6, 3, 3});
  CHECK(g.ops[3].attrs.pads == std::vector<int64_t>{0, 0, 1, 2, 0, 0, 1, 0});
  CHECK(g.ops[3].attrs.padValue == 0.5f);
  CHECK(g.values[g.ops[3].outputs[0]].dims == std::vector<int64_t>{2, 6, 5, 5});
  CHECK(g.ops[4].attrs.size == 3);
  CHECK(g.ops[4].attrs.alpha == 2e-4f);
  CHECK(g.ops[4].attrs.beta == 0.75f);
  CHECK(g.ops[5].attrs.alpha == 0.2f);
  CHECK(g.ops[6].inputs.size() == 3);
  CHECK(g.ops[7].attrs.axis == 1);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 6, 5, 5});
}

TEST_CASE("Nodes that do not reach the output are ignored", "[onnx][import]") {
  OnnxBuilder b;
  b.input("x", {2, 3})
      .node("Erf", {"x"}, {"unused"})
      .node("Relu", {"x"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b);
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Relu});
}

TEST_CASE("External data beside the model", "[onnx][import][file]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  llvm::sys::fs::create_directory(dir.file("weights"));
  std::vector<float> w = ramp({2, 3, 1, 1});
  std::string raw = floatTensor({6}, w).raw_data();
  dir.write("weights/w.bin", std::string(8, 'x') + raw);
  OnnxBuilder b;
  b.input("x", {1, 3, 4, 4})
      .init("w", {2, 3, 1, 1})
      .node("Conv", {"x", "w"}, {"y"})
      .output("y", 4);
  pb::TensorProto *t = b.model.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->set_data_location(pb::TensorProto::EXTERNAL);
  auto add = [&](const char *k, const std::string &v) {
    auto *e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "weights/w.bin");
  add("offset", "8");
  add("length", "24");
  dir.write("m.onnx", b.bytes());
  auto g = importOnnxFile(dir.file("m.onnx"));
  if (!g)
    FAIL(llvm::toString(g.takeError()));
  CHECK(valueNamed(*g, "w").data == w);
}

TEST_CASE("GELU and LayerNorm spelled out in nodes import as one operator",
          "[onnx][import]") {
  // torch's export of F.gelu and, before opset 17, of nn.LayerNorm.
  auto gelu = [](OnnxBuilder &b, const std::string &x, const std::string &y) {
    b.constFloat(y + "_r2", 1.4142135f)
        .constFloat(y + "_one", 1.0f)
        .constFloat(y + "_half", 0.5f)
        .node("Div", {x, y + "_r2"}, {y + "_d"})
        .node("Erf", {y + "_d"}, {y + "_e"})
        .node("Add", {y + "_e", y + "_one"}, {y + "_a"})
        .node("Mul", {x, y + "_a"}, {y + "_m"})
        .node("Mul", {y + "_m", y + "_half"}, {y});
  };
  SECTION("GELU") {
    OnnxBuilder b;
    b.input("x", {-1, 8});
    gelu(b, "x", "y");
    b.output("y", 2);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Gelu});
    CHECK_FALSE(g.ops[0].attrs.tanhApprox);
  }
  SECTION("an intermediate read elsewhere keeps the nodes apart") {
    OnnxBuilder b;
    b.input("x", {-1, 8});
    gelu(b, "x", "g");
    b.node("Add", {"g", "g_e"}, {"y"}).output("y", 2);
    Graph g = importOk(b, batchOf(2));
    CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Div, OpKind::Erf,
                                            OpKind::Add, OpKind::Mul,
                                            OpKind::Mul, OpKind::Add});
  }
  SECTION("a constant that is not the exporter's keeps the nodes apart") {
    OnnxBuilder b;
    b.input("x", {-1, 8})
        .constFloat("r", 1.5f)
        .constFloat("one", 1.0f)
        .constFloat("half", 0.5f)
        .node("Div", {"x", "r"}, {"d"})
        .node("Erf", {"d"}, {"e"})
        .node("Add", {"e", "one"}, {"a"})
        .node("Mul", {"x", "a"}, {"m"})
        .node("Mul", {"m", "half"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b, batchOf(2));
    CHECK(g.ops.size() == 5);
  }
  SECTION("LayerNorm before opset 17") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 8})
        .init("w", {8})
        .init("bias", {8})
        .constFloat("two", 2.0f)
        .constFloat("eps", 1e-5f)
        .node("ReduceMean", {"x"}, {"mean"}, {attrInts("axes", {-1})})
        .node("Sub", {"x", "mean"}, {"dev"})
        .node("Pow", {"dev", "two"}, {"sq"})
        .node("ReduceMean", {"sq"}, {"var"}, {attrInts("axes", {-1})})
        .node("Add", {"var", "eps"}, {"ve"})
        .node("Sqrt", {"ve"}, {"std"})
        .node("Div", {"dev", "std"}, {"xhat"})
        .node("Mul", {"xhat", "w"}, {"scaled"})
        .node("Add", {"scaled", "bias"}, {"y"})
        .output("y", 3);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::LayerNorm});
    CHECK(g.ops[0].attrs.epsilon == 1e-5f);
    CHECK(g.ops[0].attrs.axis == 2);
    CHECK(g.values[g.ops[0].inputs[1]].name == "w");
    CHECK(g.values[g.ops[0].inputs[2]].name == "bias");
  }
}

TEST_CASE("the batch followed through a sequence-first attention layout",
          "[onnx][import]") {
  // nn.MultiheadAttention's inside: [N, T, E] -> [T, N, E] -> [T, N*H, d]
  // -> [N*H, T, d], the target shapes folded from Shape (N*H from Mul).
  OnnxBuilder b;
  b.input("x", {-1, 5, 6})
      .node("Transpose", {"x"}, {"t"}, {attrInts("perm", {1, 0, 2})})
      .node("Shape", {"t"}, {"s"})
      .constInt64("i1", {1}, {1})
      .node("Gather", {"s", "i1"}, {"n"})
      .constInt64("h", {1}, {2})
      .node("Mul", {"n", "h"}, {"nh"})
      .constInt64("five", {1}, {5})
      .constInt64("three", {1}, {3})
      .node("Concat", {"five", "nh", "three"}, {"target"}, {attrInt("axis", 0)})
      .node("Reshape", {"t", "target"}, {"heads"})
      .node("Transpose", {"heads"}, {"y"}, {attrInts("perm", {1, 0, 2})})
      .output("y", 3);
  Graph g = importOk(b, batchOf(4));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Transpose, OpKind::Reshape,
                                            OpKind::Transpose});
  const Value &t = g.values[g.ops[0].outputs[0]];
  CHECK(t.dims == std::vector<int64_t>{5, 4, 6});
  CHECK(t.batchAxis == 1);
  const Value &heads = g.values[g.ops[1].outputs[0]];
  CHECK(heads.dims == std::vector<int64_t>{5, 8, 3});
  CHECK(heads.batchAxis == 1);
  CHECK(heads.batchInner == 2); // each sample's two heads follow it
  const Value &y = g.values[g.ops[2].outputs[0]];
  CHECK(y.batchAxis == 0);
  CHECK(y.batchInner == 2);
  CHECK(y.elementsPerSample() == 30);
  // A convolution cannot read a value whose batch is not alone on axis 0.
  OnnxBuilder c;
  c.input("x", {-1, 3, 4, 4})
      .init("w", {3, 4, 1, 1})
      .node("Transpose", {"x"}, {"t"}, {attrInts("perm", {1, 0, 2, 3})})
      .node("Conv", {"t", "w"}, {"y"}, {}, "conv")
      .output("y", 4);
  CHECK_THAT(errorText(c.import(batchOf(2))),
             Catch::Contains("'conv' (Conv)") &&
                 Catch::Contains("batch on axis 1"));
  // Element by element, an activation computes the same on any layout: its
  // definition says so (OpDef::batchLayout), for the op type as imported
  // (Neg, opset 20's Gelu) as for the kind it becomes.
  for (const char *opType : {"Neg", "Gelu", "Softplus", "Celu"}) {
    INFO(opType);
    OnnxBuilder d(20);
    d.input("x", {-1, 3, 4, 4})
        .node("Transpose", {"x"}, {"t"}, {attrInts("perm", {1, 0, 2, 3})})
        .node(opType, {"t"}, {"u"})
        .node("Transpose", {"u"}, {"y"}, {attrInts("perm", {1, 0, 2, 3})})
        .output("y", 4);
    Graph gd = importOk(d, batchOf(2));
    REQUIRE(gd.ops.size() == 3);
    CHECK(gd.ops[1].kind == opDefForOnnx(opType)->kind);
    CHECK(gd.values[gd.ops[1].inputs[0]].batchAxis == 1);
  }
}

TEST_CASE("Softplus, Mish, Celu and LogSigmoid as torch.onnx writes them",
          "[onnx][import]") {
  // nn.Mish as Mul(x, Tanh(Softplus(x))), nn.LogSigmoid as Log(Sigmoid(x)):
  // one operator each.
  OnnxBuilder b(17);
  b.input("x", {-1, 8})
      .node("Softplus", {"x"}, {"sp"})
      .node("Tanh", {"sp"}, {"t"})
      .node("Mul", {"x", "t"}, {"m"})
      .node("Sigmoid", {"m"}, {"s"})
      .node("Log", {"s"}, {"l"})
      .node("Celu", {"l"}, {"c"}, {attrFloat("alpha", 0.5f)})
      .node("Softplus", {"c"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Mish, OpKind::LogSigmoid,
                                          OpKind::Celu, OpKind::Softplus});
  CHECK(g.ops[2].attrs.alpha == 0.5f);

  // The softplus read by something else too stays itself.
  OnnxBuilder shared(17);
  shared.input("x", {-1, 8})
      .node("Softplus", {"x"}, {"sp"})
      .node("Tanh", {"sp"}, {"t"})
      .node("Mul", {"x", "t"}, {"m"})
      .node("Add", {"m", "sp"}, {"y"})
      .output("y", 2);
  CHECK(opKinds(importOk(shared, batchOf(2))) ==
        std::vector<OpKind>{OpKind::Softplus, OpKind::Tanh, OpKind::Mul,
                            OpKind::Add});

  // Log of anything but a Sigmoid is the natural logarithm.
  OnnxBuilder log(17);
  log.input("x", {-1, 8}).node("Log", {"x"}, {"y"}, {}, "lg").output("y", 2);
  CHECK(opKinds(importOk(log, batchOf(2))) ==
        std::vector<OpKind>{OpKind::Log});
  OnnxBuilder zero(17);
  zero.input("x", {-1, 8})
      .node("Celu", {"x"}, {"y"}, {attrFloat("alpha", 0.0f)}, "celu")
      .output("y", 2);
  CHECK_THAT(errorText(zero.import(batchOf(2))),
             Catch::Contains("'celu' (Celu)") && Catch::Contains("nonzero"));
}
