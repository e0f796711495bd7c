//===- GoogLeNet.cpp - Inception v1 ---------------------------------------===//
//
// GoogLeNet as Caffe's bvlc_googlenet defines it (Szegedy et al. 2014):
// convolutions with bias and ReLU, LRN in the stem, nine inception modules
// whose four branches meet in a Concat, dropout 0.4 before the classifier.
// The two auxiliary classifiers are left out. Caffe's round-up pools are
// written as floor pools with padding 1, which gives the same shapes.
//
//===----------------------------------------------------------------------===//
#include "models/Families.h"

namespace memfit::zoo {

namespace {

struct InceptionSpec {
  const char *name;
  int64_t c1x1, c3x3Reduce, c3x3, c5x5Reduce, c5x5, poolProj;
};

Val convRelu(GraphBuilder &b, const std::string &conv, const std::string &relu,
             Val x, const ConvSpec &spec) {
  return b.relu(relu, b.conv(conv, x, spec));
}

Val inception(GraphBuilder &b, const InceptionSpec &s, Val x) {
  std::string p = std::string(s.name) + ".";
  Val b1 = convRelu(b, p + "1x1", p + "relu_1x1", x,
                    {.outChannels = s.c1x1, .kernel = 1});
  Val b2 = convRelu(b, p + "3x3_reduce", p + "relu_3x3_reduce", x,
                    {.outChannels = s.c3x3Reduce, .kernel = 1});
  b2 = convRelu(b, p + "3x3", p + "relu_3x3", b2,
                {.outChannels = s.c3x3, .kernel = 3, .pad = 1});
  Val b3 = convRelu(b, p + "5x5_reduce", p + "relu_5x5_reduce", x,
                    {.outChannels = s.c5x5Reduce, .kernel = 1});
  b3 = convRelu(b, p + "5x5", p + "relu_5x5", b3,
                {.outChannels = s.c5x5, .kernel = 5, .pad = 2});
  Val b4 = b.maxPool(p + "pool", x, {.kernel = 3, .stride = 1, .pad = 1});
  b4 = convRelu(b, p + "pool_proj", p + "relu_pool_proj", b4,
                {.outChannels = s.poolProj, .kernel = 1});
  return b.concat(p + "output", {b1, b2, b3, b4});
}

} // namespace

Val buildGoogLeNet(GraphBuilder &b) {
  static const InceptionSpec k3[] = {
      {"inception_3a", 64, 96, 128, 16, 32, 32},
      {"inception_3b", 128, 128, 192, 32, 96, 64}};
  static const InceptionSpec k4[] = {
      {"inception_4a", 192, 96, 208, 16, 48, 64},
      {"inception_4b", 160, 112, 224, 24, 64, 64},
      {"inception_4c", 128, 128, 256, 24, 64, 64},
      {"inception_4d", 112, 144, 288, 32, 64, 64},
      {"inception_4e", 256, 160, 320, 32, 128, 128}};
  static const InceptionSpec k5[] = {
      {"inception_5a", 256, 160, 320, 32, 128, 128},
      {"inception_5b", 384, 192, 384, 48, 128, 128}};
  const PoolSpec down = {.kernel = 3, .stride = 2, .pad = 1};

  Val x = b.imageInput(3);
  x = convRelu(b, "conv1", "relu1", x,
               {.outChannels = 64, .kernel = 7, .stride = 2, .pad = 3});
  x = b.maxPool("pool1", x, down);
  x = b.lrn("norm1", x, 5, 1e-4f, 0.75f, 1.0f);
  x = convRelu(b, "conv2_reduce", "relu2_reduce", x,
               {.outChannels = 64, .kernel = 1});
  x = convRelu(b, "conv2", "relu2", x,
               {.outChannels = 192, .kernel = 3, .pad = 1});
  x = b.lrn("norm2", x, 5, 1e-4f, 0.75f, 1.0f);
  x = b.maxPool("pool2", x, down);
  for (const auto &s : k3)
    x = inception(b, s, x);
  x = b.maxPool("pool3", x, down);
  for (const auto &s : k4)
    x = inception(b, s, x);
  x = b.maxPool("pool4", x, down);
  for (const auto &s : k5)
    x = inception(b, s, x);
  x = b.globalAvgPool("pool5", x);
  x = b.flatten("flatten", x);
  x = b.dropout("drop5", x, 0.4f);
  return b.gemm("classifier", x, b.numClasses());
}

} // namespace memfit::zoo
