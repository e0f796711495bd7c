//===- ZooTestUtil.h - Inspecting zoo models in tests -----------*- C++ -*-===//
//
// Parses a zoo model, runs the ONNX checker and strict shape inference on
// it, and answers questions about its structure (shapes, op counts,
// parameter counts) from the ONNX proto alone, independently of the
// builder that wrote it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_ZOOTESTUTIL_H
#define MEMFIT_TESTS_ZOOTESTUTIL_H

#include "models/Zoo.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace memfit::test {

/// Dims of a tensor type; -1 for a symbolic dimension.
inline std::vector<int64_t> dimsOf(const onnx::TypeProto &type) {
  std::vector<int64_t> dims;
  for (const auto &d : type.tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

struct InspectedModel {
  onnx::ModelProto proto;
  /// Inferred shapes of every value (from shape inference) and of the
  /// graph inputs and outputs.
  std::map<std::string, std::vector<int64_t>> shapes;

  const onnx::GraphProto &graph() const { return proto.graph(); }

  int countOps(const std::string &opType) const {
    int n = 0;
    for (const auto &node : graph().node())
      n += node.op_type() == opType;
    return n;
  }

  const onnx::NodeProto *node(const std::string &name) const {
    for (const auto &node : graph().node())
      if (node.name() == name)
        return &node;
    return nullptr;
  }

  /// Shape of a weight, from its initializer or its declared input.
  std::vector<int64_t> weightDims(const std::string &name) const {
    for (const auto &t : graph().initializer())
      if (t.name() == name)
        return {t.dims().begin(), t.dims().end()};
    for (const auto &in : graph().input())
      if (in.name() == name)
        return dimsOf(in.type());
    FAIL("no weight named " << name);
    return {};
  }

  /// Trainable parameters as torchvision counts them: every weight of a
  /// Conv, Gemm or BatchNormalization except BN's running statistics.
  int64_t trainableParams() const {
    int64_t total = 0;
    for (const auto &node : graph().node()) {
      int inputs = 0;
      if (node.op_type() == "Conv" || node.op_type() == "Gemm")
        inputs = node.input_size();
      else if (node.op_type() == "BatchNormalization")
        inputs = 3; // scale and B; mean and var are buffers
      for (int i = 1; i < inputs; ++i) {
        int64_t n = 1;
        for (int64_t d : weightDims(node.input(i)))
          n *= d;
        total += n;
      }
    }
    return total;
  }
};

/// Parses, checks and infers shapes; fails the test on any ONNX error.
inline InspectedModel inspect(const std::string &bytes) {
  InspectedModel m;
  REQUIRE(m.proto.ParseFromString(bytes));
  try {
    onnx::checker::check_model(m.proto);
    onnx::ShapeInferenceOptions options(/*check_type=*/true,
                                        /*strict_mode=*/1);
    onnx::shape_inference::InferShapes(
        m.proto, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception &e) {
    FAIL("onnx rejected the model: " << e.what());
  }
  for (const auto &vi : m.graph().value_info())
    m.shapes[vi.name()] = dimsOf(vi.type());
  for (const auto &vi : m.graph().input())
    m.shapes[vi.name()] = dimsOf(vi.type());
  for (const auto &vi : m.graph().output())
    m.shapes[vi.name()] = dimsOf(vi.type());
  return m;
}

inline InspectedModel buildAndInspect(const std::string &name,
                                      const ZooOptions &opts = {}) {
  auto bytes = buildZooModel(name, opts);
  if (!bytes)
    FAIL("building " << name
                     << " failed: " << llvm::toString(bytes.takeError()));
  return inspect(*bytes);
}

} // namespace memfit::test

#endif
