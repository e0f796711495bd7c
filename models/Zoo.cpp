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
#include <utility>

namespace memfit {

using zoo::GraphBuilder;
using zoo::Val;

namespace {

constexpr int64_t kImageNetClasses = 1000;
constexpr int64_t kTinyClasses = 10;
constexpr int64_t kTinyImage = 8;
constexpr int64_t kMaxClasses = int64_t(1) << 24;
constexpr int64_t kMaxImageSize = 16384;
constexpr int64_t kMaxSeqLen = int64_t(1) << 20;
/// Past this a vocabulary is a typo: the largest in use are near 256k.
constexpr int64_t kMaxVocab = int64_t(1) << 22;
// Parametric depths up to this many layers (10x the deepest networks of the
// papers); beyond it the graph itself would take gigabytes.
constexpr int64_t kMaxDepth = 100000;

struct Model {
  std::string name;
  std::string description;
  bool tiny = false;
  int64_t defaultImage = 224; // 0: the input is a feature vector or tokens
  std::function<Val(GraphBuilder &)> build;
  /// Language models: the default and the longest sequence (the context
  /// length); 0 for the others.
  int64_t defaultSeqLen = 0;
  int64_t maxSeqLen = 0;
};

/// The decoders: GPT-2 at the OpenAI/Hugging Face configurations, GPT-3's
/// 13B and 175B (the offload papers' models), Llama-2
/// 7B/13B/70B, TinyLlama-1.1B as llama-1b, and two tiny ones for tests.
void addLanguageModels(std::vector<Model> &m) {
  struct Gpt2 {
    const char *name, *description;
    zoo::Gpt2Config config;
  };
  for (const Gpt2 &g : {Gpt2{"gpt2",
                             "GPT-2 (124M): 12 layers, width 768, 12 heads",
                             {12, 768, 12}},
                        Gpt2{"gpt2-medium",
                             "GPT-2 medium (355M): 24 layers, width 1024, 16 "
                             "heads",
                             {24, 1024, 16}},
                        Gpt2{"gpt2-large",
                             "GPT-2 large (774M): 36 layers, width 1280, 20 "
                             "heads",
                             {36, 1280, 20}},
                        Gpt2{"gpt2-xl",
                             "GPT-2 XL (1.5B): 48 layers, width 1600, 25 heads",
                             {48, 1600, 25}},
                        // GPT-3's sizes (Brown et al. 2020, Table 2.1) as
                        // GPT-2 blocks with dense attention throughout;
                        // 13B's width is its heads x 128 (the table's
                        // 5140 is not a multiple of 40).
                        Gpt2{"gpt3-13b",
                             "GPT-3 13B: 40 layers, width 5120, 40 heads, "
                             "context 2048",
                             {40, 5120, 40, 50257, 2048}},
                        Gpt2{"gpt3-175b",
                             "GPT-3 175B: 96 layers, width 12288, 96 heads, "
                             "context 2048",
                             {96, 12288, 96, 50257, 2048}}}) {
    zoo::Gpt2Config c = g.config;
    m.push_back({g.name, g.description, false, 0,
                 [c](GraphBuilder &b) { return zoo::buildGpt2(b, c); },
                 c.positions, c.positions});
  }
  struct Llama {
    const char *name, *description;
    zoo::LlamaConfig config;
    int64_t context;
  };
  for (const Llama &l :
       {Llama{"llama-1b",
              "TinyLlama-1.1B (Llama-2 architecture): 22 layers, width 2048, "
              "32 heads, 4 key/value heads, MLP 5632",
              {22, 2048, 32, 4, 5632},
              2048},
        Llama{"llama-7b",
              "Llama-2-7B: 32 layers, width 4096, 32 heads, MLP 11008",
              {32, 4096, 32, 32, 11008},
              4096},
        Llama{"llama3-8b",
              "Llama-3-8B: 32 layers, width 4096, 32 heads, 8 key/value "
              "heads, MLP 14336, vocabulary 128256, context 8192",
              {32, 4096, 32, 8, 14336, 128256, 500000.0f},
              8192},
        Llama{"llama-13b",
              "Llama-2-13B: 40 layers, width 5120, 40 heads, MLP 13824",
              {40, 5120, 40, 40, 13824},
              4096},
        Llama{"llama-70b",
              "Llama-2-70B: 80 layers, width 8192, 64 heads, 8 key/value "
              "heads, MLP 28672",
              {80, 8192, 64, 8, 28672},
              4096}}) {
    zoo::LlamaConfig c = l.config;
    m.push_back({l.name, l.description, false, 0,
                 [c](GraphBuilder &b) { return zoo::buildLlama(b, c); },
                 l.context, l.context});
  }
  zoo::Gpt2Config tinyGpt{2, 32, 4, 61, 16};
  m.push_back(
      {"gpt2-tiny",
       "tiny: GPT-2 of 2 layers, width 32, 4 heads, 61 tokens, T 16", true, 0,
       [tinyGpt](GraphBuilder &b) { return zoo::buildGpt2(b, tinyGpt); }, 16,
       16});
  zoo::LlamaConfig tinyLlama{2, 32, 4, 2, 64, 61};
  m.push_back(
      {"llama-tiny",
       "tiny: Llama of 2 layers, width 32, 4 heads, 2 key/value heads, MLP "
       "64, 61 tokens, T 16",
       true, 0,
       [tinyLlama](GraphBuilder &b) { return zoo::buildLlama(b, tinyLlama); },
       16, 16});
}

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
    addLanguageModels(m);
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
  if (opts.seqLen < 0 || opts.seqLen > kMaxSeqLen)
    return makeErrorF("sequence length must be between 1 and {0} (0 for "
                      "the model's default); got {1}",
                      kMaxSeqLen, opts.seqLen);
  bool language = model->defaultSeqLen != 0;
  if (model->defaultImage == 0 && opts.imageSize != 0)
    return makeErrorF("model {0} takes {1}, not an image; an image size does "
                      "not apply",
                      quoteName(model->name),
                      language ? "token ids" : "a feature vector");
  // Options of language models alone.
  for (auto [set, what] :
       {std::pair{opts.seqLen != 0, "a sequence length"},
        std::pair{opts.vocab != 0, "a vocabulary"},
        std::pair{opts.layers != 0, "a number of decoder layers"}})
    if (!language && set)
      return makeErrorF("model {0} is not a language model; {1} does not "
                        "apply",
                        quoteName(model->name), what);
  if (language && opts.numClasses != 0)
    return makeErrorF("model {0} predicts tokens of its own vocabulary; a "
                      "number of classes does not apply",
                      quoteName(model->name));
  if (opts.vocab < 0 || opts.vocab > kMaxVocab)
    return makeErrorF("vocabulary must be between 1 and {0} tokens (0 for "
                      "the model's own); got {1}",
                      kMaxVocab, opts.vocab);
  if (opts.layers < 0 || opts.layers > kMaxDepth)
    return makeErrorF("layers must be between 1 and {0} (0 for the model's "
                      "own); got {1}",
                      kMaxDepth, opts.layers);
  if (language && opts.seqLen > model->maxSeqLen)
    return makeErrorF("model {0} takes sequences of up to {1} tokens (its "
                      "context length); got {2}",
                      quoteName(model->name), model->maxSeqLen, opts.seqLen);

  int64_t classes = opts.numClasses != 0
                        ? opts.numClasses
                        : (model->tiny ? kTinyClasses : kImageNetClasses);
  int64_t image = opts.imageSize != 0 ? opts.imageSize : model->defaultImage;
  int64_t seqLen = opts.seqLen != 0 ? opts.seqLen : model->defaultSeqLen;
  GraphBuilder builder(model->name, opts.batch, classes, image, seqLen);
  builder.setVocab(opts.vocab);
  builder.setLayers(opts.layers);
  Val out = model->build(builder);
  std::string doc =
      model->name + ": " + model->description + ". Written by memfit zoo";
  if (opts.layers != 0)
    doc += ", " + std::to_string(opts.layers) + " decoder layers";
  if (language)
    doc += " for sequences of " + std::to_string(seqLen) + " tokens";
  else
    doc += " with " + std::to_string(classes) + " classes";
  if (image != 0)
    doc +=
        ", " + std::to_string(image) + "x" + std::to_string(image) + " images";
  doc += opts.withWeights ? ", deterministic initial weights."
                          : ", weights declared as inputs without data.";
  return builder.finish(out, opts.withWeights, doc);
}

} // namespace memfit
