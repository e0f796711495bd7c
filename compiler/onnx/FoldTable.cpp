//===- FoldTable.cpp - Which ONNX op types fold, and how ------------------===//
//
// The one table of constant folds: each op type appears once, with whether
// it only ever folds and the function that folds it. The importer asks it
// which nodes to fold, the folds run through it, and the list of supported
// op types reads it, so adding a fold is one entry in one file's part.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Fold.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cassert>

namespace memfit::onnximport {
namespace {

const llvm::StringMap<const FoldRule *> &foldTable() {
  static const llvm::StringMap<const FoldRule *> table = [] {
    llvm::StringMap<const FoldRule *> t;
    for (llvm::ArrayRef<FoldRule> part :
         {shapeFoldRules(), arithFoldRules(), literalFoldRules()})
      for (const FoldRule &r : part) {
        bool fresh = t.try_emplace(r.opType, &r).second;
        assert(fresh && "an op type folds in two places");
        (void)fresh;
      }
    return t;
  }();
  return table;
}

const FoldRule *foldRule(llvm::StringRef opType) {
  auto it = foldTable().find(opType);
  return it == foldTable().end() ? nullptr : it->second;
}

} // namespace

bool isFoldOnlyOp(llvm::StringRef opType) {
  const FoldRule *r = foldRule(opType);
  return r && r->onlyFolds;
}

bool isFoldableOp(llvm::StringRef opType) { return foldRule(opType); }

const std::vector<std::string> &foldOpTypes() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (llvm::ArrayRef<FoldRule> part :
         {shapeFoldRules(), arithFoldRules(), literalFoldRules()})
      for (const FoldRule &r : part)
        v.emplace_back(r.opType);
    return v;
  }();
  return ops;
}

llvm::Error foldNode(Importer &im, const pb::NodeProto &n) {
  const FoldRule *rule = foldRule(n.op_type());
  if (!rule)
    return im.fail(n, "cannot be folded");
  llvm::Expected<ConstTensor> out = rule->fold(im, n);
  if (!out)
    return out.takeError();
  if (out->numel() > kMaxFoldElements)
    return im.fail(n, llvm::formatv("folds into {0} elements; memfit folds "
                                    "constants of at most {1}",
                                    out->numel(), kMaxFoldElements));
  finish(*out);
  im.bindConstant(n.output(0), std::move(*out));
  return llvm::Error::success();
}

} // namespace memfit::onnximport
