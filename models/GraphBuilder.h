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

class GraphBuilder {
public:
  GraphBuilder(std::string modelName, int64_t batch, int64_t numClasses,
               int64_t imageSize);

  int64_t numClasses() const { return numClasses_; }
  int64_t imageSize() const { return imageSize_; }

  /// The model input "input": [N, channels, imageSize, imageSize].
  Val imageInput(int64_t channels);
  /// The model input "input": [N, features].
  Val vectorInput(int64_t features);

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
    int32_t producer = -1;      // node index, -1 for the model input
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
                     bool batched) const;

  std::string modelName_;
  int64_t batch_;
  int64_t numClasses_;
  int64_t imageSize_;
  onnx::GraphProto graph_;
  std::vector<ValueRec> values_;
  std::vector<WeightSpec> weights_;
  llvm::StringSet<> nodeNames_;
  llvm::StringSet<> valueNames_;
  std::string error_;
};

} // namespace memfit::zoo

#endif
