//===- KernelAccuracy.cpp - The model against a user's measured kernels ---===//
#include "compiler/cost/KernelAccuracy.h"

#include <algorithm>
#include <cmath>

namespace memfit {

namespace {

/// Nearest-rank percentile `p` (0..1] of sorted values.
double rankOf(const std::vector<double> &sorted, double p) {
  size_t rank =
      static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

double medianOf(const std::vector<double> &sorted) {
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

} // namespace

std::vector<KernelBand> kernelBands(const DeviceSpec &spec,
                                    const KernelCsv &csv) {
  std::vector<KernelBand> out;
  for (int k = 0; k < kNumKernelKinds; ++k) {
    auto kind = static_cast<KernelKind>(k);
    std::vector<double> ratio, absLog;
    for (const KernelRow &row : csv.rows) {
      // The parser takes only positive times.
      if (!row.measured[k])
        continue;
      auto pred = predictKernel(spec, csv, row, kind);
      if (!pred)
        continue;
      double r = *pred / *row.measured[k];
      ratio.push_back(r - 1);
      absLog.push_back(std::fabs(std::log(r)));
    }
    if (ratio.empty())
      continue;
    std::sort(ratio.begin(), ratio.end());
    std::sort(absLog.begin(), absLog.end());
    KernelBand b;
    b.kind = kind;
    b.count = ratio.size();
    b.median = medianOf(ratio);
    b.low = rankOf(ratio, 0.1);
    b.high = rankOf(ratio, 0.9);
    b.min = ratio.front();
    b.max = ratio.back();
    b.medianAbsLog = medianOf(absLog);
    out.push_back(b);
  }
  return out;
}

} // namespace memfit
