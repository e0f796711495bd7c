//===- ConvAlgo.cpp - cuDNN convolution algorithms ------------------------===//
#include "compiler/cost/ConvAlgo.h"

#include <algorithm>
#include <cassert>

namespace memfit {

std::string_view convDirectionName(ConvDirection d) {
  switch (d) {
  case ConvDirection::Forward:
    return "conv_fwd";
  case ConvDirection::BackwardData:
    return "conv_bwd_data";
  case ConvDirection::BackwardFilter:
    return "conv_bwd_filter";
  }
  return "conv_?";
}

// The implicit-GEMM algorithm of each direction is the baseline: no
// workspace and deterministic results. Backward ALGO_0 is the same method
// but accumulates with atomics, so its results vary from run to run.
static const ConvAlgoInfo kFwd[] = {
    {0, "implicit_gemm", ConvMethod::ImplicitGemm, true, true},
    {1, "implicit_precomp_gemm", ConvMethod::ImplicitPrecompGemm, true, false},
    {2, "gemm", ConvMethod::Gemm, true, false},
    {3, "direct", ConvMethod::Direct, true, false},
    {4, "fft", ConvMethod::Fft, true, false},
    {5, "fft_tiling", ConvMethod::FftTiling, true, false},
    {6, "winograd", ConvMethod::Winograd, true, false},
    {7, "winograd_nonfused", ConvMethod::WinogradNonfused, true, false},
};
static const ConvAlgoInfo kBwdData[] = {
    {0, "algo_0", ConvMethod::ImplicitGemm, false, false},
    {1, "algo_1", ConvMethod::ImplicitGemm, true, true},
    {2, "fft", ConvMethod::Fft, true, false},
    {3, "fft_tiling", ConvMethod::FftTiling, true, false},
    {4, "winograd", ConvMethod::Winograd, true, false},
    {5, "winograd_nonfused", ConvMethod::WinogradNonfused, true, false},
};
static const ConvAlgoInfo kBwdFilter[] = {
    {0, "algo_0", ConvMethod::ImplicitGemm, false, false},
    {1, "algo_1", ConvMethod::ImplicitGemm, true, true},
    {2, "fft", ConvMethod::Fft, true, false},
    {3, "algo_3", ConvMethod::ImplicitPrecompGemm, false, false},
    {5, "winograd_nonfused", ConvMethod::WinogradNonfused, true, false},
    {6, "fft_tiling", ConvMethod::FftTiling, true, false},
};

llvm::ArrayRef<ConvAlgoInfo> convAlgorithms(ConvDirection d) {
  switch (d) {
  case ConvDirection::Forward:
    return kFwd;
  case ConvDirection::BackwardData:
    return kBwdData;
  case ConvDirection::BackwardFilter:
    return kBwdFilter;
  }
  return {};
}

const ConvAlgoInfo *findConvAlgo(ConvDirection d, int id) {
  for (const ConvAlgoInfo &a : convAlgorithms(d))
    if (a.id == id)
      return &a;
  return nullptr;
}

int convBaselineAlgo(ConvDirection d) {
  for (const ConvAlgoInfo &a : convAlgorithms(d))
    if (a.baseline)
      return a.id;
  assert(false && "every direction has a baseline");
  return 0;
}

static int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t x : v)
    p *= x;
  return p;
}

int64_t ConvShape::inSpatial() const { return product(in); }
int64_t ConvShape::outSpatial() const { return product(out); }
int64_t ConvShape::kernelSpatial() const { return product(kernel); }

double ConvShape::directFlops() const {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(k) *
         static_cast<double>(c / std::max<int64_t>(group, 1)) *
         static_cast<double>(kernelSpatial()) *
         static_cast<double>(outSpatial());
}

ConvShape convShape(const Graph &g, OpId opId, int64_t b) {
  const Op &op = g.op(opId);
  assert(op.kind == OpKind::Conv && op.inputs.size() >= 2 &&
         !op.outputs.empty() && "not a Conv op");
  const Value &x = g.value(op.inputs[0]);
  const Value &w = g.value(op.inputs[1]);
  const Value &y = g.value(op.outputs[0]);
  assert(x.dims.size() >= 3 && w.dims.size() == x.dims.size() &&
         y.dims.size() == x.dims.size() && "conv operands of unequal rank");
  size_t rank = x.dims.size() - 2;
  ConvShape s;
  s.batch = b;
  s.c = x.dims[1];
  s.k = w.dims[0];
  s.group = std::max<int64_t>(op.attrs.group, 1);
  s.hasBias = op.inputs.size() >= 3;
  s.in.assign(x.dims.begin() + 2, x.dims.end());
  s.kernel.assign(w.dims.begin() + 2, w.dims.end());
  s.out.assign(y.dims.begin() + 2, y.dims.end());
  auto orDefault = [&](const std::vector<int64_t> &v, size_t n, int64_t def) {
    return v.size() == n ? v : std::vector<int64_t>(n, def);
  };
  s.strides = orDefault(op.attrs.strides, rank, 1);
  s.dilations = orDefault(op.attrs.dilations, rank, 1);
  s.pads = orDefault(op.attrs.pads, 2 * rank, 0);
  return s;
}

static bool allEqual(const std::vector<int64_t> &v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
}

// Conditions every transform-based method (FFT, Winograd) shares: 2-D,
// ungrouped, unit stride and dilation, padding smaller than the kernel.
static bool transformFriendly(const ConvShape &s) {
  if (s.rank() != 2 || s.group != 1 || !allEqual(s.strides, 1) ||
      !allEqual(s.dilations, 1))
    return false;
  for (int i = 0; i < 2; ++i)
    if (s.pads[i] >= s.kernel[i] || s.pads[i + 2] >= s.kernel[i])
      return false;
  return true;
}

static bool applicable(const ConvShape &s, ConvMethod m) {
  switch (m) {
  case ConvMethod::ImplicitGemm:
  case ConvMethod::ImplicitPrecompGemm:
  case ConvMethod::Gemm:
    return true;
  case ConvMethod::Direct:
    // cuDNN declares the id but implements no kernel for it.
    return false;
  case ConvMethod::Fft:
    // Whole-image FFT: the padded image is at most 256 on each side.
    if (!transformFriendly(s))
      return false;
    for (int i = 0; i < 2; ++i)
      if (s.in[i] + s.pads[i] + s.pads[i + 2] > 256)
        return false;
    return true;
  case ConvMethod::FftTiling:
    // 32x32 tiles: the kernel must fit in a tile.
    return transformFriendly(s) && s.kernel[0] <= 32 && s.kernel[1] <= 32;
  case ConvMethod::Winograd:
    return transformFriendly(s) && s.kernel[0] == 3 && s.kernel[1] == 3;
  case ConvMethod::WinogradNonfused:
    return transformFriendly(s) && s.kernel[0] == s.kernel[1] &&
           (s.kernel[0] == 3 || s.kernel[0] == 5);
  }
  return false;
}

bool convAlgoOffered(int cc, ConvDirection d, int id) {
  if (!findConvAlgo(d, id))
    return false;
  if (cc < 80)
    return true;
  switch (d) {
  case ConvDirection::Forward:
    return id == (int)FwdAlgo::ImplicitGemm ||
           id == (int)FwdAlgo::ImplicitPrecompGemm || id == (int)FwdAlgo::Gemm;
  case ConvDirection::BackwardData:
    return id == (int)BwdDataAlgo::Algo0 || id == (int)BwdDataAlgo::Algo1;
  case ConvDirection::BackwardFilter:
    return id == (int)BwdFilterAlgo::Algo0 || id == (int)BwdFilterAlgo::Algo1;
  }
  return false;
}

bool convAlgoApplicable(const ConvShape &s, ConvDirection d, int id, int cc) {
  const ConvAlgoInfo *info = findConvAlgo(d, id);
  return info && convAlgoOffered(cc, d, id) && applicable(s, info->method);
}

std::vector<int> applicableConvAlgos(const ConvShape &s, ConvDirection d,
                                     int cc) {
  std::vector<int> out;
  for (const ConvAlgoInfo &a : convAlgorithms(d))
    if (convAlgoOffered(cc, d, a.id) && applicable(s, a.method))
      out.push_back(a.id);
  assert(std::find(out.begin(), out.end(), convBaselineAlgo(d)) != out.end() &&
         "every device offers the baseline");
  return out;
}

} // namespace memfit
