//===- Fold.h - Shared pieces of the constant folds -------------*- C++ -*-===//
//
// FoldShapes.cpp folds shape arithmetic (following the symbolic batch);
// FoldLiterals.cpp folds the literal, mask and position arithmetic
// exporters leave in graphs (comparisons, Trilu, rotary tables). Both
// build ConstTensors with these helpers.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_ONNX_FOLD_H
#define MEMFIT_COMPILER_ONNX_FOLD_H

#include "compiler/onnx/Importer.h"

#include <algorithm>
#include <optional>

namespace memfit::onnximport {

/// Appends element `k` of `src` to `dst` (same element kind).
inline void appendElem(ConstTensor &dst, const ConstTensor &src, int64_t k) {
  if (src.isFloat()) {
    dst.floats.push_back(src.floats[k]);
    return;
  }
  dst.ints.push_back(src.ints[k]);
  dst.batch.push_back(src.isBatch(k) ? 1 : 0);
}

/// Drops the batch marks when no element is the batch.
inline void finish(ConstTensor &t) {
  if (std::find(t.batch.begin(), t.batch.end(), 1) == t.batch.end())
    t.batch.clear();
}

inline int64_t prod(const std::vector<int64_t> &dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i)
    n *= dims[i];
  return n;
}

/// The literal folds of FoldLiterals.cpp; nullopt when `n`'s op is not
/// one of them.
std::optional<llvm::Expected<ConstTensor>> foldLiteral(Importer &im,
                                                       const pb::NodeProto &n);

} // namespace memfit::onnximport

#endif
