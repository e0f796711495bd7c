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
