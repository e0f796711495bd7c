//===- Calibrate.h - Fit the analytic model to measured kernels -*- C++ -*-===//
//
// Fits the calibration of the analytic model (DeviceSpec.h's
// CostCalibration: launch floor, utilisation ramps, reduction-depth ramp,
// strided backward-data penalty and the efficiency of every convolution
// algorithm and of GEMM) to measured
// kernel times on one or more GPUs, each described by its datasheet
// numbers. One calibration serves every GPU: what depends on the kernel
// (shape, algorithm, arithmetic intensity, occupancy at small sizes) is in
// the fitted parameters, what depends on the GPU comes from its datasheet.
//
// The error of a prediction is |ln(predicted / measured)|; the fit
// minimises its mean over all measurements by coordinate descent in the
// logarithm of each parameter, from the hand-chosen prior, in a fixed
// order with fixed steps: the same data give the same calibration. The
// launch floor is bounded by the fastest measured kernel. It runs in two
// stages: first one scale per conv direction over the prior's algorithm
// ratios with the global parameters, from a small grid of starting launch
// floors and half rates (they trade against each other), then each
// algorithm that the first stage's model picks for enough kernels gets its
// own efficiency.
// Algorithms that are never fastest cannot be told apart by the data and
// keep the prior's ratio to their direction; so do the baselines, whose
// arithmetic their faster siblings share.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_CALIBRATE_H
#define MEMFIT_COMPILER_COST_CALIBRATE_H

#include "compiler/cost/KernelCsv.h"

#include <array>
#include <string>
#include <vector>

namespace memfit {

/// Measured kernels of one GPU: its datasheet (calibration fields are
/// ignored) and CSV files in DeepBench's layout.
struct GpuMeasurements {
  DeviceSpec device;
  std::vector<KernelCsv> files;
};

/// |ln(predicted / measured)| of every measured kernel, per kind.
using KernelErrors = std::array<std::vector<double>, kNumKernelKinds>;
KernelErrors kernelErrors(const DeviceSpec &spec,
                          const std::vector<KernelCsv> &files);

struct ErrorSummary {
  size_t count = 0;
  double median = 0, p90 = 0; // of |ln(predicted / measured)|
};
/// The median of sorted values (an even count's: the mean of the middle
/// two), and their nearest-rank percentile `p` in (0, 1].
double medianOfSorted(const std::vector<double> &sorted);
double nearestRank(const std::vector<double> &sorted, double p);
/// Median and 90th percentile (nearest rank on the sorted values; the
/// median of an even count is the mean of the middle two).
ErrorSummary summarizeErrors(std::vector<double> errors);

struct CalibrationFit {
  CostCalibration calibration;
  double meanError = 0; // the objective at the result
  /// Per efficiency slot: how many measured kernels the fitted model runs
  /// with that algorithm (0 for slots the data cannot identify).
  std::array<int, kNumEfficiencySlots> wins{};
  /// Slots given their own efficiency in the second stage.
  std::array<bool, kNumEfficiencySlots> fitted{};
};

/// Fits the calibration to every measurement in `gpus`, starting from
/// `prior`.
CalibrationFit fitCalibration(const std::vector<GpuMeasurements> &gpus,
                              const CostCalibration &prior);

/// The calibration as CalibratedParams.inc text (what DeviceSpec.cpp
/// includes): readable, one parameter per line, a comment saying where it
/// came from.
std::string calibrationInc(const CostCalibration &c,
                           const std::string &provenance);

} // namespace memfit

#endif
