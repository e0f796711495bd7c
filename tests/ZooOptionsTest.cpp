//===- ZooOptionsTest.cpp - Zoo options, weights, determinism, errors -----===//
#include "ZooTestUtil.h"

#include "llvm/Support/Endian.h"

#include <cmath>
#include <cstring>

using namespace memfit;
using memfit::test::buildAndInspect;
using memfit::test::InspectedModel;

namespace {

std::string build(const std::string &name, const ZooOptions &opts = {}) {
  auto bytes = buildZooModel(name, opts);
  if (!bytes)
    FAIL(llvm::toString(bytes.takeError()));
  return *bytes;
}

std::string buildError(const std::string &name, const ZooOptions &opts = {}) {
  auto bytes = buildZooModel(name, opts);
  if (bytes)
    FAIL("building " << name << " should fail");
  return llvm::toString(bytes.takeError());
}

std::vector<float> floatsOf(const onnx::TensorProto &t) {
  std::vector<float> out(t.raw_data().size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits =
        llvm::support::endian::read32le(t.raw_data().data() + 4 * i);
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

const onnx::TensorProto *initializer(const InspectedModel &m,
                                     const std::string &name) {
  for (const auto &t : m.graph().initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

} // namespace

TEST_CASE("building twice gives identical bytes", "[zoo]") {
  ZooOptions withWeights;
  withWeights.withWeights = true;
  for (const char *name : {"alexnet", "googlenet", "resnet-101", "tiny-bn"})
    CHECK(build(name) == build(name));
  CHECK(build("resnet18", withWeights) == build("resnet18", withWeights));
  CHECK(build("tiny-inception", withWeights) ==
        build("tiny-inception", withWeights));
}

TEST_CASE("weights are initializers with data or declared inputs", "[zoo]") {
  ZooOptions with;
  with.withWeights = true;
  InspectedModel full = buildAndInspect("resnet18", with);
  InspectedModel bare = buildAndInspect("resnet18");
  // With weights only the data is an input; every Conv/Gemm/BN weight is an
  // initializer with raw data of its full size.
  CHECK(full.graph().input_size() == 1);
  // resnet18: 20 convs (1 weight), 20 BNs (4), one Gemm (2).
  CHECK(full.graph().initializer_size() == 20 + 20 * 4 + 2);
  for (const auto &t : full.graph().initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    CHECK(t.data_type() == onnx::TensorProto::FLOAT);
    CHECK(static_cast<int64_t>(t.raw_data().size()) == 4 * n);
  }
  // Without, the same tensors are inputs with shapes and nothing holds data.
  CHECK(bare.graph().initializer_size() == 0);
  CHECK(bare.graph().input_size() == 1 + 20 + 20 * 4 + 2);
  CHECK(bare.weightDims("layer2.0.downsample.0.weight") ==
        std::vector<int64_t>{128, 64, 1, 1});
  CHECK(full.weightDims("layer2.0.downsample.0.weight") ==
        std::vector<int64_t>{128, 64, 1, 1});
  CHECK(full.trainableParams() == bare.trainableParams());
}

TEST_CASE("initial weights follow He and Glorot bounds", "[zoo]") {
  ZooOptions with;
  with.withWeights = true;
  InspectedModel m = buildAndInspect("tiny-bn", with);
  // conv1: fan-in 3*3*3 = 27, bound sqrt(6/27).
  std::vector<float> conv = floatsOf(*initializer(m, "conv1.weight"));
  REQUIRE(conv.size() == 108);
  float heBound = std::sqrt(6.0f / 27.0f);
  float maxAbs = 0;
  for (float v : conv) {
    CHECK(std::fabs(v) <= heBound);
    maxAbs = std::max(maxAbs, std::fabs(v));
  }
  // 108 uniform draws reach past half the bound (else they are not spread).
  CHECK(maxAbs > heBound / 2);
  // fc: Glorot over fan-in 4 + fan-out 10.
  for (float v : floatsOf(*initializer(m, "fc.weight")))
    CHECK(std::fabs(v) <= std::sqrt(6.0f / 14.0f));
  for (float v : floatsOf(*initializer(m, "fc.bias")))
    CHECK(v == 0.0f);
  for (float v : floatsOf(*initializer(m, "bn1.weight")))
    CHECK(v == 1.0f);
  for (float v : floatsOf(*initializer(m, "bn1.running_var")))
    CHECK(v == 1.0f);
  for (float v : floatsOf(*initializer(m, "bn1.running_mean")))
    CHECK(v == 0.0f);
  // Values depend on the weight's name only: another class count changes fc
  // but not conv1.
  ZooOptions other = with;
  other.numClasses = 3;
  InspectedModel m3 = buildAndInspect("tiny-bn", other);
  CHECK(floatsOf(*initializer(m3, "conv1.weight")) == conv);
  CHECK(m3.weightDims("fc.weight") == std::vector<int64_t>{3, 4});
}

TEST_CASE("dropout is in opset-13 training form", "[zoo]") {
  InspectedModel m = buildAndInspect("tiny-dropout");
  const onnx::NodeProto *drop = m.node("drop1");
  REQUIRE(drop);
  REQUIRE(drop->input_size() == 3);
  const onnx::TensorProto *ratio = initializer(m, drop->input(1));
  const onnx::TensorProto *mode = initializer(m, drop->input(2));
  REQUIRE(ratio);
  REQUIRE(mode);
  CHECK(ratio->dims_size() == 0);
  CHECK(ratio->float_data(0) == 0.5f);
  CHECK(mode->data_type() == onnx::TensorProto::BOOL);
  CHECK(mode->int32_data(0) == 1);
  // The constants stay initializers when weights are only declared.
  InspectedModel bare = buildAndInspect("alexnet");
  CHECK(bare.graph().initializer_size() == 4); // drop6, drop7 x 2
}

TEST_CASE("batch, classes and image size options", "[zoo]") {
  ZooOptions opts;
  opts.batch = 32;
  opts.numClasses = 10;
  opts.imageSize = 32;
  InspectedModel m = buildAndInspect("vgg16", opts);
  CHECK(m.shapes["input"] == std::vector<int64_t>{32, 3, 32, 32});
  CHECK(m.shapes["pool5"] == std::vector<int64_t>{32, 512, 1, 1});
  CHECK(m.weightDims("fc6.weight") == std::vector<int64_t>{4096, 512});
  CHECK(m.shapes["output"] == std::vector<int64_t>{32, 10});
  ZooOptions big;
  big.imageSize = 256;
  CHECK(buildAndInspect("resnet50", big).shapes["layer4.2.relu3"] ==
        std::vector<int64_t>{-1, 2048, 8, 8});
  ZooOptions hundred;
  hundred.numClasses = 100;
  CHECK(buildAndInspect("tiny-cnn", hundred).shapes["output"] ==
        std::vector<int64_t>{-1, 100});
}

TEST_CASE("bad names and options are reported", "[zoo]") {
  std::string unknown = buildError("resnet5O");
  CHECK(unknown.find("unknown model 'resnet5O'") != std::string::npos);
  for (const char *listed :
       {"alexnet", "vgg16", "vgg-N", "resnet-N", "googlenet", "densenet121",
        "fcn", "mlp", "tiny-cnn", "tiny-dropout"})
    CHECK(unknown.find(listed) != std::string::npos);
  // Untrusted names are quoted.
  CHECK(buildError("a\nb").find("'a\\x0ab'") != std::string::npos);

  std::string depth = buildError("resnet-1920");
  CHECK(depth.find("3k + 2") != std::string::npos);
  CHECK(depth.find("1919 and 1922") != std::string::npos);
  for (const char *bad : {"resnet-11", "resnet-050", "resnet-x", "resnet-",
                          "resnet-999999999", "vgg-16", "vgg-117", "vgg-x"})
    CHECK(buildError(bad).find("invalid model name") != std::string::npos);

  ZooOptions negative;
  negative.batch = -1;
  CHECK(buildError("mlp", negative).find("batch") != std::string::npos);
  ZooOptions classes;
  classes.numClasses = -5;
  CHECK(buildError("mlp", classes).find("classes") != std::string::npos);
  ZooOptions image;
  image.imageSize = 16;
  CHECK(buildError("mlp", image).find("feature vector") != std::string::npos);
  // 16x16: conv1 gives 2x2, then the 3x3 pool1 has too little input.
  std::string small = buildError("alexnet", image);
  CHECK(small.find("image size 16 is too small for model 'alexnet'") !=
        std::string::npos);
  CHECK(small.find("'pool1'") != std::string::npos);
}

TEST_CASE("weights beyond one onnx file are refused early", "[zoo]") {
  ZooOptions opts;
  opts.withWeights = true;
  opts.imageSize = 1024; // vgg16's fc6 becomes 4096 x 512*32*32: 8 GiB
  std::string err = buildError("vgg16", opts);
  CHECK(err.find("2 GiB") != std::string::npos);
}

TEST_CASE("language models take a sequence length up to their context",
          "[zoo]") {
  ZooOptions opts;
  opts.seqLen = 8;
  opts.batch = 3;
  InspectedModel m = buildAndInspect("llama-tiny", opts);
  CHECK(m.shapes["input"] == std::vector<int64_t>{3, 8});
  CHECK(m.shapes["output"] == std::vector<int64_t>{3, 8, 61});
  CHECK(m.shapes["model.layers.1.self_attn.probs"] ==
        std::vector<int64_t>{3, 4, 8, 8});
  // The default is the context length.
  CHECK(buildAndInspect("gpt2-tiny").shapes["input"] ==
        std::vector<int64_t>{-1, 16});
  ZooOptions with;
  with.withWeights = true;
  CHECK(build("llama-tiny", with) == build("llama-tiny", with));
  CHECK(build("gpt2-xl") == build("gpt2-xl"));

  ZooOptions longer;
  longer.seqLen = 1025;
  std::string err = buildError("gpt2", longer);
  CHECK(err.find("up to 1024 tokens") != std::string::npos);
  longer.seqLen = 4097;
  CHECK(buildError("llama-70b", longer).find("up to 4096") !=
        std::string::npos);
  ZooOptions seq;
  seq.seqLen = 16;
  CHECK(buildError("resnet18", seq).find("not a language model") !=
        std::string::npos);
  ZooOptions classes;
  classes.numClasses = 10;
  CHECK(buildError("gpt2", classes).find("vocabulary") != std::string::npos);
  ZooOptions image;
  image.imageSize = 32;
  CHECK(buildError("llama-7b", image).find("token ids") != std::string::npos);
  // Every decoder is refused with weights past one file; the tiny ones fit.
  CHECK(buildError("gpt2-xl", with).find("2 GiB") != std::string::npos);
}
