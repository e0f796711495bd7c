//===- ReportText.h - The plan summary a person reads -----------*- C++ -*-===//
//
// `memfit report`: what a person needs to trust a plan or pick a budget, in
// thirty seconds -- feasibility, memory (budget, peak, lower bound, ideal
// peak, allocation efficiency), time (ideal, planned, overhead, stall),
// traffic, recomputation, the sub-batch, a per-layer table of decisions and
// the largest stall causes -- as text, or as JSON with the same content.
// Built from a PlanReport only, so it reads the same from plan.json later.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_REPORTTEXT_H
#define MEMFIT_CODEGEN_REPORTTEXT_H

#include "codegen/PlanReport.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace memfit {

struct ReportTextOptions {
  std::string source;    // the plan.json path, for the heading ("" for none)
  size_t maxLayers = 30; // rows of the layer table; 0 for all
  size_t maxStalls = 5;
  size_t maxWhy = 8; // offloaded blocks listed with their reason
};

void printReportText(llvm::raw_ostream &os, const PlanReport &r,
                     const ReportTextOptions &opts);
std::string reportToJson(const PlanReport &r, const ReportTextOptions &opts);

/// "0.12 ms", "3.40 s": seconds for people.
std::string formatSeconds(double seconds);

} // namespace memfit

#endif
