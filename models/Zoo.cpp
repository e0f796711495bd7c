//===- Zoo.cpp - Model names, options and the zoo entry point -------------===//
//
// Maps a model name (fixed, or parametric: resnet-N, vgg-N) to a network
// family and its configuration, resolves the options against the model's
// defaults, and serializes the result. Names come from users: they are
// validated here and quoted in messages.
//
//===----------------------------------------------------------------------===//
#include "models/Zoo.h"

#include "compiler/support/Diagnostics.h"
#include "models/Families.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <functional>

namespace memfit {

using zoo::GraphBuilder;
using zoo::Val;

namespace {

constexpr int64_t kImageNetClasses = 1000;
constexpr int64_t kTinyClasses = 10;
constexpr int64_t kTinyImage = 8;
constexpr int64_t kMaxClasses = int64_t(1) << 24;
constexpr int64_t kMaxImageSize = 16384;
// Parametric depths up to this many layers (10x the deepest networks of the
// papers); beyond it the graph itself would take gigabytes.
constexpr int64_t kMaxDepth = 100000;

struct Model {
  std::string name;
  std::string description;
  bool tiny = false;
  int64_t defaultImage = 224; // 0: the input is a feature vector
  std::function<Val(GraphBuilder &)> build;
};

const std::vector<Model> &fixedModels() {
  static const std::vector<Model> models = [] {
    std::vector<Model> m;
    m.push_back({"alexnet",
                 "AlexNet as in Caffe (LRN, grouped conv2/4/5), 227x227 input",
                 false, 227, zoo::buildAlexNet});
    m.push_back({"vgg16", "VGG-16: 13 conv + 3 FC (torchvision layout)", false,
                 224, [](GraphBuilder &b) {
                   return zoo::buildVgg(b, {2, 2, 3, 3, 3});
                 }});
    m.push_back({"vgg19", "VGG-19: 16 conv + 3 FC (torchvision layout)", false,
                 224, [](GraphBuilder &b) {
                   return zoo::buildVgg(b, {2, 2, 4, 4, 4});
                 }});
    m.push_back({"vgg101",
                 "moDNN's VGG-101: VGG-19 deepened to 98 conv + 3 FC "
                 "(groups 2, 2, 32, 31, 31)",
                 false, 224, [](GraphBuilder &b) {
                   return zoo::buildVgg(b, {2, 2, 32, 31, 31});
                 }});
    struct TvResNet {
      const char *name, *description;
      bool bottleneck;
      std::array<int64_t, 4> blocks;
    };
    for (const TvResNet &r : {TvResNet{"resnet18",
                                       "ResNet-18 (torchvision, basic blocks)",
                                       false,
                                       {2, 2, 2, 2}},
                              TvResNet{"resnet34",
                                       "ResNet-34 (torchvision, basic blocks)",
                                       false,
                                       {3, 4, 6, 3}},
                              TvResNet{"resnet50",
                                       "ResNet-50 (torchvision, bottlenecks)",
                                       true,
                                       {3, 4, 6, 3}},
                              TvResNet{"resnet101",
                                       "ResNet-101 (torchvision, bottlenecks)",
                                       true,
                                       {3, 4, 23, 3}},
                              TvResNet{"resnet152",
                                       "ResNet-152 (torchvision, bottlenecks)",
                                       true,
                                       {3, 8, 36, 3}}})
      m.push_back({r.name, r.description, false, 224, [r](GraphBuilder &b) {
                     return zoo::buildResNet(b, r.bottleneck, r.blocks);
                   }});
    m.push_back({"googlenet",
                 "GoogLeNet / Inception v1 (Caffe bvlc_googlenet, no "
                 "auxiliary classifiers)",
                 false, 224, zoo::buildGoogLeNet});
    m.push_back({"densenet121", "DenseNet-121 (torchvision)", false, 224,
                 zoo::buildDenseNet121});
    m.push_back({"fcn",
                 "fully convolutional VGG-16 (FCN-32s body, 1x1 score conv, "
                 "global average pool, no Gemm)",
                 false, 224, zoo::buildFcn});
    m.push_back(
        {"mlp", "tiny: Gemm-Relu-Gemm on 16 features", true, 0, zoo::buildMlp});
    m.push_back({"tiny-cnn",
                 "tiny: conv-relu-maxpool-conv-relu-gap-flatten-gemm on 3x8x8",
                 true, kTinyImage, zoo::buildTinyCnn});
    m.push_back({"tiny-residual", "tiny: a residual block joined by Add", true,
                 kTinyImage, zoo::buildTinyResidual});
    m.push_back({"tiny-inception", "tiny: three branches joined by Concat",
                 true, kTinyImage, zoo::buildTinyInception});
    m.push_back({"tiny-bn", "tiny: conv-BatchNormalization-relu", true,
                 kTinyImage, zoo::buildTinyBn});
    m.push_back({"tiny-dropout", "tiny: Gemm-Relu-Dropout-Gemm on 16 features",
                 true, 0, zoo::buildTinyDropout});
    return m;
  }();
  return models;
}

const char *const kResNetRule =
    "resnet-N takes a depth N = 3k + 2 with k >= 4 bottleneck units "
    "(N >= 14, e.g. 50, 101, 152, 1001)";
const char *const kVggRule =
    "vgg-N takes N = 16 + 5k convolutions with k >= 1 (vDNN's vgg-116, "
    "vgg-216, vgg-316, vgg-416)";

std::string availableNames() {
  std::string s;
  for (const ZooEntry &e : zooModels()) {
    if (!s.empty())
      s += ", ";
    s += e.name;
  }
  return s;
}

/// Parses the N of a parametric name; false unless it is canonical decimal.
bool parseDepth(llvm::StringRef digits, int64_t &n) {
  if (digits.empty() || digits.size() > 9 || digits.front() == '0' ||
      !llvm::all_of(digits, llvm::isDigit))
    return false;
  return !digits.getAsInteger(10, n);
}

llvm::Expected<Model> parametricResNet(const std::string &name,
                                       llvm::StringRef digits) {
  int64_t depth = 0;
  if (!parseDepth(digits, depth))
    return makeErrorF("invalid model name {0}: {1}", quoteName(name),
                      kResNetRule);
  if (depth < 14 || depth > kMaxDepth)
    return makeErrorF("invalid model name {0}: {1}, up to {2}", quoteName(name),
                      kResNetRule, kMaxDepth);
  if ((depth - 2) % 3 != 0) {
    int64_t below = depth - (depth - 2) % 3;
    return makeErrorF("invalid model name {0}: {1}; the nearest depths are "
                      "{2} and {3}",
                      quoteName(name), kResNetRule, below, below + 3);
  }
  int64_t units = (depth - 2) / 3;
  auto split = zoo::preActStageUnits(units);
  std::string description = llvm::formatv(
      "pre-activation bottleneck ResNet, {0} layers: {1} units split {2}, "
      "{3}, {4}, {5} over the four stages",
      depth, units, split[0], split[1], split[2], split[3]);
  return Model{name, description, false, 224, [units](GraphBuilder &b) {
                 return zoo::buildPreActResNet(b, units);
               }};
}

llvm::Expected<Model> parametricVgg(const std::string &name,
                                    llvm::StringRef digits) {
  int64_t convs = 0;
  if (!parseDepth(digits, convs) || convs < 21 || (convs - 16) % 5 != 0 ||
      convs > kMaxDepth)
    return makeErrorF("invalid model name {0}: {1}, up to {2}", quoteName(name),
                      kVggRule, kMaxDepth);
  // vDNN's base is the 16-convolution VGG (groups 2, 2, 4, 4, 4); every 100
  // extra layers add 20 to each of the five groups.
  int64_t k = (convs - 16) / 5;
  std::string description = llvm::formatv(
      "vDNN's very deep VGG: {0} conv + 3 FC (groups {1}, {1}, {2}, {2}, {2})",
      convs, 2 + k, 4 + k);
  return Model{name, description, false, 224, [k](GraphBuilder &b) {
                 return zoo::buildVgg(b, {2 + k, 2 + k, 4 + k, 4 + k, 4 + k});
               }};
}

llvm::Expected<Model> resolveModel(const std::string &name) {
  for (const Model &m : fixedModels())
    if (m.name == name)
      return m;
  llvm::StringRef ref(name);
  if (ref.startswith("resnet-"))
    return parametricResNet(name, ref.drop_front(7));
  if (ref.startswith("vgg-"))
    return parametricVgg(name, ref.drop_front(4));
  return makeErrorF("unknown model {0}; available models: {1}", quoteName(name),
                    availableNames());
}

} // namespace

const std::vector<ZooEntry> &zooModels() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> e;
    for (const Model &m : fixedModels()) {
      e.push_back({m.name, m.description, m.tiny});
      // Parametric families are listed beside their fixed relatives.
      if (m.name == "vgg101")
        e.push_back({"vgg-N",
                     "vDNN's very deep VGG with N = 16 + 5k conv layers + 3 "
                     "FC (vgg-116, vgg-216, vgg-316, vgg-416)",
                     false});
      if (m.name == "resnet152")
        e.push_back({"resnet-N",
                     "pre-activation bottleneck ResNet of depth N = 3k + 2 "
                     "(k units over 4 stages in ResNet-50's 3:4:6:3 ratio)",
                     false});
    }
    return e;
  }();
  return entries;
}

bool isTinyZooModel(const std::string &name) {
  auto m = resolveModel(name);
  if (!m) {
    llvm::consumeError(m.takeError());
    return false;
  }
  return m->tiny;
}

llvm::Expected<std::string> buildZooModel(const std::string &name,
                                          const ZooOptions &opts) {
  auto model = resolveModel(name);
  if (!model)
    return model.takeError();
  if (opts.batch < 0)
    return makeErrorF("batch size must be positive, or 0 for a symbolic "
                      "batch; got {0}",
                      opts.batch);
  if (opts.numClasses < 0 || opts.numClasses > kMaxClasses)
    return makeErrorF("number of classes must be between 1 and {0} (0 for "
                      "the model's default); got {1}",
                      kMaxClasses, opts.numClasses);
  if (opts.imageSize < 0 || opts.imageSize > kMaxImageSize)
    return makeErrorF("image size must be between 1 and {0} (0 for the "
                      "model's default); got {1}",
                      kMaxImageSize, opts.imageSize);
  if (model->defaultImage == 0 && opts.imageSize != 0)
    return makeErrorF("model {0} takes a feature vector, not an image; "
                      "an image size does not apply",
                      quoteName(model->name));

  int64_t classes = opts.numClasses != 0
                        ? opts.numClasses
                        : (model->tiny ? kTinyClasses : kImageNetClasses);
  int64_t image = opts.imageSize != 0 ? opts.imageSize : model->defaultImage;
  GraphBuilder builder(model->name, opts.batch, classes, image);
  Val out = model->build(builder);
  std::string doc = model->name + ": " + model->description +
                    ". Written by memfit zoo with " + std::to_string(classes) +
                    " classes";
  if (image != 0)
    doc +=
        ", " + std::to_string(image) + "x" + std::to_string(image) + " images";
  doc += opts.withWeights ? ", deterministic initial weights."
                          : ", weights declared as inputs without data.";
  return builder.finish(out, opts.withWeights, doc);
}

} // namespace memfit
