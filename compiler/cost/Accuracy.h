//===- Accuracy.h - How far the cost model's times were measured off ------===//
//
// The device model's predicted iteration times against measured ones, per
// GPU architecture and precision: every comparison memfit has (whole
// networks, the same batch and precision), as predicted / measured - 1.
// What a plan's summary says of its own times, so that a prediction on a
// device class no measurement covers says so instead of looking exact.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_ACCURACY_H
#define MEMFIT_COMPILER_COST_ACCURACY_H

#include "compiler/ir/TaskGraph.h"

#include <string>

namespace memfit {

struct Accuracy {
  std::string deviceClass; // "Hopper", "Ampere", ...; "" when unknown
  std::string precision;   // "fp32", "bf16", ...
  /// Measured comparisons on that class in that precision; 0: none, and
  /// low, high and basis are then empty.
  int cases = 0;
  /// The least and the largest predicted / measured - 1 among them.
  double low = 0, high = 0;
  /// Which measurements, and where they are written up.
  std::string basis;
};

/// The architecture a compute capability (major * 10 + minor) belongs to;
/// "" for 0 or one not known here.
std::string deviceClassOf(int computeCapability);

/// What memfit's measurements say of its predicted times on a device of
/// this compute capability, in this precision.
Accuracy accuracyFor(int computeCapability, Precision precision);

} // namespace memfit

#endif
