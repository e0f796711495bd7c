//===- ConvAlgo.h - cuDNN convolution algorithms ----------------*- C++ -*-===//
//
// The convolution algorithms a Conv task may use, per direction, with the
// ids cuDNN gives them (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t), so an
// id can be passed to cuDNN unchanged and a measured profile stores it as is.
//
// Each direction has one baseline: the deterministic implicit-GEMM algorithm
// that needs no workspace (moDNN's fallback when memory is short). The
// applicability rules follow cuDNN's documented limits (Winograd only for
// small kernels at stride 1, FFT only at stride 1 with bounded sizes); they
// are what the analytic model offers. A measured profile replaces them with
// the algorithms that actually ran.
//
// ConvShape is the geometry of one Conv op at a given sub-batch, read from the
// forward Graph; all formulas in the cost model start from it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_CONVALGO_H
#define MEMFIT_COMPILER_COST_CONVALGO_H

#include "compiler/ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace memfit {

enum class ConvDirection : uint8_t { Forward, BackwardData, BackwardFilter };
constexpr int kNumConvDirections = 3;
/// "conv_fwd", "conv_bwd_data", "conv_bwd_filter".
std::string_view convDirectionName(ConvDirection d);

/// Ids equal cudnnConvolutionFwdAlgo_t.
enum class FwdAlgo : int {
  ImplicitGemm = 0,
  ImplicitPrecompGemm = 1,
  Gemm = 2,
  Direct = 3,
  Fft = 4,
  FftTiling = 5,
  Winograd = 6,
  WinogradNonfused = 7,
};
/// Ids equal cudnnConvolutionBwdDataAlgo_t.
enum class BwdDataAlgo : int {
  Algo0 = 0,
  Algo1 = 1,
  Fft = 2,
  FftTiling = 3,
  Winograd = 4,
  WinogradNonfused = 5,
};
/// Ids equal cudnnConvolutionBwdFilterAlgo_t (cuDNN's id 4, a fused
/// Winograd, is not implemented by cuDNN and is left out).
enum class BwdFilterAlgo : int {
  Algo0 = 0,
  Algo1 = 1,
  Fft = 2,
  Algo3 = 3,
  WinogradNonfused = 5,
  FftTiling = 6,
};
/// Largest algorithm id of any direction, plus one.
constexpr int kMaxConvAlgoId = 8;

/// How an algorithm computes; the analytic FLOP, traffic and workspace
/// formulas go by this.
enum class ConvMethod : uint8_t {
  ImplicitGemm,        // no workspace
  ImplicitPrecompGemm, // a small table of precomputed indices
  Gemm,                // explicit im2col buffer, then one GEMM
  Direct,
  Fft,              // whole-image FFTs of inputs, filters and outputs
  FftTiling,        // FFTs over 32x32 tiles
  Winograd,         // fused F(2x2,3x3): only transformed filters in memory
  WinogradNonfused, // F(4x4,3x3) or F(2x2,5x5) with transformed tensors
};

struct ConvAlgoInfo {
  int id;
  std::string_view name; // e.g. "implicit_gemm", "algo_1"
  ConvMethod method;
  bool deterministic;
  bool baseline; // the zero-workspace fallback of this direction
};

/// Every algorithm cuDNN has for `d`, in id order.
llvm::ArrayRef<ConvAlgoInfo> convAlgorithms(ConvDirection d);
/// Null when `id` is not an algorithm of `d`.
const ConvAlgoInfo *findConvAlgo(ConvDirection d, int id);
int convBaselineAlgo(ConvDirection d);

/// A Conv op at sub-batch b: X [b, c, in...], W [k, c/group, kernel...],
/// Y [b, k, out...]. Spatial vectors have one entry per spatial axis; `pads`
/// holds begin pads then end pads.
/// Workspace bytes a 16-bit program's convolution backward-filter stages
/// its 16-bit weight gradient of `weightCount` values in (2 bytes each,
/// rounded up to 256 so the algorithm's own workspace after it stays
/// aligned). The runtime lays the workspace out by its twin,
/// rt::convGradStagingBytes in runtime/Kernels.h, which the compiler may
/// not include; ConvAlgoTest holds the two equal.
inline int64_t convGradStagingBytes(int64_t weightCount) {
  return (weightCount * 2 + 255) / 256 * 256;
}

struct ConvShape {
  int64_t batch = 1, c = 1, k = 1, group = 1;
  std::vector<int64_t> in, kernel, out, strides, pads, dilations;
  bool hasBias = false;

  int rank() const { return static_cast<int>(in.size()); }
  int64_t inSpatial() const;     // product of `in`
  int64_t outSpatial() const;    // product of `out`
  int64_t kernelSpatial() const; // product of `kernel`
  /// Multiply-adds of the direct method, times two.
  double directFlops() const;
};

/// Reads the geometry of Conv op `op` (asserts it is one) with the batch
/// replaced by `b`. Missing attributes take their ONNX defaults.
ConvShape convShape(const Graph &g, OpId op, int64_t b);

/// Whether cuDNN 9's legacy API runs algorithm `id` of direction `d` on a
/// GPU of compute capability `cc` (major * 10 + minor) at all. From sm_80
/// on only the implicit-GEMM family and forward GEMM: cuDNN 9.19 on an
/// H200 refused forward 3-7, backward-data 2-5 and backward-filter 2, 3, 5
/// and 6 on every shape memfit planned, and sm_80/86/89 are given the same
/// set, as docs/cost-model.md explains. Below sm_80, and for a device that
/// states no capability (cc 0), every algorithm the shape allows. The
/// runtime's twin is rt::cudnnRunsConvAlgo (runtime/ConvCheck.h);
/// ConvAlgoTest holds the two equal.
bool convAlgoOffered(int cc, ConvDirection d, int id);
/// Whether cuDNN implements algorithm `id` of direction `d` for `s` (on a
/// GPU of compute capability `cc`; 0: any).
bool convAlgoApplicable(const ConvShape &s, ConvDirection d, int id,
                        int cc = 0);
/// The applicable algorithms in id order; the baseline is always among them.
std::vector<int> applicableConvAlgos(const ConvShape &s, ConvDirection d,
                                     int cc = 0);

} // namespace memfit

#endif
