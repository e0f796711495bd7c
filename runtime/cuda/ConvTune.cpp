//===- ConvTune.cpp - CUDA backend: cuDNN's timings of a convolution ------===//
//
// What cudnn.benchmark does for PyTorch, held to the plan's memory: cuDNN
// times every algorithm of a call (cudnnFind*AlgorithmEx, on operands and
// workspace the trainer owns, the workspace as large as the arena allows),
// so the trainer can run the fastest that fits the workspace the plan gave
// it without asking for a byte more, and the next plan can see the rest.
// The operands are scratch at the arena's start: the check runs before the
// first iteration, when nothing the plan placed in the arena is live, and
// the call itself needs its input, output and workspace in the arena at
// once (its weight may live in the pool; scratch holds a copy's room too, so
// a call whose four parts do not fit is not timed and keeps its algorithm).
// The results are filtered by cudnnGetConvolution*WorkspaceSize, the figure
// the call is held to when it runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Impl.h"

#include <algorithm>
#include <vector>

namespace memfit::rt {

using cuda::check;

cudnnStatus_t cuda::convWorkspace(const Exec::Impl &im, const ConvEntry &e,
                                  int32_t dir, int32_t algo, size_t &bytes) {
  switch (dir) {
  case ConvFwd:
    return cudnnGetConvolutionForwardWorkspaceSize(
        im.cudnn, e.x, e.w, e.conv, e.y,
        static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
  case ConvBwdData:
    return cudnnGetConvolutionBackwardDataWorkspaceSize(
        im.cudnn, e.w, e.y, e.conv, e.x,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
  default:
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        im.cudnn, e.x, e.y, e.conv, e.w,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
  }
}

int cuda::convAlgoCount(const Exec &x, const Exec::Impl &im, int32_t dir) {
  int max = 0;
  switch (dir) {
  case ConvFwd:
    check(x, cudnnGetConvolutionForwardAlgorithmMaxCount(im.cudnn, &max),
          "cudnnGetConvolutionForwardAlgorithmMaxCount");
    break;
  case ConvBwdData:
    check(x, cudnnGetConvolutionBackwardDataAlgorithmMaxCount(im.cudnn, &max),
          "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
    break;
  default:
    check(x, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(im.cudnn, &max),
          "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
  }
  return std::max(max, 1);
}

namespace {

constexpr int64_t kAlign = 256;

int64_t aligned(int64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

/// The rows of cuDNN's answer that ran, one per algorithm (the fastest).
template <typename Perf>
std::vector<ConvTiming> ranRows(const std::vector<Perf> &perf, int got) {
  std::vector<ConvTiming> out;
  for (int i = 0; i < got; ++i) {
    const Perf &r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.time < 0)
      continue;
    const int32_t algo = static_cast<int32_t>(r.algo);
    auto same = [&](const ConvTiming &t) { return t.algo == algo; };
    if (std::any_of(out.begin(), out.end(), same))
      continue;
    out.push_back({algo, static_cast<double>(r.time) / 1000.0,
                   static_cast<int64_t>(r.memory)});
  }
  return out;
}

} // namespace

namespace {
struct OperandBytes {
  int64_t x, y, w;
};
OperandBytes operandBytes(const ConvParams &p, int64_t n, cuda::Store store) {
  const int64_t elt = store == cuda::Store::F32 ? 4 : 2;
  return {aligned(n * p.cin * p.hin * p.win * elt),
          aligned(n * p.cout * p.hout * p.wout * elt),
          aligned(p.cout * (p.cin / p.group) * p.kh * p.kw * elt)};
}
} // namespace

int64_t cuda::convScratchRoom(const Exec &x, const ConvParams &p, int64_t n,
                              Store store) {
  const OperandBytes o = operandBytes(p, n, store);
  const int64_t room = x.info().arenaBytes - o.x - o.y - o.w;
  return room > 0 ? room / kAlign * kAlign : 0;
}

cuda::ConvScratch cuda::convScratch(Exec &x, Exec::Impl &im,
                                    const ConvParams &p, int64_t n, Store store,
                                    int64_t have) {
  const auto [xb, yb, wb] = operandBytes(p, n, store);
  if (have < 0 || xb + yb + wb + have > x.info().arenaBytes)
    return {};
  char *base = reinterpret_cast<char *>(x.arena(0));
  ConvScratch s;
  s.x = base;
  s.y = base + xb;
  s.w = s.y + yb;
  s.work = have > 0 ? s.w + wb : nullptr;
  // Defined operands, every byte 0x3f: about 0.75 in fp32 and bf16, 1.8
  // in fp16. Garbage can hold NaNs, and all zeros make tensor-core products
  // faster than real data does (an H100's bf16 GEMM: 894 TFLOP/s on zeros,
  // 788 on random data), which would favour them in the timing.
  check(x, cudaMemsetAsync(base, 0x3f, xb + yb + wb, im.compute()),
        "cudaMemsetAsync");
  check(x, cudaStreamSynchronize(im.compute()), "cudaStreamSynchronize");
  return s;
}

std::vector<ConvTiming> cuda::timeConvAlgos(Exec &x, Exec::Impl &im,
                                            const ConvEntry &e,
                                            const ConvParams &p, int64_t n,
                                            Store store, int32_t dir,
                                            int64_t have) {
  // Every algorithm, in the most workspace there is: the file the trainer
  // writes then says what a larger planned workspace would buy.
  if (have < 0)
    return {};
  have = std::max(have, convScratchRoom(x, p, n, store));
  const ConvScratch s = convScratch(x, im, p, n, store, have);
  if (!s)
    return {};
  char *xs = s.x, *ys = s.y, *ws = s.w;
  void *work = s.work;
  const size_t workBytes = static_cast<size_t>(have);
  const int max = convAlgoCount(x, im, dir);
  int got = 0;
  std::vector<ConvTiming> out;
  switch (dir) {
  case ConvFwd: {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max);
    check(x,
          cudnnFindConvolutionForwardAlgorithmEx(im.cudnn, e.x, xs, e.w, ws,
                                                 e.conv, e.y, ys, max, &got,
                                                 perf.data(), work, workBytes),
          "cudnnFindConvolutionForwardAlgorithmEx");
    out = ranRows(perf, got);
    break;
  }
  case ConvBwdData: {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max);
    check(x,
          cudnnFindConvolutionBackwardDataAlgorithmEx(
              im.cudnn, e.w, ws, e.y, ys, e.conv, e.x, xs, max, &got,
              perf.data(), work, workBytes),
          "cudnnFindConvolutionBackwardDataAlgorithmEx");
    out = ranRows(perf, got);
    break;
  }
  default: {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max);
    check(x,
          cudnnFindConvolutionBackwardFilterAlgorithmEx(
              im.cudnn, e.x, xs, e.y, ys, e.conv, e.w, ws, max, &got,
              perf.data(), work, workBytes),
          "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    out = ranRows(perf, got);
    break;
  }
  }
  // Each with the bytes the call will be held to when it runs (cuDNN's
  // workspace query, which can ask more than the timing used).
  std::vector<ConvTiming> runs;
  for (ConvTiming t : out) {
    size_t need = 0;
    if (convWorkspace(im, e, dir, t.algo, need) != CUDNN_STATUS_SUCCESS)
      continue;
    t.bytes = std::max(t.bytes, static_cast<int64_t>(need));
    runs.push_back(t);
  }
  return runs;
}

} // namespace memfit::rt
