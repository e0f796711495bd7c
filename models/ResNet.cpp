//===- ResNet.cpp - Residual networks -------------------------------------===//
//
// torchvision's ResNet-18/34/50/101/152 (post-activation, stride on the 3x3
// convolution, BatchNorm everywhere, names as torchvision's modules), and
// the pre-activation bottleneck ResNet of He et al. ("Identity Mappings in
// Deep Residual Networks") at any depth, the network Chen et al. and
// SuperNeurons grow to thousands of layers.
//
//===----------------------------------------------------------------------===//
#include "models/Families.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace memfit::zoo {

namespace {

/// conv1 7x7/2 -> BN -> ReLU -> 3x3/2 max pool: 224 -> 56.
Val stem(GraphBuilder &b, Val x, llvm::StringRef reluName) {
  x = b.conv(
      "conv1", x,
      {.outChannels = 64, .kernel = 7, .stride = 2, .pad = 3, .bias = false});
  x = b.batchNorm("bn1", x);
  x = b.relu(reluName, x);
  return b.maxPool("maxpool", x, {.kernel = 3, .stride = 2, .pad = 1});
}

Val convBn(GraphBuilder &b, const std::string &p, const char *conv,
           const char *bn, Val x, const ConvSpec &spec) {
  x = b.conv(p + conv, x, spec);
  return b.batchNorm(p + bn, x);
}

Val basicBlock(GraphBuilder &b, const std::string &p, Val x, int64_t planes,
               int64_t stride) {
  Val y = convBn(b, p, "conv1", "bn1", x,
                 {.outChannels = planes,
                  .kernel = 3,
                  .stride = stride,
                  .pad = 1,
                  .bias = false});
  y = b.relu(p + "relu1", y);
  y = convBn(b, p, "conv2", "bn2", y,
             {.outChannels = planes, .kernel = 3, .pad = 1, .bias = false});
  Val shortcut = x;
  if (stride != 1 || b.shape(x)[0] != planes)
    shortcut = convBn(
        b, p, "downsample.0", "downsample.1", x,
        {.outChannels = planes, .kernel = 1, .stride = stride, .bias = false});
  y = b.add(p + "add", y, shortcut);
  return b.relu(p + "relu2", y);
}

Val bottleneck(GraphBuilder &b, const std::string &p, Val x, int64_t planes,
               int64_t stride) {
  int64_t out = planes * 4;
  Val y = convBn(b, p, "conv1", "bn1", x,
                 {.outChannels = planes, .kernel = 1, .bias = false});
  y = b.relu(p + "relu1", y);
  y = convBn(b, p, "conv2", "bn2", y,
             {.outChannels = planes,
              .kernel = 3,
              .stride = stride,
              .pad = 1,
              .bias = false});
  y = b.relu(p + "relu2", y);
  y = convBn(b, p, "conv3", "bn3", y,
             {.outChannels = out, .kernel = 1, .bias = false});
  Val shortcut = x;
  if (stride != 1 || b.shape(x)[0] != out)
    shortcut = convBn(
        b, p, "downsample.0", "downsample.1", x,
        {.outChannels = out, .kernel = 1, .stride = stride, .bias = false});
  y = b.add(p + "add", y, shortcut);
  return b.relu(p + "relu3", y);
}

/// BN-ReLU-conv three times; the shortcut projects the pre-activated input
/// when the unit changes width or stride, as in He et al.'s v2 units.
Val preActUnit(GraphBuilder &b, const std::string &p, Val x, int64_t planes,
               int64_t stride) {
  int64_t out = planes * 4;
  Val act = b.relu(p + "relu1", b.batchNorm(p + "bn1", x));
  Val y = b.conv(p + "conv1", act,
                 {.outChannels = planes, .kernel = 1, .bias = false});
  y = b.relu(p + "relu2", b.batchNorm(p + "bn2", y));
  y = b.conv(p + "conv2", y,
             {.outChannels = planes,
              .kernel = 3,
              .stride = stride,
              .pad = 1,
              .bias = false});
  y = b.relu(p + "relu3", b.batchNorm(p + "bn3", y));
  y = b.conv(p + "conv3", y, {.outChannels = out, .kernel = 1, .bias = false});
  Val shortcut = x;
  if (stride != 1 || b.shape(x)[0] != out)
    shortcut = b.conv(
        p + "downsample", act,
        {.outChannels = out, .kernel = 1, .stride = stride, .bias = false});
  return b.add(p + "add", y, shortcut);
}

std::string unitPrefix(int stage, int64_t index) {
  return ("layer" + llvm::Twine(stage + 1) + "." + llvm::Twine(index) + ".")
      .str();
}

Val classifier(GraphBuilder &b, Val x) {
  x = b.globalAvgPool("avgpool", x);
  x = b.flatten("flatten", x);
  return b.gemm("fc", x, b.numClasses());
}

} // namespace

Val buildResNet(GraphBuilder &b, bool bottleneckBlocks,
                const std::array<int64_t, 4> &blocksPerStage) {
  Val x = stem(b, b.imageInput(3), "relu");
  for (int s = 0; s < 4; ++s) {
    int64_t planes = int64_t(64) << s;
    for (int64_t i = 0; i < blocksPerStage[s]; ++i) {
      int64_t stride = (s > 0 && i == 0) ? 2 : 1;
      x = bottleneckBlocks ? bottleneck(b, unitPrefix(s, i), x, planes, stride)
                           : basicBlock(b, unitPrefix(s, i), x, planes, stride);
    }
  }
  return classifier(b, x);
}

std::array<int64_t, 4> preActStageUnits(int64_t units) {
  // ResNet-50's 3:4:6:3 proportions, rounded by largest remainder (ties to
  // the earlier stage): 16 units give exactly ResNet-50's split and every
  // stage grows with depth, as Chen et al. grow "each residual stage".
  assert(units >= 4 && "one unit per stage at least");
  const int64_t weights[4] = {3, 4, 6, 3};
  const int64_t total = 16;
  std::array<int64_t, 4> split;
  std::array<int64_t, 4> remainder;
  int64_t assigned = 0;
  for (int s = 0; s < 4; ++s) {
    split[s] = units * weights[s] / total;
    remainder[s] = units * weights[s] % total;
    assigned += split[s];
  }
  std::array<int, 4> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int c) { return remainder[a] > remainder[c]; });
  for (int64_t k = 0; k < units - assigned; ++k)
    ++split[order[k]];
  assert(std::accumulate(split.begin(), split.end(), int64_t(0)) == units);
  return split;
}

Val buildPreActResNet(GraphBuilder &b, int64_t units) {
  Val x = stem(b, b.imageInput(3), "relu1");
  std::array<int64_t, 4> split = preActStageUnits(units);
  for (int s = 0; s < 4; ++s) {
    int64_t planes = int64_t(64) << s;
    for (int64_t i = 0; i < split[s]; ++i)
      x = preActUnit(b, unitPrefix(s, i), x, planes, (s > 0 && i == 0) ? 2 : 1);
  }
  // Pre-activation units end on an Add; the head normalises once more.
  x = b.relu("relu_final", b.batchNorm("bn_final", x));
  return classifier(b, x);
}

} // namespace memfit::zoo
