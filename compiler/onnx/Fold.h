//===- Fold.h - Shared pieces of the constant folds -------------*- C++ -*-===//
//
// Which ONNX op types fold, and how, is one table (FoldTable.cpp) joined
// from a part per file: FoldShapes.cpp folds shape arithmetic (following
// the symbolic batch), FoldArith.cpp the arithmetic, comparisons and casts
// on shape vectors, FoldLiterals.cpp the literal, mask and position
// arithmetic exporters leave in graphs (comparisons, Trilu, rotary
// tables). All build ConstTensors with these helpers.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_ONNX_FOLD_H
#define MEMFIT_COMPILER_ONNX_FOLD_H

#include "compiler/onnx/Importer.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

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

/// Room for `numel` elements in `out`, whose type is set (and their batch
/// marks, which integer appends carry): folds append element by element,
/// and a mask of 64M elements grown by doubling is copied over again and
/// again (most of a long-context import's time before).
inline void reserveElems(ConstTensor &out, int64_t numel) {
  const auto count = static_cast<size_t>(std::max<int64_t>(numel, 0));
  if (out.isFloat()) {
    out.floats.reserve(count);
    return;
  }
  out.ints.reserve(count);
  out.batch.reserve(count);
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

/// Checks that `dims` has at most kMaxFoldElements elements.
inline llvm::Error checkFoldSize(Importer &im, const pb::NodeProto &n,
                                 const std::vector<int64_t> &dims) {
  auto numel = checkedProduct(dims);
  if (!numel || *numel > kMaxFoldElements)
    return im.fail(n, "would fold into a constant of shape " + dimsStr(dims) +
                          ", more than memfit folds");
  return llvm::Error::success();
}

/// Two constants broadcast numpy style: the result's dims, and for each of
/// its elements in order the element of each operand it pairs.
class Broadcast {
public:
  /// Fails, naming both shapes, when they do not broadcast or the result
  /// would be larger than memfit folds.
  static llvm::Expected<Broadcast> of(Importer &im, const pb::NodeProto &n,
                                      const std::vector<int64_t> &a,
                                      const std::vector<int64_t> &b) {
    Broadcast r;
    size_t rank = std::max(a.size(), b.size());
    r.da.assign(rank - a.size(), 1);
    r.da.insert(r.da.end(), a.begin(), a.end());
    r.db.assign(rank - b.size(), 1);
    r.db.insert(r.db.end(), b.begin(), b.end());
    for (size_t i = 0; i < rank; ++i) {
      if (r.da[i] != r.db[i] && r.da[i] != 1 && r.db[i] != 1)
        return im.fail(n, "operand shapes " + dimsStr(a) + " and " +
                              dimsStr(b) + " do not broadcast");
      r.dims.push_back(r.da[i] == 1 ? r.db[i] : r.da[i]);
    }
    if (llvm::Error e = checkFoldSize(im, n, r.dims))
      return std::move(e);
    return r;
  }

  std::vector<int64_t> dims;

  /// Calls f(ia, ib) for each result element; stops at f's first error.
  template <typename F> llvm::Error forEach(F f) const {
    const size_t rank = dims.size();
    std::vector<int64_t> idx(rank, 0);
    int64_t numel = 1;
    for (int64_t d : dims)
      numel *= d;
    for (int64_t k = 0; k < numel; ++k) {
      int64_t ia = 0, ib = 0;
      for (size_t i = 0; i < rank; ++i) {
        ia = ia * da[i] + (da[i] == 1 ? 0 : idx[i]);
        ib = ib * db[i] + (db[i] == 1 ? 0 : idx[i]);
      }
      if (llvm::Error e = f(ia, ib))
        return e;
      for (size_t i = rank; i-- > 0;) {
        if (++idx[i] < dims[i])
          break;
        idx[i] = 0;
      }
    }
    return llvm::Error::success();
  }

private:
  std::vector<int64_t> da, db; // operand dims padded to the result's rank
};

/// One node being folded: its operands as constants, errors naming it.
class FoldBase {
public:
  FoldBase(Importer &im, const pb::NodeProto &n) : im(im), n(n) {}

protected:
  Importer &im;
  const pb::NodeProto &n;

  /// Operand `i` as the importer holds it: a fold reads it in place (a
  /// folded mask can be hundreds of megabytes) and copies only what it
  /// changes.
  llvm::Expected<const ConstTensor &> input(int i) {
    auto c = im.constant(n, i);
    if (!c)
      return c.takeError();
    return **c;
  }
  llvm::Error checkSize(const std::vector<int64_t> &dims) {
    return checkFoldSize(im, n, dims);
  }
};

/// How one ONNX op type folds.
struct FoldRule {
  llvm::StringLiteral opType;
  /// Always folded: every operand must be a constant (Shape reads only its
  /// operand's dims). Otherwise the op folds when all its operands are
  /// constants and is translated as an operator when not.
  bool onlyFolds;
  llvm::Expected<ConstTensor> (*fold)(Importer &, const pb::NodeProto &);
};

/// Each file's part of the fold table.
llvm::ArrayRef<FoldRule> shapeFoldRules();   // FoldShapes.cpp
llvm::ArrayRef<FoldRule> fillFoldRules();    // FoldFill.cpp
llvm::ArrayRef<FoldRule> arithFoldRules();   // FoldArith.cpp
llvm::ArrayRef<FoldRule> literalFoldRules(); // FoldLiterals.cpp

} // namespace memfit::onnximport

#endif
