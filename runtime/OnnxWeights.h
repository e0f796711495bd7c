//===- OnnxWeights.h - A trainer's weights in the ONNX model ----*- C++ -*-===//
//
// Reads the float32 initializers of the model a trainer was compiled from
// (its starting weights), and writes the trained weights into a copy of it
// that onnxruntime loads: initializers replaced in place, weights that the
// model declared as inputs without data become initializers. The copy is
// written to a temporary file and renamed.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_ONNXWEIGHTS_H
#define MEMFIT_RUNTIME_ONNXWEIGHTS_H

#include "runtime/Exec.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memfit::rt {

struct OnnxWeights {
  std::map<std::string, std::vector<float>> byName;
  const std::vector<float> *find(const std::string &name) const {
    auto it = byName.find(name);
    return it == byName.end() ? nullptr : &it->second;
  }
};

std::optional<OnnxWeights> readOnnxWeights(const std::string &path,
                                           std::string &err);

bool writeTrainedModel(const std::string &modelPath, const std::string &outPath,
                       const std::vector<WeightInfo> &weights,
                       const std::vector<std::vector<float>> &values,
                       std::string &err);

} // namespace memfit::rt

#endif
