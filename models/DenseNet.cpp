//===- DenseNet.cpp - DenseNet-121 ----------------------------------------===//
//
// torchvision's DenseNet-121 (growth 32, bottleneck width 4 x 32, blocks of
// 6, 12, 24, 16 layers, compression 0.5). Each dense layer concatenates the
// block input with every earlier layer's output before its BN-ReLU-conv
// bottleneck, as torchvision's memory-hungry default does: the Concats are
// what makes DenseNet's activation memory grow quadratically.
//
//===----------------------------------------------------------------------===//
#include "models/Families.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

namespace memfit::zoo {

namespace {

constexpr int64_t kGrowth = 32;
constexpr int64_t kBottleneckWidth = 4 * kGrowth;

Val bnReluConv(GraphBuilder &b, const std::string &p, const char *suffix, Val x,
               const ConvSpec &spec) {
  x = b.batchNorm(p + "norm" + suffix, x);
  x = b.relu(p + "relu" + suffix, x);
  return b.conv(p + "conv" + suffix, x, spec);
}

Val denseBlock(GraphBuilder &b, int block, int64_t layers, Val x) {
  llvm::SmallVector<Val, 32> features = {x};
  for (int64_t l = 1; l <= layers; ++l) {
    std::string p = ("denseblock" + llvm::Twine(block) + ".denselayer" +
                     llvm::Twine(l) + ".")
                        .str();
    Val in =
        features.size() == 1 ? features[0] : b.concat(p + "concat", features);
    Val y = bnReluConv(
        b, p, "1", in,
        {.outChannels = kBottleneckWidth, .kernel = 1, .bias = false});
    y = bnReluConv(
        b, p, "2", y,
        {.outChannels = kGrowth, .kernel = 3, .pad = 1, .bias = false});
    features.push_back(y);
  }
  return b.concat("denseblock" + std::to_string(block) + ".output", features);
}

Val transition(GraphBuilder &b, int index, Val x) {
  std::string p = "transition" + std::to_string(index) + ".";
  x = b.batchNorm(p + "norm", x);
  x = b.relu(p + "relu", x);
  x = b.conv(p + "conv", x,
             {.outChannels = b.shape(x)[0] / 2, .kernel = 1, .bias = false});
  return b.avgPool(p + "pool", x, {.kernel = 2, .stride = 2});
}

} // namespace

Val buildDenseNet121(GraphBuilder &b) {
  const int64_t blocks[4] = {6, 12, 24, 16};
  Val x = b.imageInput(3);
  x = b.conv(
      "conv0", x,
      {.outChannels = 64, .kernel = 7, .stride = 2, .pad = 3, .bias = false});
  x = b.batchNorm("norm0", x);
  x = b.relu("relu0", x);
  x = b.maxPool("pool0", x, {.kernel = 3, .stride = 2, .pad = 1});
  for (int i = 0; i < 4; ++i) {
    x = denseBlock(b, i + 1, blocks[i], x);
    if (i < 3)
      x = transition(b, i + 1, x);
  }
  x = b.batchNorm("norm5", x);
  x = b.relu("relu5", x);
  x = b.globalAvgPool("avgpool", x);
  x = b.flatten("flatten", x);
  return b.gemm("classifier", x, b.numClasses());
}

} // namespace memfit::zoo
