//===- Operators.cpp - memfit operators: the table of what imports --------===//
//
//   memfit operators
//
// Prints docs/operators.md: every ONNX op type memfit accepts, how it runs
// it, its gradient and the forms it takes (compiler/onnx/OperatorTable.h).
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/OperatorTable.h"
#include "tools/memfit/Command.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("operators", "Print the table of the ONNX operators memfit "
                                "accepts and their forms (docs/operators.md)");

int run() {
  printOperatorTable(outs());
  outs().flush();
  return outs().has_error() ? 1 : 0;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
