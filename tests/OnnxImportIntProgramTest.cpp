//===- OnnxImportIntProgramTest.cpp - Index arithmetic on the token ids ---===//
//
// RoBERTa's position ids, cumsum(ids != pad) * (ids != pad) + pad, as
// torch exports them: one IntProgram op from the ids, its shared steps
// once, read as int32 by the position table's lookup; no gradient.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/ops/OpDef.h"
#include "compiler/ops/RuntimeKinds.h"
#include "runtime/Kernels.h"

#include <catch2/catch.hpp>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;
using ops::RtIntOp;

namespace {

/// word[x] + pos[cumsum(x != 1) * (x != 1) + 1] over ids x [N, 5].
OnnxBuilder positionIds(int64_t cumsumAxis = 1) {
  OnnxBuilder b;
  b.input("x", {-1, 5}, pb::TensorProto::INT64)
      .init("word", {10, 4})
      .init("pos", {12, 4})
      .constInt64("pad", {}, {1})
      .constInt64("axis", {}, {cumsumAxis})
      .node("Equal", {"x", "pad"}, {"eq"})
      .node("Not", {"eq"}, {"mask"})
      .node("Cast", {"mask"}, {"m32"}, {attrInt("to", pb::TensorProto::INT32)})
      .node("CumSum", {"m32", "axis"}, {"cs"})
      .node("Mul", {"cs", "m32"}, {"kept"})
      .node("Cast", {"kept"}, {"k64"}, {attrInt("to", pb::TensorProto::INT64)})
      .node("Add", {"k64", "pad"}, {"ids"})
      .node("Gather", {"word", "x"}, {"we"})
      .node("Gather", {"pos", "ids"}, {"pe"})
      .node("Add", {"we", "pe"}, {"y"})
      .output("y", 3);
  return b;
}

IntStep step(RtIntOp k, int a = -1, int b = -1, int64_t imm = 0) {
  return IntStep{.kind = uint8_t(k),
                 .a = static_cast<int8_t>(a),
                 .b = static_cast<int8_t>(b),
                 .imm = imm};
}

} // namespace

TEST_CASE("position ids from the token ids are one integer program",
          "[onnx][import][ids]") {
  Graph g = importOk(positionIds(), batchOf(3));
  CHECK(opKinds(g) == std::vector<OpKind>{OpKind::Embedding, OpKind::IntProgram,
                                          OpKind::Embedding, OpKind::Add});
  const Op &prog = g.ops[1];
  CHECK(prog.inputs == std::vector<ValueId>{g.input});
  // x != 1 is computed once; the constant 1 is one immediate.
  CHECK(prog.attrs.program ==
        std::vector<IntStep>{step(RtIntOp::Ids), step(RtIntOp::Imm, -1, -1, 1),
                             step(RtIntOp::Equal, 0, 1), step(RtIntOp::Not, 2),
                             step(RtIntOp::CumSum, 3), step(RtIntOp::Mul, 4, 3),
                             step(RtIntOp::Add, 5, 1)});
  CHECK(prog.attrs.programRow == 5);
  const Value &ids = g.values[prog.outputs[0]];
  CHECK(ids.dtype == DType::I32);
  CHECK(ids.batched);
  CHECK(ids.dims == std::vector<int64_t>{3, 5});
  CHECK(g.ops[2].inputs[1] == prog.outputs[0]);
  // Token ids have no gradient: the program runs forward only.
  TrainingConfig cfg;
  cfg.loss = LossKind::MSE;
  auto tg = buildTaskGraph(g, cfg);
  REQUIRE(static_cast<bool>(tg));
  int programTasks = 0;
  for (const Task &t : tg->tasks)
    if (t.op == 1) {
      ++programTasks;
      CHECK(t.kind == TaskKind::Forward);
    }
  CHECK(programTasks == 1);
}

TEST_CASE("the runtime's limit on program length is the compiler's",
          "[onnx][import][ids]") {
  CHECK(kMaxIntSteps == rt::kMaxIntInstrs);
  CHECK(std::string(ops::runtimeKind(RtIntOp::CumSum).onnx) == "CumSum");
  CHECK(ops::runtimeKind(RtIntOp::Where).operands == 3);
}

TEST_CASE("integer programs the runtime cannot run are refused, named",
          "[onnx][import][ids]") {
  // A sum over the batch mixes samples.
  std::string err = errorText(positionIds(0).import(batchOf(2)));
  CHECK_THAT(err, Contains("(CumSum)"));
  CHECK_THAT(err, Contains("along the last axis"));
  // A per-position constant that does not count along the axis.
  OnnxBuilder b;
  b.input("x", {-1, 3}, pb::TensorProto::INT64)
      .init("pos", {8, 2})
      .initInt64("offs", {3}, {0, 1, 5})
      .node("Add", {"x", "offs"}, {"ids"})
      .node("Gather", {"pos", "ids"}, {"y"})
      .output("y", 3);
  err = errorText(b.import(batchOf(2)));
  CHECK_THAT(err, Contains("'offs'"));
  CHECK_THAT(err, Contains("not one integer everywhere"));
}

TEST_CASE("a masked fill by a condition computed from the ids",
          "[onnx][import][ids]") {
  // masked_fill(ids == 0, 0.5) on word[ids]: the condition is a float
  // program per sample, read by Where.
  OnnxBuilder b;
  b.input("x", {-1, 5}, pb::TensorProto::INT64)
      .init("word", {10, 4})
      .constInt64("zero", {}, {0})
      .constInt64("last", {1}, {-1})
      .constFloat("fill", 0.5f)
      .node("Gather", {"word", "x"}, {"h"})
      .node("Equal", {"x", "zero"}, {"pad"})
      .node("Unsqueeze", {"pad", "last"}, {"pad3"})
      .node("Where", {"pad3", "fill", "h"}, {"y"})
      .output("y", 3);
  Graph g = importOk(b, batchOf(3));
  REQUIRE(opKinds(g) == std::vector<OpKind>{OpKind::Embedding,
                                            OpKind::IntProgram, OpKind::Where});
  const Value &mask = g.values[g.ops[1].outputs[0]];
  CHECK(mask.dtype == DType::F32);
  CHECK(mask.batched);
  CHECK(mask.dims == std::vector<int64_t>{3, 5, 1});
  CHECK(g.ops[2].inputs[1] == g.ops[1].outputs[0]);
  auto params = opDef(OpKind::Where).params(g, g.ops[2]);
  REQUIRE(static_cast<bool>(params));
  CHECK_THAT(params->init, Contains(".maskBatched = true"));
}

namespace {

/// Token ids x [N, 5] looked up in word [10, 4] as h, the constants zero,
/// one and axis1 ([1]), and samples = arange(N) over x's batch: what every
/// pick below starts from.
OnnxBuilder idsWithSamples() {
  OnnxBuilder b;
  b.input("x", {-1, 5}, pb::TensorProto::INT64)
      .init("word", {10, 4})
      .constInt64("zero", {}, {0})
      .constInt64("one", {}, {1})
      .constInt64("axis1", {1}, {1})
      .node("Gather", {"word", "x"}, {"h"})
      .node("Shape", {"x"}, {"shape"})
      .node("Gather", {"shape", "zero"}, {"n"}, {attrInt("axis", 0)})
      .node("Range", {"zero", "n", "one"}, {"samples"});
  return b;
}

/// The graph's integer program op (the last, where it has several).
const Op *intProgramOf(const Graph &g) {
  const Op *prog = nullptr;
  for (const Op &op : g.ops)
    if (op.kind == OpKind::IntProgram)
      prog = &op;
  return prog;
}

/// GPT2ForSequenceClassification's pick as torch 1.13 exports it: scores
/// [N, 5, 3] flattened to [N * 5, 3], gathered at arange(N) * 5 +
/// (argmax(x == 0) - 1) mod 5. `offset` replaces that last term.
OnnxBuilder sequenceScores(const std::string &offset = "last") {
  OnnxBuilder b = idsWithSamples();
  b.init("score", {4, 3})
      .constInt64("five", {}, {5})
      .node("MatMul", {"h", "score"}, {"s"})
      .node("Flatten", {"s"}, {"flat"}, {attrInt("axis", 2)})
      .node("Equal", {"x", "zero"}, {"pad"})
      .node("Cast", {"pad"}, {"p32"}, {attrInt("to", pb::TensorProto::INT32)})
      .node("ArgMax", {"p32"}, {"first"},
            {attrInt("axis", -1), attrInt("keepdims", 0)})
      .node("Sub", {"first", "one"}, {"before"})
      .node("Mod", {"before", "five"}, {"last"})
      .node("Mul", {"samples", "five"}, {"starts"})
      .node("Add", {offset, "starts"}, {"rows"})
      .node("Gather", {"flat", "rows"}, {"y"}, {attrInt("axis", 0)})
      .output("y", 2);
  return b;
}

} // namespace

TEST_CASE("a decoder's sequence classification picks one row per sample",
          "[onnx][import][ids]") {
  Graph g = importOk(sequenceScores(), batchOf(3));
  // The pick: the scores reshaped back to [N, 5, 3], times a one-hot of
  // the row (a float program), summed over the rows.
  const Op *prog = intProgramOf(g);
  REQUIRE(prog != nullptr);
  CHECK(prog->attrs.program ==
        std::vector<IntStep>{
            step(RtIntOp::Ids), step(RtIntOp::Imm, -1, -1, 0),
            step(RtIntOp::Equal, 0, 1), step(RtIntOp::ArgMax, 2),
            step(RtIntOp::Imm, -1, -1, 1), step(RtIntOp::Sub, 3, 4),
            step(RtIntOp::Imm, -1, -1, 5), step(RtIntOp::Mod, 5, 6),
            step(RtIntOp::Pos), step(RtIntOp::Equal, 8, 7)});
  CHECK(prog->attrs.programRow == 5);
  CHECK_FALSE(prog->attrs.programPerRow);
  const Value &onehot = g.values[prog->outputs[0]];
  CHECK(onehot.dtype == DType::F32);
  CHECK(onehot.dims == std::vector<int64_t>{3, 5, 1});
  const Value &y = g.values[g.ops.back().outputs[0]];
  CHECK(y.dims == std::vector<int64_t>{3, 3});
  CHECK(y.canonical());
  auto params = opDef(OpKind::IntProgram).params(g, *prog);
  REQUIRE(static_cast<bool>(params));
  CHECK_THAT(params->init, Contains(".perSample = 5, .inner = 5"));
}

TEST_CASE("each sample's index is read only to pick its row",
          "[onnx][import][ids]") {
  // arange(N) * 5 + arange(N) * 5 leaves the sample's rows: refused,
  // saying what is needed.
  OnnxBuilder b = sequenceScores("starts");
  std::string err = errorText(b.import(batchOf(3)));
  CHECK_THAT(err, Contains("known to lie in [0, T)"));
  // The arange read as floats: a sample's index in its sub-batch is not
  // its index in the batch.
  OnnxBuilder c = idsWithSamples();
  c.node("Cast", {"samples"}, {"sf"}, {attrInt("to", pb::TensorProto::FLOAT)})
      .node("Unsqueeze", {"sf", "one"}, {"s2"})
      .node("Unsqueeze", {"s2", "one"}, {"s3"})
      .node("Mul", {"h", "s3"}, {"y"})
      .output("y", 3);
  err = errorText(c.import(batchOf(3)));
  CHECK_THAT(err, Contains("each sample's index"));
}

TEST_CASE("ArgMax of a float activation is refused, named",
          "[onnx][import][ids]") {
  OnnxBuilder b;
  b.input("x", {-1, 5}, pb::TensorProto::FLOAT)
      .node("Relu", {"x"}, {"r"})
      .node("ArgMax", {"r"}, {"y"}, {attrInt("axis", -1)})
      .output("y", 2);
  std::string err = errorText(b.import(batchOf(2)));
  CHECK_THAT(err, Contains("(ArgMax)"));
  CHECK_THAT(err, Contains("only on integers computed from"));
  // Two reductions of one row in one program: the kernel keeps one.
  OnnxBuilder c;
  c.input("x", {-1, 5}, pb::TensorProto::INT64)
      .init("pos", {8, 2})
      .constInt64("zero", {}, {0})
      .constInt64("one", {}, {1})
      .node("Equal", {"x", "zero"}, {"e0"})
      .node("Equal", {"x", "one"}, {"e1"})
      .node("ArgMax", {"e0"}, {"a0"},
            {attrInt("axis", 1), attrInt("keepdims", 0)})
      .node("ArgMax", {"e1"}, {"a1"},
            {attrInt("axis", 1), attrInt("keepdims", 0)})
      .node("Add", {"a0", "a1"}, {"ids"})
      .node("Gather", {"pos", "ids"}, {"y"})
      .output("y", 2);
  err = errorText(c.import(batchOf(2)));
  CHECK_THAT(err, Contains("two ArgMaxes"));
}

TEST_CASE("torch.export's x[arange(N), last] of transformers 5 picks rows",
          "[onnx][import][ids]") {
  // last = argmax(arange(5) * (x != 0)): the rightmost token that is not
  // padding. The index tensors broadcast against each other as torch.export
  // writes it (Max, Shape, Expand), then paired for GatherND.
  OnnxBuilder b = idsWithSamples();
  b.init("score", {4, 3})
      .initInt64("positions", {5}, {0, 1, 2, 3, 4})
      .node("MatMul", {"h", "score"}, {"s"})
      .node("Equal", {"x", "zero"}, {"pad"})
      .node("Not", {"pad"}, {"kept"})
      .node("Cast", {"kept"}, {"k64"}, {attrInt("to", pb::TensorProto::INT64)})
      .node("Mul", {"positions", "k64"}, {"at"})
      .node("ArgMax", {"at"}, {"last"},
            {attrInt("axis", -1), attrInt("keepdims", 0)})
      .node("Max", {"samples", "last"}, {"both"})
      .node("Shape", {"both"}, {"common"})
      .node("Expand", {"samples", "common"}, {"s1"})
      .node("Expand", {"last", "common"}, {"l1"})
      .node("Unsqueeze", {"s1", "axis1"}, {"s2"})
      .node("Unsqueeze", {"l1", "axis1"}, {"l2"})
      .node("Concat", {"s2", "l2"}, {"pairs"}, {attrInt("axis", -1)})
      .node("GatherND", {"s", "pairs"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(3));
  const Op *prog = intProgramOf(g);
  REQUIRE(prog != nullptr);
  // arange(5) is the position in the row.
  CHECK(prog->attrs.program ==
        std::vector<IntStep>{step(RtIntOp::Pos), step(RtIntOp::Ids),
                             step(RtIntOp::Imm, -1, -1, 0),
                             step(RtIntOp::Equal, 1, 2), step(RtIntOp::Not, 3),
                             step(RtIntOp::Mul, 0, 4), step(RtIntOp::ArgMax, 5),
                             step(RtIntOp::Equal, 0, 6)});
  CHECK(g.values[prog->outputs[0]].dims == std::vector<int64_t>{3, 5, 1});
  const Value &y = g.values[g.ops.back().outputs[0]];
  CHECK(y.dims == std::vector<int64_t>{3, 3});
}

TEST_CASE("index tuples that may leave the sample's rows are refused",
          "[onnx][import][ids]") {
  // x[arange(N), arange(N)]: the second index is not known to lie in [0, T).
  OnnxBuilder b = idsWithSamples();
  b.node("Unsqueeze", {"samples", "axis1"}, {"s2"})
      .node("Concat", {"s2", "s2"}, {"pairs"}, {attrInt("axis", -1)})
      .node("GatherND", {"h", "pairs"}, {"y"})
      .output("y", 2);
  std::string err = errorText(b.import(batchOf(3)));
  CHECK_THAT(err, Contains("x[arange(N), q]"));
}

TEST_CASE("the pick read again at the planned batch, arange(N) a constant",
          "[onnx][import][ids]") {
  // A float read of arange(N) (transformers 5's masks broadcast the sample
  // index against positions) fails the symbolic reading; read at batch 3,
  // arange(3) is a constant, and as the pick's first index it is each
  // sample's own again.
  OnnxBuilder b = idsWithSamples();
  b.init("score", {4, 3})
      .constInt64("axis2", {1}, {2})
      .node("Unsqueeze", {"samples", "axis1"}, {"s2"})
      .node("Min", {"s2", "zero"}, {"table"})
      .node("Cast", {"table"}, {"tf"}, {attrInt("to", pb::TensorProto::FLOAT)})
      .node("Unsqueeze", {"tf", "axis2"}, {"t3"})
      .node("Add", {"h", "t3"}, {"h2"})
      .node("MatMul", {"h2", "score"}, {"s"})
      .node("Equal", {"x", "zero"}, {"pad"})
      .node("Cast", {"pad"}, {"p64"}, {attrInt("to", pb::TensorProto::INT64)})
      .node("ArgMax", {"p64"}, {"last"},
            {attrInt("axis", -1), attrInt("keepdims", 0)})
      .node("Unsqueeze", {"last", "axis1"}, {"l2"})
      .node("Concat", {"s2", "l2"}, {"pairs"}, {attrInt("axis", -1)})
      .node("GatherND", {"s", "pairs"}, {"y"})
      .output("y", 2);
  Graph g = importOk(b, batchOf(3));
  const Op *prog = intProgramOf(g);
  REQUIRE(prog != nullptr);
  for (const IntStep &s : prog->attrs.program)
    CHECK(s.kind != uint8_t(RtIntOp::Sample));
  CHECK(prog->attrs.program.back() == step(RtIntOp::Equal, 4, 3));
  CHECK(g.values[g.ops.back().outputs[0]].dims == std::vector<int64_t>{3, 3});
}
