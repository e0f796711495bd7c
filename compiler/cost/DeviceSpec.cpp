//===- DeviceSpec.cpp - GPU description for the analytic model ------------===//
//
// The built-in table and the JSON reader/writer. JSON fields are in the units
// datasheets use (TFLOP/s, GB/s, GiB, microseconds); the struct holds SI
// units. Every field is described once in kNumberFields so reading, writing
// and error messages cannot drift apart.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/DeviceSpec.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/JsonText.h"

#include "llvm/Support/MemoryBuffer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace memfit {

using nlohmann::json;

std::string_view costClassName(CostClass c) {
  switch (c) {
  case CostClass::Gemm:
    return "gemm";
  case CostClass::Elementwise:
    return "elementwise";
  case CostClass::Pooling:
    return "pooling";
  case CostClass::Normalization:
    return "normalization";
  case CostClass::Softmax:
    return "softmax";
  case CostClass::Copy:
    return "copy";
  case CostClass::Loss:
    return "loss";
  case CostClass::Update:
    return "update";
  }
  return "?";
}

int efficiencySlot(ConvDirection d, int algo) {
  assert(algo >= 0 && algo < kMaxConvAlgoId &&
         "conv algorithm id out of range");
  return static_cast<int>(d) * kMaxConvAlgoId + algo;
}

int efficiencySlot(CostClass c) {
  return kNumConvDirections * kMaxConvAlgoId + static_cast<int>(c);
}

std::string efficiencySlotName(int slot) {
  if (slot >= kNumConvDirections * kMaxConvAlgoId)
    return std::string(costClassName(
        static_cast<CostClass>(slot - kNumConvDirections * kMaxConvAlgoId)));
  auto dir = static_cast<ConvDirection>(slot / kMaxConvAlgoId);
  const ConvAlgoInfo *info = findConvAlgo(dir, slot % kMaxConvAlgoId);
  if (!info)
    return "";
  return std::string(convDirectionName(dir)) + "." + std::string(info->name);
}

static std::array<Efficiency, kNumEfficiencySlots> priorEfficiencies() {
  // The fit's starting point, chosen before any measurement: fractions of
  // FP32 peak commonly reported for cuDNN/cuBLAS kernels on large problems.
  // Implicit GEMM is the slowest general method, precomputed indices help,
  // transform methods run at lower efficiency on far fewer FLOPs. Backward
  // filter kernels reduce over the batch and reach less. The classes DeepBench
  // does not measure (everything but convolutions and GEMM) keep these values.
  std::array<Efficiency, kNumEfficiencySlots> e{};
  auto conv = [&](ConvDirection d, int algo, double compute) {
    e[efficiencySlot(d, algo)] = {compute, 0.8};
  };
  using D = ConvDirection;
  conv(D::Forward, (int)FwdAlgo::ImplicitGemm, 0.45);
  conv(D::Forward, (int)FwdAlgo::ImplicitPrecompGemm, 0.65);
  conv(D::Forward, (int)FwdAlgo::Gemm, 0.60);
  conv(D::Forward, (int)FwdAlgo::Direct, 0.25);
  conv(D::Forward, (int)FwdAlgo::Fft, 0.45);
  conv(D::Forward, (int)FwdAlgo::FftTiling, 0.45);
  conv(D::Forward, (int)FwdAlgo::Winograd, 0.55);
  conv(D::Forward, (int)FwdAlgo::WinogradNonfused, 0.50);
  conv(D::BackwardData, (int)BwdDataAlgo::Algo0, 0.45);
  conv(D::BackwardData, (int)BwdDataAlgo::Algo1, 0.55);
  conv(D::BackwardData, (int)BwdDataAlgo::Fft, 0.45);
  conv(D::BackwardData, (int)BwdDataAlgo::FftTiling, 0.45);
  conv(D::BackwardData, (int)BwdDataAlgo::Winograd, 0.50);
  conv(D::BackwardData, (int)BwdDataAlgo::WinogradNonfused, 0.45);
  conv(D::BackwardFilter, (int)BwdFilterAlgo::Algo0, 0.45);
  conv(D::BackwardFilter, (int)BwdFilterAlgo::Algo1, 0.40);
  conv(D::BackwardFilter, (int)BwdFilterAlgo::Fft, 0.40);
  conv(D::BackwardFilter, (int)BwdFilterAlgo::Algo3, 0.50);
  conv(D::BackwardFilter, (int)BwdFilterAlgo::WinogradNonfused, 0.40);
  conv(D::BackwardFilter, (int)BwdFilterAlgo::FftTiling, 0.40);
  auto cls = [&](CostClass c, double compute, double memory) {
    e[efficiencySlot(c)] = {compute, memory};
  };
  cls(CostClass::Gemm, 0.75, 0.8);
  cls(CostClass::Elementwise, 0.5, 0.85);
  cls(CostClass::Pooling, 0.5, 0.7);
  cls(CostClass::Normalization, 0.5, 0.7);
  cls(CostClass::Softmax, 0.5, 0.75);
  cls(CostClass::Copy, 0.5, 0.85);
  cls(CostClass::Loss, 0.5, 0.7);
  cls(CostClass::Update, 0.5, 0.85);
  return e;
}

CostCalibration priorCalibration() {
  CostCalibration c;
  c.launchSeconds = 4e-6;
  c.halfRateItemsPerSm = 1024;
  c.halfRateReduction = 0;
  c.efficiency = priorEfficiencies();
  return c;
}

const CostCalibration &calibratedDefaults() {
  static const CostCalibration table = [] {
    CostCalibration c = priorCalibration();
    auto slotOf = [](std::string_view name) {
      for (int s = 0; s < kNumEfficiencySlots; ++s)
        if (efficiencySlotName(s) == name)
          return s;
      assert(false && "CalibratedParams.inc names an unknown class");
      return 0;
    };
#define MEMFIT_CALIBRATED_PARAM(field, value) c.field = value;
#define MEMFIT_CALIBRATED_EFFICIENCY(name, compute, memory)                    \
  c.efficiency[slotOf(name)] = {compute, memory};
#include "compiler/cost/CalibratedParams.inc"
#undef MEMFIT_CALIBRATED_PARAM
#undef MEMFIT_CALIBRATED_EFFICIENCY
    return c;
  }();
  return table;
}

void applyCalibration(DeviceSpec &spec, const CostCalibration &c) {
  spec.launchSeconds = c.launchSeconds;
  spec.halfRateItemsPerSm = c.halfRateItemsPerSm;
  spec.halfRateReduction = c.halfRateReduction;
  spec.halfRateFilterItemsPerSm = c.halfRateFilterItemsPerSm;
  spec.stridePenaltyExponent = c.stridePenaltyExponent;
  spec.efficiency = c.efficiency;
}

CostCalibration calibrationOf(const DeviceSpec &spec) {
  CostCalibration c;
  c.launchSeconds = spec.launchSeconds;
  c.halfRateItemsPerSm = spec.halfRateItemsPerSm;
  c.halfRateReduction = spec.halfRateReduction;
  c.halfRateFilterItemsPerSm = spec.halfRateFilterItemsPerSm;
  c.stridePenaltyExponent = spec.stridePenaltyExponent;
  c.efficiency = spec.efficiency;
  return c;
}

std::array<Efficiency, kNumEfficiencySlots> defaultEfficiencies() {
  return calibratedDefaults().efficiency;
}

namespace {

/// A numeric field: JSON value times `scale` is the struct's SI value.
struct NumberField {
  const char *key;
  double DeviceSpec::*member;
  double scale;
  bool required;
  bool fraction; // must lie in (0, 1] rather than merely be positive
  bool allowZero;
  /// Written only when stated (non-zero): the host's figures, which a
  /// device without a host lacks, so its JSON stays what it was.
  bool omitZero = false;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

const NumberField kNumberFields[] = {
    {"fp32_tflops", &DeviceSpec::fp32Flops, 1e12, true, false, false},
    {"tf32_tflops", &DeviceSpec::tf32Flops, 1e12, false, false, true},
    {"bf16_tflops", &DeviceSpec::bf16Flops, 1e12, false, false, true},
    {"fp16_tflops", &DeviceSpec::fp16Flops, 1e12, false, false, true},
    {"memory_gbps", &DeviceSpec::memoryBandwidth, 1e9, true, false, false},
    {"h2d_gbps", &DeviceSpec::h2dBandwidth, 1e9, true, false, false},
    {"d2h_gbps", &DeviceSpec::d2hBandwidth, 1e9, true, false, false},
    {"launch_us", &DeviceSpec::launchSeconds, 1e-6, false, false, true},
    {"link_efficiency", &DeviceSpec::linkEfficiency, 1, false, true, false},
    {"transfer_latency_us", &DeviceSpec::transferLatency, 1e-6, false, false,
     true},
    {"half_rate_items_per_sm", &DeviceSpec::halfRateItemsPerSm, 1, false, false,
     true},
    {"half_rate_reduction", &DeviceSpec::halfRateReduction, 1, false, false,
     true},
    {"half_rate_filter_items_per_sm", &DeviceSpec::halfRateFilterItemsPerSm, 1,
     false, false, true},
    {"stride_penalty_exponent", &DeviceSpec::stridePenaltyExponent, 1, false,
     false, true},
    {"nvlink_gbps", &DeviceSpec::nvlinkBandwidth, 1e9, false, false, true},
    {"network_gbps", &DeviceSpec::networkBandwidth, 1e9, false, false, true},
    {"collective_efficiency", &DeviceSpec::collectiveEfficiency, 1, false, true,
     false},
    {"collective_step_latency_us", &DeviceSpec::collectiveStepLatency, 1e-6,
     false, false, true},
    {"host_memory_gbps", &DeviceSpec::hostMemoryBandwidth, 1e9, false, false,
     false, true},
    {"host_adam_mparams_per_s", &DeviceSpec::hostAdamParamsPerSecond, 1e6,
     false, false, false, true},
    {"host_sgd_mparams_per_s", &DeviceSpec::hostSgdParamsPerSecond, 1e6, false,
     false, false, true},
    {"nvme_read_gbps", &DeviceSpec::nvmeReadBandwidth, 1e9, false, false, false,
     true},
    {"nvme_write_gbps", &DeviceSpec::nvmeWriteBandwidth, 1e9, false, false,
     false, true},
};
// Fields handled outside the table: name, description, compute_capability,
// memory_gib, library_reserve_mib, sm_count, efficiency, and the host's
// sizes (kHostSizeFields).

/// The host's sizes: optional, positive when present, written only when
/// stated.
struct HostSizeField {
  const char *key;
  int64_t DeviceSpec::*member;
  double scale; // JSON value times this is the struct's value
  bool integer; // a count, not a size in GiB
};
const HostSizeField kHostSizeFields[] = {
    {"host_cores", &DeviceSpec::hostCores, 1, true},
    {"host_memory_gib", &DeviceSpec::hostMemoryBytes, kGiB, false},
    {"nvme_gib", &DeviceSpec::nvmeBytes, kGiB, false},
};

struct Builtin {
  const char *name, *description;
  int cc; // compute capability, major * 10 + minor
  double tflops, memGBps, memGiB, linkGBps;
  int64_t sms;
  double tf32, bf16, fp16;        // dense tensor-core TFLOP/s, 0: none
  double nvlinkGBps, networkGBps; // per direction; 0: no NVLink
};

// Datasheet values; docs/cost-model.md gives the source of each row. Host
// links are PCIe x16 per direction: Gen3 15.75 GB/s, Gen4 31.5, Gen5 63.
// Tensor-core rates are dense (the datasheets' sparsity figures halved).
// Collective links per GPU and direction (docs/data-parallel.md): NVLink
// links x 25 GB/s (P100: 4 x 20), and the InfiniBand NIC of the machines
// these GPUs shipped in (FDR 56, EDR 100, HDR 200, NDR 400 Gb/s).
const Builtin kBuiltins[] = {
    {"k40m", "NVIDIA Tesla K40m 12GB", 35, 4.29, 288, 12, 15.75, 15, 0, 0, 0, 0,
     7},
    {"titanx-maxwell", "NVIDIA GeForce GTX TITAN X (Maxwell) 12GB", 52, 6.14,
     336.5, 12, 15.75, 24, 0, 0, 0, 0, 7},
    {"p100", "NVIDIA Tesla P100 SXM2 16GB", 60, 10.6, 732, 16, 15.75, 56, 0, 0,
     0, 80, 12.5},
    {"v100", "NVIDIA Tesla V100 SXM2 32GB", 70, 15.7, 900, 32, 15.75, 80, 0, 0,
     125, 150, 12.5},
    {"v100-32g-pcie", "NVIDIA Tesla V100 PCIe 32GB", 70, 14, 900, 32, 15.75, 80,
     0, 0, 112, 0, 0},
    {"a100-40g", "NVIDIA A100 SXM4 40GB", 80, 19.5, 1555, 40, 31.5, 108, 156,
     312, 312, 300, 25},
    {"a100-80g", "NVIDIA A100 SXM4 80GB", 80, 19.5, 2039, 80, 31.5, 108, 156,
     312, 312, 300, 25},
    {"h100-pcie", "NVIDIA H100 PCIe 80GB", 90, 51, 2000, 80, 63, 114, 378, 756,
     756, 0, 50},
    {"h100-sxm", "NVIDIA H100 SXM5 80GB", 90, 67, 3350, 80, 63, 132, 494.7,
     989.4, 989.4, 450, 50},
    {"h200", "NVIDIA H200 SXM 141GB", 90, 67, 4800, 141, 63, 132, 494.7, 989.4,
     989.4, 450, 50},
    // GeForce tensor-core rates with FP32 accumulation, as training uses.
    {"rtx-4090", "NVIDIA GeForce RTX 4090 24GB", 89, 82.6, 1008, 24, 31.5, 128,
     82.6, 165.2, 165.2, 0, 0},
};

/// The host a built-in GPU's figures come with: the machine it ships in
/// (or the paper's), divided per GPU where GPUs share the node; 0 where no
/// source states a figure. docs/cost-model.md cites each.
struct BuiltinHost {
  const char *name;
  int64_t cores;
  double memGBps, memGiB, nvmeTB; // nvmeTB in 1e12 bytes, as drives are sold
};

// DGX H100 and H200: 2 x Xeon Platinum 8480C (56 cores, 8 channels of
// DDR5-4800 each), 2 TB, 8 x 3.84 TB NVMe U.2 data drives, for 8 GPUs.
// DGX A100 320GB / 640GB: 2 x EPYC 7742 (64 cores, 8 channels of
// DDR4-3200 each), 1 TB / 2 TB, 15 TB / 30 TB NVMe (4 / 8 x 3.84 TB), for 8
// GPUs. DGX-1 (V100): 2 x Xeon E5-2698 v4 (20 cores, 4 channels each) with
// DDR4-2133, 512 GB, for 8 GPUs (its SSDs are not NVMe: left out). The
// LoHan/Fuyou machine: one RTX 4090 and 256 GB of main memory (the paper's
// CPU and SSDs are not stated in a source found: left out).
constexpr double kDdr5x4800Channel = 4.8e9 * 8 / 1e9;    // GB/s
constexpr double kDdr4x3200Channel = 3.2e9 * 8 / 1e9;    // GB/s
constexpr double kDdr4x2133Channel = 2.1333e9 * 8 / 1e9; // GB/s
const BuiltinHost kBuiltinHosts[] = {
    {"v100", 40 / 8, 2 * 4 * kDdr4x2133Channel / 8, 512.0 / 8, 0},
    {"a100-40g", 128 / 8, 2 * 8 * kDdr4x3200Channel / 8, 1024.0 / 8,
     4 * 3.84 / 8},
    {"a100-80g", 128 / 8, 2 * 8 * kDdr4x3200Channel / 8, 2048.0 / 8,
     8 * 3.84 / 8},
    {"h100-sxm", 112 / 8, 2 * 8 * kDdr5x4800Channel / 8, 2048.0 / 8,
     8 * 3.84 / 8},
    {"h200", 112 / 8, 2 * 8 * kDdr5x4800Channel / 8, 2048.0 / 8, 8 * 3.84 / 8},
    {"rtx-4090", 0, 0, 256, 0},
};

DeviceSpec fromBuiltin(const Builtin &b) {
  DeviceSpec s;
  s.name = b.name;
  s.description = b.description;
  s.computeCapability = b.cc;
  s.fp32Flops = b.tflops * 1e12;
  s.tf32Flops = b.tf32 * 1e12;
  s.bf16Flops = b.bf16 * 1e12;
  s.fp16Flops = b.fp16 * 1e12;
  s.memoryBandwidth = b.memGBps * 1e9;
  s.memoryBytes = static_cast<int64_t>(std::llround(b.memGiB * kGiB));
  s.h2dBandwidth = s.d2hBandwidth = b.linkGBps * 1e9;
  s.smCount = b.sms;
  s.nvlinkBandwidth = b.nvlinkGBps * 1e9;
  s.networkBandwidth = b.networkGBps * 1e9;
  // Every GPU takes the same calibration: it was fitted to predict GPUs
  // from their datasheet numbers (docs/benchmarks/cost-model.md).
  applyCalibration(s, calibratedDefaults());
  for (const BuiltinHost &h : kBuiltinHosts)
    if (std::string_view(h.name) == b.name) {
      s.hostCores = h.cores;
      s.hostMemoryBandwidth = h.memGBps * 1e9;
      s.hostMemoryBytes = static_cast<int64_t>(std::llround(h.memGiB * kGiB));
      s.nvmeBytes = static_cast<int64_t>(std::llround(h.nvmeTB * 1e12));
    }
  return s;
}

/// The host's sizes of `obj` into `spec` (kHostSizeFields).
llvm::Error readHostSizes(DeviceSpec &spec, const json &obj,
                          llvm::StringRef file) {
  for (const HostSizeField &f : kHostSizeFields) {
    if (!obj.contains(f.key))
      continue;
    const json &v = obj.at(f.key);
    auto fieldErr = [&](const llvm::Twine &what) {
      return makeError(file + ": field '" + f.key + "' " + what);
    };
    if (f.integer ? !v.is_number_integer() : !v.is_number())
      return fieldErr(llvm::Twine("must be ") +
                      (f.integer ? "an integer" : "a number") + ", not " +
                      jsonTypeName(v));
    double x = v.get<double>();
    if (!std::isfinite(x))
      return fieldErr("must be finite");
    if (!(x > 0))
      return fieldErr("must be positive, got " + numberText(x));
    // Past 2^62 bytes (or cores) a figure means nothing and would not fit
    // the integer it is kept in.
    if (!(x * f.scale < 0x1p62))
      return fieldErr("is too large, got " + numberText(x));
    spec.*f.member = static_cast<int64_t>(std::llround(x * f.scale));
  }
  return llvm::Error::success();
}

/// Reads one JSON object into `spec`. With `requireAll`, every required
/// field must be present (a full device description); otherwise only the
/// fields present change (calibration overrides).
llvm::Error readFields(DeviceSpec &spec, const json &obj, llvm::StringRef file,
                       bool requireAll) {
  if (!obj.is_object())
    return makeErrorF("{0}: expected a JSON object describing a device, got "
                      "{1}",
                      file, jsonTypeName(obj));
  auto fieldErr = [&](llvm::StringRef key, const llvm::Twine &what) {
    return makeError(file + ": field '" + key + "' " + what);
  };
  auto number = [&](llvm::StringRef key, double &out) -> llvm::Error {
    const json &v = obj.at(std::string(key));
    if (!v.is_number())
      return fieldErr(key, "must be a number, not " + jsonTypeName(v));
    out = v.get<double>();
    if (!std::isfinite(out))
      return fieldErr(key, "must be finite");
    return llvm::Error::success();
  };

  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string &key = it.key();
    bool known = key == "name" || key == "description" ||
                 key == "compute_capability" || key == "memory_gib" ||
                 key == "library_reserve_mib" || key == "sm_count" ||
                 key == "efficiency";
    for (const NumberField &f : kNumberFields)
      known |= key == f.key;
    for (const HostSizeField &f : kHostSizeFields)
      known |= key == f.key;
    if (!known)
      return makeError(file + ": unknown field " + quoteName(key) +
                       " (see docs/cost-model.md for the device fields)");
  }

  for (const char *key : {"name", "description"}) {
    if (!obj.contains(key)) {
      if (requireAll && std::string_view(key) == "name")
        return fieldErr(key, "is missing");
      continue;
    }
    const json &v = obj.at(key);
    if (!v.is_string())
      return fieldErr(key, "must be a string, not " + jsonTypeName(v));
    (std::string_view(key) == "name" ? spec.name : spec.description) =
        v.get<std::string>();
  }

  for (const NumberField &f : kNumberFields) {
    if (!obj.contains(f.key)) {
      if (requireAll && f.required)
        return fieldErr(f.key, "is missing");
      continue;
    }
    double v;
    if (auto err = number(f.key, v))
      return err;
    if (f.fraction && !(v > 0 && v <= 1))
      return fieldErr(f.key, "must be in (0, 1], got " + numberText(v));
    if (!f.fraction && !(v > 0 || (f.allowZero && v == 0)))
      return fieldErr(f.key, llvm::Twine("must be ") +
                                 (f.allowZero ? "non-negative" : "positive") +
                                 ", got " + numberText(v));
    spec.*f.member = v * f.scale;
  }

  if (auto err = readHostSizes(spec, obj, file))
    return err;

  if (obj.contains("compute_capability")) {
    // "8.6", as nvidia-smi and cudaDeviceProp state it.
    const json &v = obj.at("compute_capability");
    int major = 0, minor = 0;
    char tail = 0;
    if (!v.is_string() ||
        std::sscanf(v.get<std::string>().c_str(), "%d.%d%c", &major, &minor,
                    &tail) != 2 ||
        major < 1 || major > 99 || minor < 0 || minor > 9)
      return fieldErr("compute_capability",
                      "must be a string MAJOR.MINOR such as \"8.6\", not " +
                          (v.is_string() ? quoteName(v.get<std::string>())
                                         : jsonTypeName(v)));
    spec.computeCapability = major * 10 + minor;
  }

  if (obj.contains("memory_gib")) {
    double v;
    if (auto err = number("memory_gib", v))
      return err;
    if (!(v > 0))
      return fieldErr("memory_gib", "must be positive, got " + numberText(v));
    if (!(v * kGiB < 0x1p62))
      return fieldErr("memory_gib", "is too large, got " + numberText(v));
    spec.memoryBytes = static_cast<int64_t>(std::llround(v * kGiB));
  } else if (requireAll) {
    return fieldErr("memory_gib", "is missing");
  }

  // Optional: a device file without it keeps the default reserve.
  if (obj.contains("library_reserve_mib")) {
    double v;
    if (auto err = number("library_reserve_mib", v))
      return err;
    if (!(v >= 0))
      return fieldErr("library_reserve_mib",
                      "must be non-negative, got " + numberText(v));
    if (!(v * kMiB < 0x1p62))
      return fieldErr("library_reserve_mib",
                      "is too large, got " + numberText(v));
    spec.libraryReserveBytes = static_cast<int64_t>(std::llround(v * kMiB));
  }

  if (obj.contains("sm_count")) {
    const json &v = obj.at("sm_count");
    if (!v.is_number_integer())
      return fieldErr("sm_count", "must be an integer, not " + jsonTypeName(v));
    if (v.get<int64_t>() <= 0)
      return fieldErr("sm_count", "must be positive");
    spec.smCount = v.get<int64_t>();
  } else if (requireAll) {
    return fieldErr("sm_count", "is missing");
  }

  if (obj.contains("efficiency")) {
    const json &eff = obj.at("efficiency");
    if (!eff.is_object())
      return fieldErr("efficiency",
                      "must be an object, not " + jsonTypeName(eff));
    for (auto it = eff.begin(); it != eff.end(); ++it) {
      int slot = -1;
      for (int s = 0; s < kNumEfficiencySlots; ++s)
        if (!efficiencySlotName(s).empty() && efficiencySlotName(s) == it.key())
          slot = s;
      std::string path = "efficiency." + it.key();
      if (slot < 0)
        return makeError(file + ": efficiency: unknown kernel class " +
                         quoteName(it.key()) +
                         " (expected e.g. 'conv_fwd.winograd' or 'gemm')");
      if (!it.value().is_object())
        return fieldErr(path, "must be an object with 'compute' and/or "
                              "'memory', not " +
                                  jsonTypeName(it.value()));
      for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) {
        std::string sub = path + "." + jt.key();
        double *dst = jt.key() == "compute"  ? &spec.efficiency[slot].compute
                      : jt.key() == "memory" ? &spec.efficiency[slot].memory
                                             : nullptr;
        if (!dst)
          return makeError(file + ": unknown field " + quoteName(sub) +
                           " (expected 'compute' or 'memory')");
        if (!jt.value().is_number())
          return fieldErr(sub,
                          "must be a number, not " + jsonTypeName(jt.value()));
        double v = jt.value().get<double>();
        if (!(v > 0 && v <= 1))
          return fieldErr(sub, "must be in (0, 1], got " + numberText(v));
        *dst = v;
      }
    }
  }
  return llvm::Error::success();
}

llvm::Expected<json> parseJsonText(llvm::StringRef text, llvm::StringRef file) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    return makeError(file + ": invalid JSON: " + e.what());
  }
}

} // namespace

namespace {
/// The bandwidth's rate, capped by the cores' where they are stated.
double derivedRate(double bandwidth, double bytesPerParameter, int64_t cores,
                   double perCore) {
  double rate = bandwidth / bytesPerParameter;
  if (cores > 0)
    rate = rate > 0 ? std::min(rate, static_cast<double>(cores) * perCore) : 0;
  return rate;
}
} // namespace

double DeviceSpec::hostAdamRate() const {
  return hostAdamParamsPerSecond > 0
             ? hostAdamParamsPerSecond
             : derivedRate(hostMemoryBandwidth, kHostAdamBytesPerParameter,
                           hostCores, kHostAdamParamsPerCoreSecond);
}

double DeviceSpec::hostSgdRate() const {
  return hostSgdParamsPerSecond > 0
             ? hostSgdParamsPerSecond
             : derivedRate(hostMemoryBandwidth, kHostSgdBytesPerParameter,
                           hostCores, kHostSgdParamsPerCoreSecond);
}

std::vector<std::string> builtinDeviceNames() {
  std::vector<std::string> out;
  for (const Builtin &b : kBuiltins)
    out.push_back(b.name);
  return out;
}

llvm::Expected<DeviceSpec> builtinDevice(llvm::StringRef name) {
  for (const Builtin &b : kBuiltins)
    if (name == b.name)
      return fromBuiltin(b);
  std::string known;
  for (const Builtin &b : kBuiltins)
    known += (known.empty() ? "" : ", ") + std::string(b.name);
  return makeError("unknown device " + quoteName(name) + " (built-in: " +
                   known + "; or give a .json file describing the device)");
}

llvm::Expected<DeviceSpec> parseDeviceJson(llvm::StringRef text,
                                           llvm::StringRef displayName) {
  auto obj = parseJsonText(text, displayName);
  if (!obj)
    return obj.takeError();
  DeviceSpec spec;
  applyCalibration(spec, calibratedDefaults());
  if (auto err = readFields(spec, *obj, displayName, /*requireAll=*/true))
    return err;
  return spec;
}

llvm::Expected<DeviceSpec> loadDeviceFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return makeError(path +
                     ": cannot read device file: " + buf.getError().message());
  return parseDeviceJson((*buf)->getBuffer(), path);
}

llvm::Expected<DeviceSpec> resolveDevice(llvm::StringRef nameOrPath) {
  if (nameOrPath.endswith(".json") || nameOrPath.contains('/'))
    return loadDeviceFile(nameOrPath);
  return builtinDevice(nameOrPath);
}

llvm::Error applyDeviceOverrides(DeviceSpec &spec, llvm::StringRef jsonText,
                                 llvm::StringRef displayName) {
  auto obj = parseJsonText(jsonText, displayName);
  if (!obj)
    return obj.takeError();
  return readFields(spec, *obj, displayName, /*requireAll=*/false);
}

int64_t DeviceSpec::localMemoryReserveBytes(int64_t perThread) const {
  if (smCount <= 0 || perThread <= kContextLocalBytes)
    return 0;
  // Resident threads an SM holds (CUDA C++ Programming Guide, "Compute
  // capabilities"); 2048 where the capability is not stated.
  const int64_t threads = computeCapability == 75 ? 1024
                          : computeCapability == 86 ||
                                  computeCapability == 87 ||
                                  computeCapability == 89
                              ? 1536
                              : 2048;
  return (perThread - kContextLocalBytes) * threads * smCount;
}

std::string computeCapabilityText(int cc) {
  if (cc <= 0)
    return "";
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

std::string deviceToJson(const DeviceSpec &spec) {
  // Fields in the order a person reads them: identity, datasheet numbers,
  // then the calibration factors.
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["name"] = spec.name;
  out["description"] = spec.description;
  if (spec.computeCapability > 0)
    out["compute_capability"] = computeCapabilityText(spec.computeCapability);
  auto hostSize = [&](std::string_view key) {
    for (const HostSizeField &f : kHostSizeFields)
      if (key == f.key && spec.*f.member > 0) {
        if (f.integer)
          out[f.key] = spec.*f.member;
        else
          out[f.key] = static_cast<double>(spec.*f.member) / f.scale;
      }
  };
  for (const NumberField &f : kNumberFields) {
    if (std::string_view(f.key) == "host_memory_gbps")
      hostSize("host_cores");
    if (!(f.omitZero && spec.*f.member == 0))
      out[f.key] = spec.*f.member / f.scale;
    if (std::string_view(f.key) == "host_memory_gbps")
      hostSize("host_memory_gib");
    if (std::string_view(f.key) == "nvme_write_gbps")
      hostSize("nvme_gib");
    if (std::string_view(f.key) == "memory_gbps") {
      out["memory_gib"] = static_cast<double>(spec.memoryBytes) / kGiB;
      out["library_reserve_mib"] =
          static_cast<double>(spec.libraryReserveBytes) / kMiB;
    }
    if (std::string_view(f.key) == "d2h_gbps")
      out["sm_count"] = spec.smCount;
  }
  nlohmann::ordered_json eff = nlohmann::ordered_json::object();
  for (int s = 0; s < kNumEfficiencySlots; ++s) {
    std::string name = efficiencySlotName(s);
    if (!name.empty())
      eff[name] = {{"compute", spec.efficiency[s].compute},
                   {"memory", spec.efficiency[s].memory}};
  }
  out["efficiency"] = std::move(eff);
  return out.dump(2) + "\n";
}

} // namespace memfit
