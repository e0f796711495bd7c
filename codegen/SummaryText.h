//===- SummaryText.h - What plan and compile print --------------*- C++ -*-===//
//
// The summary `memfit plan` and `memfit compile` print once a plan is made:
// a dozen lines for a terminal, or one JSON object (--json) whose fields
// scripts read (docs/user-guide.md). Both are rendered from the PlanReport
// that plan.json and report.txt are written from, and read nothing else, so
// the printed figures are the files' figures.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_SUMMARYTEXT_H
#define MEMFIT_CODEGEN_SUMMARYTEXT_H

#include "codegen/PlanReport.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace memfit {

void printPlanSummary(llvm::raw_ostream &os, const PlanReport &r);
/// The summary's `host` and `nvme` lines (weights homed off the GPU; none
/// without), labels padded to `width` columns: the plan's summary and
/// `memfit report` print the same sentences; `precision` as PlanReport's.
void printTierLines(llvm::raw_ostream &os, const ReportSummary &s,
                    llvm::StringRef precision, int width);
/// The `accuracy` line: how far the device model's times were measured off
/// on this device's architecture in this precision, or that nothing was
/// measured there (compiler/cost/Accuracy.h); labels padded to `width`.
void printAccuracy(llvm::raw_ostream &os, const ReportSummary &s, int width);
/// "predicted iteration times were -12% to -3% off the measured (2
/// networks: BASIS)": the accuracy line's words, which `memfit cost` says
/// too; `cases` at least 1.
std::string measuredOffText(int cases, double low, double high,
                            llvm::StringRef basis);
std::string planSummaryJson(const PlanReport &r);

/// The profile line of the summary: how many task costs a measured profile
/// gave and which it did not have (nothing without a profile).
void printProfileLine(llvm::raw_ostream &os, const ReportProfile &p);

} // namespace memfit

#endif
