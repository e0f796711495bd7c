//===- KernelAccuracy.h - The model against a user's measured kernels -----===//
//
// How far the analytic model's kernel times are off a user's own
// measurements (a CSV in DeepBench's layout with its measured columns), per
// kind of kernel: the band that holds the middle 80% of predicted /
// measured - 1, its median, and the median |ln(predicted / measured)| the
// calibration minimizes. What `memfit cost` reports beside its predictions,
// so that a user can see before planning how far the model is off on their
// GPU, library version and shapes.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_KERNELACCURACY_H
#define MEMFIT_COMPILER_COST_KERNELACCURACY_H

#include "compiler/cost/KernelCsv.h"

#include <vector>

namespace memfit {

struct KernelBand {
  KernelKind kind = KernelKind::Gemm;
  /// Kernels of this kind with a measured time.
  size_t count = 0;
  /// Of predicted / measured - 1 over them: the median, and the 10th and
  /// 90th percentiles (nearest rank), so that low..high holds the middle
  /// 80%; min and max of all.
  double median = 0, low = 0, high = 0, min = 0, max = 0;
  /// Median |ln(predicted / measured)|.
  double medianAbsLog = 0;
};

/// One band per kind of kernel the file measures, in KernelKind order;
/// empty when no row has a measured time.
std::vector<KernelBand> kernelBands(const DeviceSpec &spec,
                                    const KernelCsv &csv);

} // namespace memfit

#endif
