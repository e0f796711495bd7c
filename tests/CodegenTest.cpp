//===- CodegenTest.cpp - generated trainer source -------------------------===//
#include "codegen/Emit.h"
#include "codegen/Names.h"
#include "compiler/autodiff/Autodiff.h"
#include "passes/analysis/Liveness.h"
#include "passes/schedule/Schedule.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace memfit;
using memfit::test::GraphLiteral;

TEST_CASE("untrusted names cannot reach the program's tokens", "[codegen]") {
  std::string evil = "x */ system(\"rm -rf /\"); /*\n#include <evil>\\";
  std::string id = identifierFrom("r1_", evil);
  for (char c : id)
    CHECK((std::isalnum(static_cast<unsigned char>(c)) || c == '_'));
  std::string comment = commentText(evil);
  CHECK(comment.find("*/") == std::string::npos);
  CHECK(comment.find('\n') == std::string::npos);
  CHECK(comment.find('\\') == std::string::npos);
  CHECK(comment.find('"') == std::string::npos);
  std::string lit = stringLiteral(evil);
  // Only the surrounding quotes are raw quotes; everything else is escaped.
  CHECK(lit.front() == '"');
  CHECK(lit.back() == '"');
  CHECK(lit.substr(1, lit.size() - 2).find('"') == std::string::npos);
  CHECK(lit.find('\n') == std::string::npos);
}

TEST_CASE("a model with hostile names gives clean, deterministic sources",
          "[codegen]") {
  GraphLiteral L(4);
  std::string evil = "conv*/ int main(){} /*\n#define x";
  ValueId x = L.input("in\"put", {3, 4, 4});
  OpAttrs conv;
  conv.kernel = {3, 3};
  conv.pads = {1, 1, 1, 1};
  x = L.op(OpKind::Conv, evil, {x, L.weight("w\\", {2, 3, 3, 3})}, {2, 4, 4},
           conv);
  x = L.op(OpKind::Relu, "relu\n", {x}, {2, 4, 4});
  x = L.op(OpKind::GlobalAveragePool, "gap", {x}, {2, 1, 1});
  x = L.op(OpKind::Flatten, "flat", {x}, {2});
  OpAttrs gemm;
  gemm.transB = true;
  L.op(OpKind::Gemm, "fc", {x, L.weight("W", {5, 2})}, {5}, gemm);
  L.g.name = "model */ evil";
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));
  CostTable c;
  c.subBatch = 4;
  for (size_t t = 0; t < tg->tasks.size(); ++t)
    c.tasks.push_back({{0, "default", 1e-3, 0, true}});
  auto plan = schedule(*tg, c, builtOrder(*tg),
                       {.policy = Policy::Ideal, .budget = 0, .batch = 4});
  REQUIRE(static_cast<bool>(plan));
  auto a = emitTrainer(*tg, *plan, {});
  auto b = emitTrainer(*tg, *plan, {});
  REQUIRE(static_cast<bool>(a));
  REQUIRE(static_cast<bool>(b));
  REQUIRE(a->size() == b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const GeneratedFile &f = (*a)[i];
    INFO(f.path);
    CHECK(f.contents == (*b)[i].contents); // deterministic
    CHECK(f.path.find("..") == std::string::npos);
    if (f.path.find(".cpp") == std::string::npos &&
        f.path.find(".h") == std::string::npos)
      continue;
    // The names survive only inside escaped string literals: no line
    // starts a directive, and a "*/" is always between quotes.
    size_t pos = 0;
    while (pos < f.contents.size()) {
      size_t end = f.contents.find('\n', pos);
      if (end == std::string::npos)
        end = f.contents.size();
      std::string line = f.contents.substr(pos, end - pos);
      pos = end + 1;
      size_t first = line.find_first_not_of(' ');
      if (first != std::string::npos && line[first] == '#')
        CHECK((line.rfind("#include", first) == first ||
               line.rfind("#pragma once", first) == first ||
               line.rfind("#ifndef MEMFIT_MODEL_PATH", first) == first ||
               line.rfind("#define MEMFIT_MODEL_PATH", first) == first ||
               line.rfind("#endif", first) == first));
      size_t close = line.find("*/");
      if (close != std::string::npos) {
        size_t q1 = line.find('"'), q2 = line.rfind('"');
        bool quoted = q1 < close && close < q2;
        CHECK(quoted);
      }
      // Task names appear in setTask calls and in the convolution list's
      // .task fields, both escaped literals.
      bool outside = line.find("int main(){}") != std::string::npos &&
                     line.find("setTask(\"") == std::string::npos &&
                     line.find(".task = \"") == std::string::npos;
      CHECK_FALSE(outside);
    }
  }
  // The schedule names the ONNX node (escaped) beside its call.
  bool named = false;
  for (const GeneratedFile &f : *a)
    named = named || f.contents.find("ONNX node conv") != std::string::npos;
  CHECK(named);
}

TEST_CASE("consecutive updates are one multi-tensor group call", "[codegen]") {
  GraphLiteral L(4);
  ValueId x = L.input("in", {3});
  OpAttrs gemm;
  gemm.transB = true;
  x = L.op(OpKind::Gemm, "fc1", {x, L.weight("A", {4, 3})}, {4}, gemm);
  x = L.op(OpKind::Relu, "relu", {x}, {4});
  x = L.op(OpKind::Gemm, "fc2", {x, L.weight("B", {4, 4})}, {4}, gemm);
  L.op(OpKind::Gemm, "fc3", {x, L.weight("C", {5, 4})}, {5}, gemm);
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));
  CostTable c;
  c.subBatch = 4;
  for (size_t t = 0; t < tg->tasks.size(); ++t)
    c.tasks.push_back({{0, "default", 1e-3, 0, true}});
  auto plan = schedule(*tg, c, builtOrder(*tg),
                       {.policy = Policy::Ideal, .budget = 0, .batch = 4});
  REQUIRE(static_cast<bool>(plan));
  REQUIRE(plan->update.size() == 3);
  auto files = emitTrainer(*tg, *plan, {});
  REQUIRE(static_cast<bool>(files));
  std::string schedule;
  for (const GeneratedFile &f : *files)
    if (f.path == "src/schedule.cpp")
      schedule = f.contents;
  REQUIRE(!schedule.empty());
  // One call names the three weights, each once; no update of its own.
  size_t at = schedule.find("x.sgdGroup({");
  REQUIRE(at != std::string::npos);
  CHECK(schedule.find("x.sgdGroup(", at + 1) == std::string::npos);
  CHECK(schedule.find("x.sgd(") == std::string::npos);
  std::string ids =
      schedule.substr(at + 12, schedule.find("})", at) - (at + 12));
  std::vector<std::string> got;
  for (size_t p = 0; p <= ids.size();) {
    size_t q = std::min(ids.find(',', p), ids.size());
    std::string id = ids.substr(p, q - p);
    id.erase(0, id.find_first_not_of(" \n"));
    got.push_back(id);
    p = q + 1;
  }
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::string>{"0", "1", "2"});
  CHECK(schedule.find("(3 updates)") != std::string::npos);
}
