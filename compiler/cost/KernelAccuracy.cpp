//===- KernelAccuracy.cpp - The model against a user's measured kernels ---===//
#include "compiler/cost/KernelAccuracy.h"
#include "compiler/cost/Calibrate.h"

#include <algorithm>
#include <cmath>

namespace memfit {

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
    b.median = medianOfSorted(ratio);
    b.low = nearestRank(ratio, 0.1);
    b.high = nearestRank(ratio, 0.9);
    b.min = ratio.front();
    b.max = ratio.back();
    b.medianAbsLog = medianOfSorted(absLog);
    out.push_back(b);
  }
  return out;
}

} // namespace memfit
