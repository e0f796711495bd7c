//===- GraphBuilder.h - ONNX graph construction for the zoo -----*- C++ -*-===//
//
// Builds an ONNX graph one operator at a time while tracking every value's
// shape (without the batch axis), so that model code can size classifiers
// from the shapes it produces and an image too small for a model is caught
// by name. Each operator's node name doubles as its output's value name and
// as the prefix of its weights ("conv1.weight", "bn1.running_var"), which
// keeps names unique and readable.
//
// Weights are recorded as specifications and materialised only in finish():
// as initializers with deterministic values, or as graph inputs without data.
// Constants of the model (reshape targets, masks, rotary frequencies) are
// Constant nodes, written either way. Families written operator by operator
// (the transformers) use the generic node(), param() and const*() blocks.
// A shape error is sticky: later operators still build (with placeholder
// sizes) and finish() reports the first error.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_MODELS_GRAPHBUILDER_H
#define MEMFIT_MODELS_GRAPHBUILDER_H

#include "models/WeightInit.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memfit::zoo {

/// A value of the graph under construction.
struct Val {
  int32_t id = -1;
};

struct ConvSpec {
  int64_t outChannels = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t pad = 0;
  int64_t group = 1;
  bool bias = true;
};

struct PoolSpec {
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t pad = 0;
};

/// An attribute of a node built with GraphBuilder::node().
struct NodeAttr {
  enum Kind : uint8_t { Int, Ints, Float } kind = Int;
  std::string name;
  std::vector<int64_t> ints;
  float f = 0;

  static NodeAttr i(llvm::StringRef name, int64_t v) {
    return {Int, name.str(), {v}, 0};
  }
  static NodeAttr is(llvm::StringRef name, std::vector<int64_t> v) {
    return {Ints, name.str(), std::move(v), 0};
  }
  static NodeAttr fl(llvm::StringRef name, float v) {
    return {Float, name.str(), {}, v};
  }
};

class GraphBuilder {
public:
  GraphBuilder(std::string modelName, int64_t batch, int64_t numClasses,
               int64_t imageSize, int64_t seqLen = 0);

  int64_t numClasses() const { return numClasses_; }
  int64_t imageSize() const { return imageSize_; }
  int64_t seqLen() const { return seqLen_; }
  /// A language model's vocabulary: the one set (ZooOptions::vocab), else
  /// the model's own.
  int64_t vocab(int64_t modelDefault) const {
    return vocab_ > 0 ? vocab_ : modelDefault;
  }
  void setVocab(int64_t vocab) { vocab_ = vocab; }
  /// A language model's decoder blocks: the count set
  /// (ZooOptions::layers), else the model's own.
  int64_t layers(int64_t modelDefault) const {
    return layers_ > 0 ? layers_ : modelDefault;
  }
  void setLayers(int64_t layers) { layers_ = layers; }
  /// The opset the model imports (13 unless a family needs newer
  /// operators, such as LayerNormalization of opset 17).
  void setOpset(int64_t opset) { opset_ = opset; }

  /// The model input "input": [N, channels, imageSize, imageSize].
  Val imageInput(int64_t channels);
  /// The model input "input": [N, features].
  Val vectorInput(int64_t features);
  /// The model input "input": int64 token ids [N, seqLen].
  Val tokenInput();

  // Building blocks for families written operator by operator (the
  // transformers). A value's shape excludes the batch axis when it is
  // computed from the input, and is the full shape of a weight or constant.

  /// A trainable weight named `name` (the full name), as an operand.
  Val param(llvm::StringRef name, std::vector<int64_t> dims, WeightFill fill,
            int64_t fanIn = 0, int64_t fanOut = 0);
  /// A constant of the model (a Constant node, written with or without
  /// weights): float or int64 contents of the given dims.
  Val constFloats(llvm::StringRef name, std::vector<int64_t> dims,
                  std::vector<float> values);
  Val constInts(llvm::StringRef name, std::vector<int64_t> dims,
                std::vector<int64_t> values);
  /// A node of any type; its output has `shape` (without the batch axis
  /// when computed from the input).
  Val node(llvm::StringRef opType, llvm::StringRef name,
           llvm::ArrayRef<Val> inputs, std::vector<int64_t> shape,
           llvm::ArrayRef<NodeAttr> attrs = {});

  Val conv(llvm::StringRef name, Val x, const ConvSpec &spec);
  Val relu(llvm::StringRef name, Val x);
  Val maxPool(llvm::StringRef name, Val x, const PoolSpec &spec);
  Val avgPool(llvm::StringRef name, Val x, const PoolSpec &spec);
  Val globalAvgPool(llvm::StringRef name, Val x);
  /// Local response normalisation across channels (Caffe/AlexNet form).
  Val lrn(llvm::StringRef name, Val x, int64_t size, float alpha, float beta,
          float bias);
  /// BatchNormalization with scale, B, running mean and variance weights.
  Val batchNorm(llvm::StringRef name, Val x, float epsilon = 1e-5f);
  Val flatten(llvm::StringRef name, Val x);
  /// Fully connected layer: Gemm(x, weight^T, bias), weight [out, in].
  Val gemm(llvm::StringRef name, Val x, int64_t outFeatures);
  /// Training-mode Dropout: ratio and training_mode as scalar initializers.
  Val dropout(llvm::StringRef name, Val x, float ratio);
  Val add(llvm::StringRef name, Val a, Val b);
  /// Concatenation along channels.
  Val concat(llvm::StringRef name, llvm::ArrayRef<Val> xs);

  /// Shape of `v` without the batch axis.
  const std::vector<int64_t> &shape(Val v) const;

  /// Names `output` "output", materialises the weights and serializes.
  /// Call once: the graph moves into the returned model.
  llvm::Expected<std::string> finish(Val output, bool withWeights,
                                     llvm::StringRef docString);

private:
  struct ValueRec {
    std::string name;
    std::vector<int64_t> shape; // without the batch axis
    int32_t producer = -1; // node index; -1 for the model input, -2 weights
  };

  onnx::NodeProto &addNode(llvm::StringRef opType, llvm::StringRef name,
                           llvm::ArrayRef<Val> inputs);
  Val addValue(llvm::StringRef name, std::vector<int64_t> shape,
               int32_t producer);
  std::string addWeight(llvm::StringRef node, llvm::StringRef suffix,
                        std::vector<int64_t> dims, WeightFill fill,
                        int64_t fanIn = 0, int64_t fanOut = 0);
  Val pool(llvm::StringRef opType, llvm::StringRef name, Val x,
           const PoolSpec &spec);
  int64_t windowOut(llvm::StringRef node, int64_t in, int64_t kernel,
                    int64_t stride, int64_t pad);
  void fail(std::string msg);
  void setTensorType(onnx::ValueInfoProto &info, llvm::ArrayRef<int64_t> dims,
                     bool batched,
                     int32_t elemType = onnx::TensorProto::FLOAT) const;
  onnx::TensorProto &addConstantNode(llvm::StringRef name,
                                     llvm::ArrayRef<int64_t> dims);

  std::string modelName_;
  int64_t batch_;
  int64_t numClasses_;
  int64_t imageSize_;
  int64_t seqLen_;
  int64_t vocab_ = 0;
  int64_t layers_ = 0;
  int64_t opset_ = 13;
  onnx::GraphProto graph_;
  std::vector<ValueRec> values_;
  std::vector<WeightSpec> weights_;
  llvm::StringSet<> nodeNames_;
  llvm::StringSet<> valueNames_;
  std::string error_;
};

} // namespace memfit::zoo

#endif
