//===- OnnxImportWeightValuesTest.cpp - Computations on weights -----------===//
//
// A weight that an op computes on (a position table sliced to the sequence
// length, Gemma's 1 + w, a table permuted to heads first) is read as a
// value: one lift per weight, the computation on values without a batch,
// and the gradient of every use summed into the one weight.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "compiler/autodiff/Autodiff.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

namespace {

/// x [N, 3, 4] + pos[:, :3] (pos [1, 5, 4]), times (1 + w) (w [4]).
OnnxBuilder positionsAndScale() {
  OnnxBuilder b;
  b.input("x", {-1, 3, 4})
      .init("pos", {1, 5, 4})
      .init("w", {4})
      .constInt64("s", {1}, {0})
      .constInt64("e", {1}, {3})
      .constInt64("ax", {1}, {1})
      .constFloat("one", 1.0f)
      .node("Slice", {"pos", "s", "e", "ax"}, {"p"})
      .node("Add", {"x", "p"}, {"h"})
      .node("Add", {"w", "one"}, {"g"})
      .node("Mul", {"h", "g"}, {"y"})
      .output("y", 3);
  return b;
}

} // namespace

TEST_CASE("a weight computed on is a value without a batch",
          "[onnx][import][weights]") {
  Graph g = importOk(positionsAndScale(), batchOf(2));
  // value(pos), Slice, Add, value(w), Add (1 + w), Mul.
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Embedding, OpKind::Slice,
                                          OpKind::Add, OpKind::Embedding,
                                          OpKind::Add, OpKind::Mul});
  const Value &p = valueNamed(g, "p");
  CHECK(!p.batched);
  CHECK(p.dims == std::vector<int64_t>{1, 3, 4});
  CHECK(!valueNamed(g, "g").batched);
  CHECK(valueNamed(g, "h").batched);
  CHECK(valueNamed(g, "y").dims == std::vector<int64_t>{2, 3, 4});
  // The parameters are the model's own, trainable, once each.
  std::vector<std::string> names;
  for (ValueId w : g.weights())
    if (g.values[w].trainable)
      names.push_back(g.values[w].name);
  CHECK(names == std::vector<std::string>{"pos", "w"});
  CHECK(!g.ops[0].batched(g));
  CHECK(!g.ops[1].batched(g));
  CHECK(g.ops[2].batched(g));
}

TEST_CASE("the gradient of a value computed from a weight reaches the weight",
          "[onnx][import][weights]") {
  Graph g = importOk(positionsAndScale(), batchOf(2));
  TrainingConfig cfg;
  cfg.loss = LossKind::MSE;
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  ValueId pos = kNoId, p = kNoId;
  for (ValueId v = 0; v < (ValueId)g.values.size(); ++v) {
    pos = g.values[v].name == "pos" ? v : pos;
    p = g.values[v].name == "p" ? v : p;
  }
  // p's gradient is one sample's size whatever the sub-batch; pos has a
  // weight gradient, written by the lift's BP-weight and updated.
  const Block &dp = tg->blocks[tg->gradBlock[p]];
  CHECK(dp.kind == BlockKind::Gradient);
  CHECK(dp.perSampleBytes == 0);
  CHECK(dp.fixedBytes == 3 * 4 * 4);
  REQUIRE(tg->gradBlock[pos] >= 0);
  const Block &dpos = tg->blocks[tg->gradBlock[pos]];
  CHECK(dpos.kind == BlockKind::WeightGrad);
  REQUIRE(dpos.writers.size() == 1);
  const Task &bw = tg->tasks[dpos.writers[0]];
  CHECK(bw.kind == TaskKind::BackwardWeight);
  CHECK(g.ops[bw.op].kind == OpKind::Embedding);
  int updates = 0;
  for (const Task &t : tg->tasks)
    updates += t.kind == TaskKind::Update;
  CHECK(updates == 2);
}

TEST_CASE("a weight used directly and as a value is one parameter",
          "[onnx][import][weights]") {
  // y = x @ W + W[:1]: W [4, 4] read by MatMul and, sliced, added as a
  // bias row.
  OnnxBuilder b;
  b.input("x", {-1, 4})
      .init("W", {4, 4})
      .constInt64("s", {1}, {0})
      .constInt64("e", {1}, {1})
      .constInt64("ax", {1}, {0})
      .node("MatMul", {"x", "W"}, {"m"})
      .node("Slice", {"W", "s", "e", "ax"}, {"row"})
      .node("Add", {"m", "row"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  int trainable = 0;
  for (ValueId w : g.weights())
    trainable += g.values[w].trainable;
  CHECK(trainable == 1);
  TrainingConfig cfg;
  cfg.loss = LossKind::MSE;
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  // MatMul's BP-weight and the lift's both add into dW.
  ValueId w = g.weights()[0];
  CHECK(tg->blocks[tg->gradBlock[w]].writers.size() == 2);
}

TEST_CASE("computations on weights memfit does not run are named",
          "[onnx][import][weights]") {
  OnnxBuilder b;
  b.input("x", {-1, 4})
      .init("w", {4})
      .node("Cos", {"w"}, {"c"}, {}, "cosine")
      .node("Mul", {"x", "c"}, {"y"})
      .output("y", 2);
  std::string err = errorText(b.import(batchOf(2)));
  CHECK_THAT(err, Contains("'cosine'"));
  CHECK_THAT(err, Contains("computes on a weight"));
  CHECK_THAT(err, Contains("Slice, Transpose"));
  CHECK_THAT(err, Contains("--constants"));
  // A value computed from weights is no operand of a weight slot.
  OnnxBuilder m;
  m.input("x", {-1, 4})
      .init("w", {4, 4})
      .constFloat("two", 2.0f)
      .node("Mul", {"w", "two"}, {"w2"})
      .node("Gemm", {"x", "w2"}, {"y"}, {}, "gemm")
      .output("y", 2);
  err = errorText(m.import(batchOf(2)));
  CHECK_THAT(err, Contains("'gemm'"));
  CHECK_THAT(err, Contains("('w2') is computed from the weight 'w'"));
}

TEST_CASE("a value varying along two runs of axes is expanded between them",
          "[onnx][import][weights]") {
  // DeBERTa's query bias: b [4] viewed [1, 1, 2, 2], moved to [1, 2, 1, 2]
  // over q [N, 2, 3, 2]; expanded to [1, 2, 3, 2] it varies along one run.
  OnnxBuilder b;
  b.input("q", {-1, 2, 3, 2})
      .init("b", {4})
      .constInt64("shape", {4}, {1, 1, 2, 2})
      .node("Reshape", {"b", "shape"}, {"b4"})
      .node("Transpose", {"b4"}, {"bt"}, {attrInts("perm", {0, 2, 1, 3})})
      .node("Add", {"q", "bt"}, {"y"}, {}, "add")
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 5);
  CHECK(g.ops[3].kind == OpKind::Expand);
  CHECK(g.ops[3].name == "add#tiled");
  const Value &tiled = g.values[g.ops[3].outputs[0]];
  CHECK(!tiled.batched);
  CHECK(tiled.dims == std::vector<int64_t>{1, 2, 3, 2});
  CHECK(g.ops[4].kind == OpKind::Add);
  CHECK(g.ops[4].inputs[1] == g.ops[3].outputs[0]);
}

namespace {

/// BEiT's relative position bias: a table t [9, 2] viewed [1, 3, 3, 2],
/// moved heads first and interpolated to `side` x `side` (F.interpolate,
/// bilinear), then added to x [N, 2, side, side].
OnnxBuilder interpolatedTable(int64_t side) {
  OnnxBuilder b;
  b.input("x", {-1, 2, side, side})
      .init("t", {9, 2})
      .constInt64("shape", {4}, {1, 3, 3, 2})
      .constInt64("sizes", {4}, {1, 2, side, side})
      .node("Reshape", {"t", "shape"}, {"t4"})
      .node("Transpose", {"t4"}, {"tt"}, {attrInts("perm", {0, 3, 1, 2})})
      .node("Resize", {"tt", "", "", "sizes"}, {"r"},
            {attrStr("mode", "linear")}, "interp")
      .node("Add", {"x", "r"}, {"y"})
      .output("y", 4);
  return b;
}

} // namespace

TEST_CASE("a Resize to its input's own size is the identity, on weights too",
          "[onnx][import][weights]") {
  // The table is already the window's size: no Resize op, the sum reads
  // the transposed table, and the table stays one trainable parameter.
  Graph g = importOk(interpolatedTable(3), batchOf(2));
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Embedding, OpKind::Reshape,
                                          OpKind::Transpose, OpKind::Add});
  CHECK(g.ops[3].inputs[1] == g.ops[2].outputs[0]);
  CHECK(g.values[g.output].dims == std::vector<int64_t>{2, 2, 3, 3});
  // Another size would interpolate a value without a batch: refused, with
  // both shapes.
  std::string err = errorText(interpolatedTable(5).import(batchOf(2)));
  CHECK_THAT(err, Contains("'interp'"));
  CHECK_THAT(err, Contains("from [1, 2, 3, 3] to [1, 2, 5, 5]"));
  // On an activation the same identity leaves no op either.
  OnnxBuilder a;
  a.input("x", {-1, 2, 4, 4})
      .constInt64("sizes", {4}, {2, 2, 4, 4})
      .node("Relu", {"x"}, {"h"})
      .node("Resize", {"h", "", "", "sizes"}, {"y"},
            {attrStr("mode", "nearest")})
      .output("y", 4);
  Graph ga = importOk(a, batchOf(2));
  CHECK(opKinds(ga) == std::vector<OpKind>{OpKind::Relu});
}

TEST_CASE("GatherElements of a value computed from weights is a lookup of "
          "its elements",
          "[onnx][import][weights]") {
  // Funnel's relative positions: out[i][j] = v[i][idx[i][j]] of v = 1 + w
  // [2, 3]: the elements 2, 0 of row 0 and 1, 1 of row 1, at flat
  // positions 2, 0, 4, 4 of v as one column.
  OnnxBuilder b;
  b.input("x", {-1, 2, 2})
      .init("w", {2, 3})
      .constFloat("one", 1.0f)
      .node("Add", {"w", "one"}, {"v"})
      .constInt64("idx", {2, 2}, {2, 0, 1, 1})
      .node("GatherElements", {"v", "idx"}, {"p"}, {attrInt("axis", 1)})
      .node("Add", {"x", "p"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  // value(w), 1 + w, one column, the lookup, back to [2, 2], the sum.
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Embedding, OpKind::Add,
                                          OpKind::Reshape, OpKind::Embedding,
                                          OpKind::Reshape, OpKind::Add});
  const Op &lookup = g.ops[3];
  CHECK(g.values[lookup.inputs[0]].dims == std::vector<int64_t>{6, 1});
  CHECK(g.values[lookup.inputs[1]].data == std::vector<float>{2, 0, 4, 4});
  const Value &p = valueNamed(g, "p");
  CHECK(!p.batched);
  CHECK(p.dims == std::vector<int64_t>{2, 2});
  // An index past its axis is named.
  OnnxBuilder bad;
  bad.input("x", {-1, 2, 2})
      .init("w", {2, 3})
      .constFloat("one", 1.0f)
      .node("Add", {"w", "one"}, {"v"})
      .constInt64("idx", {2, 2}, {2, 0, 3, 1})
      .node("GatherElements", {"v", "idx"}, {"p"}, {attrInt("axis", 1)}, "ge")
      .node("Add", {"x", "p"}, {"y"})
      .output("y", 3);
  CHECK_THAT(errorText(bad.import(batchOf(2))),
             Contains("'ge'") &&
                 Contains("index 3 is out of range for axis 1 of extent 3"));
}

TEST_CASE("Dropout of a constant in training is a value without a batch",
          "[onnx][import][weights]") {
  // Funnel drops out its sinusoidal table: one mask for every sample, as
  // torch draws one a forward. Of a parameter (DropConnect) the same, and
  // the parameter trains.
  pb::AttributeProto train;
  train.set_name("value");
  train.set_type(pb::AttributeProto::TENSOR);
  train.mutable_t()->set_data_type(pb::TensorProto::BOOL);
  train.mutable_t()->add_int32_data(1);
  for (bool parameter : {false, true}) {
    OnnxBuilder b(13);
    b.input("x", {-1, 4});
    if (parameter)
      b.init("table", {4}, {0.5f, -1, 2, 0.25f});
    else
      b.constFloat("half", 0.5f).node("Sin", {"half"}, {"table"});
    b.constFloat("ratio", 0.1f)
        .node("Constant", {}, {"train"}, {train})
        .node("Dropout", {"table", "ratio", "train"}, {"d"})
        .node("Add", {"x", "d"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b, batchOf(2));
    std::vector<OpKind> want{OpKind::Dropout, OpKind::Add};
    if (parameter)
      want.insert(want.begin(), OpKind::Embedding); // value(table)
    CHECK(opKinds(g) == want);
    const Op &drop = g.ops[want.size() - 2];
    CHECK(drop.attrs.ratio == 0.1f);
    CHECK(!valueNamed(g, "d").batched);
    int trainable = 0;
    for (ValueId w : g.weights())
      trainable += g.values[w].trainable;
    CHECK(trainable == (parameter ? 1 : 0));
  }
}
