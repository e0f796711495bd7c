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
  // A per-position constant is no scalar.
  OnnxBuilder b;
  b.input("x", {-1, 3}, pb::TensorProto::INT64)
      .init("pos", {8, 2})
      .initInt64("offs", {3}, {0, 1, 2})
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
