//===- OpRegistryTest.cpp - One definition per operator -------------------===//
#include "compiler/autodiff/Autodiff.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OpDef.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <set>

using namespace memfit;

TEST_CASE("every operator kind has exactly one definition", "[ops]") {
  const auto &defs = allOpDefs();
  // IntProgram is the last kind.
  REQUIRE(defs.size() == static_cast<size_t>(OpKind::IntProgram) + 1);
  std::set<std::string_view> names;
  for (size_t k = 0; k < defs.size(); ++k) {
    CHECK(static_cast<size_t>(defs[k].kind) == k);
    CHECK(names.insert(defs[k].name).second);
    CHECK(&opDef(defs[k].kind) == &defs[k]);
    // Every kind imports from ONNX and runs: its forward and backward have
    // generated code.
    // (BatchMatMul comes from Einsum, and from MatMul of two activations;
    // Attention from a pass over the imported graph; IntProgram from
    // the integer nodes on the token ids; LogSigmoid from Log(Sigmoid).)
    bool derived = defs[k].kind == OpKind::Attention ||
                   defs[k].kind == OpKind::IntProgram ||
                   defs[k].kind == OpKind::LogSigmoid;
    CHECK((defs[k].importOnnx != nullptr) != derived);
    CHECK(defs[k].onnxTypes.empty() == derived);
    CHECK(defs[k].emit != nullptr);
  }
  CHECK(opKindName(OpKind::BatchNorm) == "BatchNormalization");
  // Convolution is the one kind the cost model prices per algorithm.
  for (const OpDef &d : defs)
    CHECK((d.work == nullptr) == (d.kind == OpKind::Conv));
}

TEST_CASE("every operator kind documents its forms and its gradient", "[ops]") {
  // docs/operators.md prints them as table cells.
  for (const OpDef &d : allOpDefs()) {
    INFO(d.name);
    CHECK(d.forms.size() >= 20);
    CHECK(!d.gradient.empty());
    for (std::string_view s : {d.forms, d.gradient})
      CHECK(s.find_first_of("|\n") == std::string_view::npos);
  }
}

TEST_CASE("every ONNX operator the importer computes with has one definition",
          "[ops]") {
  std::set<std::string> claimed;
  for (const OpDef &d : allOpDefs())
    for (std::string_view t : d.onnxTypes) {
      CHECK(claimed.insert(std::string(t)).second);
      CHECK(opDefForOnnx(llvm::StringRef(t.data(), t.size())) == &d);
    }
  const auto &supported = supportedOnnxOps();
  for (const std::string &t : claimed)
    CHECK(std::count(supported.begin(), supported.end(), t) == 1);
  CHECK(opDefForOnnx("ReduceMean")->kind == OpKind::GlobalAveragePool);
  CHECK(opDefForOnnx("Split")->kind == OpKind::Slice);
  CHECK(opDefForOnnx("Upsample")->kind == OpKind::Resize);
  CHECK(opDefForOnnx("ScatterND")->kind == OpKind::Slice);
  CHECK(opDefForOnnx("Range") == nullptr); // folded at import only
}

namespace {

/// The reads of the task of `kind` that belongs to op `name`.
std::vector<std::string> readsOf(const TaskGraph &tg, TaskKind kind,
                                 const std::string &name) {
  for (const Task &t : tg.tasks)
    if (t.kind == kind && t.op >= 0 && tg.graph->op(t.op).name == name) {
      std::vector<std::string> out;
      for (BlockId b : t.reads)
        out.push_back(tg.block(b).name);
      return out;
    }
  return {"<no such task>"};
}

} // namespace

TEST_CASE("autodiff reads what each definition's rule lists", "[ops]") {
  // x -> conv(w) -> bn(s, b, mean, var) -> relu -> maxpool -> mul(x2, x2)
  test::GraphLiteral l(2);
  ValueId x = l.input("x", {1, 4, 4});
  ValueId w = l.weight("w", {2, 1, 1, 1});
  OpAttrs conv;
  conv.kernel = {1, 1};
  ValueId c = l.op(OpKind::Conv, "conv", {x, w}, {2, 4, 4}, conv);
  ValueId s = l.weight("s", {2}), b = l.weight("b", {2});
  ValueId m = l.weight("m", {2}, false), v = l.weight("v", {2}, false);
  ValueId n = l.op(OpKind::BatchNorm, "bn", {c, s, b, m, v}, {2, 4, 4});
  ValueId r = l.op(OpKind::Relu, "relu", {n}, {2, 4, 4});
  OpAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  ValueId p = l.op(OpKind::MaxPool, "pool", {r}, {2, 2, 2}, pool);
  l.op(OpKind::Mul, "square", {p, p}, {2, 2, 2});
  TrainingConfig cfg;
  cfg.loss = LossKind::MSE;
  auto tg = buildTaskGraph(l.g, cfg);
  REQUIRE(static_cast<bool>(tg));
  tg->graph = &l.g;

  // Conv: dX reads w, but x needs no gradient here; dW reads x.
  CHECK(readsOf(*tg, TaskKind::BackwardWeight, "conv") ==
        std::vector<std::string>{"x", "d(conv_out)"});
  // BatchNorm: dX reads x, the scale and the saved statistics; dW x and
  // the statistics.
  CHECK(readsOf(*tg, TaskKind::BackwardData, "bn") ==
        std::vector<std::string>{"conv_out", "s", "stats(bn)", "d(bn_out)"});
  CHECK(readsOf(*tg, TaskKind::BackwardWeight, "bn") ==
        std::vector<std::string>{"conv_out", "stats(bn)", "d(bn_out)"});
  // ReLU: its output only, so the forward may overwrite its input.
  CHECK(readsOf(*tg, TaskKind::BackwardData, "relu") ==
        std::vector<std::string>{"relu_out", "d(relu_out)"});
  // MaxPool: x and y locate the maximum.
  CHECK(readsOf(*tg, TaskKind::BackwardData, "pool") ==
        std::vector<std::string>{"relu_out", "pool_out", "d(pool_out)"});
  // p * p: the gradient of each operand reads the other, here itself.
  CHECK(readsOf(*tg, TaskKind::BackwardData, "square") ==
        std::vector<std::string>{"pool_out", "pool_out", "d(square_out)"});
}

TEST_CASE("an activation's backward reads what Activations.def says", "[ops]") {
  // x * w -> relu -> softplus -> mish -> celu -> logsigmoid -> neg (the
  // weight makes every backward needed)
  test::GraphLiteral l(2);
  ValueId v =
      l.op(OpKind::Mul, "scale", {l.input("x", {8}), l.weight("w", {8})}, {8});
  const std::pair<OpKind, const char *> chain[] = {
      {OpKind::Relu, "relu"},
      {OpKind::Softplus, "softplus"},
      {OpKind::Mish, "mish"},
      {OpKind::Celu, "celu"},
      {OpKind::LogSigmoid, "logsigmoid"},
      {OpKind::Neg, "neg"}};
  for (auto [kind, name] : chain)
    v = l.op(kind, name, {v}, {8});
  TrainingConfig cfg;
  cfg.loss = LossKind::MSE;
  auto tg = buildTaskGraph(l.g, cfg);
  REQUIRE(static_cast<bool>(tg));
  tg->graph = &l.g;
  // Output: y; Input: x, so the forward may not overwrite it; Nothing: dY.
  CHECK(readsOf(*tg, TaskKind::BackwardData, "relu") ==
        std::vector<std::string>{"relu_out", "d(relu_out)"});
  CHECK(readsOf(*tg, TaskKind::BackwardData, "softplus") ==
        std::vector<std::string>{"relu_out", "d(softplus_out)"});
  CHECK(readsOf(*tg, TaskKind::BackwardData, "mish") ==
        std::vector<std::string>{"softplus_out", "d(mish_out)"});
  CHECK(readsOf(*tg, TaskKind::BackwardData, "celu") ==
        std::vector<std::string>{"mish_out", "d(celu_out)"});
  CHECK(readsOf(*tg, TaskKind::BackwardData, "logsigmoid") ==
        std::vector<std::string>{"celu_out", "d(logsigmoid_out)"});
  CHECK(readsOf(*tg, TaskKind::BackwardData, "neg") ==
        std::vector<std::string>{"d(neg_out)"});
  CHECK(opDef(OpKind::Relu).mayRunInPlace);
  CHECK(opDef(OpKind::Neg).mayRunInPlace);
  for (OpKind k : {OpKind::Softplus, OpKind::Mish, OpKind::Celu,
                   OpKind::LogSigmoid, OpKind::Gelu})
    CHECK_FALSE(opDef(k).mayRunInPlace);
  CHECK(opKindName(OpKind::Celu) == "Celu");
}
