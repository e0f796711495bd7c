//===- OnnxImportNewerTest.cpp - Opsets past the ONNX library's -----------===//
//
// Models at opset 18 and up (PyTorch 2's dynamo exporter) are checked by
// memfit alone: structure, attributes memfit knows, and the newer operator
// forms. Also the literals and sequences torch.export graphs carry.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "compiler/ir/Graph.h"
#include "compiler/ops/OpDef.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

TEST_CASE("opset 18: Split num_outputs, ReduceMean axes as an input",
          "[onnx][import][newer]") {
  OnnxBuilder b(18);
  b.model.set_ir_version(10);
  b.input("x", {-1, 6, 4, 4})
      .node("Split", {"x"}, {"a", "c"},
            {attrInt("axis", 1), attrInt("num_outputs", 2)})
      .initInt64("axes", {2}, {2, 3})
      .node("ReduceMean", {"a", "axes"}, {"m"}, {attrInt("keepdims", 0)})
      .node("ReduceMean", {"c", "axes"}, {"n"}, {attrInt("keepdims", 0)})
      .node("Add", {"m", "n"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3});
  // Split of 6 into 2: two Slices of 3 channels.
  int slices = 0;
  for (const Op &op : g.ops)
    if (op.kind == OpKind::Slice) {
      ++slices;
      CHECK(g.values[op.outputs[0]].dims == std::vector<int64_t>{2, 3, 4, 4});
    }
  CHECK(slices == 2);
}

TEST_CASE("opset 20: Gelu is one operator", "[onnx][import][newer]") {
  OnnxBuilder b(20);
  b.input("x", {-1, 8})
      .node("Gelu", {"x"}, {"y"}, {attrStr("approximate", "tanh")})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Gelu);
  CHECK(g.ops[0].attrs.tanhApprox);
}

TEST_CASE("past opset 17 memfit checks what the ONNX checker would",
          "[onnx][errors][newer]") {
  SECTION("an attribute memfit does not read is refused") {
    OnnxBuilder b(19);
    b.input("x", {-1, 3, 8, 8})
        .node("AveragePool", {"x"}, {"y"},
              {attrInts("kernel_shape", {2, 2}), attrInt("novel", 1)}, "p")
        .output("y", 4);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'p' (AveragePool)") &&
                   Contains("attribute 'novel' is not supported at opset 19"));
  }
  SECTION("a newer attribute that changes the result is refused") {
    OnnxBuilder b(19);
    b.input("x", {-1, 3, 8, 8})
        .node("AveragePool", {"x"}, {"y"},
              {attrInts("kernel_shape", {2, 2}), attrInts("dilations", {2, 2})},
              "p")
        .output("y", 4);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'p' (AveragePool)") &&
                   Contains("dilations [2, 2] are not supported"));
  }
  SECTION("an operand used before it is defined") {
    OnnxBuilder b(18);
    b.input("x", {-1, 4})
        .node("Relu", {"h"}, {"y"}, {}, "late")
        .node("Relu", {"x"}, {"h"})
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'late' (Relu)") &&
                   Contains("operand 'h' is not defined before the node"));
  }
  SECTION("a name defined twice") {
    OnnxBuilder b(18);
    b.input("x", {-1, 4})
        .node("Relu", {"x"}, {"h"})
        .node("Sigmoid", {"x"}, {"h"}, {}, "again")
        .node("Relu", {"h"}, {"y"})
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'again' (Sigmoid)") &&
                   Contains("output 'h' is already defined"));
  }
  SECTION("opsets past 23 are refused") {
    OnnxBuilder b(24);
    b.input("x", {-1, 4}).node("Relu", {"x"}, {"y"}).output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("opset 24") && Contains("opsets 7 to 23"));
  }
}

TEST_CASE("an IR version newer than the library's is checked at opset 17",
          "[onnx][import][newer]") {
  OnnxBuilder b(17);
  b.model.set_ir_version(10);
  b.input("x", {-1, 4}).node("Relu", {"x"}, {"y"}).output("y", 2);
  Graph g = importOk(b, batchOf(2));
  CHECK(g.ops.size() == 1);
}

TEST_CASE("SequenceAt of a SplitToSequence is the Slice it takes",
          "[onnx][import][newer]") {
  OnnxBuilder b(18);
  b.input("x", {-1, 4, 9})
      .constInt64("chunk", {}, {4})
      .node("SplitToSequence", {"x", "chunk"}, {"seq"}, {attrInt("axis", 2)})
      .constInt64("i0", {}, {0})
      .constInt64("i2", {}, {2})
      .node("SequenceAt", {"seq", "i0"}, {"q"})
      .node("SequenceAt", {"seq", "i2"}, {"tail"}, {}, "last")
      .node("ReduceMean", {"q"}, {"qm"},
            {attrInts("axes", {2}), attrInt("keepdims", 1)})
      .node("Mul", {"tail", "qm"}, {"y"})
      .output("y", 3);
  // Chunks of 4 along 9: the first holds four elements, the third one.
  Graph g0 = importOk(b, batchOf(2));
  CHECK(g0.values[g0.output].dims == std::vector<int64_t>{2, 4, 1});

  OnnxBuilder c(18);
  c.input("x", {-1, 4, 9})
      .constInt64("chunk", {}, {4})
      .node("SplitToSequence", {"x", "chunk"}, {"seq"}, {attrInt("axis", 2)})
      .constInt64("i2", {}, {2})
      .node("SequenceAt", {"seq", "i2"}, {"y"}, {}, "last")
      .output("y", 3);
  Graph g = importOk(c, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Slice);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 4, 1});
}

TEST_CASE("literals torch.export computes in the graph fold",
          "[onnx][import][fold]") {
  // scale = 1 / sqrt(float(d)) and an index (7 mod -3 = -2, C's fmod 1).
  OnnxBuilder b(18);
  b.input("x", {-1, 4})
      .constInt64("d", {}, {16})
      .node("CastLike", {"d", "x"}, {"df"})
      .node("Sqrt", {"df"}, {"s"})
      .node("Mul", {"x", "s"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &s = g.values[g.ops[0].inputs[1]];
  CHECK(!s.trainable);
  CHECK(s.data == std::vector<float>{4.0f});

  auto mod = [](int64_t fmod) {
    OnnxBuilder m(17);
    m.input("x", {-1, 3, 4})
        .constInt64("a", {1}, {7})
        .constInt64("b", {1}, {-3})
        .node("Mod", {"a", "b"}, {"r"}, {attrInt("fmod", fmod)})
        .constInt64("five", {1}, {5})
        .node("Add", {"r", "five"}, {"k"})
        .constInt64("zero", {1}, {0})
        .constInt64("n", {1}, {-1})
        .node("Concat", {"zero", "k", "n"}, {"t"}, {attrInt("axis", 0)})
        .node("Reshape", {"x", "t"}, {"y"})
        .output("y", 3);
    return m;
  };
  // 7 mod -3 is -2 with the divisor's sign, 1 with C's: 3 or 6 rows.
  Graph g0 = importOk(mod(0), batchOf(2));
  CHECK(g0.values[g0.output].dims == std::vector<int64_t>{2, 3, 4});
  Graph g1 = importOk(mod(1), batchOf(2));
  CHECK(g1.values[g1.output].dims == std::vector<int64_t>{2, 6, 2});
}

namespace {

/// A Constant node with `t` as its value.
void constTensor(OnnxBuilder &b, const std::string &out, pb::TensorProto t) {
  pb::AttributeProto a;
  a.set_name("value");
  a.set_type(pb::AttributeProto::TENSOR);
  *a.mutable_t() = std::move(t);
  b.node("Constant", {}, {out}, {a});
}

/// Hugging Face's causal mask over `t` positions: Range, its column and row
/// views, and `keep` = LessOrEqual(column, row) in a node named "causal".
void causalKeep(OnnxBuilder &b, int64_t t) {
  b.constInt64("s", {}, {0})
      .constInt64("e", {}, {t})
      .constInt64("d", {}, {1})
      .node("Range", {"s", "e", "d"}, {"r"})
      .constInt64("ax0", {1}, {0})
      .constInt64("ax1", {1}, {1})
      .node("Unsqueeze", {"r", "ax0"}, {"col"})
      .node("Unsqueeze", {"r", "ax1"}, {"row"})
      .node("LessOrEqual", {"col", "row"}, {"keep"}, {}, "causal");
}

/// The data of the last op's constant operand.
std::vector<float> operandData(const Graph &g) {
  for (ValueId v : g.ops.back().inputs)
    if (g.values[v].kind == ValueKind::Weight)
      return g.values[v].data;
  return {};
}

} // namespace

TEST_CASE("mask arithmetic folds: comparisons, Trilu, GatherElements, "
          "doubles",
          "[onnx][import][fold]") {
  const std::vector<float> lower = {1, 0, 0, 0, 1, 1, 0, 0,
                                    1, 1, 1, 0, 1, 1, 1, 1};
  SECTION("a causal mask from positions (Hugging Face's GPT-2)") {
    OnnxBuilder b(17);
    b.input("x", {-1, 4, 4});
    causalKeep(b, 4);
    b.node("Not", {"keep"}, {"masked"})
        .node("Not", {"masked"}, {"keep2"})
        .constFloat("fill", -1e9f)
        .node("Where", {"keep2", "x", "fill"}, {"y"})
        .output("y", 3);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(g.ops.size() == 1);
    CHECK(g.ops[0].kind == OpKind::Where);
    CHECK(operandData(g) == lower);
  }
  SECTION("a mask past what the folder holds is refused, naming its node") {
    // 16384 positions: a [16384, 16384] mask, 2^28 elements.
    OnnxBuilder b(17);
    b.input("x", {-1, 16384, 16384});
    causalKeep(b, 16384);
    b.constFloat("fill", -1e9f)
        .node("Where", {"keep", "x", "fill"}, {"y"})
        .output("y", 3);
    const std::string msg = errorText(b.import(batchOf(1)));
    INFO(msg);
    CHECK(msg.find("'causal'") != std::string::npos);
    CHECK(msg.find("[16384, 16384]") != std::string::npos);
    CHECK(msg.find("more than memfit folds") != std::string::npos);
  }
  SECTION("Trilu of ones") {
    OnnxBuilder b(17);
    b.input("x", {-1, 4, 4})
        .init("ones", {4, 4}, std::vector<float>(16, 1.0f))
        .node("Trilu", {"ones"}, {"t"}, {attrInt("upper", 0)})
        .node("Cast", {"t"}, {"keep"}, {attrInt("to", pb::TensorProto::BOOL)})
        .constFloat("fill", -1e9f)
        .node("Where", {"keep", "x", "fill"}, {"y"})
        .output("y", 3);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(g.ops.size() == 1);
    CHECK(operandData(g) == lower);
  }
  SECTION("GatherElements and a double literal") {
    OnnxBuilder b(17);
    b.input("x", {-1, 2, 2})
        .constInt64("data", {2, 3}, {10, 11, 12, 20, 21, 22})
        .constInt64("idx", {2, 2}, {2, 0, 1, 1})
        .node("GatherElements", {"data", "idx"}, {"g"}, {attrInt("axis", 1)})
        .node("Cast", {"g"}, {"gf"}, {attrInt("to", pb::TensorProto::FLOAT)});
    pb::TensorProto half;
    half.set_data_type(pb::TensorProto::DOUBLE);
    half.add_double_data(0.5);
    constTensor(b, "h", half);
    b.node("Cast", {"h"}, {"hf"}, {attrInt("to", pb::TensorProto::FLOAT)})
        .node("Mul", {"gf", "hf"}, {"w"})
        .node("Mul", {"x", "w"}, {"y"})
        .output("y", 3);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(g.ops.size() == 1);
    CHECK(operandData(g) == std::vector<float>{6, 5, 10.5f, 10.5f});
  }
  SECTION("a comparison with the batch is refused") {
    OnnxBuilder b(17);
    b.input("x", {-1, 4})
        .node("Shape", {"x"}, {"s"})
        .constInt64("two", {1}, {2})
        .node("Less", {"s", "two"}, {"small"}, {}, "cmp")
        .constFloat("zero", 0.0f)
        .node("Where", {"small", "x", "zero"}, {"y"})
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'cmp' (Less)") && Contains("batch"));
  }
}

TEST_CASE("RMSNorm's pieces: ReduceMean over the last axis, Reciprocal, Neg",
          "[onnx][import]") {
  // y = -(x / sqrt(mean(x * x, -1) + eps)), as Llama's RMSNorm and
  // rotate_half spell it.
  OnnxBuilder b(18);
  b.input("x", {-1, 5, 8})
      .node("Mul", {"x", "x"}, {"sq"})
      .initInt64("axes", {1}, {-1})
      .node("ReduceMean", {"sq", "axes"}, {"ms"}, {attrInt("keepdims", 1)})
      .constFloat("eps", 1e-6f)
      .node("Add", {"ms", "eps"}, {"v"})
      .node("Sqrt", {"v"}, {"r"})
      .node("Reciprocal", {"r"}, {"inv"})
      .node("Mul", {"x", "inv"}, {"n"})
      .node("Neg", {"n"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  std::vector<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.push_back(op.kind);
  CHECK(kinds == std::vector<OpKind>{OpKind::Mul, OpKind::GlobalAveragePool,
                                     OpKind::Add, OpKind::Sqrt, OpKind::Pow,
                                     OpKind::Mul, OpKind::Neg});
  CHECK(g.values[g.ops[1].outputs[0]].dims == std::vector<int64_t>{2, 5, 1});
  CHECK(g.ops[4].attrs.alpha == -1.0f);

  // Over the batch's axis: refused; over others, moved last.
  auto reduce = [](std::vector<int64_t> axes) {
    OnnxBuilder r(18);
    r.input("x", {-1, 5, 8})
        .initInt64("axes", {static_cast<int64_t>(axes.size())}, axes)
        .node("ReduceMean", {"x", "axes"}, {"y"}, {}, "rm")
        .output("y", 3);
    return errorText(r.import(batchOf(2)));
  };
  CHECK(reduce({1}) == "");
  CHECK_THAT(reduce({0, 1, 2}),
             Contains("'rm' (ReduceMean)") && Contains("after the batch's"));
  CHECK(reduce({1, 2}) == "");
}

TEST_CASE("rotary tables fold: float Range, Cos, Sin, CumSum, GatherND",
          "[onnx][import][fold]") {
  OnnxBuilder b(18);
  b.input("x", {-1, 4})
      .constFloat("s", 0.0f)
      .constFloat("e", 2.0f)
      .constFloat("d", 0.5f)
      .node("Range", {"s", "e", "d"}, {"t"}) // 0, .5, 1, 1.5
      .node("Cos", {"t"}, {"c"})
      .node("Sin", {"t"}, {"si"})
      .node("Add", {"c", "si"}, {"cs"})
      .node("Mul", {"x", "cs"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const std::vector<float> &w = operandData(g);
  REQUIRE(w.size() == 4);
  for (int i = 0; i < 4; ++i)
    CHECK(w[i] == Approx(std::cos(0.5f * i) + std::sin(0.5f * i)));

  // Positions 1, 2, 3, 4 by a running sum; elements 3 and 0 of them.
  OnnxBuilder p(18);
  p.input("x", {-1, 2})
      .constInt64("ones", {4}, {1, 1, 1, 1})
      .constInt64("ax", {}, {0})
      .node("CumSum", {"ones", "ax"}, {"pos"})
      .constInt64("idx", {2, 1}, {3, 0})
      .node("GatherND", {"pos", "idx"}, {"picked"})
      .node("Cast", {"picked"}, {"pf"}, {attrInt("to", pb::TensorProto::FLOAT)})
      .node("Mul", {"x", "pf"}, {"y"})
      .output("y", 2);
  Graph gp = importOk(p, batchOf(2));
  CHECK(operandData(gp) == std::vector<float>{4, 1});
}

TEST_CASE("relative position buckets fold: Sign, Abs, Log, Exp, Floor, Ceil",
          "[onnx][import][fold]") {
  // DeBERTa's log-bucket position: sign(r) * ceil(log(|r| / 2) / log(4) *
  // 3 + 2) for |r| > 2, as exporters write it with constants; Exp and
  // Floor alike.
  OnnxBuilder b(18);
  b.input("x", {-1, 4})
      .node("Constant", {}, {"r"}, {[] {
              pb::AttributeProto a;
              a.set_name("value");
              a.set_type(pb::AttributeProto::TENSOR);
              *a.mutable_t() = floatTensor({4}, {-9.0f, -3.0f, 5.0f, 20.0f});
              return a;
            }()})
      .constFloat("two", 2.0f)
      .constFloat("four", 4.0f)
      .constFloat("three", 3.0f)
      .node("Sign", {"r"}, {"sg"})
      .node("Abs", {"r"}, {"ab"})
      .node("Div", {"ab", "two"}, {"q"})
      .node("Log", {"q"}, {"lq"})
      .node("Log", {"four"}, {"l4"})
      .node("Div", {"lq", "l4"}, {"f"})
      .node("Mul", {"f", "three"}, {"f3"})
      .node("Add", {"f3", "two"}, {"f32"})
      .node("Ceil", {"f32"}, {"c"})
      .node("Mul", {"sg", "c"}, {"bucket"})
      .node("Exp", {"q"}, {"e"})
      .node("Floor", {"e"}, {"fe"})
      .node("Add", {"bucket", "fe"}, {"cs"})
      .node("Mul", {"x", "cs"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const std::vector<float> &w = operandData(g);
  REQUIRE(w.size() == 4);
  const float r[] = {-9.0f, -3.0f, 5.0f, 20.0f};
  for (int i = 0; i < 4; ++i) {
    float q = std::fabs(r[i]) / 2.0f;
    float bucket = (r[i] > 0 ? 1.0f : -1.0f) *
                   std::ceil(std::log(q) / std::log(4.0f) * 3.0f + 2.0f);
    CHECK(w[i] == bucket + std::floor(std::exp(q)));
  }
}

TEST_CASE("Round folds halves to even", "[onnx][import][fold]") {
  OnnxBuilder b(17);
  b.input("x", {-1, 5})
      .node(
          "Constant", {}, {"r"}, {[] {
            pb::AttributeProto a;
            a.set_name("value");
            a.set_type(pb::AttributeProto::TENSOR);
            *a.mutable_t() = floatTensor({5}, {0.5f, 1.5f, 2.5f, -2.5f, 2.6f});
            return a;
          }()})
      .node("Round", {"r"}, {"rr"})
      .node("Mul", {"x", "rr"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(operandData(g) == std::vector<float>{0.0f, 2.0f, 2.0f, -2.0f, 3.0f});
}

TEST_CASE("Swin's shifted-window mask folds and repeats over the heads",
          "[onnx][import][fold]") {
  // mask[w] is T x T (windows w = 2, T = 2), built by ScatterND into zeros
  // and transposed; unsqueezed to [1, W, 1, T, T] it varies along two runs
  // of the scores' axes [N, W, heads, T, T], so it is repeated over the
  // heads (3) into one run.
  OnnxBuilder b(17);
  b.input("x", {-1, 2, 3, 2, 2})
      .constInt64("shape", {3}, {2, 2, 2})
      .node("ConstantOfShape", {"shape"}, {"zeros"})
      .constInt64("idx", {1, 2}, {1, 0})
      .constFloat("u0", -1.0f)
      .constFloat("u1", -2.0f)
      .constInt64("ax", {1}, {0})
      .node("Unsqueeze", {"u0", "ax"}, {"v0"})
      .node("Unsqueeze", {"u1", "ax"}, {"v1"})
      .node("Concat", {"v0", "v1"}, {"row"}, {attrInt("axis", 0)})
      .node("Unsqueeze", {"row", "ax"}, {"upd"})
      .node("ScatterND", {"zeros", "idx", "upd"}, {"m"})
      .node("Transpose", {"m"}, {"mt"}, {attrInts("perm", {0, 2, 1})})
      .constInt64("axes", {2}, {0, 2})
      .node("Unsqueeze", {"mt", "axes"}, {"mask"})
      .node("Add", {"x", "mask"}, {"y"})
      .output("y", 5);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].kind == OpKind::Add);
  const Value &m = g.values[g.ops[0].inputs[1]];
  CHECK(m.dims == std::vector<int64_t>{1, 2, 3, 2, 2});
  CHECK(!m.trainable);
  std::vector<float> want(12, 0.0f);
  for (int h = 0; h < 3; ++h)
    want.insert(want.end(), {-1, 0, -2, 0});
  CHECK(m.data == want);
}

TEST_CASE("Einsum of two activations is a batched matrix product",
          "[onnx][import]") {
  auto einsum = [](const std::string &eq, std::vector<int64_t> out) {
    OnnxBuilder b(17);
    b.input("x", {-1, 2, 3, 4})
        .node("Einsum", {"x", "x"}, {"y"}, {attrStr("equation", eq)})
        .output("y", static_cast<int>(out.size()));
    return b;
  };
  auto kinds = [](const Graph &g) {
    std::vector<OpKind> k;
    for (const Op &op : g.ops)
      k.push_back(op.kind);
    return k;
  };
  SECTION("scores: Q K^T (MaxViT's form, spaces and capitals)") {
    Graph g = importOk(einsum("B H I D, B H J D -> B H I J", {-1, 2, 3, 3}),
                       batchOf(2));
    CHECK(kinds(g) ==
          std::vector<OpKind>{OpKind::Transpose, OpKind::BatchMatMul});
    CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 2, 3, 3});
  }
  SECTION("already in order: one product") {
    OnnxBuilder b(17);
    b.input("x", {-1, 2, 3, 3})
        .node("Einsum", {"x", "x"}, {"y"},
              {attrStr("equation", "bhij,bhjd->bhid")})
        .output("y", 4);
    Graph g = importOk(b, batchOf(2));
    CHECK(kinds(g) == std::vector<OpKind>{OpKind::BatchMatMul});
  }
  SECTION("an output in another order is transposed after") {
    Graph g = importOk(einsum("bhid,bhjd->bjhi", {-1, 3, 2, 3}), batchOf(2));
    CHECK(kinds(g) == std::vector<OpKind>{OpKind::Transpose,
                                          OpKind::BatchMatMul,
                                          OpKind::Transpose});
    CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3, 2, 3});
  }
  SECTION("a sum over the batch is refused") {
    CHECK_THAT(errorText(einsum("bhid,bhjd->ij", {3, 3}).import(batchOf(2))),
               Contains("(Einsum)") &&
                   Contains("is not a batched matrix product"));
  }
}

TEST_CASE("Einsum with weights: Funnel's relative attention",
          "[onnx][import]") {
  // x [N, 3 positions, 2 heads, 4]; a position table [5, 8] times a weight
  // [8, 2, 4] per head ("td,dnh->tnh", both weights), the queries against
  // that table ("binh,tnh->bnit") and against a weight per key and head
  // ("bind,snd->bnis"), summed.
  OnnxBuilder b(17);
  b.input("x", {-1, 3, 2, 4})
      .init("pos", {5, 8})
      .init("w_r", {8, 2, 4})
      .init("seg", {5, 2, 4})
      .node("Einsum", {"pos", "w_r"}, {"r"},
            {attrStr("equation", "td,dnh->tnh")})
      .node("Einsum", {"x", "r"}, {"position"},
            {attrStr("equation", "binh,tnh->bnit")})
      .node("Einsum", {"x", "seg"}, {"types"},
            {attrStr("equation", "bind,snd->bnis")})
      .node("Add", {"position", "types"}, {"y"})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 2, 3, 5});
  std::vector<const Op *> products;
  for (const Op &op : g.ops)
    if (op.kind == OpKind::BatchMatMul)
      products.push_back(&op);
  REQUIRE(products.size() == 3);
  // The table is one product of two weights read as values ([5, 8] x
  // [8, 2 * 4], then viewed as [5, 2, 4]), without a batch: it is
  // computed once, whatever the sub-batch.
  CHECK(!products[0]->batched(g));
  CHECK(g.values[products[0]->outputs[0]].dims == std::vector<int64_t>{5, 8});
  // The queries' products take the table and the weight, without a batch,
  // as the same operand for every sample.
  for (const Op *p : {products[1], products[2]}) {
    CHECK(p->batched(g));
    CHECK(g.values[p->inputs[0]].batched);
    CHECK(!g.values[p->inputs[1]].batched);
    CHECK(g.values[p->inputs[1]].dims == std::vector<int64_t>{2, 4, 5});
    auto text = llvm::cantFail(opDef(OpKind::BatchMatMul).params(g, *p));
    CHECK_THAT(text.init, Contains(".bShared = true"));
  }
  // All three weights train: 40 + 64 + 40 parameters.
  int64_t trained = 0;
  for (const Value &v : g.values)
    if (v.kind == ValueKind::Weight && v.trainable)
      trained += v.elementsPerSample();
  CHECK(trained == 144);
}

TEST_CASE("Expand of an activation repeats key/value heads", "[onnx][import]") {
  // Hugging Face's repeat_kv: [N, 2, T, d] -> [N, 2, 1, T, d] expanded to
  // [N, 2, 3, T, d] with the target built from Shape (the batch in it),
  // then merged to 6 heads.
  OnnxBuilder b(17);
  b.input("x", {-1, 2, 4, 8})
      .constInt64("two", {1}, {2})
      .node("Unsqueeze", {"x", "two"}, {"u"})
      .node("Shape", {"x"}, {"s"})
      .constInt64("i0", {1}, {0})
      .node("Gather", {"s", "i0"}, {"n"}, {attrInt("axis", 0)})
      .constInt64("rest", {4}, {2, 3, 4, 8})
      .node("Concat", {"n", "rest"}, {"target"}, {attrInt("axis", 0)})
      .node("Expand", {"u", "target"}, {"e"})
      .constInt64("merged", {4}, {0, 6, 4, 8})
      .node("Reshape", {"e", "merged"}, {"y"})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  std::vector<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.push_back(op.kind);
  // Unsqueeze and the merge are views (Reshape ops without memory).
  CHECK(kinds ==
        std::vector<OpKind>{OpKind::Reshape, OpKind::Expand, OpKind::Reshape});
  CHECK(g.values[g.ops[1].outputs[0]].dims ==
        std::vector<int64_t>{2, 2, 3, 4, 8});
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 6, 4, 8});

  OnnxBuilder bad(17);
  bad.input("x", {-1, 2, 4})
      .constInt64("t", {3}, {1, 3, 4})
      .node("Expand", {"x", "t"}, {"y"}, {}, "e")
      .output("y", 3);
  CHECK_THAT(errorText(bad.import(batchOf(2))),
             Contains("'e' (Expand)") &&
                 Contains("along axes of extent 1 other than the batch's"));
}

TEST_CASE("Tile of an activation is views around an Expand", "[onnx][import]") {
  // x.repeat(1, 2, 1, 3) of [N, 3, 1, 4]: axis 1 (extent 3) gets an axis
  // of 2 before it, axis 3 (extent 4) one of 3; axis 2 is not tiled.
  OnnxBuilder b(17);
  b.input("x", {-1, 3, 1, 4})
      .constInt64("r", {4}, {1, 2, 1, 3})
      .node("Tile", {"x", "r"}, {"y"}, {}, "rep")
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 3);
  CHECK(g.ops[0].kind == OpKind::Reshape);
  CHECK(g.values[g.ops[0].outputs[0]].dims ==
        std::vector<int64_t>{2, 1, 3, 1, 1, 4});
  CHECK(g.ops[1].kind == OpKind::Expand);
  CHECK(g.ops[1].name == "rep");
  CHECK(g.values[g.ops[1].outputs[0]].dims ==
        std::vector<int64_t>{2, 2, 3, 1, 3, 4});
  CHECK(g.ops[2].kind == OpKind::Reshape);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 6, 1, 12});

  // Along axes of extent 1 alone it is one Expand.
  OnnxBuilder ones(17);
  ones.input("x", {-1, 3, 1, 1})
      .constInt64("r", {4}, {1, 1, 2, 5})
      .node("Tile", {"x", "r"}, {"y"})
      .output("y", 4);
  Graph g1 = importOk(ones, batchOf(2));
  REQUIRE(g1.ops.size() == 1);
  CHECK(g1.ops[0].kind == OpKind::Expand);
  CHECK(g1.values[g1.output].dims == std::vector<int64_t>{2, 3, 2, 5});

  OnnxBuilder batch(17);
  batch.input("x", {-1, 3})
      .constInt64("r", {2}, {2, 1})
      .node("Tile", {"x", "r"}, {"y"}, {}, "t")
      .output("y", 2);
  CHECK_THAT(errorText(batch.import(batchOf(2))),
             Contains("'t' (Tile)") && Contains("repeats the batch"));
}

TEST_CASE("Tile of a weight over the batch is the class token's lookup",
          "[onnx][import]") {
  // cls.repeat(x.shape[0], 1, 1) of a [1, 1, 4] parameter, the repeats
  // built from Shape (the batch in them), added to x [N, 1, 4]: one lookup
  // of its row per sample, then the Add; the weight trains.
  auto model = [](std::vector<int64_t> rest) {
    OnnxBuilder b(17);
    b.input("x", {-1, 1, 4})
        .init("cls", {1, 1, 4})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i0", {1}, {0})
        .node("Gather", {"s", "i0"}, {"n"}, {attrInt("axis", 0)})
        .constInt64("rest", {2}, rest)
        .node("Concat", {"n", "rest"}, {"reps"}, {attrInt("axis", 0)})
        .node("Tile", {"cls", "reps"}, {"c"}, {}, "tile")
        .node("Add", {"x", "c"}, {"y"})
        .output("y", 3);
    return b;
  };
  Graph g = importOk(model({1, 1}), batchOf(2));
  REQUIRE(g.ops.size() == 2);
  CHECK(g.ops[0].kind == OpKind::Embedding);
  CHECK(g.values[g.ops[0].inputs[0]].trainable);
  CHECK(g.values[g.ops[0].outputs[0]].dims == std::vector<int64_t>{2, 1, 4});
  CHECK(g.ops[1].kind == OpKind::Add);
  // Repeated over the batch and along its own axes at once: refused, named.
  CHECK_THAT(errorText(model({2, 1}).import(batchOf(2))),
             Contains("'tile' (Tile)") && Contains("tiles a weight by"));
}

TEST_CASE("Tile of a weight along its own axes tiles its value",
          "[onnx][import]") {
  // w.repeat(1, 2, 1) of a [1, 2, 4] parameter added to x [N, 4, 4]: the
  // weight read as a value without a batch, [1, 2, 4] -> [1, 1, 2, 4] ->
  // [1, 2, 2, 4] -> [1, 4, 4], so its gradient is the two repeats' sum.
  OnnxBuilder b(17);
  b.input("x", {-1, 4, 4})
      .init("w", {1, 2, 4})
      .constInt64("r", {3}, {1, 2, 1})
      .node("Tile", {"w", "r"}, {"t"}, {}, "tile")
      .node("Add", {"x", "t"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 5);
  CHECK(g.ops[0].kind == OpKind::Embedding); // the lift
  CHECK(g.values[g.ops[0].inputs[0]].kind == ValueKind::Weight);
  CHECK(g.values[g.ops[0].inputs[0]].trainable);
  CHECK(g.ops[1].kind == OpKind::Reshape);
  CHECK(g.ops[2].kind == OpKind::Expand);
  CHECK(g.values[g.ops[2].outputs[0]].dims == std::vector<int64_t>{1, 2, 2, 4});
  CHECK(g.ops[3].kind == OpKind::Reshape);
  const Value &tiled = g.values[g.ops[3].outputs[0]];
  CHECK(tiled.dims == std::vector<int64_t>{1, 4, 4});
  CHECK(!tiled.batched);
  CHECK(g.ops[4].kind == OpKind::Add);
  CHECK(g.values[g.ops[4].outputs[0]].batched);
}

TEST_CASE("Flatten after larger axes merges them with the batch",
          "[onnx][import]") {
  // [N, 2, 3, 4] at axis 2 is [N * 2, 12], each sample's two rows
  // together; a Linear reads the rows and a Reshape restores [N, 2, 5].
  OnnxBuilder b(17);
  b.input("x", {-1, 2, 3, 4})
      .node("Flatten", {"x"}, {"f"}, {attrInt("axis", 2)}, "fl")
      .init("w", {12, 5})
      .node("MatMul", {"f", "w"}, {"m"})
      .constInt64("t", {3}, {-1, 2, 5})
      .node("Reshape", {"m", "t"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(3));
  REQUIRE(g.ops.size() == 3);
  CHECK(g.ops[0].kind == OpKind::Reshape);
  const Value &f = g.values[g.ops[0].outputs[0]];
  CHECK(f.dims == std::vector<int64_t>{6, 12});
  CHECK(f.batchAxis == 0);
  CHECK(f.batchOuter == 1);
  CHECK(f.batchInner == 2);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{3, 2, 5});
  CHECK(g.values[g.output].canonical());
}

TEST_CASE("ReduceMax and ReduceMin are max pools of one window a row",
          "[onnx][import]") {
  // The minimum over axis 1 of [N, 3, 4] without keepdims: axis 1 moved
  // last, negated, viewed as [N, 4, 1, 3], pooled by [1, 3] windows,
  // negated back, viewed as [N, 4].
  OnnxBuilder b(17);
  b.input("x", {-1, 3, 4})
      .node("ReduceMin", {"x"}, {"y"},
            {attrInts("axes", {1}), attrInt("keepdims", 0)}, "mn")
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  std::vector<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.push_back(op.kind);
  CHECK(kinds == std::vector<OpKind>{OpKind::Transpose, OpKind::Neg,
                                     OpKind::Reshape, OpKind::MaxPool,
                                     OpKind::Neg, OpKind::Reshape});
  const Op &pool = g.ops[3];
  CHECK(pool.name == "mn");
  CHECK(pool.attrs.kernel == std::vector<int64_t>{1, 3});
  CHECK(pool.attrs.strides == std::vector<int64_t>{1, 3});
  CHECK(g.values[pool.inputs[0]].dims == std::vector<int64_t>{2, 4, 1, 3});
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 4});

  // The maximum over the last axes with keepdims: no move, no negation,
  // and the pool's [N, 2, 1, 1] is ONNX's shape already.
  OnnxBuilder mx(17);
  mx.input("x", {-1, 2, 3, 4})
      .node("ReduceMax", {"x"}, {"y"}, {attrInts("axes", {2, 3})})
      .output("y", 4);
  Graph g2 = importOk(mx, batchOf(2));
  REQUIRE(g2.ops.size() == 2);
  CHECK(g2.ops[1].kind == OpKind::MaxPool);
  CHECK(g2.values[g2.output].dims == std::vector<int64_t>{2, 2, 1, 1});
}

TEST_CASE("a buffer torch.export marks folds; a parameter does not",
          "[onnx][import][fold]") {
  // A rotary table computed from inv_freq (Hugging Face's Llama). The
  // dynamo exporter marks buffers in value_info metadata (IR 10), which
  // this ONNX library keeps as unknown fields.
  auto model = [](bool marked) {
    OnnxBuilder b(18);
    b.input("x", {-1, 4})
        .init("inv_freq", {4}, {1.0f, 0.5f, 0.25f, 0.125f})
        .constFloat("two", 2.0f)
        .node("Mul", {"inv_freq", "two"}, {"f"})
        .node("Cos", {"f"}, {"c"})
        .node("Mul", {"x", "c"}, {"y"})
        .output("y", 2);
    if (marked)
      b.torchInputKind("inv_freq", "BUFFER");
    return b;
  };
  Graph g = importOk(model(true), batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &c = g.values[g.ops[0].inputs[1]];
  CHECK(!c.trainable);
  CHECK(c.data == std::vector<float>{std::cos(2.0f), std::cos(1.0f),
                                     std::cos(0.5f), std::cos(0.25f)});
  CHECK_THAT(errorText(model(false).import(batchOf(2))),
             Contains("'f') is computed from the weight 'inv_freq'") &&
                 Contains("--constants makes it a constant"));
}

TEST_CASE("torch.export's NaN guard on a softmax is one operator",
          "[onnx][import]") {
  OnnxBuilder b(18);
  b.input("x", {-1, 2, 4})
      .node("Softmax", {"x"}, {"p"}, {attrInt("axis", -1)})
      .node("IsNaN", {"p"}, {"nan"})
      .constFloat("zero", 0.0f)
      .node("Where", {"nan", "zero", "p"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 2);
  CHECK(g.ops[1].kind == OpKind::NanTo);
  CHECK(g.ops[1].attrs.alpha == 0.0f);

  OnnxBuilder alone(18);
  alone.input("x", {-1, 4})
      .node("IsNaN", {"x"}, {"nan"}, {}, "n")
      .node("Cast", {"nan"}, {"y"}, {attrInt("to", pb::TensorProto::FLOAT)})
      .output("y", 2);
  CHECK_THAT(errorText(alone.import(batchOf(2))),
             Contains("'n' (IsNaN)") &&
                 Contains("only as the guard Where(IsNaN(x), c, x)"));
}

TEST_CASE("equal constants are one value; different ones are not",
          "[onnx][import][fold]") {
  // Each layer's copy of one causal mask (torch registers one per layer)
  // is held once; a different mask and a trainable weight stay apart.
  OnnxBuilder b(17);
  b.input("x", {-1, 2, 2})
      .constInt64("keep1", {2, 2}, {1, 0, 1, 1})
      .constInt64("keep2", {2, 2}, {1, 0, 1, 1})
      .constInt64("other", {2, 2}, {1, 1, 1, 1})
      .node("Cast", {"keep1"}, {"m1"}, {attrInt("to", pb::TensorProto::BOOL)})
      .node("Cast", {"keep2"}, {"m2"}, {attrInt("to", pb::TensorProto::BOOL)})
      .node("Cast", {"other"}, {"m3"}, {attrInt("to", pb::TensorProto::BOOL)})
      .constFloat("fill", -1e9f)
      .node("Where", {"m1", "x", "fill"}, {"y1"})
      .node("Where", {"m2", "y1", "fill"}, {"y2"})
      .node("Where", {"m3", "y2", "fill"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 3);
  auto mask = [&](int i) {
    for (ValueId v : g.ops[i].inputs)
      if (g.values[v].kind == ValueKind::Weight)
        return v;
    return kNoId;
  };
  REQUIRE(mask(0) != kNoId);
  CHECK(mask(0) == mask(1));
  CHECK(mask(2) != mask(0));
  CHECK(g.values[mask(0)].data == std::vector<float>{1, 0, 1, 1});
  CHECK(g.values[mask(2)].data == std::vector<float>{1, 1, 1, 1});
}

TEST_CASE("an empty slice joined by Concat adds nothing; another reader is "
          "an error",
          "[onnx][import]") {
  // A rotary embedding over every channel: h[..., :4] rotated, h[..., 4:]
  // (empty) passed through, concatenated back.
  auto model = [](bool readEmpty) {
    OnnxBuilder b(18);
    b.input("x", {-1, 4})
        .constInt64("s0", {1}, {0})
        .constInt64("s4", {1}, {4})
        .constInt64("big", {1}, {1 << 30})
        .constInt64("ax", {1}, {1})
        .constFloat("two", 2.0f)
        .node("Slice", {"x", "s0", "s4", "ax"}, {"rot"})
        .node("Slice", {"x", "s4", "big", "ax"}, {"rest"}, {}, "rest")
        .node("Mul", {"rot", "two"}, {"r2"});
    if (readEmpty)
      b.node("Relu", {"rest"}, {"rr"}, {}, "reads_rest")
          .node("Concat", {"r2", "rr"}, {"y"}, {attrInt("axis", 1)});
    else
      b.node("Concat", {"r2", "rest"}, {"y"}, {attrInt("axis", 1)});
    b.output("y", 2);
    return b;
  };
  Graph g = importOk(model(false), batchOf(2));
  for (const Op &op : g.ops)
    CHECK(op.kind != OpKind::Concat); // one operand left: an alias
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 4});
  auto bad = model(true).import(batchOf(2));
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK_THAT(llvm::toString(bad.takeError()),
             Contains("'reads_rest' (Relu)") &&
                 Contains("is an empty tensor (a slice to nothing)"));
}

TEST_CASE("Where choosing between two activations", "[onnx][import]") {
  // torch.where(typed, same, diff) with a constant condition (Funnel's
  // token-type scores): each side kept where chosen, 0 elsewhere, added.
  auto where = [](bool sameShape) {
    OnnxBuilder b(17);
    b.input("x", {-1, 2, 3});
    if (sameShape)
      b.node("Neg", {"x"}, {"y"});
    else
      b.node("ReduceMax", {"x"}, {"y"},
             {attrInts("axes", {1}), attrInt("keepdims", 1)});
    b.initInt64("c", {1, 3}, {1, 0, 1})
        .node("Cast", {"c"}, {"cond"}, {attrInt("to", 9)})
        .node("Where", {"cond", "x", "y"}, {"out"})
        .output("out", 3);
    return b;
  };
  Graph g = importOk(where(true), batchOf(2));
  std::vector<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.push_back(op.kind);
  CHECK(kinds == std::vector<OpKind>{OpKind::Neg, OpKind::Where, OpKind::Where,
                                     OpKind::Add});
  // x is kept where the condition holds (filled 0 where it is false), y
  // where it does not.
  CHECK(g.values[g.ops[1].inputs[0]].name == "x");
  CHECK(!g.ops[1].attrs.fillWhere);
  CHECK(g.values[g.ops[2].inputs[0]].name == "y");
  CHECK(g.ops[2].attrs.fillWhere);
  CHECK(g.ops[1].attrs.padValue == 0.0f);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 2, 3});
  CHECK_THAT(errorText(where(false).import(batchOf(2))),
             Contains("(Where)") &&
                 Contains("chooses between activations of shapes [2, 2, 3] "
                          "and [2, 1, 3]"));
}

TEST_CASE("ScatterND of an activation: torch.export's slice assignment",
          "[onnx][import]") {
  // y = x; y[..., :2] = 2 * x[..., :2], as torch.export writes it: x and
  // the updates moved to the last axis first, ScatterND at rows 0 and 1,
  // moved back.
  auto scatter = [](std::vector<int64_t> rows, bool moved = true) {
    OnnxBuilder b(18);
    b.input("x", {-1, 3, 4})
        .constInt64("starts", {1}, {0})
        .constInt64("ends", {1}, {2})
        .constInt64("axes", {1}, {2})
        .node("Slice", {"x", "starts", "ends", "axes"}, {"s"})
        .constFloat("two", 2.0f)
        .node("Mul", {"s", "two"}, {"u"})
        .initInt64("rows", {static_cast<int64_t>(rows.size()), 1}, rows);
    if (moved) {
      b.node("Transpose", {"x"}, {"xt"}, {attrInts("perm", {2, 1, 0})})
          .node("Transpose", {"u"}, {"ut"}, {attrInts("perm", {2, 1, 0})})
          .node("ScatterND", {"xt", "rows", "ut"}, {"st"})
          .node("Transpose", {"st"}, {"y"}, {attrInts("perm", {2, 1, 0})});
    } else { // every sample of the batch at those rows, shapes matching
      b.node("Mul", {"x", "two"}, {"x2"})
          .node("ScatterND", {"x", "rows", "x2"}, {"y"});
    }
    b.output("y", 3);
    return b;
  };
  Graph g = importOk(scatter({0, 1}), batchOf(2));
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3, 4});
  // The rows after the window sliced from the data, the updates before
  // them, joined with the batch first and moved back.
  const Op *join = nullptr;
  for (const Op &op : g.ops)
    if (op.kind == OpKind::Concat)
      join = &op;
  REQUIRE(join);
  REQUIRE(join->inputs.size() == 2);
  CHECK(g.values[join->inputs[0]].dims == std::vector<int64_t>{2, 2, 3});
  CHECK(g.values[join->inputs[1]].dims == std::vector<int64_t>{2, 2, 3});
  CHECK(g.values[join->outputs[0]].dims == std::vector<int64_t>{2, 4, 3});
  CHECK(join->attrs.axis == 1);
  SECTION("rows that are not one window are refused") {
    CHECK_THAT(errorText(scatter({0, 2}).import(batchOf(2))),
               Contains("(ScatterND)") && Contains("contiguous rows"));
  }
  SECTION("rows of the batch's axis are refused") {
    CHECK_THAT(errorText(scatter({0, 1}, false).import(batchOf(2))),
               Contains("(ScatterND)") && Contains("not the batch's"));
  }
}

TEST_CASE("InstanceNormalization is the LayerNorm operator over the "
          "trailing axes, then its constant affine per channel",
          "[onnx][import]") {
  // [N, 3, 4, 5] with scale (1, 2, 3) and bias (0, 0, 1): the rows viewed
  // as [N, 3, 20], one LayerNorm with a unit scale over the 20, the view
  // back, then the scale and bias per channel. torch's GroupNorm form
  // ([N, groups, L], ones and zeros) is the LayerNorm alone.
  auto model = [](std::vector<int64_t> dims, std::vector<float> scale,
                  std::vector<float> bias) {
    OnnxBuilder b(17);
    b.input("x", dims);
    constTensor(b, "s", floatTensor({(int64_t)scale.size()}, scale));
    constTensor(b, "b", floatTensor({(int64_t)bias.size()}, bias));
    b.node("InstanceNormalization", {"x", "s", "b"}, {"y"},
           {attrFloat("epsilon", 1e-3f)}, "in")
        .output("y", static_cast<int>(dims.size()));
    return b;
  };
  Graph g = importOk(model({-1, 3, 4, 5}, {1, 2, 3}, {0, 0, 1}), batchOf(2));
  std::vector<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.push_back(op.kind);
  CHECK(kinds == std::vector<OpKind>{OpKind::Reshape, OpKind::LayerNorm,
                                     OpKind::Reshape, OpKind::Mul,
                                     OpKind::Add});
  const Op &ln = g.ops[1];
  CHECK(ln.attrs.axis == 2);
  CHECK(ln.attrs.epsilon == 1e-3f);
  CHECK(g.values[ln.outputs[0]].dims == std::vector<int64_t>{2, 3, 20});
  const Value &unit = g.values[ln.inputs[1]];
  CHECK(!unit.trainable);
  CHECK(unit.data == std::vector<float>(20, 1.0f));
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 3, 4, 5});

  Graph gn =
      importOk(model({-1, 4, 64}, {1, 1, 1, 1}, {0, 0, 0, 0}), batchOf(2));
  REQUIRE(gn.ops.size() == 1);
  CHECK(gn.ops[0].kind == OpKind::LayerNorm);
  CHECK(gn.values[gn.output].dims == std::vector<int64_t>{2, 4, 64});
}
