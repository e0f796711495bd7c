//===- Units.h - Byte sizes for people --------------------------*- C++ -*-===//
//
// Sizes on the command line take units (B, KB/KiB, MB/MiB, GB/GiB, TB/TiB;
// K/M/G/T alone are binary, as nvidia-smi and PyTorch report memory). Printed
// sizes use binary units with two decimals.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_SUPPORT_UNITS_H
#define MEMFIT_COMPILER_SUPPORT_UNITS_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace memfit {

llvm::Expected<int64_t> parseSize(std::string_view text);
std::string formatBytes(int64_t bytes);

} // namespace memfit

#endif
