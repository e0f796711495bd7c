//===- Device.cpp - memfit device -----------------------------------------===//
//
// memfit device [NAME | FILE.json]
//
// Without an argument, lists the built-in devices of the analytic cost
// model. With one, prints that device (built-in name or JSON file) as the
// JSON a planning command's --device accepts, so a user can start from a
// built-in, edit it, and check the result: every error names the file and
// the field.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/DeviceSpec.h"
#include "tools/memfit/Command.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("device", "List the built-in devices, or print one "
                             "(or a JSON device file) as JSON");
cl::opt<std::string> DeviceArg(cl::Positional, cl::desc("[name | file.json]"),
                               cl::init(""), cl::sub(Cmd));
cl::opt<bool> Json("json",
                   cl::desc("List the built-in devices as one JSON array of "
                            "device objects"),
                   cl::sub(Cmd));

/// The hosts the built-in GPUs come with, per GPU (docs/cost-model.md
/// states each division); "-" where no source states a figure. Optimizer
/// rates are the host memory bandwidth over the bytes an update moves,
/// capped by the cores' arithmetic, unless measured ("m").
void printHosts() {
  outs() << "\nhosts, per GPU (optimizer rates derived from the host memory "
            "bandwidth and cores unless marked m, measured):\n";
  outs() << "  name            cores  mem GB/s  mem GiB  Adam Mparam/s  "
            "SGD Mparam/s  NVMe rd/wr GB/s  NVMe GiB\n";
  auto num = [](double v, const char *fmt) {
    return v > 0 ? formatv(fmt, v).str() : std::string("-");
  };
  auto rate = [&](double v, bool measured) {
    return v > 0 ? formatv("{0:F0}{1}", v / 1e6, measured ? " m" : "").str()
                 : std::string("-");
  };
  for (const std::string &name : builtinDeviceNames()) {
    DeviceSpec s = cantFail(builtinDevice(name));
    if (!s.hasHost() && !s.hasNvme())
      continue;
    std::string nvme = s.nvmeReadBandwidth > 0 || s.nvmeWriteBandwidth > 0
                           ? num(s.nvmeReadBandwidth / 1e9, "{0:F1}") + "/" +
                                 num(s.nvmeWriteBandwidth / 1e9, "{0:F1}")
                           : std::string("-");
    outs() << format(
        "  %-15s %5s %9s %8s %14s %13s %16s %9s\n", name.c_str(),
        num(double(s.hostCores), "{0:F0}").c_str(),
        num(s.hostMemoryBandwidth / 1e9, "{0:F1}").c_str(),
        num(double(s.hostMemoryBytes) / (1024.0 * 1024 * 1024), "{0:F0}")
            .c_str(),
        rate(s.hostAdamRate(), s.hostAdamRateMeasured()).c_str(),
        rate(s.hostSgdRate(), s.hostSgdRateMeasured()).c_str(), nvme.c_str(),
        num(double(s.nvmeBytes) / (1024.0 * 1024 * 1024), "{0:F0}").c_str());
  }
}

int run() {
  if (DeviceArg.empty() && Json) {
    outs() << "[";
    bool first = true;
    for (const std::string &name : builtinDeviceNames()) {
      std::string one = deviceToJson(cantFail(builtinDevice(name)));
      while (!one.empty() && one.back() == '\n')
        one.pop_back();
      outs() << (first ? "\n" : ",\n") << one;
      first = false;
    }
    outs() << "\n]\n";
    return ExitOk;
  }
  if (DeviceArg.empty()) {
    outs() << "built-in devices (memfit device NAME prints one as JSON):\n";
    outs() << "  name            TFLOP/s  TF32 TC  BF16 TC  FP16 TC  mem GB/s  "
              "mem GiB  link GB/s  description\n";
    // Tensor-core rates are dense; "-" where the GPU has none.
    auto tc = [](double flops) {
      return flops > 0 ? formatv("{0,8:F1}", flops / 1e12).str()
                       : std::string("       -");
    };
    for (const std::string &name : builtinDeviceNames()) {
      DeviceSpec s = cantFail(builtinDevice(name));
      outs() << format(
          "  %-15s %9.2f %s %s %s %9.0f %8.0f %10.2f  %s\n", name.c_str(),
          s.fp32Flops / 1e12, tc(s.tf32Flops).c_str(), tc(s.bf16Flops).c_str(),
          tc(s.fp16Flops).c_str(), s.memoryBandwidth / 1e9,
          static_cast<double>(s.memoryBytes) / (1024.0 * 1024.0 * 1024.0),
          s.h2dBandwidth / 1e9, s.description.c_str());
    }
    printHosts();
    return ExitOk;
  }
  auto spec = resolveDevice(DeviceArg);
  if (!spec)
    return reportError(spec.takeError());
  outs() << deviceToJson(*spec);
  return ExitOk;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
