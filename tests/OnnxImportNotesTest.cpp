//===- OnnxImportNotesTest.cpp - What the importer notices, and --constants
//===//
//
// ImportNotes: weights holding the same values (a tied weight that constant
// folding copied, transposed or not) and BatchNormalization in inference
// form; ImportOptions::constants: initializers the user declares buffers
// lose their gradient and optimizer state, and a pattern that matches
// nothing is an error naming some initializers.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

namespace {

/// x [2, 4] @ a [4, 3] + (x @ b [4, 3]) -> Relu, with `bValues` in b and a
/// ones vector `g` [3] scaling the sum.
OnnxBuilder twoWeights(const std::vector<float> &aValues,
                       const std::vector<float> &bValues,
                       std::vector<int64_t> bDims = {4, 3}) {
  OnnxBuilder b;
  b.input("x", {2, 4})
      .init("a", {4, 3}, aValues)
      .init("b", bDims, bValues)
      .init("g", {3}, {1, 1, 1})
      .node("MatMul", {"x", "a"}, {"ya"});
  if (bDims != std::vector<int64_t>{4, 3})
    b.node("Gemm", {"x", "b"}, {"yb"}, {attrInt("transB", 1)});
  else
    b.node("MatMul", {"x", "b"}, {"yb"});
  b.node("Add", {"ya", "yb"}, {"s"})
      .node("Mul", {"s", "g"}, {"t"})
      .node("Relu", {"t"}, {"y"})
      .output("y", 2);
  return b;
}

std::vector<float> values(int n, float scale) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i)
    v.push_back(scale * static_cast<float>((i * 7) % n) - 1.0f);
  return v;
}

/// `v` [rows, cols] transposed to [cols, rows].
std::vector<float> transposed(const std::vector<float> &v, int rows, int cols) {
  std::vector<float> t(v.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      t[c * rows + r] = v[r * cols + c];
  return t;
}

ImportNotes notesOf(const OnnxBuilder &b, ImportOptions io = {}) {
  ImportNotes notes;
  io.notes = &notes;
  auto g = b.import(io);
  if (!g)
    FAIL(llvm::toString(g.takeError()));
  return notes;
}

} // namespace

TEST_CASE("import notes: a weight copied by folding, transposed or not",
          "[onnx][notes]") {
  const std::vector<float> a = values(12, 0.25f);
  // The same values: a copy.
  ImportNotes same = notesOf(twoWeights(a, a));
  REQUIRE(same.identicalWeights.size() == 1);
  CHECK(same.identicalWeights[0] == std::vector<std::string>{"a", "b"});
  // Transposed, as folding a tied output projection's Transpose writes it.
  ImportNotes t = notesOf(twoWeights(a, transposed(a, 4, 3), {3, 4}));
  REQUIRE(t.identicalWeights.size() == 1);
  CHECK(t.identicalWeights[0] == std::vector<std::string>{"a", "b"});
  // Different values: nothing; and the unit scale 'g' never counts (one
  // repeated value is alike by initialization).
  ImportNotes apart = notesOf(twoWeights(a, values(12, 0.5f)));
  CHECK(apart.identicalWeights.empty());
  ImportNotes ones = notesOf(
      twoWeights(std::vector<float>(12, 1.0f), std::vector<float>(12, 1.0f)));
  CHECK(ones.identicalWeights.empty());
}

TEST_CASE("import notes: BatchNormalization in inference form",
          "[onnx][notes]") {
  auto model = [](bool training) {
    OnnxBuilder b(15); // training_mode is opset 14's
    b.input("x", {2, 3, 4, 4})
        .init("w", {4, 3, 3, 3})
        .init("scale", {4}, {1, 1, 1, 1})
        .init("bias", {4}, {0, 0, 0, 0})
        .init("mean", {4}, {0, 0, 0, 0})
        .init("var", {4}, {1, 1, 1, 1})
        .node("Conv", {"x", "w"}, {"c"}, {attrInts("pads", {1, 1, 1, 1})});
    if (training)
      b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"},
             {"bn", "rm", "rv"}, {attrInt("training_mode", 1)}, "bn1");
    else
      b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"},
             {"bn"}, {}, "bn1");
    b.node("Relu", {"bn"}, {"y"}).output("y", 4);
    return b;
  };
  ImportNotes eval = notesOf(model(false));
  CHECK(eval.inferenceBatchNorms == std::vector<std::string>{"bn1"});
  ImportNotes train = notesOf(model(true));
  CHECK(train.inferenceBatchNorms.empty());
}

TEST_CASE("--constants: declared buffers train no more", "[onnx][notes]") {
  OnnxBuilder b = twoWeights(values(12, 0.25f), values(12, 0.5f));
  auto trainable = [](const Graph &g) {
    std::vector<std::string> names;
    for (ValueId w : g.weights())
      if (g.values[w].trainable)
        names.push_back(g.values[w].name);
    return names;
  };
  auto all = b.import();
  REQUIRE(static_cast<bool>(all));
  CHECK(trainable(*all) == std::vector<std::string>{"a", "b", "g"});
  ImportOptions io;
  io.constants = "^(b|g)$";
  auto some = b.import(io);
  REQUIRE(static_cast<bool>(some));
  CHECK(trainable(*some) == std::vector<std::string>{"a"});
  // A buffer is a constant: its values are kept to compile in or read.
  for (ValueId w : some->weights())
    if (some->values[w].name == "b")
      CHECK(some->values[w].data.size() == 12);

  io.constants = "^nothing$";
  auto none = b.import(io);
  REQUIRE_FALSE(static_cast<bool>(none));
  CHECK_THAT(llvm::toString(none.takeError()),
             Contains("--constants '^nothing$' matches no initializer of the "
                      "model (its 3 initializers and declared weights are "
                      "named 'a', 'b', 'g')"));
  io.constants = "(";
  auto bad = b.import(io);
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK_THAT(llvm::toString(bad.takeError()), Contains("invalid --constants"));
}
