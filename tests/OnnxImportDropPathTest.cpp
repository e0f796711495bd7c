//===- OnnxImportDropPathTest.cpp - Stochastic depth as torch writes it ---===//
//
// x / keep * floor(keep + rand_like(m)) is a dropout of ratio 1 - keep: one
// draw per sample when m has one element per sample (Hugging Face's
// drop_path), one per element when m has x's shape.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

namespace {

/// drop_path(relu(x)) with random numbers shaped like `like`'s output:
/// "one" [N, 1, 1] (Shape, Gather, Concat, ConstantOfShape as torch writes
/// it), "x" relu(x)'s own shape, "half" [N, 3, 1].
OnnxBuilder dropPath(const std::string &like) {
  OnnxBuilder b;
  b.input("x", {-1, 3, 4})
      .node("Relu", {"x"}, {"h"})
      .constFloat("keep", 0.8f)
      .constInt64("i0", {1}, {0})
      .node("Shape", {"h"}, {"shape"})
      .node("Gather", {"shape", "i0"}, {"n"}, {attrInt("axis", 0)})
      .constInt64("ones", {2}, {1, 1})
      .constInt64("three1", {2}, {3, 1})
      .node("Concat", {"n", like == "half" ? "three1" : "ones"}, {"mshape"},
            {attrInt("axis", 0)})
      .node("ConstantOfShape", {"mshape"}, {"m"})
      .node("RandomUniformLike", {like == "x" ? "h" : "m"}, {"r"},
            {attrInt("dtype", 1)})
      .node("Add", {"r", "keep"}, {"a"})
      .node("Floor", {"a"}, {"mask"})
      .node("Div", {"h", "keep"}, {"scaled"})
      .node("Mul", {"scaled", "mask"}, {"y"}, {}, "drop_path")
      .output("y", 3);
  return b;
}

} // namespace

TEST_CASE("drop path is a dropout with one draw per sample",
          "[onnx][import][dropout]") {
  Graph g = importOk(dropPath("one"), batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Relu, OpKind::Dropout});
  CHECK(g.ops[1].attrs.wholeSample);
  CHECK(g.ops[1].attrs.ratio == Approx(0.2f));
  CHECK(g.ops[1].name == "drop_path");
  CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{2, 3, 4});
  // Random numbers of x's shape: a dropout of every element.
  Graph e = importOk(dropPath("x"), batchOf(2));
  REQUIRE(opKinds(e) == std::vector<OpKind>{OpKind::Relu, OpKind::Dropout});
  CHECK(!e.ops[1].attrs.wholeSample);
}

TEST_CASE("random numbers of another shape are refused, named",
          "[onnx][import][dropout]") {
  std::string err = errorText(dropPath("half").import(batchOf(2)));
  CHECK_THAT(err, Contains("'drop_path'") && Contains("[2, 3, 1]") &&
                      Contains("drop path (one per sample)"));
}

TEST_CASE("torch.export's in-place dropout is a dropout",
          "[onnx][import][dropout]") {
  // nn.Dropout(0.1, inplace=True) through torch.export: a constant like
  // h, rand_like of it, < keep (cast like the numbers), cast like h,
  // / keep, times h.
  OnnxBuilder b(18);
  b.input("x", {-1, 3})
      .node("Relu", {"x"}, {"h"})
      .constFloat("zero", 0.0f)
      .node("Shape", {"h"}, {"hs"})
      .node("Expand", {"zero", "hs"}, {"like"})
      .node("RandomUniformLike", {"like"}, {"rands"})
      .constFloat("keep", 0.9f)
      .node("CastLike", {"keep", "rands"}, {"keep_cast"})
      .node("Less", {"rands", "keep_cast"}, {"sampled"})
      .node("CastLike", {"sampled", "like"}, {"mask"})
      .node("Div", {"mask", "keep"}, {"scale"})
      .node("Mul", {"h", "scale"}, {"y"}, {}, "dropout")
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Relu, OpKind::Dropout});
  CHECK(!g.ops[1].attrs.wholeSample);
  CHECK(g.ops[1].attrs.ratio == Approx(0.1f));
}
