//===- Cost.cpp - memfit cost ---------------------------------------------===//
//
// memfit cost --device D --csv FILE [-o OUT]
//
// Prints a CSV of kernels (DeepBench's layout: convolutions or GEMMs) with
// the analytic model's predictions appended: pred_fwd_ms, pred_bwd_data_ms
// and pred_bwd_filter_ms for a convolution, each with the fastest
// algorithm the model would pick and no workspace limit, pred_ms for a
// GEMM. Held against the measured columns, it shows how far the model is
// off on a given GPU before a plan is trusted.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/KernelCsv.h"
#include "compiler/support/FileUtil.h"
#include "tools/memfit/Command.h"

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

int run() {
  auto spec = resolveDevice(Device);
  if (!spec)
    return reportError(spec.takeError());
  auto csv = loadKernelCsv(Csv);
  if (!csv)
    return reportError(csv.takeError());
  std::string text = predictionCsv(*spec, *csv);
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
