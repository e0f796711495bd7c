//===- DeviceSpec.h - GPU description for the analytic model ----*- C++ -*-===//
//
// What the analytic cost model knows about a GPU: peak FP32 rate, memory
// bandwidth and size, host link bandwidth per direction, per-kernel launch
// cost, the SM count that sets how much parallel work saturates it, and the
// calibration factors (efficiency per algorithm class, utilisation ramp).
//
// Built-in specs cover the GPUs of the moDNN/vDNN papers and current data
// centre parts (docs/cost-model.md cites the datasheet for every number). A
// user describes another GPU in a JSON file with the same fields; errors name
// the file and the field. The calibration factors are explicit fields so a
// measured profile can set them (Profile's "calibration" object).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_DEVICESPEC_H
#define MEMFIT_COMPILER_COST_DEVICESPEC_H

#include "compiler/cost/ConvAlgo.h"
#include "compiler/ops/OpDef.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace memfit {

/// Classes of non-convolution kernels that share an efficiency.
// CostClass (the kind of kernel a task runs) is compiler/ops/OpDef.h's.
std::string_view costClassName(CostClass c); // "gemm", "elementwise", ...

/// Fractions of peak a kernel class reaches on large problems: `compute` of
/// the FP32 rate (for the class's own FLOP count), `memory` of the DRAM
/// bandwidth.
struct Efficiency {
  double compute = 0.5;
  double memory = 0.8;
};

/// One efficiency per convolution (direction, algorithm) and per CostClass.
constexpr int kNumEfficiencySlots =
    kNumConvDirections * kMaxConvAlgoId + kNumCostClasses;
int efficiencySlot(ConvDirection d, int algo);
int efficiencySlot(CostClass c);
/// "conv_fwd.winograd", "gemm", ...; empty for slots of ids cuDNN lacks.
std::string efficiencySlotName(int slot);

/// The device memory cuDNN's and cuBLAS's handles and cuBLAS's workspace
/// take once the CUDA context exists, unless a device says otherwise:
/// measured 110-130 MiB on an H200 (cuDNN 9.19, cuBLAS 13, cuBLAS's own
/// workspace then included), with room for the spread
/// (docs/memory.md, "The library reserve").
constexpr int64_t kDefaultLibraryReserveBytes = int64_t(144) << 20;
/// Local memory a thread that the CUDA context sets aside
/// (cudaLimitStackSize's default).
constexpr int64_t kContextLocalBytes = 1024;

/// Bytes of host memory one fp32 parameter's update moves, which bound the
/// host optimizer where it is memory-bound, as it is on every core count
/// the built-in hosts have: Adam/AdamW reads the weight, its gradient and
/// both moments and writes the weight and both moments (4 x 4 + 3 x 4);
/// SGD with momentum reads the weight, the gradient and the momentum buffer
/// and writes the weight and the buffer (3 x 4 + 2 x 4).
constexpr double kHostAdamBytesPerParameter = 28;
constexpr double kHostSgdBytesPerParameter = 20;
/// What one core of the host optimizer updates per second where the
/// arithmetic, not the memory, limits it (Adam's square root and division
/// are in double): measured single-threaded on 64M parameters
/// (docs/benchmarks/offload.md, "Host optimizer"; a loaded 2-core machine,
/// so a floor rather than a peak). The derived rate is the smaller of this
/// times the cores and the bandwidth's.
constexpr double kHostAdamParamsPerCoreSecond = 80e6;
constexpr double kHostSgdParamsPerCoreSecond = 310e6;

struct DeviceSpec {
  std::string name;        // "h100-sxm"
  std::string description; // "NVIDIA H100 SXM5 80GB"
  /// Compute capability, major * 10 + minor (90 for sm_90); 0 where the
  /// device does not state one. It selects the convolution algorithms
  /// cuDNN 9 runs there (convAlgoOffered).
  int computeCapability = 0;
  double fp32Flops = 0; // FLOP/s, FP32 without tensor cores
  /// Dense tensor-core rates, FLOP/s (no structured sparsity); 0 where the
  /// GPU has no tensor cores for the type, whose products then run at the
  /// FP32 rate.
  double tf32Flops = 0, bf16Flops = 0, fp16Flops = 0;
  double memoryBandwidth = 0; // device memory, bytes/s
  int64_t memoryBytes = 0;
  /// Device bytes the libraries keep (kDefaultLibraryReserveBytes): inside
  /// the budget, outside the plan.
  int64_t libraryReserveBytes = kDefaultLibraryReserveBytes;
  double h2dBandwidth = 0; // host link per direction, bytes/s
  double d2hBandwidth = 0;
  /// Fraction of the link rate pinned copies reach.
  double linkEfficiency = 0.8;
  double transferLatency = 8e-6; // fixed cost of one copy, seconds
  /// Data-parallel collectives, per GPU and direction, bytes/s: NVLink to
  /// the GPUs of its node (0: none, they share PCIe) and the network to
  /// other nodes (one NIC per GPU, as in NVIDIA's DGX machines).
  double nvlinkBandwidth = 0;
  double networkBandwidth = 0;
  /// Fraction of the link rate NCCL's ring collectives reach on large
  /// buffers, and the latency of one ring step.
  double collectiveEfficiency = 0.8;
  double collectiveStepLatency = 5e-6;
  double launchSeconds = 0; // fixed cost of one kernel, seconds
  int64_t smCount = 0;
  /// A kernel with this many parallel work items per SM (output elements)
  /// runs at half its peak rate; utilisation is W / (W + smCount * this).
  double halfRateItemsPerSm = 1024;
  /// A GEMM-like kernel with this many multiply-adds per output element
  /// runs at half its class's compute efficiency; 0 turns the factor off.
  double halfRateReduction = 0;
  /// A backward-filter kernel whose filter gradient has this many elements
  /// per SM runs at half rate (it splits its batch reduction to fill the
  /// GPU, so it needs fewer output elements than other kernels).
  double halfRateFilterItemsPerSm = 1024;
  /// A strided implicit-GEMM backward-data kernel takes (stride_h *
  /// stride_w) to this power times its FLOPs' time (AnalyticCost.h).
  double stridePenaltyExponent = 1;
  std::array<Efficiency, kNumEfficiencySlots> efficiency{};

  /// The host of this GPU, for weight-side tensors homed off the GPU: its
  /// share of the machine's CPU cores, memory and local NVMe where several
  /// GPUs share a node (docs/cost-model.md states each built-in's
  /// division). 0 means not stated; a device without them plans as if the
  /// GPU were the only tier.
  int64_t hostCores = 0;
  double hostMemoryBandwidth = 0; // bytes/s, the host's DRAM
  int64_t hostMemoryBytes = 0;
  /// The host optimizer's rate, parameters/s, where measured; 0 derives it
  /// from hostMemoryBandwidth (hostAdamRate, hostSgdRate).
  double hostAdamParamsPerSecond = 0;
  double hostSgdParamsPerSecond = 0;
  double nvmeReadBandwidth = 0, nvmeWriteBandwidth = 0; // bytes/s
  int64_t nvmeBytes = 0;

  /// Device bytes the driver reserves beyond the CUDA context's own when a
  /// kernel needs `perThread` bytes of local memory a thread: the excess
  /// over kContextLocalBytes for every thread the GPU can hold (threads
  /// an SM holds at the compute capability, times smCount). 0 for a
  /// device without an SM count or a need within the context's.
  int64_t localMemoryReserveBytes(int64_t perThread) const;

  bool hasHost() const {
    return hostCores > 0 || hostMemoryBandwidth > 0 || hostMemoryBytes > 0 ||
           hostAdamParamsPerSecond > 0 || hostSgdParamsPerSecond > 0;
  }
  bool hasNvme() const {
    return nvmeReadBandwidth > 0 || nvmeWriteBandwidth > 0 || nvmeBytes > 0;
  }
  /// Parameters/s of the host's Adam/AdamW: the measured figure, else the
  /// host memory bandwidth over the bytes one update moves
  /// (kHostAdamBytesPerParameter), capped by the cores' arithmetic where
  /// the core count is stated (kHostAdamParamsPerCoreSecond); 0 where
  /// neither is known.
  double hostAdamRate() const;
  /// The same for SGD with momentum (kHostSgdBytesPerParameter).
  double hostSgdRate() const;
  /// Whether hostAdamRate/hostSgdRate come from a measurement rather than
  /// from the bandwidth.
  bool hostAdamRateMeasured() const { return hostAdamParamsPerSecond > 0; }
  bool hostSgdRateMeasured() const { return hostSgdParamsPerSecond > 0; }

  const Efficiency &convEfficiency(ConvDirection d, int algo) const {
    return efficiency[efficiencySlot(d, algo)];
  }
  const Efficiency &classEfficiency(CostClass c) const {
    return efficiency[efficiencySlot(c)];
  }
  /// The rate of convolutions and matrix products under `p`: the tensor
  /// cores' where the GPU has them for it, else the FP32 rate.
  double productFlops(Precision p) const {
    double tc = p == Precision::TF32   ? tf32Flops
                : p == Precision::BF16 ? bf16Flops
                : p == Precision::FP16 ? fp16Flops
                                       : 0;
    return tc > 0 ? tc : fp32Flops;
  }
  /// Items at which utilisation is one half.
  double halfRateItems() const {
    return halfRateItemsPerSm * static_cast<double>(smCount);
  }
  double halfRateFilterItems() const {
    return halfRateFilterItemsPerSm * static_cast<double>(smCount);
  }
};

/// The parameters of the analytic model that are not datasheet facts and
/// are fitted to measured kernel times (docs/benchmarks/cost-model.md).
struct CostCalibration {
  double launchSeconds = 4e-6;
  double halfRateItemsPerSm = 1024;
  double halfRateReduction = 0;
  double halfRateFilterItemsPerSm = 1024;
  double stridePenaltyExponent = 1;
  std::array<Efficiency, kNumEfficiencySlots> efficiency{};
};

/// The calibration fitted on DeepBench's measurements
/// (compiler/cost/CalibratedParams.inc, written by `memfit calibrate`):
/// what every built-in device and every device file uses for what it does
/// not state.
const CostCalibration &calibratedDefaults();
/// The hand-chosen starting point the fit starts from (the values before
/// any measurement), so refitting does not depend on the previous fit.
CostCalibration priorCalibration();
/// Sets the calibration fields of `spec`.
void applyCalibration(DeviceSpec &spec, const CostCalibration &c);
/// The calibration fields of `spec`.
CostCalibration calibrationOf(const DeviceSpec &spec);

/// The calibrated efficiency table (calibratedDefaults().efficiency).
std::array<Efficiency, kNumEfficiencySlots> defaultEfficiencies();

/// Names of the built-in devices, in table order.
std::vector<std::string> builtinDeviceNames();
llvm::Expected<DeviceSpec> builtinDevice(llvm::StringRef name);

/// A device from JSON text. `displayName` names the source in errors.
llvm::Expected<DeviceSpec> parseDeviceJson(llvm::StringRef text,
                                           llvm::StringRef displayName);
llvm::Expected<DeviceSpec> loadDeviceFile(llvm::StringRef path);
/// A built-in name, or a JSON file when the argument ends in ".json" or
/// contains a path separator.
llvm::Expected<DeviceSpec> resolveDevice(llvm::StringRef nameOrPath);

/// Applies the fields present in a JSON object to `spec` (calibration from
/// a measured profile); fields not present keep their values.
llvm::Error applyDeviceOverrides(DeviceSpec &spec, llvm::StringRef jsonText,
                                 llvm::StringRef displayName);

/// "9.0" for 90; empty for 0.
std::string computeCapabilityText(int cc);

/// The spec as JSON that parseDeviceJson reads back unchanged.
std::string deviceToJson(const DeviceSpec &spec);

} // namespace memfit

#endif
