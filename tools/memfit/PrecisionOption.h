//===- PrecisionOption.h - The --precision flag's values --------*- C++ -*-===//
//
// inspect, plan, compile and compare take the same --precision values, so
// the list and its help text live here once.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_MEMFIT_PRECISIONOPTION_H
#define MEMFIT_TOOLS_MEMFIT_PRECISIONOPTION_H

#include "compiler/ir/TaskGraph.h"

#include "llvm/Support/CommandLine.h"

namespace memfit::tool {

inline constexpr const char *kPrecisionHelp =
    "Storage and arithmetic of training (bf16 and fp16 as torch.autocast: "
    "16-bit activations, fp32 master weights and optimizer state)";

inline llvm::cl::ValuesClass precisionValues() {
  return llvm::cl::values(
      clEnumValN(Precision::FP32, "fp32", "fp32 storage and FMA (default)"),
      clEnumValN(Precision::TF32, "tf32",
                 "fp32 storage, convolutions and matrix products on TF32 "
                 "tensor cores"),
      clEnumValN(Precision::BF16, "bf16",
                 "bf16 activations and gradients, fp32 master weights"),
      clEnumValN(Precision::FP16, "fp16",
                 "fp16 activations and gradients, fp32 master weights, "
                 "dynamic loss scaling"));
}

} // namespace memfit::tool

#endif
