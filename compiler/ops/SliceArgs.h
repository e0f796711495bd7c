//===- SliceArgs.h - Slice's operands, read once ----------------*- C++ -*-===//
//
// Slice and Split are translated as operators on activations (Layout.cpp)
// and folded on constants (compiler/onnx); both read their operands here,
// so the two cannot disagree on defaults or opsets.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_OPS_SLICEARGS_H
#define MEMFIT_COMPILER_OPS_SLICEARGS_H

#include "compiler/ops/OnnxNode.h"

#include <cstdint>
#include <vector>

namespace memfit {

struct SliceArgs {
  /// One entry per sliced axis, as written (negative values not yet
  /// resolved against the extent).
  std::vector<int64_t> starts, ends, axes, steps;
  /// A start or end is the symbolic batch (x[:x.size(0)] keeps every
  /// sample); its entry holds the batch the model was written with.
  bool batchBound = false;
};

/// Operands 1 to 4 from opset 10, attributes before it; axes default to
/// 0, 1, ... and steps to 1. Fails, naming the node, when an operand is not
/// a 1-D integer constant or the four lists differ in length.
llvm::Expected<SliceArgs> sliceArgs(OnnxNode &node);

struct SplitArgs {
  int64_t axis = 0; // resolved against the rank
  /// One extent per output, covering the axis.
  std::vector<int64_t> sizes;
};

/// Split's axis and sizes for an input of `dims`: the `split` operand
/// (opset 13) or attribute (before), `num_outputs` (opset 18: parts of
/// ceil(extent / n), the last one smaller) or equal parts. Fails, naming
/// the node, when they do not cover the axis in the node's outputs.
llvm::Expected<SplitArgs> splitArgs(OnnxNode &node,
                                    const std::vector<int64_t> &dims);

} // namespace memfit

#endif
