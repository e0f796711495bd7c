//===- OnnxImportZooTest.cpp - The model zoo's ONNX imports ---------------===//
//
// Every model the zoo writes must import: with weights declared without
// data (each gets an initialization kind) and, for the tiny models, with
// initializer data.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/OnnxImport.h"
#include "models/Zoo.h"

#include "llvm/ADT/StringRef.h"

#include <catch2/catch.hpp>

using namespace memfit;

TEST_CASE("every zoo model imports", "[onnx][zoo]") {
  std::vector<std::string> names;
  for (const ZooEntry &e : zooModels())
    if (e.name.find("-N") == std::string::npos)
      names.push_back(e.name);
  names.push_back("vgg-116");
  names.push_back("resnet-164");
  for (const std::string &name : names) {
    INFO(name);
    for (bool withWeights : {false, true}) {
      if (withWeights && !isTinyZooModel(name))
        continue;
      ZooOptions zo;
      zo.withWeights = withWeights;
      // The large decoders at a short sequence: the full length is the
      // planning benchmark's (docs/model-zoo.md), not a unit test's.
      bool language = llvm::StringRef(name).startswith("gpt") ||
                      llvm::StringRef(name).startswith("llama");
      if (language && !isTinyZooModel(name))
        zo.seqLen = 32;
      auto bytes = buildZooModel(name, zo);
      if (!bytes)
        FAIL(llvm::toString(bytes.takeError()));
      ImportOptions io;
      io.batch = 2;
      auto g = importOnnxBytes(*bytes, name + ".onnx", io);
      if (!g)
        FAIL(llvm::toString(g.takeError()));
      CHECK(g->batch == 2);
      CHECK(g->values[g->output].dims.size() == (language ? 3u : 2u));
      CHECK(g->values[g->output].dims[0] == 2);
      for (ValueId w : g->weights()) {
        const Value &v = g->values[w];
        if (!v.trainable && v.init == WeightInit::FromData)
          continue; // a constant of the model
        CHECK((v.init == WeightInit::FromData) == withWeights);
        CHECK(v.data.size() ==
              (withWeights ? static_cast<size_t>(v.elementsPerSample()) : 0));
      }
    }
  }
}

TEST_CASE("the zoo's decoders import with every weight once and attention "
          "fused",
          "[onnx][zoo]") {
  struct Case {
    const char *name;
    int64_t params; // the published count, GPT-2's tied head once
    int64_t layers;
  };
  for (Case c : {Case{"gpt2", 124439808, 12}, Case{"llama-1b", 1100048384, 22},
                 Case{"llama-70b", 68976648192, 80}}) {
    INFO(c.name);
    ZooOptions zo;
    zo.seqLen = 64;
    auto bytes = buildZooModel(c.name, zo);
    REQUIRE(static_cast<bool>(bytes));
    ImportOptions io;
    io.batch = 1;
    auto g = importOnnxBytes(*bytes, std::string(c.name) + ".onnx", io);
    if (!g)
      FAIL(llvm::toString(g.takeError()));
    int64_t params = 0;
    for (ValueId w : g->weights())
      if (g->values[w].trainable)
        params += g->values[w].elementsPerSample();
    CHECK(params == c.params);
    // Every layer's attention is one fusable subgraph, grouped-query
    // attention (llama-1b, llama-70b) included.
    CHECK(countAttention(*g) == c.layers);
    CHECK(g->values[g->output].dims ==
          std::vector<int64_t>{1, 64, c.name[0] == 'g' ? 50257 : 32000});
  }
}

TEST_CASE("Llama 3 imports at its own context of 8192 tokens",
          "[onnx][zoo][slow]") {
  // The causal mask folds into one [8192, 8192] constant, held once for
  // every layer.
  ZooOptions zo;
  auto bytes = buildZooModel("llama3-8b", zo);
  REQUIRE(static_cast<bool>(bytes));
  ImportOptions io;
  io.batch = 1;
  auto g = importOnnxBytes(*bytes, "llama3-8b.onnx", io);
  if (!g)
    FAIL(llvm::toString(g.takeError()));
  CHECK(countAttention(*g) == 32);
  CHECK(g->values[g->output].dims == std::vector<int64_t>{1, 8192, 128256});
  int64_t masks = 0;
  for (ValueId w : g->weights())
    if (!g->values[w].trainable &&
        g->values[w].elementsPerSample() == int64_t(8192) * 8192)
      ++masks;
  CHECK(masks == 1);
}
