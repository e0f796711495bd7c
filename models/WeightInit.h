//===- WeightInit.h - Deterministic weight values for the zoo ---*- C++ -*-===//
//
// Weight values that depend only on the weight's name and shape: every
// tensor draws from its own SplitMix64 stream seeded with a hash of its
// name, and floats are formed from integer bits without library
// distributions, so the values are bit-identical on every platform and do
// not change when other weights are added or reordered.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_MODELS_WEIGHTINIT_H
#define MEMFIT_MODELS_WEIGHTINIT_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace memfit::zoo {

enum class WeightFill : uint8_t {
  HeUniform,     // U(-b, b), b = sqrt(6 / fanIn): convolutions before ReLU
  GlorotUniform, // U(-b, b), b = sqrt(6 / (fanIn + fanOut)): Gemm
  Zeros,
  Ones,
};

struct WeightSpec {
  std::string name;
  std::vector<int64_t> dims;
  WeightFill fill = WeightFill::Zeros;
  int64_t fanIn = 0;
  int64_t fanOut = 0;

  int64_t numElements() const;
};

/// The weight's values as little-endian fp32 bytes (ONNX raw_data).
std::string weightRawData(const WeightSpec &spec);

/// 64-bit FNV-1a, the per-tensor seed.
uint64_t hashName(llvm::StringRef name);

} // namespace memfit::zoo

#endif
