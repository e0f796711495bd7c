//===- TrainerOptionsTest.cpp - The generated trainer's flags -------------===//
//
// The convolution flags of runtime/TrainerOptions.h: the start-up tuning
// and cuDNN's graph API are on unless turned off, each on its own.
//
//===----------------------------------------------------------------------===//
#include "runtime/TrainerOptions.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using memfit::rt::Options;

namespace {
Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "trainer");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return memfit::rt::parseArgs(static_cast<int>(argv.size()), argv.data(),
                               "model.onnx");
}
} // namespace

TEST_CASE("trainer flags: convolutions tuned on both cuDNN APIs unless "
          "turned off",
          "[trainer-options]") {
  Options plain = parse({"--synthetic"});
  CHECK(plain.tuneConvs);
  CHECK(plain.convGraph);
  Options legacy = parse({"--synthetic", "--no-conv-graph"});
  CHECK(legacy.tuneConvs);
  CHECK_FALSE(legacy.convGraph);
  Options planned = parse({"--no-tune-convs", "--synthetic"});
  CHECK_FALSE(planned.tuneConvs);
  CHECK(planned.convGraph);
  CHECK(parse({"--synthetic", "--conv-algos", "ca.json"}).convAlgos ==
        "ca.json");
}
