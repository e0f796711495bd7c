//===- Calibrate.cpp - memfit calibrate -----------------------------------===//
//
// memfit calibrate GPU=FILE.csv... [--emit-cpp FILE] [-o DEVICE.json]
// memfit calibrate --no-fit GPU=FILE.csv...
//
// Fits the analytic cost model's calibration to measured kernel times
// (compiler/cost/Calibrate.h) and prints the fit report as Markdown: the
// error of the uncalibrated prior, of a fit on the other GPUs (each GPU
// held out in turn, when there are several), and of the final fit on all
// of them, per GPU (named by its device's name) and per kernel kind; then
// the fitted parameters. `--no-fit` prints only the error of the
// calibration memfit was built with (or what a device file sets), the
// model as a plan would use it on those GPUs.
//
// GPU is a built-in device name or a device JSON file (only its datasheet
// numbers are used in a fit); FILE a CSV in DeepBench's layout. `--emit-cpp`
// writes compiler/cost/CalibratedParams.inc (the built-in calibration:
// tools/calibrate-cost-model regenerates it); `-o` writes the first GPU's
// device file with the fitted calibration, for a user with measurements of
// their own GPU.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/Calibrate.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/FileUtil.h"
#include "tools/memfit/Command.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("calibrate",
                   "Fit the cost model to measured kernel times and print "
                   "its error");
cl::list<std::string> Inputs(cl::Positional, cl::OneOrMore,
                             cl::desc("GPU=file.csv (GPU: built-in name or "
                                      "device JSON; file: DeepBench layout)"),
                             cl::sub(Cmd));
cl::opt<std::string> EmitCpp("emit-cpp",
                             cl::desc("Write the calibration as "
                                      "CalibratedParams.inc here"),
                             cl::value_desc("file.inc"), cl::init(""),
                             cl::sub(Cmd));
cl::opt<std::string> Output("o",
                            cl::desc("Write the first GPU's device file with "
                                     "the fitted calibration here"),
                            cl::value_desc("device.json"), cl::init(""),
                            cl::sub(Cmd));
cl::opt<bool> NoFit("no-fit",
                    cl::desc("Fit nothing: print the error of the built-in "
                             "calibration (or the device file's own)"),
                    cl::init(false), cl::sub(Cmd));

struct Gpu {
  std::string arg;   // as given before '='
  std::string label; // the device's name, in the report
  GpuMeasurements data;
};

Expected<std::vector<Gpu>> readInputs() {
  std::vector<Gpu> gpus;
  for (const std::string &arg : Inputs) {
    auto [dev, file] = StringRef(arg).split('=');
    if (file.empty() || dev.empty())
      return makeError("calibrate: expected GPU=FILE.csv, got " +
                       quoteName(arg));
    auto spec = resolveDevice(dev);
    if (!spec)
      return spec.takeError();
    auto csv = loadKernelCsv(file);
    if (!csv)
      return csv.takeError();
    auto it = std::find_if(gpus.begin(), gpus.end(),
                           [&](const Gpu &g) { return g.arg == dev; });
    if (it == gpus.end()) {
      gpus.push_back({dev.str(), spec->name, {*spec, {}}});
      it = gpus.end() - 1;
    }
    it->data.files.push_back(std::move(*csv));
  }
  return gpus;
}

std::vector<GpuMeasurements> measurementsOf(const std::vector<Gpu> &gpus,
                                            int except) {
  std::vector<GpuMeasurements> out;
  for (size_t i = 0; i < gpus.size(); ++i)
    if (static_cast<int>(i) != except)
      out.push_back(gpus[i].data);
  return out;
}

/// |ln r| as the percentage a ratio exp(|ln r|) is off by.
std::string pct(double lnErr) {
  return formatv("{0:F0}%", 100 * (std::exp(lnErr) - 1)).str();
}

/// One row per GPU and kernel kind (and one for all kinds together); a
/// null calibration keeps the device's own.
void errorTable(raw_ostream &os, const std::vector<Gpu> &gpus,
                const std::vector<const CostCalibration *> &calibrationPerGpu) {
  os << "| GPU | kernels | n | median | 90th pct | median ln | 90th pct ln "
        "|\n|---|---|---|---|---|---|---|\n";
  for (size_t g = 0; g < gpus.size(); ++g) {
    DeviceSpec spec = gpus[g].data.device;
    if (calibrationPerGpu[g])
      applyCalibration(spec, *calibrationPerGpu[g]);
    KernelErrors errs = kernelErrors(spec, gpus[g].data.files);
    std::vector<double> all;
    auto row = [&](StringRef kind, const std::vector<double> &e) {
      ErrorSummary s = summarizeErrors(e);
      os << "| " << gpus[g].label << " | " << kind << " | " << s.count << " | "
         << pct(s.median) << " | " << pct(s.p90) << " | "
         << format("%.3f", s.median) << " | " << format("%.3f", s.p90)
         << " |\n";
    };
    for (int k = 0; k < kNumKernelKinds; ++k) {
      if (errs[k].empty())
        continue;
      row(kernelKindName(static_cast<KernelKind>(k)), errs[k]);
      all.insert(all.end(), errs[k].begin(), errs[k].end());
    }
    row("all", all);
  }
  os << "\n";
}

int run() {
  if (NoFit && (!EmitCpp.empty() || !Output.empty()))
    return reportError(makeError("calibrate: --no-fit fits nothing to write "
                                 "(--emit-cpp, -o)"));
  auto gpus = readInputs();
  if (!gpus)
    return reportError(gpus.takeError());
  raw_ostream &os = outs();
  CostCalibration prior = priorCalibration();

  os << "# Cost model calibration\n\nMeasurements: ";
  for (size_t g = 0; g < gpus->size(); ++g) {
    os << (g ? "; " : "") << (*gpus)[g].label << " (";
    for (size_t f = 0; f < (*gpus)[g].data.files.size(); ++f)
      os << (f ? ", " : "")
         << sys::path::filename((*gpus)[g].data.files[f].name);
    os << ")";
  }
  os << ". Error is |ln(predicted / measured)|, shown also as the "
        "percentage the prediction is off by (e^|ln| - 1).\n\n";

  if (NoFit) {
    os << "## The calibration as built (nothing fitted)\n\n";
    errorTable(os, *gpus,
               std::vector<const CostCalibration *>(gpus->size(), nullptr));
    return ExitOk;
  }

  os << "## Prior (hand-chosen, before any measurement)\n\n";
  errorTable(os, *gpus,
             std::vector<const CostCalibration *>(gpus->size(), &prior));

  if (gpus->size() > 1) {
    os << "## Each GPU predicted by a fit on the others\n\n";
    std::vector<CostCalibration> held(gpus->size());
    std::vector<const CostCalibration *> per;
    for (size_t g = 0; g < gpus->size(); ++g) {
      held[g] =
          fitCalibration(measurementsOf(*gpus, static_cast<int>(g)), prior)
              .calibration;
      per.push_back(&held[g]);
    }
    errorTable(os, *gpus, per);
  }

  CalibrationFit fit = fitCalibration(measurementsOf(*gpus, -1), prior);
  os << "## Final fit on all GPUs\n\n";
  errorTable(
      os, *gpus,
      std::vector<const CostCalibration *>(gpus->size(), &fit.calibration));

  const CostCalibration &c = fit.calibration;
  os << "## Fitted parameters\n\n"
     << "mean |ln error| " << format("%.4f", fit.meanError) << "; launch "
     << format("%.3g", c.launchSeconds * 1e6) << " us; half rate at "
     << format("%.4g", c.halfRateItemsPerSm)
     << " output elements per SM (backward-filter: "
     << format("%.4g", c.halfRateFilterItemsPerSm)
     << " filter elements per SM); half rate at "
     << format("%.4g", c.halfRateReduction)
     << " multiply-adds per output; strided backward-data penalty exponent "
     << format("%.4g", c.stridePenaltyExponent) << "\n\n"
     << "| class | compute | memory | fastest for | fitted |\n"
     << "|---|---|---|---|---|\n";
  for (int s = 0; s < kNumEfficiencySlots; ++s) {
    std::string name = efficiencySlotName(s);
    bool conv = s < kNumConvDirections * kMaxConvAlgoId;
    if (name.empty() || (!conv && s != efficiencySlot(CostClass::Gemm)))
      continue;
    os << "| " << name << " | " << format("%.4g", c.efficiency[s].compute)
       << " | " << format("%.4g", c.efficiency[s].memory) << " | "
       << fit.wins[s] << " | "
       << (!conv || fit.fitted[s] ? "own" : "direction scale") << " |\n";
  }

  if (!EmitCpp.empty()) {
    std::string prov = "Fitted on:";
    for (const Gpu &g : *gpus)
      for (const KernelCsv &f : g.data.files)
        prov += " " + g.arg + "=" + sys::path::filename(f.name).str();
    if (auto err = writeFileAtomically(EmitCpp, calibrationInc(c, prov)))
      return reportError(std::move(err));
  }
  if (!Output.empty()) {
    DeviceSpec dev = (*gpus)[0].data.device;
    applyCalibration(dev, c);
    if (auto err = writeFileAtomically(Output, deviceToJson(dev)))
      return reportError(std::move(err));
  }
  return ExitOk;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
