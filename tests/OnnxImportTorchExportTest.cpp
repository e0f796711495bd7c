//===- OnnxImportTorchExportTest.cpp - What torch.export writes -----------===//
//
// Forms torch 2.9 to 2.15's dynamo exporter writes for today's Hugging Face
// models (transformers 4.57 and 5.x): literals lifted into initializers
// and cloned, masks compared with broadcasting, position ids joined along
// their last axis, graphs traced at a fixed batch (masks and reshapes
// spelled at that batch), advanced indexing at constant positions as
// GatherND, CastLike of a weight, and a buffer table through a layer.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"
#include "compiler/ops/Families.h"
#include "compiler/ops/OpDef.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

TEST_CASE("a lifted constant is no parameter, also through its clone",
          "[onnx][import][torch2]") {
  // BERT's extended mask: (1.0 - mask) * -big, the 1.0 lifted into an
  // initializer that the graph clones with Identity. y = x - clone.
  OnnxBuilder b(18);
  b.input("x", {-1, 3})
      .init("lifted_tensor_0", {}, {1.0f})
      .node("Identity", {"lifted_tensor_0"}, {"clone"})
      .node("Sub", {"x", "clone"}, {"y"})
      .output("y", 2);
  b.torchInputKind("lifted_tensor_0", "CONSTANT_TENSOR");
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &c = g.values[g.ops[0].inputs[1]];
  CHECK(!c.trainable);
  CHECK(c.data == std::vector<float>{1.0f});
}

TEST_CASE("Equal of constants broadcasts", "[onnx][import][fold]") {
  // transformers' causal check: q [3, 1] == k [1, 3] is the identity, as a
  // 0/1 float mask added to x [N, 3, 3].
  OnnxBuilder b(18);
  b.input("x", {-1, 3, 3})
      .constInt64("q", {3, 1}, {0, 1, 2})
      .constInt64("k", {1, 3}, {0, 1, 2})
      .node("Equal", {"q", "k"}, {"eq"})
      .node("Cast", {"eq"}, {"m"}, {attrInt("to", 1)})
      .node("Add", {"x", "m"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &m = g.values[g.ops[0].inputs[1]];
  CHECK(m.data == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
}

TEST_CASE("position ids filled over the batch join along their last axis",
          "[onnx][import][fold]") {
  // pos = arange(3).expand(N, 3); cat([pos[:, :1] - 1, pos], -1): the
  // packed-sequence check of transformers 5 (torch.diff with a prepend).
  OnnxBuilder b(18);
  b.input("x", {-1, 4})
      .node("Shape", {"x"}, {"s"})
      .constInt64("i0", {1}, {0})
      .node("Gather", {"s", "i0"}, {"n"})
      .constInt64("three", {1}, {3})
      .node("Concat", {"n", "three"}, {"shape"}, {attrInt("axis", 0)})
      .constInt64("r", {3}, {0, 1, 2})
      .node("Expand", {"r", "shape"}, {"pos"})
      .constInt64("s0", {1}, {0})
      .constInt64("s1", {1}, {1})
      .constInt64("a1", {1}, {1})
      .node("Slice", {"pos", "s0", "s1", "a1"}, {"first"})
      .constInt64("one", {}, {1})
      .node("Sub", {"first", "one"}, {"prev"})
      .node("Concat", {"prev", "pos"}, {"cat"}, {attrInt("axis", -1)})
      .node("Cast", {"cat"}, {"f"}, {attrInt("to", 1)})
      .node("Add", {"x", "f"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &f = g.values[g.ops[0].inputs[1]];
  CHECK(f.dims == std::vector<int64_t>{1, 4});
  CHECK(f.data == std::vector<float>{-1, 0, 1, 2});
}

TEST_CASE("a fixed-batch export's mask, the same for every sample, "
          "broadcasts at any batch",
          "[onnx][import][torch2]") {
  // Traced at batch 2: the mask [2, 1, 3] is written whole. Equal rows are
  // one sample's; different rows depend on the sample and are refused.
  auto model = [](std::vector<float> mask) {
    OnnxBuilder b(18);
    b.input("x", {2, 4, 3})
        .init("mask", {2, 1, 3}, mask)
        .node("Add", {"x", "mask"}, {"y"}, {}, "add_mask")
        .output("y", 3);
    b.torchInputKind("mask", "BUFFER");
    return b;
  };
  std::vector<float> same = {0, -9, -9, 0, -9, -9};
  for (int64_t batch : {2, 4}) {
    Graph g = importOk(model(same), batchOf(batch));
    REQUIRE(g.ops.size() == 1);
    const Value &m = g.values[g.ops[0].inputs[1]];
    CHECK(m.dims == std::vector<int64_t>{1, 1, 3});
    CHECK(m.data == std::vector<float>{0, -9, -9});
    CHECK(g.values[g.ops[0].outputs[0]].dims ==
          std::vector<int64_t>{batch, 4, 3});
  }
  CHECK_THAT(errorText(model({0, -9, -9, 0, 0, -9}).import(batchOf(2))),
             Contains("'add_mask'") && Contains("does not broadcast"));
}

TEST_CASE("a fixed-batch export's reshape back from [N * T, C] finds the "
          "batch by its literal",
          "[onnx][import][torch2]") {
  // GPT-2's Conv1D at batch 2: x.view(-1, 3) @ W, viewed as [2, 4, 5].
  OnnxBuilder b(18);
  b.input("x", {2, 4, 3})
      .constInt64("flat", {2}, {-1, 3})
      .node("Reshape", {"x", "flat"}, {"rows"})
      .init("W", {3, 5})
      .node("MatMul", {"rows", "W"}, {"p"})
      .constInt64("back", {3}, {2, 4, 5})
      .node("Reshape", {"p", "back"}, {"y"})
      .output("y", 3);
  for (int64_t batch : {2, 6}) {
    Graph g = importOk(b, batchOf(batch));
    const Value &y = g.values[g.ops.back().outputs[0]];
    CHECK(y.dims == std::vector<int64_t>{batch, 4, 5});
    CHECK(y.batchAxis == 0);
    CHECK(y.canonical());
  }
}

TEST_CASE("a fixed-batch window reshape whose -1 is not the batch",
          "[onnx][import][torch2]") {
  // Swin's attention at batch 2 by torch.export: windows [N * 4, 2, 8]
  // split into heads as [8, -1, 2, 4]; the 8 holds the batch, the -1 is
  // the 2 tokens. Then its pooler's flatten as torch.export decomposes
  // as_strided: every element of the flattened value gathered in order.
  OnnxBuilder b(18);
  std::vector<int64_t> order(2 * 64);
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = static_cast<int64_t>(k);
  b.input("x", {2, 4, 2, 8})
      .constInt64("windows", {3}, {-1, 2, 8})
      .node("Reshape", {"x", "windows"}, {"w"})
      .node("Relu", {"w"}, {"r"})
      .constInt64("heads", {4}, {8, -1, 2, 4})
      .node("Reshape", {"r", "heads"}, {"h"})
      .constInt64("flat", {1}, {-1})
      .node("Reshape", {"h", "flat"}, {"f"})
      .constInt64("idx", {2, 64}, order)
      .node("Gather", {"f", "idx"}, {"y"}, {attrInt("axis", 0)})
      .output("y", 2);
  Graph g = importOk(b, batchOf(2));
  const Value &h = valueNamed(g, "h");
  CHECK(h.dims == std::vector<int64_t>{8, 2, 2, 4});
  CHECK(h.batchAxis == 0);
  CHECK(h.batchInner == 4);
  // The gather is the reshape back to one sample a row: no gather op.
  for (const Op &op : g.ops)
    CHECK(op.kind != OpKind::Slice);
  const Value &y = g.values[g.output];
  CHECK(y.dims == std::vector<int64_t>{2, 64});
  CHECK(y.canonical());
  CHECK(g.ops.back().kind == OpKind::Reshape);
  // Indices out of order are still no index selection.
  std::swap(order[0], order[1]);
  OnnxBuilder c(18);
  c.input("x", {2, 64})
      .constInt64("flat", {1}, {-1})
      .node("Reshape", {"x", "flat"}, {"f"})
      .constInt64("idx", {2, 64}, order)
      .node("Gather", {"f", "idx"}, {"y"}, {attrInt("axis", 0)}, "gather")
      .output("y", 2);
  CHECK_THAT(errorText(c.import(batchOf(2))),
             Contains("'gather'") && Contains("index selection"));
}

TEST_CASE("a constant tiled over the batch's rows of [N * heads, T, T]",
          "[onnx][import][torch2]") {
  // BLOOM's ALiBi: slopes times positions, [heads, 1, T] = [2, 1, 3],
  // tiled to [N * heads, 1, 3] and added to scores [N * heads, 3, 3]. The
  // repeats hold the batch, so the graph is read at the planned batch;
  // each sample's rows are then the constant itself, repeated over the
  // query axis.
  pb::AttributeProto slopes = floatValue({2, 1, 3}, {0, 1, 2, 10, 11, 12});
  OnnxBuilder b(17);
  b.input("x", {-1, 2, 3, 3})
      .constInt64("rows", {3}, {-1, 3, 3})
      .node("Reshape", {"x", "rows"}, {"s"})
      .node("Constant", {}, {"alibi"}, {slopes})
      .node("Shape", {"x"}, {"shape"})
      .constInt64("zero", {}, {0})
      .node("Gather", {"shape", "zero"}, {"n"}, {attrInt("axis", 0)})
      .constInt64("ax", {1}, {0})
      .node("Unsqueeze", {"n", "ax"}, {"n1"})
      .constInt64("ones", {2}, {1, 1})
      .node("Concat", {"n1", "ones"}, {"reps"}, {attrInt("axis", 0)})
      .node("Tile", {"alibi", "reps"}, {"tiled"})
      .node("Add", {"s", "tiled"}, {"y"})
      .output("y", 3);
  for (int64_t batch : {2, 5}) {
    Graph g = importOk(b, batchOf(batch));
    const Value &s = valueNamed(g, "s");
    CHECK(s.batchInner == 2);
    const Op &add = g.ops.back();
    REQUIRE(add.kind == OpKind::Add);
    const Value &c = g.values[add.inputs[1]];
    CHECK(!c.batched);
    CHECK(c.dims == std::vector<int64_t>{2, 3, 3});
    CHECK(c.data == std::vector<float>{0, 1, 2, 0, 1, 2, 0, 1, 2, 10, 11, 12,
                                       10, 11, 12, 10, 11, 12});
    CHECK(g.values[add.outputs[0]].batchInner == 2);
  }
}

TEST_CASE("a constant filled over the batch reshaped with the heads is "
          "read at the planned batch",
          "[onnx][import][torch2]") {
  // transformers 4's BLOOM: the attention mask of ones [N, T] times the
  // slopes [1, 2, 1] is [N, 2, 3], reshaped to [N * 2, 1, 3] and added to
  // scores [N * 2, 3, 3]. Filled over the batch the folder cannot merge it
  // with the heads; read at the planned batch each sample's rows are the
  // slopes over the positions' ones.
  pb::AttributeProto slopes = floatValue({1, 2, 1}, {0.5f, 0.25f});
  OnnxBuilder b(17);
  b.input("x", {-1, 2, 3, 3})
      .constInt64("rows", {3}, {-1, 3, 3})
      .node("Reshape", {"x", "rows"}, {"s"})
      .node("Shape", {"x"}, {"shape"})
      .constInt64("zero", {1}, {0})
      .constInt64("one", {1}, {1})
      .node("Slice", {"shape", "zero", "one"}, {"n"})
      .constInt64("t", {1}, {3})
      .node("Concat", {"n", "t"}, {"maskShape"}, {attrInt("axis", 0)})
      .node("ConstantOfShape", {"maskShape"}, {"mask"}, {floatValue({1}, {1})})
      .constInt64("ax1", {1}, {1})
      .node("Unsqueeze", {"mask", "ax1"}, {"m3"})
      .node("Constant", {}, {"slopes"}, {slopes})
      .node("Mul", {"m3", "slopes"}, {"alibi"})
      .constInt64("merged", {3}, {-1, 1, 3})
      .node("Reshape", {"alibi", "merged"}, {"ab"})
      .node("Add", {"s", "ab"}, {"y"})
      .output("y", 3);
  ImportNotes notes;
  ImportOptions opts = batchOf(3);
  opts.notes = &notes;
  Graph g = importOk(b, opts);
  CHECK(notes.tracedBatch == 3);
  const Op &add = g.ops.back();
  REQUIRE(add.kind == OpKind::Add);
  const Value &c = g.values[add.inputs[1]];
  CHECK(c.dims == std::vector<int64_t>{2, 3, 3});
  std::vector<float> want(9, 0.5f);
  want.resize(18, 0.25f);
  CHECK(c.data == want);
}

TEST_CASE("GatherND at constant indices is a Gather", "[onnx][import]") {
  SECTION("of an activation along an axis before the batch's") {
    // Falcon's fused heads: qkv [N, 3, 4] moved to [3, N, 4], qkv[1].
    OnnxBuilder b(18);
    b.input("x", {-1, 3, 4})
        .node("Transpose", {"x"}, {"t"}, {attrInts("perm", {1, 0, 2})})
        .constInt64("idx", {1}, {1})
        .node("GatherND", {"t", "idx"}, {"y"})
        .output("y", 2);
    Graph g = importOk(b, batchOf(2));
    REQUIRE(g.ops.size() == 2);
    CHECK(g.ops[0].kind == OpKind::Transpose);
    // One index along an axis: a slice of it.
    CHECK(opKindName(g.ops[1].kind) == "Slice");
    CHECK(g.values[g.ops[1].outputs[0]].dims == std::vector<int64_t>{2, 4});
  }
  SECTION("of a weight by pairs of indices, its rows trained") {
    // Swin's relative position table [3, 2, 4] looked up at (0, 1) and
    // (2, 0): rows 1 and 4 of the table merged to [6, 4], added to x.
    OnnxBuilder b(18);
    b.input("x", {-1, 2, 4})
        .init("table", {3, 2, 4})
        .constInt64("idx", {2, 2}, {0, 1, 2, 0})
        .node("GatherND", {"table", "idx"}, {"bias"})
        .node("Add", {"x", "bias"}, {"y"})
        .output("y", 3);
    Graph g = importOk(b, batchOf(2));
    // The table lifted to a value, merged to rows, looked up, added.
    std::vector<std::string> kinds;
    for (const Op &op : g.ops)
      kinds.emplace_back(opKindName(op.kind));
    CHECK(kinds ==
          std::vector<std::string>{"Gather", "Reshape", "Gather", "Add"});
    REQUIRE(g.ops.size() == 4);
    CHECK(g.values[g.ops[1].outputs[0]].dims == std::vector<int64_t>{6, 4});
    CHECK(g.values[g.ops[2].outputs[0]].dims == std::vector<int64_t>{2, 4});
    bool trained = false;
    for (const Value &v : g.values)
      trained = trained || (v.name == "table" && v.trainable);
    CHECK(trained);
  }
  SECTION("never along the batch") {
    OnnxBuilder b(18);
    b.input("x", {-1, 3})
        .constInt64("idx", {1}, {0})
        .node("GatherND", {"x", "idx"}, {"y"}, {}, "by_sample")
        .output("y", 1);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'by_sample'") && Contains("the batch's axis"));
  }
}

TEST_CASE("CastLike of a weight and a buffer table through a layer",
          "[onnx][import][torch2]") {
  // PoolFormer's scale cast like the activation; Swin V2's relative
  // coordinates (a buffer) through its position-bias MLP's Linear.
  OnnxBuilder b(18);
  b.input("x", {-1, 3, 2})
      .init("scale", {2})
      .node("CastLike", {"scale", "x"}, {"s"})
      .node("Mul", {"x", "s"}, {"xs"})
      .init("coords", {3, 4})
      .init("W", {2, 4})
      .node("Transpose", {"W"}, {"Wt"}, {attrInts("perm", {1, 0})})
      .node("MatMul", {"coords", "Wt"}, {"bias"})
      .node("Add", {"xs", "bias"}, {"y"})
      .output("y", 3);
  b.torchInputKind("coords", "BUFFER");
  Graph g = importOk(b, batchOf(2));
  for (const Value &v : g.values) {
    if (v.name == "scale" || v.name == "W")
      CHECK(v.trainable);
    if (v.name == "coords")
      CHECK(!v.trainable);
  }
  bool bias = false;
  for (const Op &op : g.ops)
    bias = bias || (op.kind == OpKind::MatMul &&
                    g.values[op.outputs[0]].dims == std::vector<int64_t>{3, 2});
  CHECK(bias);
}

TEST_CASE("opset 18 reductions take noop_with_empty_axes",
          "[onnx][import][newer]") {
  // ConvNeXt V2's global response norm: ||x||_2 over the last axis.
  OnnxBuilder b(18);
  b.input("x", {-1, 3, 4})
      .constInt64("axes", {1}, {-1})
      .node("ReduceL2", {"x", "axes"}, {"y"},
            {attrInt("keepdims", 1), attrInt("noop_with_empty_axes", 0)})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  CHECK(g.values[g.ops.back().outputs[0]].dims ==
        std::vector<int64_t>{2, 3, 1});
}

TEST_CASE("a graph that counts up to its symbolic batch is read at the "
          "planned one",
          "[onnx][import][torch2]") {
  // transformers 5's per-sample mask at its smallest: b = arange(N);
  // m = (b[:, None] == b[:, None]) gives N rows of one value, read at the
  // planned batch and stored once; y = x + m.
  OnnxBuilder b(18);
  b.input("x", {-1, 3})
      .node("Shape", {"x"}, {"s"})
      .constInt64("i0", {}, {0})
      .node("Gather", {"s", "i0"}, {"n"})
      .constInt64("zero", {}, {0})
      .constInt64("one", {}, {1})
      .node("Range", {"zero", "n", "one"}, {"b"}, {}, "batch_arange")
      .constInt64("ax1", {1}, {1})
      .node("Unsqueeze", {"b", "ax1"}, {"col"})
      .node("Equal", {"col", "col"}, {"eq"})
      .node("Cast", {"eq"}, {"m"}, {attrInt("to", 1)})
      .node("Add", {"x", "m"}, {"y"})
      .output("y", 2);
  ImportNotes notes;
  ImportOptions opts = batchOf(4);
  opts.notes = &notes;
  Graph g = importOk(b, opts);
  CHECK(notes.tracedBatch == 4);
  REQUIRE(g.ops.size() == 1);
  const Value &m = g.values[g.ops[0].inputs[1]];
  CHECK(m.dims == std::vector<int64_t>{1, 1});
  CHECK(m.data == std::vector<float>{1.0f});
}

TEST_CASE("T5's position bias: Where of a mask between a value computed "
          "from weights and a scalar",
          "[onnx][import][torch2]") {
  // bias = where(mask, table[idx] (from the weight), -inf), added to x.
  OnnxBuilder b(18);
  b.input("x", {-1, 2, 2})
      .init("table", {3, 2})
      .constInt64("idx", {2}, {0, 2})
      .node("Gather", {"table", "idx"}, {"rows"})
      .initInt64("mask_src", {2, 2}, {1, 0, 1, 1})
      .node("Cast", {"mask_src"}, {"mask"}, {attrInt("to", 9)})
      .constFloat("low", -1e9f)
      .node("Where", {"mask", "rows", "low"}, {"bias"}, {}, "where_bias")
      .node("Add", {"x", "bias"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  bool where = false;
  for (const Op &op : g.ops)
    where = where || (op.kind == OpKind::Where && !op.batched(g));
  CHECK(where);
}

TEST_CASE("type_as on the token ids and a buffer of zeros gathered at them",
          "[onnx][import][torch2]") {
  // RoBERTa in transformers 5: pos = cumsum(ids != 1) cast like an int32
  // value, + 1; token types = gather(zeros buffer, 1, pos) (all 0), looked
  // up in a table and added to the position embedding.
  OnnxBuilder b(18);
  b.input("ids", {-1, 4}, pb::TensorProto::INT64)
      .constInt64("pad", {}, {1})
      .node("Equal", {"ids", "pad"}, {"is_pad"})
      .node("Not", {"is_pad"}, {"ne"})
      .node("Cast", {"ne"}, {"ne32"}, {attrInt("to", 6)})
      .node("Cast", {"ne32"}, {"ne64"}, {attrInt("to", 7)})
      .constInt64("ax", {}, {1})
      .node("CumSum", {"ne64", "ax"}, {"cs"})
      .node("CastLike", {"cs", "ne32"}, {"cs32"})
      .node("Cast", {"cs32"}, {"pos"}, {attrInt("to", 7)})
      .initInt64("types", {1, 8}, {0, 0, 0, 0, 0, 0, 0, 0})
      .node("GatherElements", {"types", "pos"}, {"tt"}, {attrInt("axis", 1)})
      .init("pos_table", {8, 3})
      .node("Gather", {"pos_table", "pos"}, {"pe"})
      .init("type_table", {2, 3})
      .node("Gather", {"type_table", "tt"}, {"te"})
      .node("Add", {"pe", "te"}, {"y"})
      .output("y", 3);
  b.torchInputKind("types", "BUFFER");
  Graph g = importOk(b, batchOf(2));
  const Value &y = g.values[g.ops.back().outputs[0]];
  CHECK(y.dims == std::vector<int64_t>{2, 4, 3});
  // The types' lookup reads row 0 for every sample: one row, broadcast.
  bool oneRow = false;
  for (const Op &op : g.ops)
    oneRow = oneRow ||
             (op.kind == OpKind::Embedding && !op.batched(g) &&
              g.values[op.outputs[0]].dims == std::vector<int64_t>{1, 4, 3});
  CHECK(oneRow);
}

TEST_CASE("Flatten of a constant folds", "[onnx][import][fold]") {
  OnnxBuilder b(18);
  b.input("x", {-1, 6})
      .init("c", {2, 3}, {1, 2, 3, 4, 5, 6})
      .node("Flatten", {"c"}, {"f"}, {attrInt("axis", 0)})
      .node("Add", {"x", "f"}, {"y"})
      .output("y", 2);
  b.torchInputKind("c", "BUFFER");
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &f = g.values[g.ops[0].inputs[1]];
  CHECK(f.dims == std::vector<int64_t>{1, 6});
  CHECK(f.data == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("a constant filled over the batch read as data",
          "[onnx][import][fold]") {
  // EdgeNeXt's position encoding: features of a mask made per sample
  // ([N, 2, 3] of 2s, its batch's axis stored as extent 1), permuted to
  // channels first and convolved by a trained weight. The permutation
  // keeps the batch on axis 0; the convolution reads the constant as a
  // weight broadcast over the batch, once.
  OnnxBuilder b(17);
  b.input("x", {-1, 3, 2, 2})
      .constInt64("i0", {1}, {0})
      .node("Shape", {"x"}, {"shape"})
      .node("Gather", {"shape", "i0"}, {"n"}, {attrInt("axis", 0)})
      .constInt64("hw", {3}, {2, 2, 3})
      .node("Concat", {"n", "hw"}, {"mshape"}, {attrInt("axis", 0)})
      .node("ConstantOfShape", {"mshape"}, {"pos"}, {floatValue({1}, {2})})
      .node("Transpose", {"pos"}, {"posT"}, {attrInts("perm", {0, 3, 1, 2})})
      .init("W", {3, 3, 1, 1})
      .node("Conv", {"posT", "W"}, {"proj"}, {}, "proj")
      .node("Add", {"x", "proj"}, {"y"})
      .output("y", 4);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(opKinds(g) ==
          std::vector<OpKind>{OpKind::Embedding, OpKind::Conv, OpKind::Add});
  const Value &w = g.values[g.ops[0].inputs[0]];
  CHECK(w.kind == ValueKind::Weight);
  CHECK(!w.trainable);
  CHECK(w.dims == std::vector<int64_t>{1, 3, 2, 2});
  CHECK(w.data == std::vector<float>(12, 2.0f));
  const Value &pos = g.values[g.ops[0].outputs[0]];
  CHECK(pos.batched);
  CHECK(pos.dims == std::vector<int64_t>{2, 3, 2, 2});
}

TEST_CASE("Pad of a constant folds", "[onnx][import][fold]") {
  // Funnel's mask: F.pad(ones(2, 2), (1, 0, 1, 0)), a zero row and column
  // before; then with a constant of 7 after the last axis alone (opset
  // 18's axes).
  OnnxBuilder b(18);
  b.input("x", {-1, 3, 3})
      .constInt64("shape", {2}, {2, 2})
      .node("ConstantOfShape", {"shape"}, {"ones"}, {floatValue({1}, {1})})
      .constInt64("pads", {4}, {1, 1, 0, 0})
      .node("Pad", {"ones", "pads"}, {"mask"})
      .node("Mul", {"x", "mask"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  REQUIRE(g.ops.size() == 1);
  const Value &mask = g.values[g.ops[0].inputs[1]];
  CHECK(mask.dims == std::vector<int64_t>{3, 3});
  CHECK(mask.data == std::vector<float>{0, 0, 0, 0, 1, 1, 0, 1, 1});
  OnnxBuilder c(18);
  c.input("x", {-1, 2, 3})
      .constInt64("shape", {2}, {2, 2})
      .node("ConstantOfShape", {"shape"}, {"zeros"})
      .constInt64("pads", {2}, {0, 1})
      .constFloat("seven", 7.0f)
      .constInt64("axes", {1}, {-1})
      .node("Pad", {"zeros", "pads", "seven", "axes"}, {"padded"})
      .node("Add", {"x", "padded"}, {"y"})
      .output("y", 3);
  Graph gc = importOk(c, batchOf(2));
  REQUIRE(gc.ops.size() == 1);
  CHECK(gc.values[gc.ops[0].inputs[1]].data ==
        std::vector<float>{0, 0, 7, 0, 0, 7});
  // Another mode is named, not folded wrongly.
  OnnxBuilder r(18);
  r.input("x", {-1, 3, 3})
      .constInt64("shape", {2}, {2, 2})
      .node("ConstantOfShape", {"shape"}, {"ones"})
      .constInt64("pads", {4}, {1, 1, 0, 0})
      .node("Pad", {"ones", "pads"}, {"mask"}, {attrStr("mode", "reflect")},
            "pad")
      .node("Mul", {"x", "mask"}, {"y"})
      .output("y", 3);
  CHECK_THAT(errorText(r.import(batchOf(2))),
             Contains("'pad'") && Contains("mode 'constant'"));
}

TEST_CASE("MatMul by a matrix computed from weights is one GEMM",
          "[onnx][import][torch2]") {
  // MobileBERT's output: x [N, T, 3] @ cat([E^T, W], 1), E [5, 3] the tied
  // embedding, W [3, 2]: a [3, 7] value; the GEMM's backward writes its
  // gradient, which the Concat and the transpose hand back to E and W.
  OnnxBuilder b(18);
  b.input("x", {-1, 4, 3})
      .init("E", {5, 3})
      .init("W", {3, 2})
      .node("Transpose", {"E"}, {"Et"}, {attrInts("perm", {1, 0})})
      .node("Concat", {"Et", "W"}, {"table"}, {attrInt("axis", 1)})
      .node("MatMul", {"x", "table"}, {"y"}, {}, "logits")
      .output("y", 3);
  Graph g = importOk(b, batchOf(2));
  const Op &mm = g.ops.back();
  CHECK(mm.kind == OpKind::MatMul);
  CHECK(!g.values[mm.inputs[1]].batched);
  CHECK(g.values[mm.inputs[1]].dims == std::vector<int64_t>{3, 7});
  CHECK(g.values[mm.outputs[0]].dims == std::vector<int64_t>{2, 4, 7});
}

TEST_CASE("Pad of one axis, or of two adjacent ones", "[onnx][import]") {
  auto model = [](std::vector<int64_t> pads) {
    OnnxBuilder b(13);
    b.input("x", {-1, 4, 3, 2})
        .constInt64("pads", {8}, pads)
        .node("Pad", {"x", "pads"}, {"y"}, {}, "pad")
        .output("y", 4);
    return b;
  };
  // The tokens of [N, T, E] padded by one on each side (MobileBERT).
  Graph g = importOk(model({0, 1, 0, 0, 0, 1, 0, 0}), batchOf(2));
  CHECK(g.values[g.ops.back().outputs[0]].dims ==
        std::vector<int64_t>{2, 6, 3, 2});
  importOk(model({0, 0, 1, 2, 0, 0, 1, 2}), batchOf(2));
  // H and W of NHWC ([N, H, W, C]: Swin's patch merging at odd sides).
  g = importOk(model({0, 0, 1, 0, 0, 1, 0, 0}), batchOf(2));
  CHECK(g.values[g.ops.back().outputs[0]].dims ==
        std::vector<int64_t>{2, 5, 4, 2});
  CHECK_THAT(errorText(model({0, 1, 0, 1, 0, 0, 0, 0}).import(batchOf(2))),
             Contains("'pad'") && Contains("not adjacent"));
  // The batch the outer factor of axis 0 ([N, 4, 3, 2] as [N * 4, 3, 2],
  // BoTNet's relative logits): each sample's rows padded, then flattened
  // at axis 1 with the layout kept.
  OnnxBuilder rows(13);
  rows.input("x", {-1, 4, 3, 2})
      .constInt64("merged", {3}, {-1, 3, 2})
      .node("Reshape", {"x", "merged"}, {"r"})
      .constInt64("pads", {6}, {0, 0, 0, 0, 0, 1})
      .node("Pad", {"r", "pads"}, {"p"}, {}, "pad")
      .node("Flatten", {"p"}, {"y"}, {attrInt("axis", 1)})
      .output("y", 2);
  g = importOk(rows, batchOf(2));
  const Value &padded = g.values[g.ops[1].outputs[0]];
  CHECK(g.ops[1].kind == OpKind::Pad);
  CHECK(padded.dims == std::vector<int64_t>{8, 3, 3});
  CHECK(padded.batchInner == 4);
  const Value &flat = g.values[g.ops.back().outputs[0]];
  CHECK(flat.dims == std::vector<int64_t>{8, 9});
  CHECK(flat.batchInner == 4);
}

TEST_CASE("a weight varying around axes of extent 1 broadcasts",
          "[onnx][import][torch2]") {
  // LeViT's attention biases, [heads, 1, T] from a weight, added to scores
  // [N, heads, 1, T]: the axis of extent 1 between heads and T neither
  // varies nor repeats, so the weight is one run of 2 * 3 elements.
  int64_t bSize = 0, inner = 0;
  CHECK(ops::broadcastRun({2, 1, 3}, {2, 1, 3}, bSize, inner));
  CHECK(bSize == 6);
  CHECK(inner == 1);
  CHECK(ops::broadcastRun({3, 1, 5, 2}, {3, 1, 5, 1}, bSize, inner));
  CHECK(bSize == 15);
  CHECK(inner == 2);
  // A repeated axis inside the run is still refused.
  CHECK_FALSE(ops::broadcastRun({3, 4, 5}, {3, 1, 5}, bSize, inner));
  // W holds 4 offsets for each of 2 heads; 3 positions look them up.
  OnnxBuilder b(18);
  b.input("x", {-1, 2, 1, 3})
      .init("W", {2, 4})
      .node("Transpose", {"W"}, {"Wt"}, {attrInts("perm", {1, 0})})
      .constInt64("idx", {3, 1}, {0, 3, 1})
      .node("GatherND", {"Wt", "idx"}, {"g"})
      .node("Transpose", {"g"}, {"gt"}, {attrInts("perm", {1, 0})})
      .constInt64("shape", {3}, {2, 1, 3})
      .node("Reshape", {"gt", "shape"}, {"bias"})
      .node("Add", {"x", "bias"}, {"y"}, {}, "add")
      .output("y", 4);
  // The GatherND reads W's transpose (kept aside for products as W^T):
  // its rows gathered, a value computed from W.
  Graph g = importOk(b, batchOf(2));
  CHECK(g.ops.back().kind == OpKind::Add);
  CHECK(g.values[g.ops.back().outputs[0]].dims ==
        std::vector<int64_t>{2, 2, 1, 3});
}

TEST_CASE("a fixed-batch mask added to a value computed from weights",
          "[onnx][import][torch2]") {
  // T5 read at a fixed batch: its position bias (from a weight, [1, 2, 2])
  // plus the mask written per sample ([2, 1, 2], rows alike) is the bias
  // plus one sample's mask, a value without a batch, added to x.
  OnnxBuilder b(18);
  b.input("x", {2, 2, 2})
      .init("bias_table", {1, 2, 2})
      .constFloat("one", 1.0f)
      .node("Mul", {"bias_table", "one"}, {"bias"})
      .init("mask", {2, 1, 2}, {0, -9, 0, -9})
      .node("Add", {"bias", "mask"}, {"masked"})
      .node("Add", {"x", "masked"}, {"y"})
      .output("y", 3);
  b.torchInputKind("mask", "BUFFER");
  for (int64_t batch : {2, 4}) {
    Graph g = importOk(b, batchOf(batch));
    bool unbatchedSum = false;
    for (const Op &op : g.ops)
      unbatchedSum =
          unbatchedSum ||
          (op.kind == OpKind::Add && !op.batched(g) &&
           g.values[op.outputs[0]].dims == std::vector<int64_t>{1, 2, 2});
    CHECK(unbatchedSum);
  }
}
