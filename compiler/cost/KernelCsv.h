//===- KernelCsv.h - CSV files of measured library kernels ------*- C++ -*-===//
//
// The layout of DeepBench's training results (docs/benchmarks/data/
// deepbench/README.md): one file of convolutions or one of SGEMMs, a header
// line naming the columns, one kernel per line. Columns are found by name,
// so their order is free and unknown columns (an application name) pass
// through. Measured times are optional, so a CSV of shapes alone can be
// predicted; an empty measured cell means "not measured".
//
// Errors name the file, the line and what was expected there.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_KERNELCSV_H
#define MEMFIT_COMPILER_COST_KERNELCSV_H

#include "compiler/cost/KernelCost.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace memfit {

enum class KernelCsvKind : uint8_t { Conv, Gemm };

/// The kinds of kernel errors are reported by: the three conv directions
/// and "gemm".
enum class KernelKind : uint8_t { ConvFwd, ConvBwdData, ConvBwdFilter, Gemm };
constexpr int kNumKernelKinds = 4;
std::string_view kernelKindName(KernelKind k);

struct KernelRow {
  int line = 0;     // 1-based line in the file
  std::string text; // the line as read, without its line break
  ConvShape conv;   // KernelCsvKind::Conv
  GemmKernel gemm;  // KernelCsvKind::Gemm
  /// Measured seconds per kind (conv: the three directions; GEMM: Gemm).
  std::optional<double> measured[kNumKernelKinds];
};

struct KernelCsv {
  std::string name; // the file, as errors name it
  KernelCsvKind kind = KernelCsvKind::Conv;
  std::string header;
  std::vector<KernelRow> rows;
};

llvm::Expected<KernelCsv> parseKernelCsv(llvm::StringRef text,
                                         llvm::StringRef displayName);
llvm::Expected<KernelCsv> loadKernelCsv(llvm::StringRef path);

/// The analytic model's seconds for `kind` of `row` (a conv direction with
/// its fastest algorithm and no workspace limit), or none where the row's
/// file holds another kind of kernel.
std::optional<double> predictKernel(const DeviceSpec &spec,
                                    const KernelCsv &csv, const KernelRow &row,
                                    KernelKind kind);

/// The file's lines with predicted columns appended: pred_fwd_ms,
/// pred_bwd_data_ms, pred_bwd_filter_ms for convolutions, pred_ms for
/// GEMMs (milliseconds, 6 significant digits).
std::string predictionCsv(const DeviceSpec &spec, const KernelCsv &csv);

} // namespace memfit

#endif
