//===- OpParams.h - Runtime parameter literals for an op --------*- C++ -*-===//
//
// Turns a Graph op into the initializer of its runtime parameter struct
// (runtime/Kernels.h), e.g. "{3, 227, 227, 96, 55, 55, 11, 11, 4, 4, 0, 0,
// 1, 1, 1}" for a ConvParams. Ops the runtime cannot run in the form given
// (e.g. 3-D convolutions) are user errors naming the node.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_OPPARAMS_H
#define MEMFIT_CODEGEN_OPPARAMS_H

#include "compiler/ir/Graph.h"

#include "llvm/Support/Error.h"

#include <string>

namespace memfit {

struct OpParamsText {
  std::string type; // "ConvParams", ... or "" for ops without a struct
  std::string init; // the braced initializer
};

llvm::Expected<OpParamsText> opParams(const Graph &g, OpId op);

/// Elements per sample of a batched value.
int64_t perSample(const Graph &g, ValueId v);

} // namespace memfit

#endif
