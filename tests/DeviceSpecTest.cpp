//===- DeviceSpecTest.cpp - Built-in devices and device JSON files --------===//
#include "compiler/cost/DeviceSpec.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace memfit;

namespace {

std::string errorOf(llvm::Expected<DeviceSpec> d) {
  REQUIRE_FALSE(static_cast<bool>(d));
  return llvm::toString(d.takeError());
}

const char *kMinimal = R"({
  "name": "lab-gpu",
  "fp32_tflops": 20,
  "memory_gbps": 1000,
  "memory_gib": 24,
  "h2d_gbps": 25,
  "d2h_gbps": 24,
  "sm_count": 84,
  "launch_us": 4
})";

} // namespace

TEST_CASE("built-in devices carry their datasheet numbers", "[device]") {
  CHECK(builtinDeviceNames() ==
        std::vector<std::string>{"k40m", "titanx-maxwell", "p100", "v100",
                                 "v100-32g-pcie", "a100-40g", "a100-80g",
                                 "h100-pcie", "h100-sxm", "h200", "rtx-4090"});
  DeviceSpec h100 = *builtinDevice("h100-sxm");
  CHECK(h100.fp32Flops == 67e12);
  CHECK(h100.memoryBandwidth == 3350e9);
  CHECK(h100.memoryBytes == int64_t(80) << 30);
  CHECK(h100.h2dBandwidth == 63e9);
  CHECK(h100.smCount == 132);
  DeviceSpec k40 = *builtinDevice("k40m");
  CHECK(k40.fp32Flops == Approx(4.29e12));
  CHECK(k40.memoryBandwidth == 288e9);
  CHECK(k40.memoryBytes == int64_t(12) << 30);
  for (const std::string &name : builtinDeviceNames()) {
    DeviceSpec s = *builtinDevice(name);
    INFO(name);
    CHECK(s.name == name);
    CHECK(s.fp32Flops > 0);
    CHECK(s.launchSeconds > 0);
    CHECK(s.smCount > 0);
    for (int slot = 0; slot < kNumEfficiencySlots; ++slot)
      if (!efficiencySlotName(slot).empty()) {
        CHECK(s.efficiency[slot].compute > 0);
        CHECK(s.efficiency[slot].compute <= 1);
      }
  }
  CHECK(errorOf(builtinDevice("h300")) ==
        "unknown device 'h300' (built-in: k40m, titanx-maxwell, p100, v100, "
        "v100-32g-pcie, a100-40g, a100-80g, h100-pcie, h100-sxm, h200, "
        "rtx-4090; or give a .json file describing the device)");
}

TEST_CASE("device JSON: a minimal file, defaults, round trip", "[device]") {
  auto d = parseDeviceJson(kMinimal, "lab.json");
  REQUIRE(static_cast<bool>(d));
  CHECK(d->name == "lab-gpu");
  CHECK(d->fp32Flops == 20e12);
  CHECK(d->d2hBandwidth == 24e9);
  CHECK(d->memoryBytes == int64_t(24) << 30);
  CHECK(d->launchSeconds == Approx(4e-6));
  // Optional fields take the documented defaults; the model's parameters
  // the calibration.
  CHECK(d->linkEfficiency == 0.8);
  CHECK(d->halfRateItemsPerSm == calibratedDefaults().halfRateItemsPerSm);
  CHECK(d->halfRateReduction == calibratedDefaults().halfRateReduction);
  CHECK(
      d->convEfficiency(ConvDirection::Forward, 0).compute ==
      defaultEfficiencies()[efficiencySlot(ConvDirection::Forward, 0)].compute);

  for (const std::string &name : builtinDeviceNames()) {
    DeviceSpec s = *builtinDevice(name);
    s.efficiency[efficiencySlot(CostClass::Pooling)].memory = 0.61;
    auto back = parseDeviceJson(deviceToJson(s), "dump.json");
    REQUIRE(static_cast<bool>(back));
    CHECK(back->description == s.description);
    CHECK(back->fp32Flops == Approx(s.fp32Flops).epsilon(1e-15));
    CHECK(back->memoryBandwidth == Approx(s.memoryBandwidth).epsilon(1e-15));
    CHECK(back->memoryBytes == s.memoryBytes);
    CHECK(back->transferLatency == Approx(s.transferLatency).epsilon(1e-15));
    CHECK(back->classEfficiency(CostClass::Pooling).memory == 0.61);
    CHECK(deviceToJson(*back) == deviceToJson(s));
  }
}

TEST_CASE("a device described by its datasheet alone takes the calibrated "
          "parameters",
          "[device]") {
  // The seven datasheet fields are enough: the launch floor, the ramps and
  // the efficiencies come from the calibration, as for a built-in GPU.
  const char *datasheet = R"({"name": "p100-sheet", "fp32_tflops": 10.6,
    "memory_gbps": 732, "memory_gib": 16, "sm_count": 56,
    "h2d_gbps": 15.75, "d2h_gbps": 15.75})";
  auto d = parseDeviceJson(datasheet, "sheet.json");
  REQUIRE(static_cast<bool>(d));
  const CostCalibration &c = calibratedDefaults();
  CHECK(d->launchSeconds == c.launchSeconds);
  CHECK(d->halfRateItemsPerSm == c.halfRateItemsPerSm);
  for (int slot = 0; slot < kNumEfficiencySlots; ++slot) {
    CHECK(d->efficiency[slot].compute == c.efficiency[slot].compute);
    CHECK(d->efficiency[slot].memory == c.efficiency[slot].memory);
  }
  // The same GPU as a built-in differs only in its name, its description,
  // its compute capability and its links to other GPUs, which the seven
  // fields do not give (a file without them has none; built-ins carry
  // their node's links).
  DeviceSpec p100 = *builtinDevice("p100");
  CHECK(d->nvlinkBandwidth == 0);
  CHECK(d->networkBandwidth == 0);
  CHECK(d->computeCapability == 0);
  CHECK(p100.computeCapability == 60);
  d->name = p100.name;
  d->description = p100.description;
  d->computeCapability = p100.computeCapability;
  d->nvlinkBandwidth = p100.nvlinkBandwidth;
  d->networkBandwidth = p100.networkBandwidth;
  CHECK(deviceToJson(*d) == deviceToJson(p100));
  // A file may carry its own calibration.
  auto own = parseDeviceJson(
      R"({"name": "x", "fp32_tflops": 1, "memory_gbps": 1, "memory_gib": 1,
          "sm_count": 1, "h2d_gbps": 1, "d2h_gbps": 1, "launch_us": 7,
          "half_rate_reduction": 48})",
      "own.json");
  REQUIRE(static_cast<bool>(own));
  CHECK(own->launchSeconds == Approx(7e-6));
  CHECK(own->halfRateReduction == 48);
}

TEST_CASE("device JSON errors name the file and the field", "[device]") {
  auto withField = [](const std::string &extra) {
    std::string text = kMinimal;
    text.insert(text.rfind('}'), "," + extra);
    return text;
  };
  auto without = [](const std::string &key) {
    std::string text = kMinimal;
    size_t at = text.find("\"" + key + "\"");
    size_t end = text.find('\n', at);
    text.erase(at, end - at + 1);
    return text;
  };
  CHECK(errorOf(parseDeviceJson(without("fp32_tflops"), "gpu.json")) ==
        "gpu.json: field 'fp32_tflops' is missing");
  CHECK(errorOf(parseDeviceJson(without("sm_count"), "gpu.json")) ==
        "gpu.json: field 'sm_count' is missing");
  CHECK(errorOf(parseDeviceJson(withField(R"("link_efficiency": "high")"),
                                "gpu.json")) ==
        "gpu.json: field 'link_efficiency' must be a number, not a string");
  CHECK(errorOf(parseDeviceJson(withField(R"("link_efficiency": 1.5)"),
                                "gpu.json")) ==
        "gpu.json: field 'link_efficiency' must be in (0, 1], got 1.5");
  std::string negative = kMinimal;
  negative.replace(negative.find("\"memory_gbps\": 1000"), 19,
                   "\"memory_gbps\": -1");
  CHECK(errorOf(parseDeviceJson(negative, "gpu.json")) ==
        "gpu.json: field 'memory_gbps' must be positive, got -1");
  // Past 2^62 bytes a memory size does not fit the integer that holds it.
  std::string huge = kMinimal;
  huge.replace(huge.find("\"memory_gib\": 24"), 16, "\"memory_gib\": 1e10");
  CHECK_THAT(errorOf(parseDeviceJson(huge, "gpu.json")),
             Catch::StartsWith("gpu.json: field 'memory_gib' is too large"));
  CHECK_THAT(
      errorOf(parseDeviceJson(withField(R"("library_reserve_mib": 1e20)"),
                              "gpu.json")),
      Catch::StartsWith("gpu.json: field 'library_reserve_mib' is too large"));
  std::string fractionalSms = kMinimal;
  fractionalSms.replace(fractionalSms.find("84"), 2, "84.5");
  CHECK(errorOf(parseDeviceJson(fractionalSms, "gpu.json")) ==
        "gpu.json: field 'sm_count' must be an integer, not a number");
  CHECK(
      errorOf(parseDeviceJson(withField(R"("fp64_tflops": 1)"), "gpu.json")) ==
      "gpu.json: unknown field 'fp64_tflops' (see docs/cost-model.md for "
      "the device fields)");
  CHECK(errorOf(parseDeviceJson(
            withField(R"("efficiency": {"conv_fwd.magic": {"compute": 1}})"),
            "gpu.json")) ==
        "gpu.json: efficiency: unknown kernel class 'conv_fwd.magic' "
        "(expected e.g. 'conv_fwd.winograd' or 'gemm')");
  CHECK(errorOf(parseDeviceJson(
            withField(R"("efficiency": {"gemm": {"compute": 0}})"),
            "gpu.json")) ==
        "gpu.json: field 'efficiency.gemm.compute' must be in (0, 1], got 0");
  CHECK(errorOf(parseDeviceJson("[1, 2]", "gpu.json")) ==
        "gpu.json: expected a JSON object describing a device, got an array");
  CHECK(errorOf(parseDeviceJson("{\"name\": ", "gpu.json"))
            .find("gpu.json: invalid JSON: ") == 0);
  CHECK(errorOf(resolveDevice("/nonexistent/gpu.json"))
            .find("/nonexistent/gpu.json: cannot read device file") == 0);

  // A valid efficiency override takes effect.
  auto tuned = parseDeviceJson(
      withField(R"("efficiency": {"conv_bwd_filter.fft": {"memory": 0.5}})"),
      "gpu.json");
  REQUIRE(static_cast<bool>(tuned));
  CHECK(tuned->convEfficiency(ConvDirection::BackwardFilter, 2).memory == 0.5);
}

TEST_CASE("resolveDevice: names are built-ins, paths are files", "[device]") {
  llvm::SmallString<128> path;
  int fd;
  REQUIRE_FALSE(
      llvm::sys::fs::createTemporaryFile("memfit-device", "json", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << kMinimal;
  }
  auto fromFile = resolveDevice(path);
  REQUIRE(static_cast<bool>(fromFile));
  CHECK(fromFile->name == "lab-gpu");
  auto builtin = resolveDevice("v100");
  REQUIRE(static_cast<bool>(builtin));
  CHECK(builtin->smCount == 80);
  llvm::sys::fs::remove(path);
}

TEST_CASE("partial overrides change only the fields given", "[device]") {
  DeviceSpec s = *builtinDevice("a100-80g");
  REQUIRE_FALSE(static_cast<bool>(applyDeviceOverrides(
      s, R"({"launch_us": 7, "efficiency": {"gemm": {"compute": 0.9}}})",
      "cal")));
  CHECK(s.launchSeconds == Approx(7e-6));
  CHECK(s.classEfficiency(CostClass::Gemm).compute == 0.9);
  // The memory half of the pair keeps the calibrated value.
  CHECK(
      s.classEfficiency(CostClass::Gemm).memory ==
      calibratedDefaults().efficiency[efficiencySlot(CostClass::Gemm)].memory);
  CHECK(s.fp32Flops == 19.5e12);
  llvm::Error err = applyDeviceOverrides(s, R"({"sm_count": -3})", "cal");
  CHECK(llvm::toString(std::move(err)) ==
        "cal: field 'sm_count' must be positive");
}

TEST_CASE("tensor-core rates: datasheet values, none on old GPUs, files",
          "[device][precision]") {
  DeviceSpec h100 = *builtinDevice("h100-sxm");
  CHECK(h100.tf32Flops == Approx(494.7e12));
  CHECK(h100.bf16Flops == Approx(989.4e12));
  CHECK(h100.fp16Flops == Approx(989.4e12));
  CHECK(h100.productFlops(Precision::FP32) == 67e12);
  CHECK(h100.productFlops(Precision::TF32) == Approx(494.7e12));
  CHECK(h100.productFlops(Precision::BF16) == Approx(989.4e12));
  DeviceSpec a100 = *builtinDevice("a100-80g");
  CHECK(a100.tf32Flops == Approx(156e12));
  CHECK(a100.bf16Flops == Approx(312e12));
  // Volta has fp16 tensor cores only: TF32 and bf16 products run at the
  // FP32 rate there.
  DeviceSpec v100 = *builtinDevice("v100");
  CHECK(v100.productFlops(Precision::FP16) == Approx(125e12));
  CHECK(v100.productFlops(Precision::TF32) == v100.fp32Flops);
  CHECK(v100.productFlops(Precision::BF16) == v100.fp32Flops);
  for (const char *old : {"k40m", "titanx-maxwell", "p100"}) {
    DeviceSpec s = *builtinDevice(old);
    INFO(old);
    for (Precision p : {Precision::TF32, Precision::BF16, Precision::FP16})
      CHECK(s.productFlops(p) == s.fp32Flops);
  }

  // Optional in a file; absent means none, and they round-trip.
  DeviceSpec plain = *parseDeviceJson(kMinimal, "lab.json");
  CHECK(plain.bf16Flops == 0);
  CHECK(plain.productFlops(Precision::BF16) == plain.fp32Flops);
  std::string withTc = kMinimal;
  withTc.insert(withTc.rfind('}'),
                ", \"bf16_tflops\": 150, \"tf32_tflops\": 75");
  DeviceSpec tc = *parseDeviceJson(withTc, "lab.json");
  CHECK(tc.bf16Flops == 150e12);
  CHECK(tc.tf32Flops == 75e12);
  DeviceSpec back = *parseDeviceJson(deviceToJson(tc), "again.json");
  CHECK(back.bf16Flops == tc.bf16Flops);
  CHECK(back.tf32Flops == tc.tf32Flops);
  CHECK(back.fp16Flops == 0);
  std::string bad = kMinimal;
  bad.insert(bad.rfind('}'), ", \"fp16_tflops\": -1");
  CHECK(errorOf(parseDeviceJson(bad, "lab.json")) ==
        "lab.json: field 'fp16_tflops' must be non-negative, got -1");
}

TEST_CASE("a device file states its compute capability as MAJOR.MINOR",
          "[device]") {
  const std::string base = R"({"name": "l4", "fp32_tflops": 30.3,
    "memory_gbps": 300, "memory_gib": 24, "sm_count": 58,
    "h2d_gbps": 31.5, "d2h_gbps": 31.5)";
  auto d =
      parseDeviceJson(base + R"(, "compute_capability": "8.9"})", "l4.json");
  REQUIRE(static_cast<bool>(d));
  CHECK(d->computeCapability == 89);
  // Written back and read again unchanged.
  std::string text = deviceToJson(*d);
  CHECK(text.find("\"compute_capability\": \"8.9\"") != std::string::npos);
  auto again = parseDeviceJson(text, "again.json");
  REQUIRE(static_cast<bool>(again));
  CHECK(again->computeCapability == 89);
  for (const char *bad : {R"("89")", "8.9", R"("8.x")", R"("8.9.1")"}) {
    auto e = parseDeviceJson(base + ", \"compute_capability\": " + bad + "}",
                             "l4.json");
    REQUIRE_FALSE(static_cast<bool>(e));
    CHECK(llvm::toString(e.takeError())
              .find("l4.json: field 'compute_capability' must be a string "
                    "MAJOR.MINOR") == 0);
  }
}

TEST_CASE("the GPUs issue 33's benchmarks need, from their datasheets",
          "[device]") {
  DeviceSpec v = *builtinDevice("v100-32g-pcie");
  CHECK(v.computeCapability == 70);
  CHECK(v.fp32Flops == 14e12);
  CHECK(v.fp16Flops == 112e12);
  CHECK(v.bf16Flops == 0);
  CHECK(v.memoryBandwidth == 900e9);
  CHECK(v.memoryBytes == int64_t(32) << 30);
  CHECK(v.h2dBandwidth == 15.75e9);
  CHECK(v.smCount == 80);
  CHECK(v.nvlinkBandwidth == 0);
  DeviceSpec r = *builtinDevice("rtx-4090");
  CHECK(r.computeCapability == 89);
  CHECK(r.fp32Flops == Approx(82.6e12));
  CHECK(r.tf32Flops == Approx(82.6e12));
  CHECK(r.bf16Flops == Approx(165.2e12));
  CHECK(r.memoryBandwidth == 1008e9);
  CHECK(r.memoryBytes == int64_t(24) << 30);
  CHECK(r.h2dBandwidth == 31.5e9);
  CHECK(r.smCount == 128);
}

TEST_CASE("built-in hosts: the node's figures per GPU, as cited",
          "[device][host]") {
  constexpr int64_t GiB = int64_t(1) << 30;
  // DGX H100 and H200: 112 cores, 16 channels of DDR5-4800, 2 TB and
  // 8 x 3.84 TB NVMe for 8 GPUs.
  for (const char *name : {"h100-sxm", "h200"}) {
    INFO(name);
    DeviceSpec s = *builtinDevice(name);
    CHECK(s.hostCores == 14);
    CHECK(s.hostMemoryBandwidth == Approx(76.8e9));
    CHECK(s.hostMemoryBytes == 256 * GiB);
    CHECK(s.nvmeBytes == int64_t(3840) * 1000 * 1000 * 1000);
    CHECK(s.nvmeReadBandwidth == 0); // no source states the drives' rates
    // Adam: the 14 cores' arithmetic (below the bandwidth's 2.7e9/s);
    // SGD: the bandwidth (below the cores' 4.3e9/s).
    CHECK(s.hostAdamRate() == Approx(14 * kHostAdamParamsPerCoreSecond));
    CHECK(s.hostSgdRate() == Approx(76.8e9 / 20));
    CHECK_FALSE(s.hostAdamRateMeasured());
  }
  // DGX A100: 128 cores, 16 channels of DDR4-3200; 1 TB and 15 TB NVMe
  // (320GB system), 2 TB and 30 TB (640GB system).
  DeviceSpec a40 = *builtinDevice("a100-40g"), a80 = *builtinDevice("a100-80g");
  CHECK(a40.hostCores == 16);
  CHECK(a40.hostMemoryBandwidth == Approx(51.2e9));
  CHECK(a40.hostMemoryBytes == 128 * GiB);
  CHECK(a40.nvmeBytes == int64_t(1920) * 1000 * 1000 * 1000);
  CHECK(a80.hostMemoryBytes == 256 * GiB);
  CHECK(a80.nvmeBytes == int64_t(3840) * 1000 * 1000 * 1000);
  // DGX-1: 40 cores, 8 channels of DDR4-2133, 512 GB for 8 GPUs.
  DeviceSpec v100 = *builtinDevice("v100");
  CHECK(v100.hostCores == 5);
  CHECK(v100.hostMemoryBandwidth == Approx(17.0664e9));
  CHECK(v100.hostMemoryBytes == 64 * GiB);
  CHECK_FALSE(v100.hasNvme());
  // LoHan's RTX 4090 machine: 256 GB of main memory, nothing else stated.
  DeviceSpec rtx = *builtinDevice("rtx-4090");
  CHECK(rtx.hostMemoryBytes == 256 * GiB);
  CHECK(rtx.hostCores == 0);
  CHECK(rtx.hostAdamRate() == 0); // neither measured nor derivable
  // No documented host: none.
  for (const char *name :
       {"k40m", "titanx-maxwell", "p100", "v100-32g-pcie", "h100-pcie"}) {
    INFO(name);
    DeviceSpec s = *builtinDevice(name);
    CHECK_FALSE(s.hasHost());
    CHECK_FALSE(s.hasNvme());
    CHECK(deviceToJson(s).find("host_") == std::string::npos);
    CHECK(deviceToJson(s).find("nvme_") == std::string::npos);
  }
}

TEST_CASE("device JSON: the host's figures parse, round-trip, and are "
          "optional",
          "[device][host]") {
  // A file without them is what it was: no host, nothing written.
  DeviceSpec plain = *parseDeviceJson(kMinimal, "lab.json");
  CHECK_FALSE(plain.hasHost());
  CHECK_FALSE(plain.hasNvme());
  CHECK(plain.hostAdamRate() == 0);
  CHECK(deviceToJson(plain).find("host_") == std::string::npos);

  std::string text = kMinimal;
  text.insert(text.rfind('}'), R"(, "host_cores": 32,
    "host_memory_gbps": 204.8, "host_memory_gib": 512,
    "host_adam_mparams_per_s": 1500, "nvme_read_gbps": 6.8,
    "nvme_write_gbps": 4.2, "nvme_gib": 7000)");
  auto d = parseDeviceJson(text, "lab.json");
  REQUIRE(static_cast<bool>(d));
  CHECK(d->hostCores == 32);
  CHECK(d->hostMemoryBandwidth == Approx(204.8e9));
  CHECK(d->hostMemoryBytes == int64_t(512) << 30);
  CHECK(d->nvmeReadBandwidth == Approx(6.8e9));
  CHECK(d->nvmeWriteBandwidth == Approx(4.2e9));
  CHECK(d->nvmeBytes == int64_t(7000) << 30);
  // Adam measured, SGD derived from the bandwidth.
  CHECK(d->hostAdamRate() == Approx(1.5e9));
  CHECK(d->hostAdamRateMeasured());
  CHECK(d->hostSgdRate() ==
        Approx(std::min(204.8e9 / 20, 32 * kHostSgdParamsPerCoreSecond)));
  CHECK_FALSE(d->hostSgdRateMeasured());

  std::string json = deviceToJson(*d);
  CHECK(json.find("\"host_sgd_mparams_per_s\"") == std::string::npos);
  auto back = parseDeviceJson(json, "dump.json");
  REQUIRE(static_cast<bool>(back));
  CHECK(back->hostCores == 32);
  CHECK(back->hostMemoryBytes == d->hostMemoryBytes);
  CHECK(back->nvmeBytes == d->nvmeBytes);
  CHECK(back->hostAdamParamsPerSecond == Approx(1.5e9).epsilon(1e-15));
  CHECK(deviceToJson(*back) == json);
  for (const std::string &name : builtinDeviceNames()) {
    INFO(name);
    DeviceSpec s = *builtinDevice(name);
    DeviceSpec again = *parseDeviceJson(deviceToJson(s), "dump.json");
    CHECK(again.hostCores == s.hostCores);
    CHECK(again.hostMemoryBytes == s.hostMemoryBytes);
    CHECK(again.nvmeBytes == s.nvmeBytes);
    CHECK(again.hostMemoryBandwidth ==
          Approx(s.hostMemoryBandwidth).epsilon(1e-15));
  }
}

TEST_CASE("device JSON: bad host figures name the file and the field",
          "[device][host]") {
  auto withField = [](const std::string &extra) {
    std::string text = kMinimal;
    text.insert(text.rfind('}'), "," + extra);
    return text;
  };
  CHECK(
      errorOf(parseDeviceJson(withField(R"("host_cores": 2.5)"), "gpu.json")) ==
      "gpu.json: field 'host_cores' must be an integer, not a number");
  CHECK(errorOf(parseDeviceJson(withField(R"("host_cores": 0)"), "gpu.json")) ==
        "gpu.json: field 'host_cores' must be positive, got 0");
  CHECK(errorOf(parseDeviceJson(withField(R"("host_memory_gib": "lots")"),
                                "gpu.json")) ==
        "gpu.json: field 'host_memory_gib' must be a number, not a string");
  CHECK(errorOf(parseDeviceJson(withField(R"("nvme_gib": -1)"), "gpu.json")) ==
        "gpu.json: field 'nvme_gib' must be positive, got -1");
  // Sizes past 2^62 bytes do not fit the integer that holds them.
  CHECK_THAT(
      errorOf(parseDeviceJson(withField(R"("nvme_gib": 1e300)"), "gpu.json")),
      Catch::StartsWith("gpu.json: field 'nvme_gib' is too large"));
  CHECK_THAT(
      errorOf(parseDeviceJson(withField(R"("host_cores": 9000000000000000000)"),
                              "gpu.json")),
      Catch::StartsWith("gpu.json: field 'host_cores' is too large"));
  CHECK(errorOf(parseDeviceJson(withField(R"("host_memory_gbps": 0)"),
                                "gpu.json")) ==
        "gpu.json: field 'host_memory_gbps' must be positive, got 0");
  CHECK(errorOf(parseDeviceJson(
            withField(R"("host_adam_mparams_per_s": "fast")"), "gpu.json")) ==
        "gpu.json: field 'host_adam_mparams_per_s' must be a number, not a "
        "string");
  CHECK(errorOf(
            parseDeviceJson(withField(R"("nvme_read_gbs": 3)"), "gpu.json")) ==
        "gpu.json: unknown field 'nvme_read_gbs' (see docs/cost-model.md for "
        "the device fields)");
}
