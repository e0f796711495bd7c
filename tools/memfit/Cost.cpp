//===- Cost.cpp - memfit cost ---------------------------------------------===//
//
// memfit cost --device D --csv FILE [-o OUT]
//
// Prints a CSV of kernels (DeepBench's layout: convolutions or GEMMs) with
// the analytic model's predictions appended: pred_fwd_ms, pred_bwd_data_ms
// and pred_bwd_filter_ms for a convolution, each with the fastest
// algorithm the model would pick and no workspace limit, pred_ms for a
// GEMM. Held against the measured columns, it shows how far the model is
// off on a given GPU before a plan is trusted: where the file has measured
// times, a summary on stderr says how far, per kind of kernel (the CSV on
// stdout stays a CSV), beside what memfit's own whole-network comparisons
// found on that device class.
//
//===----------------------------------------------------------------------===//
#include "codegen/SummaryText.h"
#include "compiler/cost/Accuracy.h"
#include "compiler/cost/KernelAccuracy.h"
#include "compiler/cost/KernelCsv.h"
#include "compiler/support/FileUtil.h"
#include "tools/memfit/Command.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("cost", "Predict the time of the kernels in a CSV "
                           "(DeepBench layout) on a device");
cl::opt<std::string> Device("device",
                            cl::desc("Built-in device name or JSON file"),
                            cl::value_desc("name|file.json"), cl::Required,
                            cl::sub(Cmd));
cl::opt<std::string> Csv("csv",
                         cl::desc("Kernels, one per line: convolutions "
                                  "(W,H,C,N,K,S,R,pad_w,pad_h,stride_w,"
                                  "stride_h) or GEMMs (M,N,K)"),
                         cl::value_desc("file.csv"), cl::Required,
                         cl::sub(Cmd));
cl::opt<std::string> Output("o",
                            cl::desc("Write the CSV here instead of stdout"),
                            cl::value_desc("file.csv"), cl::init(""),
                            cl::sub(Cmd));

std::string percent(double x) {
  return llvm::formatv("{0}%", llvm::format("%+.1f", 100 * x)).str();
}

/// The model against the file's measured kernels, and memfit's own
/// whole-network comparisons on the device's class.
void printBands(raw_ostream &os, const DeviceSpec &spec, const KernelCsv &csv) {
  std::vector<KernelBand> bands = kernelBands(spec, csv);
  if (bands.empty())
    return;
  const std::string cls = deviceClassOf(spec.computeCapability);
  os << formatv("memfit cost: {0}'s measured kernels against the model on "
                "{1}{2}, as predicted / measured - 1:\n",
                csv.name, spec.name, cls.empty() ? "" : " (" + cls + ")");
  for (const KernelBand &b : bands)
    os << formatv("  {0,-16} {1,6} kernels: median {2}, the middle 80% "
                  "{3} to {4} (all {5} to {6}); median |ln| {7:F3}\n",
                  kernelKindName(b.kind), b.count, percent(b.median),
                  percent(b.low), percent(b.high), percent(b.min),
                  percent(b.max), b.medianAbsLog);
  // DeepBench's files, and the model's kernel times here, are fp32.
  Accuracy a = accuracyFor(spec.computeCapability, Precision::FP32);
  if (a.cases == 0) {
    os << formatv("  whole networks: memfit has no measured iteration time "
                  "on {0} in fp32\n",
                  cls.empty() ? "this device" : cls);
    return;
  }
  os << formatv("  whole networks on {0} in fp32: {1}\n", cls,
                measuredOffText(a.cases, a.low, a.high, a.basis));
}

int run() {
  auto spec = resolveDevice(Device);
  if (!spec)
    return reportError(spec.takeError());
  auto csv = loadKernelCsv(Csv);
  if (!csv)
    return reportError(csv.takeError());
  std::string text = predictionCsv(*spec, *csv);
  printBands(errs(), *spec, *csv);
  if (Output.empty()) {
    outs() << text;
    return ExitOk;
  }
  if (auto err = writeFileAtomically(Output, text))
    return reportError(std::move(err));
  return ExitOk;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
