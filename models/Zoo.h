//===- Zoo.h - Model zoo generator ------------------------------*- C++ -*-===//
//
// Writes the networks of the papers memfit reproduces (AlexNet, VGG and its
// deep variants, ResNets of any depth, GoogLeNet, DenseNet-121, an FCN),
// the decoders people fine-tune today (GPT-2, Llama-2 7B to 70B) and tiny
// test models as ONNX ModelProto bytes: opset 13 (17 where LayerNormalization
// is used), IR version 8, valid for the ONNX checker and shape inference. The
// output depends only on the name and the options: building twice gives
// identical bytes.
//
// docs/model-zoo.md describes every model, its source and its parameter
// count.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_MODELS_ZOO_H
#define MEMFIT_MODELS_ZOO_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace memfit {

struct ZooOptions {
  /// Batch dimension of "input" and "output"; 0 writes the symbolic
  /// dim_param "N".
  int64_t batch = 0;
  /// true: weights are initializers holding deterministic pseudo-random
  /// values (He uniform for convolutions, Glorot uniform for Gemm, BatchNorm
  /// scale 1, bias 0, mean 0, variance 1). false: weights are graph inputs
  /// with shapes but no data.
  bool withWeights = false;
  /// Classifier outputs; 0 = the model's default (1000, or 10 for tiny
  /// models).
  int64_t numClasses = 0;
  /// Height and width of the image input; 0 = the model's default (227 for
  /// alexnet, 224 for the ImageNet models, 8 for tiny image models). Models
  /// with a feature-vector input reject any other value.
  int64_t imageSize = 0;
  /// Tokens per sequence of a language model; 0 = its default, the context
  /// length (1024 for GPT-2, 4096 for Llama-2, 2048 for llama-1b, 16 for
  /// the tiny ones), which is also the longest it takes. Other models
  /// reject any other value, and language models reject numClasses.
  int64_t seqLen = 0;
  /// Tokens of a language model's vocabulary (its embedding's and head's
  /// rows); 0 = its own. Other models reject any other value.
  int64_t vocab = 0;
  /// Decoder blocks of a language model; 0 = its own. The same blocks at
  /// another depth: a model between the published sizes (GPT-3 175B's
  /// blocks 66 deep are 120B). Other models reject any other value.
  int64_t layers = 0;
};

struct ZooEntry {
  std::string name; // a buildable name, or a pattern such as "resnet-N"
  std::string description;
  bool tiny = false; // small enough to train on a CPU in tests
};

/// Every model and name pattern the zoo knows, in listing order.
const std::vector<ZooEntry> &zooModels();

/// Whether `name` is a tiny model (the CLI writes those with weights by
/// default). False for names the zoo does not know.
bool isTinyZooModel(const std::string &name);

/// Builds model `name` and returns its serialized ModelProto. Fails on an
/// unknown name (the message lists the available ones), invalid options, an
/// image size the model cannot take, or weights beyond what one ONNX file
/// holds (2 GiB).
llvm::Expected<std::string> buildZooModel(const std::string &name,
                                          const ZooOptions &opts);

} // namespace memfit

#endif
