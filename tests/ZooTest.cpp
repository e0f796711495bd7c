//===- ZooTest.cpp - The zoo's models match their published shapes --------===//
//
// Every model passes the ONNX checker and strict shape inference; the facts
// below (shapes, layer and parameter counts) are computed by hand from the
// papers and torchvision and read back from the ONNX proto.
//
//===----------------------------------------------------------------------===//
#include "ZooTestUtil.h"

#include "models/Families.h"

#include <chrono>

using namespace memfit;
using memfit::test::buildAndInspect;
using memfit::test::InspectedModel;

namespace {

const int64_t N = -1; // the symbolic batch as test::dimsOf reports it

/// Elements of the weights a language model declares as graph inputs after
/// its token ids.
int64_t declaredParams(const onnx::GraphProto &g) {
  int64_t params = 0;
  for (int i = 1; i < g.input_size(); ++i) {
    int64_t n = 1;
    for (int64_t d : memfit::test::dimsOf(g.input(i).type()))
      n *= d;
    params += n;
  }
  return params;
}

int countConvAndGemm(const InspectedModel &m) {
  return m.countOps("Conv") + m.countOps("Gemm");
}

std::vector<int64_t> convGroups(const InspectedModel &m) {
  std::vector<int64_t> groups;
  for (const auto &node : m.graph().node()) {
    if (node.op_type() != "Conv")
      continue;
    int64_t g = 1;
    for (const auto &a : node.attribute())
      if (a.name() == "group")
        g = a.i();
    groups.push_back(g);
  }
  return groups;
}

} // namespace

TEST_CASE("every zoo model passes the onnx checker and shape inference",
          "[zoo]") {
  std::vector<std::string> names;
  for (const ZooEntry &e : zooModels()) {
    if (e.name == "resnet-N") {
      names.push_back("resnet-14");
      names.push_back("resnet-50");
    } else if (e.name == "vgg-N") {
      for (const char *v : {"vgg-116", "vgg-216", "vgg-316", "vgg-416"})
        names.push_back(v);
    } else {
      names.push_back(e.name);
    }
  }
  REQUIRE(names.size() == 31 + 2 + 4);
  for (const std::string &name : names) {
    INFO("model " << name);
    InspectedModel m = buildAndInspect(name);
    bool tiny = isTinyZooModel(name);
    // The first graph input is the data; the declared output is [N, classes]
    // (the logits [N, T, vocab] of a language model, whose input is token
    // ids) and agrees with the inferred one (strict inference merges the
    // two).
    REQUIRE(m.graph().input(0).name() == "input");
    REQUIRE(m.graph().output_size() == 1);
    CHECK(m.graph().output(0).name() == "output");
    bool tokens = m.graph().input(0).type().tensor_type().elem_type() ==
                  onnx::TensorProto::INT64;
    if (tokens) {
      int64_t t = m.shapes["input"].at(1);
      int64_t vocab = tiny                                         ? 61
                      : llvm::StringRef(name).startswith("gpt")    ? 50257
                      : llvm::StringRef(name).startswith("llama3") ? 128256
                                                                   : 32000;
      CHECK(m.shapes["output"] == std::vector<int64_t>{N, t, vocab});
    } else {
      CHECK(m.shapes["output"] == std::vector<int64_t>{N, tiny ? 10 : 1000});
    }
    CHECK(m.graph().input(0).type().tensor_type().shape().dim(0).dim_param() ==
          "N");
    CHECK(m.proto.ir_version() == 8);
    REQUIRE(m.proto.opset_import_size() == 1);
    // LayerNormalization is an opset-17 operator.
    CHECK(m.proto.opset_import(0).version() ==
          (m.countOps("LayerNormalization") ? 17 : 13));
    // Node names are present and unique.
    std::set<std::string> nodeNames;
    for (const auto &node : m.graph().node()) {
      CHECK(!node.name().empty());
      CHECK(nodeNames.insert(node.name()).second);
    }
  }
}

TEST_CASE("alexnet is Caffe's bvlc_alexnet", "[zoo]") {
  InspectedModel m = buildAndInspect("alexnet");
  CHECK(m.shapes["input"] == std::vector<int64_t>{N, 3, 227, 227});
  // (227 - 11) / 4 + 1 = 55; pools (55 - 3) / 2 + 1 = 27, 13, 6.
  CHECK(m.shapes["conv1"] == std::vector<int64_t>{N, 96, 55, 55});
  CHECK(m.shapes["pool1"] == std::vector<int64_t>{N, 96, 27, 27});
  CHECK(m.shapes["conv2"] == std::vector<int64_t>{N, 256, 27, 27});
  CHECK(m.shapes["pool2"] == std::vector<int64_t>{N, 256, 13, 13});
  CHECK(m.shapes["conv5"] == std::vector<int64_t>{N, 256, 13, 13});
  CHECK(m.shapes["pool5"] == std::vector<int64_t>{N, 256, 6, 6});
  CHECK(m.shapes["flatten"] == std::vector<int64_t>{N, 9216});
  CHECK(convGroups(m) == std::vector<int64_t>{1, 2, 1, 2, 2});
  CHECK(m.countOps("LRN") == 2);
  CHECK(m.countOps("Dropout") == 2);
  CHECK(m.countOps("MaxPool") == 3);
  CHECK(m.graph().node_size() == 23); // SuperNeurons' 23 layers minus
                                      // Softmax, plus Flatten
  // conv1 96*3*11*11 + 96          =     34,944
  // conv2 256*48*5*5 + 256         =    307,456  (group 2: 96/2 inputs)
  // conv3 384*256*3*3 + 384        =    885,120
  // conv4 384*192*3*3 + 384        =    663,936  (group 2)
  // conv5 256*192*3*3 + 256        =    442,624  (group 2)
  // fc6   9216*4096 + 4096         = 37,752,832
  // fc7   4096*4096 + 4096         = 16,781,312
  // fc8   4096*1000 + 1000         =  4,097,000
  //                          total = 60,965,224
  CHECK(m.trainableParams() == 60965224);
}

TEST_CASE("vgg16 and vgg19 match torchvision", "[zoo]") {
  InspectedModel v16 = buildAndInspect("vgg16");
  CHECK(v16.countOps("Conv") == 13);
  CHECK(v16.countOps("Gemm") == 3);
  CHECK(v16.shapes["conv1_2"] == std::vector<int64_t>{N, 64, 224, 224});
  CHECK(v16.shapes["pool5"] == std::vector<int64_t>{N, 512, 7, 7});
  CHECK(v16.trainableParams() == 138357544);
  InspectedModel v19 = buildAndInspect("vgg19");
  CHECK(v19.countOps("Conv") == 16);
  CHECK(v19.trainableParams() == 143667240);
}

TEST_CASE("vDNN's vgg-N has N convolutions, 20 more per group per 100",
          "[zoo]") {
  // vgg-116: groups 2+20, 2+20, 4+20, 4+20, 4+20 = 22+22+24+24+24 = 116.
  InspectedModel m = buildAndInspect("vgg-116");
  CHECK(m.countOps("Conv") == 116);
  CHECK(m.countOps("Gemm") == 3);
  CHECK(m.node("conv1_22") != nullptr);
  CHECK(m.node("conv1_23") == nullptr);
  CHECK(m.node("conv5_24") != nullptr);
  CHECK(m.node("conv5_25") == nullptr);
  CHECK(m.shapes["conv2_22"] == std::vector<int64_t>{N, 128, 112, 112});
  // vgg-416: 82+82+84+84+84 = 416.
  InspectedModel deep = buildAndInspect("vgg-416");
  CHECK(deep.countOps("Conv") == 416);
  CHECK(deep.node("conv3_84") != nullptr);
  CHECK(deep.node("conv3_85") == nullptr);
}

TEST_CASE("moDNN's vgg101 is VGG-19 deepened to 98 conv + 3 FC", "[zoo]") {
  InspectedModel m = buildAndInspect("vgg101");
  CHECK(countConvAndGemm(m) == 101);
  CHECK(m.countOps("Conv") == 98);
  // Groups 2, 2, 32, 31, 31: VGG-19's first two groups unchanged.
  CHECK(m.node("conv2_2") != nullptr);
  CHECK(m.node("conv2_3") == nullptr);
  CHECK(m.node("conv3_32") != nullptr);
  CHECK(m.node("conv3_33") == nullptr);
  CHECK(m.node("conv5_31") != nullptr);
  CHECK(m.node("conv5_32") == nullptr);
}

TEST_CASE("torchvision resnets have torchvision's parameter counts", "[zoo]") {
  struct Case {
    const char *name;
    int64_t params;
    int convs;
  };
  // Convs: 1 stem + 2 or 3 per block + one projection per stage that
  // changes width or stride (3 for basic blocks, 4 for bottlenecks).
  for (Case c : {Case{"resnet18", 11689512, 1 + 2 * 8 + 3},
                 Case{"resnet34", 21797672, 1 + 2 * 16 + 3},
                 Case{"resnet50", 25557032, 1 + 3 * 16 + 4},
                 Case{"resnet101", 44549160, 1 + 3 * 33 + 4},
                 Case{"resnet152", 60192808, 1 + 3 * 50 + 4}}) {
    INFO(c.name);
    InspectedModel m = buildAndInspect(c.name);
    CHECK(m.trainableParams() == c.params);
    CHECK(m.countOps("Conv") == c.convs);
    CHECK(m.countOps("BatchNormalization") == c.convs);
    CHECK(m.countOps("Gemm") == 1);
  }
  InspectedModel r50 = buildAndInspect("resnet50");
  CHECK(r50.shapes["maxpool"] == std::vector<int64_t>{N, 64, 56, 56});
  CHECK(r50.shapes["layer1.2.relu3"] == std::vector<int64_t>{N, 256, 56, 56});
  CHECK(r50.shapes["layer4.2.relu3"] == std::vector<int64_t>{N, 2048, 7, 7});
  CHECK(r50.node("layer3.5.add") != nullptr);
  CHECK(r50.node("layer3.6.add") == nullptr);
}

TEST_CASE("resnet-N has depth N counted as He et al. count it", "[zoo]") {
  // Depth = stem conv + 3 per bottleneck unit + fc; the four projection
  // shortcuts ("downsample") are not counted, as in ResNet-50's name.
  for (int64_t depth : {14, 50, 101, 152, 1001}) {
    INFO("resnet-" << depth);
    InspectedModel m = buildAndInspect("resnet-" + std::to_string(depth));
    int downsample = 0;
    for (const auto &node : m.graph().node())
      if (node.op_type() == "Conv" &&
          llvm::StringRef(node.name()).endswith(".downsample"))
        ++downsample;
    CHECK(downsample == 4);
    CHECK(countConvAndGemm(m) - downsample == depth);
    CHECK(m.countOps("Add") == (depth - 2) / 3);
    CHECK(m.shapes["bn_final"] == std::vector<int64_t>{N, 2048, 7, 7});
  }
}

TEST_CASE("resnet-N splits units over stages in 3:4:6:3 proportion", "[zoo]") {
  using Split = std::array<int64_t, 4>;
  CHECK(zoo::preActStageUnits(16) == Split{3, 4, 6, 3}); // resnet-50
  CHECK(zoo::preActStageUnits(4) == Split{1, 1, 1, 1});  // resnet-14
  // 33 units: 6.1875, 8.25, 12.375, 6.1875 -> 6, 8, 12, 6 and the one left
  // goes to the largest fraction (stage 3).
  CHECK(zoo::preActStageUnits(33) == Split{6, 8, 13, 6});
  // 333 units (resnet-1001): 62.4375, 83.25, 124.875, 62.4375 -> two left
  // go to stage 3 (.875) and stage 1 (.4375, tie with stage 4 to the
  // earlier stage).
  CHECK(zoo::preActStageUnits(333) == Split{63, 83, 125, 62});
  InspectedModel m = buildAndInspect("resnet-50");
  CHECK(m.node("layer3.5.add") != nullptr);
  CHECK(m.node("layer3.6.add") == nullptr);
  CHECK(m.node("layer4.2.add") != nullptr);
  CHECK(m.node("layer4.3.add") == nullptr);
}

TEST_CASE("a 1000-layer resnet builds quickly, a 10000-layer one too",
          "[zoo]") {
  auto start = std::chrono::steady_clock::now();
  auto bytes = buildZooModel("resnet-1001", {});
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  REQUIRE(static_cast<bool>(bytes));
  CHECK(seconds < 1.0);
  auto huge = buildZooModel("resnet-10001", {});
  REQUIRE(static_cast<bool>(huge));
  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(*huge));
  // 3333 units of 10 nodes, 4 projections, 4 stem and 5 head nodes.
  CHECK(proto.graph().node_size() == 3333 * 10 + 4 + 4 + 5);
}

TEST_CASE("googlenet is bvlc_googlenet without auxiliary heads", "[zoo]") {
  InspectedModel m = buildAndInspect("googlenet");
  CHECK(m.countOps("Conv") == 3 + 9 * 6);
  CHECK(m.countOps("Concat") == 9);
  CHECK(m.shapes["pool2"] == std::vector<int64_t>{N, 192, 28, 28});
  CHECK(m.shapes["inception_3a.output"] ==
        std::vector<int64_t>{N, 256, 28, 28}); // 64+128+32+32
  CHECK(m.shapes["inception_4e.output"] ==
        std::vector<int64_t>{N, 832, 14, 14}); // 256+320+128+128
  CHECK(m.shapes["inception_5b.output"] ==
        std::vector<int64_t>{N, 1024, 7, 7}); // 384+384+128+128
  // Stem 9,472 + 4,160 + 110,784; inceptions 163,696 + 388,736 + 376,176 +
  // 449,160 + 510,104 + 605,376 + 868,352 + 1,043,456 + 1,444,080;
  // classifier 1024*1000 + 1000 = 1,025,000.
  CHECK(m.trainableParams() == 6998552);
}

TEST_CASE("densenet121 matches torchvision", "[zoo]") {
  InspectedModel m = buildAndInspect("densenet121");
  CHECK(m.trainableParams() == 7978856);
  CHECK(m.countOps("Conv") == 1 + 2 * (6 + 12 + 24 + 16) + 3);
  // One Concat per dense layer after a block's first, one per block output.
  CHECK(m.countOps("Concat") == (5 + 11 + 23 + 15) + 4);
  // 64 + 6*32 = 256 -> 128; 128 + 12*32 = 512 -> 256; 256 + 24*32 = 1024
  // -> 512; 512 + 16*32 = 1024.
  CHECK(m.shapes["denseblock1.output"] == std::vector<int64_t>{N, 256, 56, 56});
  CHECK(m.shapes["transition1.pool"] == std::vector<int64_t>{N, 128, 28, 28});
  CHECK(m.shapes["denseblock4.output"] == std::vector<int64_t>{N, 1024, 7, 7});
}

TEST_CASE("fcn is VGG-16 without Gemm and with VGG-16's parameters", "[zoo]") {
  InspectedModel m = buildAndInspect("fcn");
  CHECK(m.countOps("Gemm") == 0);
  CHECK(m.countOps("Conv") == 13 + 3);
  // fc6 as a 7x7x512 -> 4096 conv holds fc6's 25088*4096 weights, so the
  // count equals VGG-16's.
  CHECK(m.trainableParams() == 138357544);
  CHECK(m.shapes["score"] == std::vector<int64_t>{N, 1000, 7, 7});
}

TEST_CASE("tiny models are small and have the stated structure", "[zoo]") {
  struct Case {
    const char *name;
    std::vector<std::string> ops;
    std::vector<int64_t> input;
    int64_t params;
  };
  const std::vector<Case> cases = {
      // 16*32+32 + 32*10+10
      {"mlp", {"Gemm", "Relu", "Gemm"}, {N, 16}, 544 + 330},
      {"tiny-dropout", {"Gemm", "Relu", "Dropout", "Gemm"}, {N, 16}, 544 + 330},
      // conv1 3*4*9+4, conv2 4*8*9+8, fc 8*10+10
      {"tiny-cnn",
       {"Conv", "Relu", "MaxPool", "Conv", "Relu", "GlobalAveragePool",
        "Flatten", "Gemm"},
       {N, 3, 8, 8},
       112 + 296 + 90},
      // conv0 3*4*9+4, two 4*4*9+4 convs, fc 4*10+10
      {"tiny-residual",
       {"Conv", "Relu", "Conv", "Relu", "Conv", "Add", "Relu",
        "GlobalAveragePool", "Flatten", "Gemm"},
       {N, 3, 8, 8},
       112 + 2 * 148 + 50},
      // conv0 112; 1x1 4*2+2, 3x3 4*3*9+3, pool_proj 4*2+2; fc 7*10+10
      {"tiny-inception",
       {"Conv", "Relu", "Conv", "Conv", "MaxPool", "Conv", "Concat", "Relu",
        "GlobalAveragePool", "Flatten", "Gemm"},
       {N, 3, 8, 8},
       112 + 10 + 111 + 10 + 80},
      // conv1 3*4*9 (no bias), BN scale+B 8, fc 4*10+10
      {"tiny-bn",
       {"Conv", "BatchNormalization", "Relu", "GlobalAveragePool", "Flatten",
        "Gemm"},
       {N, 3, 8, 8},
       108 + 8 + 50},
  };
  for (const Case &c : cases) {
    INFO(c.name);
    CHECK(isTinyZooModel(c.name));
    InspectedModel m = buildAndInspect(c.name);
    std::vector<std::string> ops;
    for (const auto &node : m.graph().node())
      ops.push_back(node.op_type());
    CHECK(ops == c.ops);
    CHECK(m.shapes["input"] == c.input);
    CHECK(m.shapes["output"] == std::vector<int64_t>{N, 10});
    CHECK(m.trainableParams() == c.params);
  }
  CHECK(buildAndInspect("tiny-inception").shapes["mixed.concat"] ==
        std::vector<int64_t>{N, 7, 8, 8});
  CHECK_FALSE(isTinyZooModel("alexnet"));
  CHECK_FALSE(isTinyZooModel("no-such-model"));
}

TEST_CASE("--layers sets a language model's depth", "[zoo]") {
  auto params = [](const std::string &model, const ZooOptions &o) {
    auto bytes = buildZooModel(model, o);
    REQUIRE(static_cast<bool>(bytes));
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    CHECK_THAT(proto.doc_string(),
               Catch::Contains(std::to_string(o.layers) + " decoder layers"));
    return declaredParams(proto.graph());
  };
  // GPT-3 175B's blocks 66 deep, 2048 positions: (50257 + 2048) 12288 +
  // 66 (12 12288^2 + 13 12288) + 2 12288 = 120.24B.
  ZooOptions o;
  o.layers = 66;
  CHECK(params("gpt3-175b", o) == 120241287168);
  // Llama's too: llama-tiny one block deep, 2 61 32 + (2 32^2 + 2 32 16 +
  // 3 32 64 + 2 32) + 32.
  o.layers = 1;
  CHECK(params("llama-tiny", o) ==
        2 * 61 * 32 + (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64 + 2 * 32) + 32);
  auto cnn = buildZooModel("resnet18", o);
  REQUIRE_FALSE(static_cast<bool>(cnn));
  CHECK_THAT(llvm::toString(cnn.takeError()),
             Catch::Contains("not a language model"));
}

TEST_CASE("--vocab sets a language model's vocabulary", "[zoo]") {
  // GPT-2 at V 32000: (32000 + 1024) 768 + 12 (12 768^2 + 13 768) + 2 768.
  ZooOptions o;
  o.vocab = 32000;
  auto bytes = buildZooModel("gpt2", o);
  REQUIRE(static_cast<bool>(bytes));
  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(*bytes));
  CHECK(declaredParams(proto.graph()) == 110418432);
  auto cnn = buildZooModel("resnet18", o);
  REQUIRE_FALSE(static_cast<bool>(cnn));
  CHECK(llvm::toString(cnn.takeError()) ==
        "model 'resnet18' is not a language model; a vocabulary does not "
        "apply");
}

TEST_CASE("gpt2 and llama-2 have the published parameter counts", "[zoo]") {
  struct Case {
    const char *name;
    int64_t params;
    int64_t seqLen;
  };
  // Hugging Face's num_parameters() (the tied GPT-2 head once), from the
  // declared weights alone. GPT-2, width d, L layers, V 50257, 1024
  // positions: (V + 1024) d + L (12 d^2 + 13 d) + 2 d. Llama-2, width d,
  // MLP f, key/value width k, V 32000: 2 V d + L (2 d^2 + 2 d k + 3 d f +
  // 2 d) + d.
  for (Case c :
       {Case{"gpt2", 124439808, 1024}, Case{"gpt2-medium", 354823168, 1024},
        Case{"gpt2-large", 774030080, 1024}, Case{"gpt2-xl", 1557611200, 1024},
        // GPT-3, 2048 positions: (V + 2048) d + L (12 d^2 + 13 d) + 2 d.
        Case{"gpt3-13b", 12853386240, 2048},
        Case{"gpt3-175b", 174604259328, 2048},
        Case{"llama-1b", 1100048384, 2048}, // TinyLlama-1.1B
        Case{"llama-7b", 6738415616, 4096},
        // Llama-3-8B: V 128256, 8 key/value heads of 32, MLP 14336.
        Case{"llama3-8b", 8030261248, 8192},
        Case{"llama-13b", 13015864320, 4096},
        Case{"llama-70b", 68976648192, 4096},
        // (61 + 16) 32 + 2 (12 32^2 + 13 32) + 2 32
        Case{"gpt2-tiny", 27936, 16},
        // 2 61 32 + 2 (2 32^2 + 2 32 16 + 3 32 64 + 2 32) + 32
        Case{"llama-tiny", 22496, 16}}) {
    INFO(c.name);
    auto bytes = buildZooModel(c.name, {});
    REQUIRE(static_cast<bool>(bytes));
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    const auto &g = proto.graph();
    CHECK(g.initializer_size() == 0);
    CHECK(declaredParams(g) == c.params);
    CHECK(memfit::test::dimsOf(g.input(0).type()) ==
          std::vector<int64_t>{N, c.seqLen});
    // Small files: no tables of T x T or T x d are stored.
    CHECK(bytes->size() < 2000000);
  }
}

TEST_CASE("the decoders have their layers, heads and tied or untied heads",
          "[zoo]") {
  ZooOptions short_;
  short_.seqLen = 64;
  InspectedModel gpt = buildAndInspect("gpt2", short_);
  CHECK(gpt.countOps("LayerNormalization") == 2 * 12 + 1);
  CHECK(gpt.countOps("Softmax") == 12);
  // Per layer c_attn, c_proj, c_fc, mlp.c_proj, scores, context; the head.
  CHECK(gpt.countOps("MatMul") == 6 * 12 + 1);
  CHECK(gpt.countOps("Tanh") == 12);
  CHECK(gpt.shapes["transformer.h.11.attn.probs"] ==
        std::vector<int64_t>{N, 12, 64, 64});
  CHECK(gpt.weightDims("transformer.h.0.attn.c_attn.weight") ==
        std::vector<int64_t>{768, 2304});
  // Tied: the head reads the token embedding; there is no lm_head.weight.
  REQUIRE(gpt.node("lm_head.weight_t") != nullptr);
  CHECK(gpt.node("lm_head.weight_t")->input(0) == "transformer.wte.weight");
  for (const auto &in : gpt.graph().input())
    CHECK(in.name() != "lm_head.weight");

  InspectedModel llama = buildAndInspect("llama-70b", short_);
  CHECK(llama.countOps("Softmax") == 80);
  CHECK(llama.countOps("LayerNormalization") == 0);
  CHECK(llama.countOps("Sigmoid") == 80);
  // Grouped-query attention: 8 key/value heads of 128 shared by 64 query
  // heads, expanded as Hugging Face's repeat_kv does.
  CHECK(llama.weightDims("model.layers.0.self_attn.k_proj.weight") ==
        std::vector<int64_t>{1024, 8192});
  CHECK(llama.countOps("Expand") == 2 * 80);
  CHECK(llama.shapes["model.layers.0.self_attn.k.expand"] ==
        std::vector<int64_t>{N, 8, 8, 64, 128});
  CHECK(llama.shapes["model.layers.79.self_attn.probs"] ==
        std::vector<int64_t>{N, 64, 64, 64});
  CHECK(llama.weightDims("lm_head.weight") ==
        std::vector<int64_t>{32000, 8192});
  CHECK(llama.weightDims("model.layers.3.mlp.down_proj.weight") ==
        std::vector<int64_t>{8192, 28672});
  // Llama-2-7B has as many key/value heads as heads: nothing to repeat.
  CHECK(buildAndInspect("llama-7b", short_).countOps("Expand") == 0);
}
