//===- TinyModels.cpp - Small models for end-to-end tests -----------------===//
//
// Each tiny model exercises one graph feature (a chain, a residual join, a
// fan-out with Concat, BatchNorm, Dropout) with a handful of channels on an
// 8x8 image or a 16-feature vector, so that tests can train them on a CPU
// in milliseconds.
//
//===----------------------------------------------------------------------===//
#include "models/Families.h"

namespace memfit::zoo {

namespace {

constexpr int64_t kFeatures = 16;
constexpr int64_t kHidden = 32;

Val head(GraphBuilder &b, Val x) {
  x = b.globalAvgPool("gap", x);
  x = b.flatten("flatten", x);
  return b.gemm("fc", x, b.numClasses());
}

} // namespace

Val buildMlp(GraphBuilder &b) {
  Val x = b.vectorInput(kFeatures);
  x = b.gemm("fc1", x, kHidden);
  x = b.relu("relu1", x);
  return b.gemm("fc2", x, b.numClasses());
}

Val buildTinyDropout(GraphBuilder &b) {
  Val x = b.vectorInput(kFeatures);
  x = b.gemm("fc1", x, kHidden);
  x = b.relu("relu1", x);
  x = b.dropout("drop1", x, 0.5f);
  return b.gemm("fc2", x, b.numClasses());
}

Val buildTinyCnn(GraphBuilder &b) {
  Val x = b.imageInput(3);
  x = b.conv("conv1", x, {.outChannels = 4, .kernel = 3, .pad = 1});
  x = b.relu("relu1", x);
  x = b.maxPool("pool1", x, {.kernel = 2, .stride = 2});
  x = b.conv("conv2", x, {.outChannels = 8, .kernel = 3, .pad = 1});
  x = b.relu("relu2", x);
  return head(b, x);
}

Val buildTinyResidual(GraphBuilder &b) {
  Val x = b.imageInput(3);
  x = b.conv("conv0", x, {.outChannels = 4, .kernel = 3, .pad = 1});
  x = b.relu("relu0", x);
  Val y = b.conv("block.conv1", x, {.outChannels = 4, .kernel = 3, .pad = 1});
  y = b.relu("block.relu1", y);
  y = b.conv("block.conv2", y, {.outChannels = 4, .kernel = 3, .pad = 1});
  y = b.add("block.add", y, x);
  y = b.relu("block.relu2", y);
  return head(b, y);
}

Val buildTinyInception(GraphBuilder &b) {
  Val x = b.imageInput(3);
  x = b.conv("conv0", x, {.outChannels = 4, .kernel = 3, .pad = 1});
  x = b.relu("relu0", x);
  Val b1 = b.conv("mixed.1x1", x, {.outChannels = 2, .kernel = 1});
  Val b2 = b.conv("mixed.3x3", x, {.outChannels = 3, .kernel = 3, .pad = 1});
  Val b3 = b.maxPool("mixed.pool", x, {.kernel = 3, .stride = 1, .pad = 1});
  b3 = b.conv("mixed.pool_proj", b3, {.outChannels = 2, .kernel = 1});
  Val y = b.concat("mixed.concat", {b1, b2, b3});
  y = b.relu("mixed.relu", y);
  return head(b, y);
}

Val buildTinyBn(GraphBuilder &b) {
  Val x = b.imageInput(3);
  x = b.conv("conv1", x,
             {.outChannels = 4, .kernel = 3, .pad = 1, .bias = false});
  x = b.batchNorm("bn1", x);
  x = b.relu("relu1", x);
  return head(b, x);
}

} // namespace memfit::zoo
