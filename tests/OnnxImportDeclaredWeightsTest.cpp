//===- OnnxImportDeclaredWeightsTest.cpp - Weights as graph inputs --------===//
//
// A model exported with its weights as graph inputs (export_params=False,
// the way to keep a large model's file small) must import to the graph the
// same model with initializers gives: the same ops reading the same values,
// every value of the same dims and bytes, only the weights' data missing.
// Each operator that takes a stored weight is covered: Gemm with transB,
// MatMul with a weight ([in, out] and through a Transpose), Conv,
// BatchNormalization, LayerNormalization and its pre-opset-17 spelling,
// Gather of an embedding, Mul by a weight (RMSNorm's scale), and the
// rotary tables a Llama computes from constants.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "models/Zoo.h"

#include <set>

using namespace memfit;
using namespace memfit::test;

namespace {

/// `model` with every float initializer turned into a graph input declared
/// with its dims and no data, as torch.onnx.export(export_params=False)
/// writes parameters.
std::string declareWeights(const std::string &bytes) {
  pb::ModelProto m;
  REQUIRE(m.ParseFromString(bytes));
  pb::GraphProto *g = m.mutable_graph();
  google::protobuf::RepeatedPtrField<pb::TensorProto> kept;
  for (const pb::TensorProto &t : g->initializer()) {
    if (t.data_type() != pb::TensorProto::FLOAT) {
      *kept.Add() = t;
      continue;
    }
    pb::ValueInfoProto *in = g->add_input();
    in->set_name(t.name());
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(pb::TensorProto::FLOAT);
    auto *shape = tt->mutable_shape();
    for (int64_t d : t.dims())
      shape->add_dim()->set_dim_value(d);
  }
  g->mutable_initializer()->Swap(&kept);
  return m.SerializeAsString();
}

Graph importOk(const std::string &bytes, const std::string &name) {
  ImportOptions io;
  io.batch = 2;
  auto g = importOnnxBytes(bytes, name, io);
  if (!g)
    FAIL(name << ": " << llvm::toString(g.takeError()));
  return std::move(*g);
}

/// Imports both forms and compares them op by op and value by value.
void checkSameImport(const std::string &stored, const std::string &declared,
                     const std::string &name) {
  INFO(name);
  Graph a = importOk(stored, name + " (initializers)");
  Graph b = importOk(declared, name + " (graph inputs)");
  REQUIRE(a.ops.size() == b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    INFO("op " << a.ops[i].name);
    CHECK(a.ops[i].kind == b.ops[i].kind);
    CHECK(a.ops[i].name == b.ops[i].name);
    CHECK(a.ops[i].inputs == b.ops[i].inputs);
    CHECK(a.ops[i].outputs == b.ops[i].outputs);
  }
  REQUIRE(a.values.size() == b.values.size());
  int64_t weights = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    const Value &x = a.values[i], &y = b.values[i];
    INFO("value " << x.name);
    CHECK(x.name == y.name);
    CHECK(x.kind == y.kind);
    CHECK(x.dims == y.dims);
    CHECK(x.dtype == y.dtype);
    CHECK(x.trainable == y.trainable);
    CHECK(x.bytesAt(1) == y.bytesAt(1));
    CHECK(x.bytesAt(2) == y.bytesAt(2));
    if (x.kind != ValueKind::Weight || !x.trainable)
      continue;
    ++weights;
    // Stored weights hold their data; declared ones none, and start from
    // the initialization their operator gives them.
    CHECK(x.data.size() == static_cast<size_t>(x.elementsPerSample()));
    CHECK(x.init == WeightInit::FromData);
    CHECK(y.data.empty());
    CHECK(y.init != WeightInit::FromData);
  }
  CHECK(weights > 0);
  CHECK(a.output == b.output);
}

void checkZooModel(const std::string &name) {
  ZooOptions with, without;
  with.withWeights = true;
  auto stored = buildZooModel(name, with);
  auto declared = buildZooModel(name, without);
  REQUIRE(static_cast<bool>(stored));
  REQUIRE(static_cast<bool>(declared));
  checkSameImport(*stored, *declared, name);
  // The generic conversion gives the same as the zoo's own.
  checkSameImport(*stored, declareWeights(*stored), name + " converted");
}

} // namespace

TEST_CASE("gemm, conv and batchnorm take weights declared as inputs",
          "[onnx]") {
  for (const char *name : {"mlp", "tiny-cnn", "tiny-bn"})
    checkZooModel(name);
}

TEST_CASE("a decoder's weights may all be declared as inputs", "[onnx]") {
  // gpt2-tiny: Gather of the embedding, MatMul with [in, out] weights,
  // LayerNormalization, the tied head through a Transpose. llama-tiny:
  // MatMul through a Transpose, RMSNorm's Mul by a weight, rotary tables
  // from constants, grouped-query Expand.
  for (const char *name : {"gpt2-tiny", "llama-tiny"})
    checkZooModel(name);
}

TEST_CASE("a torch export of a llama imports with its weights declared",
          "[onnx]") {
  std::string file = std::string(MEMFIT_SOURCE_DIR) +
                     "/tests/models/torch2/hf-llama-eager-torchscript.onnx";
  std::ifstream in(file, std::ios::binary);
  REQUIRE(in.good());
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  checkSameImport(bytes, declareWeights(bytes), "hf-llama-eager-torchscript");
}

TEST_CASE("a declared buffer computed on at import is refused by name",
          "[onnx]") {
  // today_models' GPT registers its causal mask as a buffer; declared
  // without data (export_params=False) its values are unknown, and the
  // message says what the file must hold instead.
  std::string file = std::string(MEMFIT_SOURCE_DIR) +
                     "/tests/models/torch2/gpt-torchscript.onnx";
  std::ifstream in(file, std::ios::binary);
  REQUIRE(in.good());
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  ImportOptions io;
  io.batch = 2;
  std::string err =
      errorText(importOnnxBytes(declareWeights(bytes), "gpt.onnx", io));
  CHECK_THAT(err, Catch::Matchers::Contains("'blocks.0.mask'") &&
                      Catch::Matchers::Contains("needs its values in the "
                                                "file"));
}

TEST_CASE("layer normalization spelled out before opset 17 takes declared "
          "weights",
          "[onnx]") {
  // ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add (torch's
  // LayerNorm before opset 17) followed by a MatMul with a 2-D weight.
  OnnxBuilder b(13);
  b.input("x", {-1, 4, 8})
      .init("ln.weight", {8})
      .init("ln.bias", {8})
      .init("fc.weight", {8, 6})
      .constFloat("two", 2.0f)
      .constFloat("eps", 1e-5f)
      .node("ReduceMean", {"x"}, {"mean"},
            {attrInts("axes", {-1}), attrInt("keepdims", 1)})
      .node("Sub", {"x", "mean"}, {"dev"})
      .node("Pow", {"dev", "two"}, {"sq"})
      .node("ReduceMean", {"sq"}, {"var"},
            {attrInts("axes", {-1}), attrInt("keepdims", 1)})
      .node("Add", {"var", "eps"}, {"var_eps"})
      .node("Sqrt", {"var_eps"}, {"std"})
      .node("Div", {"dev", "std"}, {"normed"})
      .node("Mul", {"normed", "ln.weight"}, {"scaled"})
      .node("Add", {"scaled", "ln.bias"}, {"ln"}, {}, "ln")
      .node("MatMul", {"ln", "fc.weight"}, {"y"}, {}, "fc")
      .output("y", 3);
  std::string stored = b.bytes();
  checkSameImport(stored, declareWeights(stored), "decomposed layer norm");
  Graph g = importOk(declareWeights(stored), "decomposed layer norm");
  std::multiset<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.insert(op.kind);
  // One LayerNorm (its backward reads only its input), not nine ops.
  CHECK(kinds.count(OpKind::LayerNorm) == 1);
  CHECK(g.ops.size() == 2);
}
