//===- AnalyticCost.h - Roofline cost of tasks from a device spec -*- C++ -*-=//
//
// The formulas of the analytic model (docs/cost-model.md states each one):
//
//   time = launches * launch + max(compute, memory)
//   compute = p (F_b / (R e_c u) + F_0 / (R e_c))
//   memory  = B_b / (BW e_m u) + B_0 / (BW e_m)
//   u    = W / (W + W_half),  W_half = smCount * halfRateItemsPerSm
//          (halfRateFilterItemsPerSm for backward-filter kernels)
//   e_c  = efficiency of the class * D / (D + D_half)
//   p    = (stride_h stride_w)^stridePenaltyExponent for implicit-GEMM
//          backward-data, else 1
//
// F are the FLOPs of the algorithm's method (direct, Winograd, FFT), B the
// bytes the task reads and writes (from its TaskGraph blocks, plus workspace
// traffic), each split into the part that scales with the sub-batch (_b)
// and the fixed part (_0: weights, filter transforms). W are the parallel
// work items (a convolution's output elements; for other tasks the elements
// of the largest batched block), e the efficiency of the algorithm class,
// lowered for GEMM-like kernels whose reduction depth D per output element
// is short (each loaded tile feeds few multiply-adds). The parameters that
// are not datasheet facts are fitted to measured kernels (Calibrate.h).
// Launches give every kernel a latency floor and u lowers utilisation at
// small sub-batches, so splitting a batch is never free; time is
// non-decreasing in b and time per sample non-increasing. Tasks that only
// produce views (Flatten, Reshape) run no kernel and cost nothing.
//
// Workspace follows what each cuDNN method allocates: none for implicit
// GEMM, an index table for precomputed GEMM, the im2col buffer for GEMM,
// spectra for FFT, transformed tiles for Winograd.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_ANALYTICCOST_H
#define MEMFIT_COMPILER_COST_ANALYTICCOST_H

#include "compiler/cost/ConvAlgo.h"
#include "compiler/cost/CostModel.h"
#include "compiler/cost/DeviceSpec.h"
#include "compiler/ir/TaskGraph.h"

#include <optional>

namespace memfit {

/// What one run of a task does, before the device turns it into time.
/// `fixedFlops` and `fixedBytes` are the parts that do not scale with the
/// sub-batch (weights, filter transforms).
struct TaskWork {
  double flops = 0, fixedFlops = 0;
  double bytes = 0, fixedBytes = 0; // DRAM traffic
  double parallelItems = 0;         // W: items of the batched part
  /// D: multiply-adds per output element of a GEMM-like kernel whose
  /// reduction does not run over the batch; 0 where that does not apply.
  double reduction = 0;
  /// A kernel that reduces over the batch into an output that does not
  /// scale with it (backward-filter): W are its output elements and the
  /// half rate is spec.halfRateFilterItems().
  bool batchReduction = false;
  /// How many times its forward's work a strided backward-data kernel may
  /// do (stride_h * stride_w); the time takes it to the power
  /// spec.stridePenaltyExponent, which the calibration fits.
  double stridePenalty = 1;
  int launches = 0;
  Efficiency efficiency;
  /// The peak its arithmetic runs at, FLOP/s: the tensor cores' for
  /// convolutions and matrix products under TF32, BF16 and FP16, else 0,
  /// the device's FP32 rate.
  double peakFlops = 0;
  bool free = false; // produces only views: no kernel at all
};

/// The conv direction of task `t`, if it is a Conv op's FP/BP task.
std::optional<ConvDirection> convDirectionOf(const TaskGraph &tg, TaskId t);

/// Workspace every algorithm of task `t` needs on top of its own: in a
/// bf16 or fp16 program a convolution's backward-filter stages its 16-bit
/// weight gradient there (rt::convGradStagingBytes); 0 otherwise.
int64_t convGradStagingBytes(const TaskGraph &tg, TaskId t);

/// FLOPs of conv algorithm `algo` (its method's arithmetic, transforms
/// included).
double convFlops(const ConvShape &s, ConvDirection d, int algo);
/// Workspace bytes of conv algorithm `algo` at the shape's batch;
/// `dataBytes` per element of the im2col matrix (the activations' type).
/// Filter transforms and spectra stay fp32. `tensorOps`: the call runs
/// under tensor-core math (TF32, BF16, FP16), where cuDNN copies NCHW
/// operands whose channels do not fill its tensor-core tiles into padded
/// NHWC ones (convLayoutCopyBytes).
/// `cc`, the GPU's compute capability (major * 10 + minor; 0 unknown),
/// selects cuDNN 9's engines on sm_80 and later (convEngineBytes).
int64_t convWorkspaceBytes(const ConvShape &s, ConvDirection d, int algo,
                           int64_t dataBytes = 4, bool tensorOps = false,
                           int cc = 0);
/// What cuDNN 9 asks for ALGO_1 on sm_80 and later, where every direction
/// runs through engines that copy NCHW operands to NHWC: under tensor-core
/// math X, Y and (for filters larger than 1x1) W in the data type; the
/// backward-filter under either math also, plus split-K partial sums of
/// the filter gradient; the FMA forward only an index table. An upper
/// bound of what an H200 with cuDNN 9.19 asked for 190 convolutions of
/// ResNet-18, ResNet-50 and VGG-16 (tests/data/cudnn9-h200-workspace.csv):
/// cuDNN's heuristics pick the engine per shape, and some ask far less.
/// 0 for other algorithms or older GPUs.
int64_t convEngineBytes(const ConvShape &s, ConvDirection d, int algo,
                        int64_t dataBytes, bool tensorOps, int cc);
/// The padded NHWC copies of X and dY a deterministic implicit-GEMM
/// backward-filter (ALGO_1) makes under tensor-core math when the channels
/// per group or the output channels are not multiples of 8: both tensors
/// with their channels rounded up to 8, `dataBytes` each. 0 when the
/// channels are aligned or `tensorOps` is false. cuDNN 9.19 asked 263 MB
/// for ResNet-50's first convolution at batch 64 in TF32 (docs/cost-model.md).
int64_t convLayoutCopyBytes(const ConvShape &s, ConvDirection d, int algo,
                            int64_t dataBytes, bool tensorOps);
/// Kernels one call of `algo` launches (bias excluded).
int convLaunches(ConvDirection d, int algo);
/// DRAM traffic of `algo`'s workspace: buffers one kernel writes and the
/// next reads count twice, index tables and transformed filters once.
double convWorkspaceTraffic(const ConvShape &s, ConvDirection d, int algo,
                            int64_t dataBytes = 4, bool tensorOps = false,
                            int cc = 0);
/// Implicit-GEMM backward-data kernels can run over every input position,
/// each gathering its filter taps from dY, as a stride-1 convolution over a
/// zero-filled dY would: stride_h * stride_w times the forward's work. How
/// much of that a library version shows is the calibration's exponent.
/// 1 for every other direction and method.
double convStridePenalty(const ConvShape &s, ConvDirection d, int algo);
/// W of a conv direction: the elements of its output (Y forward, dX
/// backward-data, dW backward-filter).
double convParallelItems(const ConvShape &s, ConvDirection d);
/// The reduction depth of a conv direction per output element (C R / g
/// forward, K R / g backward-data, R the filter taps); 0 for
/// backward-filter, whose reduction runs over the batch and is split
/// across the GPU however small the filter is.
double convReductionDepth(const ConvShape &s, ConvDirection d);

/// Whether an FP/BP task writes only views of its inputs (Flatten, Reshape)
/// and so runs no kernel.
bool producesOnlyViews(const TaskGraph &tg, const Task &task);

/// The work of task `t` with `algo` at sub-batch `b`.
TaskWork analyticWork(const DeviceSpec &spec, const TaskGraph &tg, TaskId t,
                      int algo, int64_t b);
/// The time formula above.
double workSeconds(const DeviceSpec &spec, const TaskWork &w);

class AnalyticCostModel : public CostModel {
public:
  explicit AnalyticCostModel(DeviceSpec spec) : CostModel(std::move(spec)) {}

  std::vector<AlgoChoice> algorithms(const TaskGraph &tg,
                                     TaskId t) const override;
  double taskSeconds(const TaskGraph &tg, TaskId t, int algo,
                     int64_t b) const override;
  int64_t workspaceBytes(const TaskGraph &tg, TaskId t, int algo,
                         int64_t b) const override;
  /// The link rate per direction times the link efficiency.
  CopyRates copyRates() const override;
  /// Whether the task runs no kernel (its outputs are views).
  bool isFree(const TaskGraph &tg, TaskId t) const;
};

/// The AlgoChoice of conv algorithm `id` of direction `d` (asserts it
/// exists), or of the single algorithm of a non-conv task.
AlgoChoice convAlgoChoice(ConvDirection d, int id);
AlgoChoice defaultAlgoChoice();

} // namespace memfit

#endif
