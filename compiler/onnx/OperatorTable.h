//===- OperatorTable.h - What the importer accepts, as a table --*- C++ -*-===//
//
// docs/operators.md, generated: every ONNX op type memfit accepts, how it
// runs it (an operator with a backward, folded at import, a step of an
// integer program on the token ids, or taken apart by the importer), the
// forms it accepts and refuses, and the operators it refuses with the
// PyTorch code that usually writes them. Everything printed comes from
// the tables the importer itself consults (OpDef, the constant folder's
// rules, the integer-program steps, importerOps below), so the page and
// the importer cannot disagree without tests/cli/operators.sh noticing.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_ONNX_OPERATORTABLE_H
#define MEMFIT_COMPILER_ONNX_OPERATORTABLE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string_view>

namespace memfit {

/// An ONNX op type the importer handles itself: neither an operator
/// definition nor a fold rule.
struct ImporterOp {
  std::string_view opType;
  std::string_view forms;
  /// What its backward is; empty when no trainable value flows through.
  std::string_view gradient = {};
};
llvm::ArrayRef<ImporterOp> importerOps();

/// An operator memfit refuses that models often contain, with the PyTorch
/// code that usually writes it (" (torch.topk: ...)").
struct RefusedIdiom {
  std::string_view opType;
  std::string_view idiom;
};
llvm::ArrayRef<RefusedIdiom> refusedIdioms();

/// docs/operators.md, byte for byte.
void printOperatorTable(llvm::raw_ostream &os);

} // namespace memfit

#endif
