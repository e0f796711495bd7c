//===- OnnxImportZooTest.cpp - The model zoo's ONNX imports ---------------===//
//
// Every model the zoo writes must import: with weights declared without
// data (each gets an initialization kind) and, for the tiny models, with
// initializer data.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/OnnxImport.h"
#include "models/Zoo.h"

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
      auto bytes = buildZooModel(name, zo);
      if (!bytes)
        FAIL(llvm::toString(bytes.takeError()));
      ImportOptions io;
      io.batch = 2;
      auto g = importOnnxBytes(*bytes, name + ".onnx", io);
      if (!g)
        FAIL(llvm::toString(g.takeError()));
      CHECK(g->batch == 2);
      CHECK(g->values[g->output].dims.size() == 2);
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
