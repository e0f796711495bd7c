//===- RunReport.h - A trainer's --log beside its plan ----------*- C++ -*-===//
//
// `memfit report PLAN.json --run LOG.jsonl`: the JSON lines a generated
// trainer wrote with --log (runtime/RunLog.h), read back and summarized
// beside the plan: the loss from the first logged step to the last, the
// measured samples per second against the plan's predicted rate, and the
// points report.html plots. A malformed line is an error naming the file
// and the line.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_RUNREPORT_H
#define MEMFIT_CODEGEN_RUNREPORT_H

#include "codegen/PlanReport.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace memfit {

struct RunPoint {
  int64_t step = 0;
  double loss = 0, lr = 0;
  std::optional<double> gradNorm;
  double samplesPerSecond = 0, elapsedSeconds = 0;
};

/// A validation the trainer logged (its val_* fields).
struct ValPoint {
  int64_t step = 0;
  double loss = 0;
  std::optional<double> accuracy, perplexity;
};

struct RunLogData {
  std::string file;
  std::vector<RunPoint> points;      // in step order
  std::vector<ValPoint> validations; // in step order
};

llvm::Expected<RunLogData> readRunLog(const std::string &path);

/// "8 steps logged in run.jsonl: loss 4.37 at step 1 to 4.16 at step 8
/// (lowest 4.16 at step 8); measured 1,045 samples/s, the plan predicts
/// 1,210 on h100-sxm (0.86x)".
std::string describeRun(const PlanReport &r, const RunLogData &run);

/// The samples per second the plan predicts (its batch over its planned
/// iteration time, every rank's).
double predictedSamplesPerSecond(const PlanReport &r);

} // namespace memfit

#endif
