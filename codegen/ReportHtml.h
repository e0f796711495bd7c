//===- ReportHtml.h - Self-contained report pages ---------------*- C++ -*-===//
//
// report.html: one page with no external resources (it opens offline and
// from a file) showing a plan's summary, memory over one round (arena in
// use above the resident bytes, the budget and the lower bound), the stream
// timeline, the per-layer decision table and the largest stalls.
// compare.html: the budget-versus-overhead curve of every policy and the
// table behind it. The data travel as JSON inside the page; an inline
// script draws it (ReportHtmlAssets.cpp). Every name from the model is
// escaped for HTML or inserted as text. Deterministic: same input, same
// bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_REPORTHTML_H
#define MEMFIT_CODEGEN_REPORTHTML_H

#include "codegen/CompareReport.h"
#include "codegen/PlanReport.h"
#include "codegen/RunReport.h"

#include <string>

namespace memfit {

/// With `run`, the page also plots the trainer's logged loss (and gradient
/// norm) over its steps, and says how its rate compares with the plan's.
std::string planToHtml(const PlanReport &r, const RunLogData *run = nullptr);
std::string compareToHtml(const CompareReport &c);

/// Escapes text for HTML element content and attribute values.
std::string htmlEscape(const std::string &text);
/// Makes JSON safe inside a <script> element: no '<', '>' or '&' remain
/// (inside JSON strings they become \u escapes, which mean the same).
std::string scriptSafeJson(const std::string &json);

const char *reportCss();
const char *reportScript();

} // namespace memfit

#endif
