//===- VggAlexNet.cpp - AlexNet, VGG and the FCN --------------------------===//
//
// The plain convolutional chains: AlexNet as Caffe defines it (the network
// SuperNeurons and vDNN measure), VGG with any number of convolutions per
// group (VGG-16/19, vDNN's VGG-116..416, moDNN's VGG-101) and a fully
// convolutional VGG-16. Names follow Caffe's prototxts ("conv3_2", "fc6").
//
//===----------------------------------------------------------------------===//
#include "models/Families.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>

namespace memfit::zoo {

namespace {

constexpr int64_t kVggChannels[5] = {64, 128, 256, 512, 512};

/// The VGG feature extractor: groups of 3x3 conv + ReLU, each closed by a
/// 2x2 max pool.
Val vggFeatures(GraphBuilder &b, Val x, llvm::ArrayRef<int64_t> convsPerGroup) {
  assert(convsPerGroup.size() == 5);
  for (int g = 0; g < 5; ++g) {
    for (int64_t i = 1; i <= convsPerGroup[g]; ++i) {
      std::string id = llvm::formatv("{0}_{1}", g + 1, i).str();
      x = b.conv("conv" + id, x,
                 {.outChannels = kVggChannels[g], .kernel = 3, .pad = 1});
      x = b.relu("relu" + id, x);
    }
    x = b.maxPool("pool" + std::to_string(g + 1), x,
                  {.kernel = 2, .stride = 2});
  }
  return x;
}

} // namespace

Val buildAlexNet(GraphBuilder &b) {
  // Caffe's bvlc_alexnet: grouped conv2/4/5 (the two-GPU split), LRN after
  // the first two ReLUs. Caffe pools round up; at the default 227 input
  // every pool divides exactly, so floor-mode ONNX pools give Caffe's shapes.
  Val x = b.imageInput(3);
  x = b.conv("conv1", x, {.outChannels = 96, .kernel = 11, .stride = 4});
  x = b.relu("relu1", x);
  x = b.lrn("norm1", x, 5, 1e-4f, 0.75f, 1.0f);
  x = b.maxPool("pool1", x, {.kernel = 3, .stride = 2});
  x = b.conv("conv2", x,
             {.outChannels = 256, .kernel = 5, .pad = 2, .group = 2});
  x = b.relu("relu2", x);
  x = b.lrn("norm2", x, 5, 1e-4f, 0.75f, 1.0f);
  x = b.maxPool("pool2", x, {.kernel = 3, .stride = 2});
  x = b.conv("conv3", x, {.outChannels = 384, .kernel = 3, .pad = 1});
  x = b.relu("relu3", x);
  x = b.conv("conv4", x,
             {.outChannels = 384, .kernel = 3, .pad = 1, .group = 2});
  x = b.relu("relu4", x);
  x = b.conv("conv5", x,
             {.outChannels = 256, .kernel = 3, .pad = 1, .group = 2});
  x = b.relu("relu5", x);
  x = b.maxPool("pool5", x, {.kernel = 3, .stride = 2});
  x = b.flatten("flatten", x);
  x = b.gemm("fc6", x, 4096);
  x = b.relu("relu6", x);
  x = b.dropout("drop6", x, 0.5f);
  x = b.gemm("fc7", x, 4096);
  x = b.relu("relu7", x);
  x = b.dropout("drop7", x, 0.5f);
  return b.gemm("fc8", x, b.numClasses());
}

Val buildVgg(GraphBuilder &b, llvm::ArrayRef<int64_t> convsPerGroup) {
  // torchvision's classifier; its adaptive 7x7 average pool is the identity
  // at 224 and is left out, so other image sizes change fc6's input.
  Val x = vggFeatures(b, b.imageInput(3), convsPerGroup);
  x = b.flatten("flatten", x);
  x = b.gemm("fc6", x, 4096);
  x = b.relu("relu6", x);
  x = b.dropout("drop6", x, 0.5f);
  x = b.gemm("fc7", x, 4096);
  x = b.relu("relu7", x);
  x = b.dropout("drop7", x, 0.5f);
  return b.gemm("fc8", x, b.numClasses());
}

Val buildFcn(GraphBuilder &b) {
  // VGG-16 convolutionalised as in FCN (Long et al.): fc6/fc7 become 7x7 and
  // 1x1 convolutions, a 1x1 convolution scores the classes. fc6 is padded so
  // that the stride-32 score map keeps its size; global average pooling
  // replaces the upsampling head because memfit trains per-image labels.
  const int64_t groups[5] = {2, 2, 3, 3, 3};
  Val x = vggFeatures(b, b.imageInput(3), groups);
  x = b.conv("fc6", x, {.outChannels = 4096, .kernel = 7, .pad = 3});
  x = b.relu("relu6", x);
  x = b.dropout("drop6", x, 0.5f);
  x = b.conv("fc7", x, {.outChannels = 4096, .kernel = 1});
  x = b.relu("relu7", x);
  x = b.dropout("drop7", x, 0.5f);
  x = b.conv("score", x, {.outChannels = b.numClasses(), .kernel = 1});
  x = b.globalAvgPool("score_pool", x);
  return b.flatten("flatten", x);
}

} // namespace memfit::zoo
