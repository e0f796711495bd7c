//===- OnnxImportFuzzTest.cpp - Corrupted models never crash the importer -===//
//
// Deterministic mutations (byte overwrites and truncations) of small valid
// models: every import must either succeed with a valid graph or fail with
// an error naming the file. A crash or a hang fails the suite.
// MEMFIT_FUZZ_ITERATIONS and MEMFIT_FUZZ_SEED make a longer local run.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include "compiler/ir/Graph.h"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace memfit;
using namespace memfit::test;

namespace {

std::vector<std::string> seedModels() {
  std::vector<std::string> seeds;
  OnnxBuilder a;
  a.input("x", {-1, 4, 8, 8})
      .init("w", {4, 2, 3, 3})
      .init("s", {4})
      .init("b", {4})
      .init("m", {4})
      .init("v", {4})
      .node("Conv", {"x", "w"}, {"c"},
            {attrInt("group", 2), attrInts("pads", {1, 1, 1, 1})})
      .node("BatchNormalization", {"c", "s", "b", "m", "v"}, {"n"})
      .node("MaxPool", {"n"}, {"p"},
            {attrInts("kernel_shape", {2, 2}), attrInts("strides", {2, 2}),
             attrInt("ceil_mode", 1)})
      .node("Shape", {"p"}, {"sh"})
      .constInt64("i0", {1}, {0})
      .node("Gather", {"sh", "i0"}, {"n0"})
      .constInt64("m1", {1}, {-1})
      .node("Concat", {"n0", "m1"}, {"t"}, {attrInt("axis", 0)})
      .node("Reshape", {"p", "t"}, {"f"})
      .init("fc", {10, 64})
      .node("Gemm", {"f", "fc"}, {"y"}, {attrInt("transB", 1)})
      .output("y", 2);
  seeds.push_back(a.bytes());
  OnnxBuilder c(11);
  c.input("x", {2, 3, 5, 5})
      .constFloat("lo", 0.0f)
      .constFloat("hi", 6.0f)
      .node("Clip", {"x", "lo", "hi"}, {"r"})
      .constInt64("p", {8}, {0, 0, 1, 1, 0, 0, 1, 1})
      .node("Pad", {"r", "p"}, {"pd"})
      .node("AveragePool", {"pd"}, {"ap"},
            {attrInts("kernel_shape", {3, 3}), attrInt("count_include_pad", 1)})
      .node("ReduceMean", {"ap"}, {"g"},
            {attrInts("axes", {2, 3}), attrInt("keepdims", 0)})
      .node("Softmax", {"g"}, {"y"})
      .output("y", 2);
  seeds.push_back(c.bytes());
  return seeds;
}

} // namespace

TEST_CASE("corrupted models give errors, not crashes", "[onnx][fuzz]") {
  int64_t iterations = 300;
  if (const char *env = std::getenv("MEMFIT_FUZZ_ITERATIONS"))
    iterations = std::atoll(env);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  if (const char *env = std::getenv("MEMFIT_FUZZ_SEED"))
    state += std::strtoull(env, nullptr, 10);
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int64_t ok = 0, failed = 0;
  for (const std::string &seed : seedModels()) {
    for (int64_t i = 0; i < iterations; ++i) {
      std::string bytes = seed;
      int edits = 1 + static_cast<int>(next() % 4);
      for (int e = 0; e < edits; ++e)
        bytes[next() % bytes.size()] = static_cast<char>(next() & 0xff);
      if (next() % 8 == 0)
        bytes.resize(next() % bytes.size());
      ImportOptions opts;
      opts.batch = 1 + static_cast<int64_t>(next() % 3);
      auto g = importOnnxBytes(bytes, "fuzz.onnx", opts);
      if (g) {
        ++ok;
        CHECK_FALSE(verifyGraph(*g).has_value());
      } else {
        ++failed;
        std::string msg = llvm::toString(g.takeError());
        CHECK_THAT(msg, Catch::Contains("fuzz.onnx"));
      }
    }
  }
  INFO(ok << " imported, " << failed << " refused");
  CHECK(ok + failed == 2 * iterations);
}
