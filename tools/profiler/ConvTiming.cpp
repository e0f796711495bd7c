//===- ConvTiming.cpp - cuDNN convolution algorithms, measured ------------===//
//
// Builds the cuDNN descriptors of one Conv at one sub-batch and lets
// cudnnFindConvolution{Forward,BackwardData,BackwardFilter}AlgorithmEx run
// every algorithm on real buffers. The workspace offered is what the
// largest algorithm asks for, capped at a share of the free memory; an
// algorithm that needs more is simply not reported (cuDNN gives it a
// failure status), so the profile never claims an algorithm that did not
// run.
//
//===----------------------------------------------------------------------===//
#include "tools/profiler/Measure.h"

#include "compiler/support/Diagnostics.h"

#include <algorithm>
#include <climits>
#include <map>

namespace memfit::profiler {

namespace {

// Find is itself a measurement of every algorithm; a few calls and the
// median per algorithm smooth out a cold first run.
constexpr int kFindRuns = 3;

llvm::Expected<std::vector<int>> toInts(const std::vector<int64_t> &v) {
  std::vector<int> out;
  for (int64_t x : v) {
    if (x < 0 || x > INT_MAX)
      return makeErrorF("convolution parameter {0} does not fit cuDNN", x);
    out.push_back(static_cast<int>(x));
  }
  return out;
}

/// One Find call's results for every direction, as (algo, seconds, bytes).
struct Found {
  int algo;
  double seconds;
  size_t memory;
};

template <typename Perf>
void collect(const Perf *perf, int n, ConvDirection dir,
             std::vector<Found> &out) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].time < 0)
      continue;
    int algo = static_cast<int>(perf[i].algo);
    if (!findConvAlgo(dir, algo))
      continue;
    out.push_back(
        {algo, static_cast<double>(perf[i].time) * 1e-3, perf[i].memory});
  }
}

} // namespace

llvm::Expected<std::vector<AlgoMeasurement>>
timeConv(Context &ctx, const ConvShape &s, ConvDirection dir) {
  // cuDNN convolves 2-D and 3-D images; a 1-D one gets a unit axis.
  std::vector<int64_t> in = s.in, kernel = s.kernel, strides = s.strides,
                       dilations = s.dilations, pads;
  for (int i = 0; i < s.rank(); ++i)
    // cuDNN pads symmetrically; the begin pad keeps the output size for the
    // usual "same" and "valid" paddings.
    pads.push_back(s.pads[i]);
  if (s.rank() == 1) {
    in.push_back(1);
    kernel.push_back(1);
    strides.push_back(1);
    dilations.push_back(1);
    pads.push_back(0);
  }
  int spatial = static_cast<int>(in.size());
  std::vector<int64_t> xDims{s.batch, s.c}, wDims{s.k, s.c / s.group};
  xDims.insert(xDims.end(), in.begin(), in.end());
  wDims.insert(wDims.end(), kernel.begin(), kernel.end());

  auto padI = toInts(pads), strideI = toInts(strides), dilI = toInts(dilations);
  if (!padI)
    return padI.takeError();
  if (!strideI)
    return strideI.takeError();
  if (!dilI)
    return dilI.takeError();

  auto x = makeDeviceTensor(xDims);
  if (!x)
    return x.takeError();
  auto wDesc = makeFilter(wDims);
  if (!wDesc)
    return wDesc.takeError();
  auto w = DeviceBuffer::alloc(static_cast<size_t>(elementsOf(wDims)) * 4);
  if (!w)
    return w.takeError();

  cudnnConvolutionDescriptor_t rawConv;
  MEMFIT_CUDNN(cudnnCreateConvolutionDescriptor(&rawConv));
  ConvDesc conv(rawConv);
  MEMFIT_CUDNN(cudnnSetConvolutionNdDescriptor(
      rawConv, spatial, padI->data(), strideI->data(), dilI->data(),
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  MEMFIT_CUDNN(
      cudnnSetConvolutionGroupCount(rawConv, static_cast<int>(s.group)));
  MEMFIT_CUDNN(cudnnSetConvolutionMathType(
      rawConv, ctx.allowTf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));

  std::vector<int> yDimsI(spatial + 2);
  MEMFIT_CUDNN(cudnnGetConvolutionNdForwardOutputDim(
      rawConv, x->desc.get(), wDesc->get(), spatial + 2, yDimsI.data()));
  auto y = makeDeviceTensor(std::vector<int64_t>(yDimsI.begin(), yDimsI.end()));
  if (!y)
    return y.takeError();

  // Offer the largest workspace any algorithm asks for, within a share of
  // what is free.
  size_t need = 0;
  for (const ConvAlgoInfo &a : convAlgorithms(dir)) {
    size_t bytes = 0;
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    switch (dir) {
    case ConvDirection::Forward:
      st = cudnnGetConvolutionForwardWorkspaceSize(
          ctx.cudnn, x->desc.get(), wDesc->get(), rawConv, y->desc.get(),
          static_cast<cudnnConvolutionFwdAlgo_t>(a.id), &bytes);
      break;
    case ConvDirection::BackwardData:
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(
          ctx.cudnn, wDesc->get(), y->desc.get(), rawConv, x->desc.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(a.id), &bytes);
      break;
    case ConvDirection::BackwardFilter:
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          ctx.cudnn, x->desc.get(), y->desc.get(), rawConv, wDesc->get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.id), &bytes);
      break;
    }
    if (st == CUDNN_STATUS_SUCCESS)
      need = std::max(need, bytes);
  }
  size_t freeBytes = 0, totalBytes = 0;
  MEMFIT_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
  size_t cap = static_cast<size_t>(static_cast<double>(freeBytes) *
                                   ctx.workspaceFraction);
  auto ws = DeviceBuffer::alloc(std::min(need, cap));
  if (!ws)
    return ws.takeError();

  std::map<int, std::vector<double>> times;
  std::map<int, size_t> memory;
  for (int run = 0; run < kFindRuns; ++run) {
    std::vector<Found> found;
    int returned = 0;
    switch (dir) {
    case ConvDirection::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      MEMFIT_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(
          ctx.cudnn, x->desc.get(), x->buf.get(), wDesc->get(), w->get(),
          rawConv, y->desc.get(), y->buf.get(),
          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws->get(),
          ws->bytes()));
      collect(perf, returned, dir, found);
      break;
    }
    case ConvDirection::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t
          perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      MEMFIT_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
          ctx.cudnn, wDesc->get(), w->get(), y->desc.get(), y->buf.get(),
          rawConv, x->desc.get(), x->buf.get(),
          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, ws->get(),
          ws->bytes()));
      collect(perf, returned, dir, found);
      break;
    }
    case ConvDirection::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t
          perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      MEMFIT_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          ctx.cudnn, x->desc.get(), x->buf.get(), y->desc.get(), y->buf.get(),
          rawConv, wDesc->get(), w->get(),
          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, ws->get(),
          ws->bytes()));
      collect(perf, returned, dir, found);
      break;
    }
    }
    // cuDNN may list an algorithm once per math mode: keep its best.
    std::map<int, double> best;
    for (const Found &f : found) {
      auto it = best.find(f.algo);
      if (it == best.end() || f.seconds < it->second)
        best[f.algo] = f.seconds;
      memory[f.algo] = std::max(memory[f.algo], f.memory);
    }
    for (const auto &[algo, secs] : best)
      times[algo].push_back(secs);
  }

  // The bias is a kernel of its own: added to Y after the forward
  // convolution, reduced from dY beside the filter gradient.
  double biasSeconds = 0;
  if (s.hasBias && dir != ConvDirection::BackwardData) {
    std::vector<int64_t> bDims(yDimsI.size(), 1);
    bDims[1] = s.k;
    auto bias = makeDeviceTensor(bDims);
    if (!bias)
      return bias.takeError();
    const float one = 1, zero = 0;
    auto t = ctx.timeMedian([&]() -> llvm::Error {
      if (dir == ConvDirection::Forward)
        MEMFIT_CUDNN(cudnnAddTensor(ctx.cudnn, &one, bias->desc.get(),
                                    bias->f(), &one, y->desc.get(), y->f()));
      else
        MEMFIT_CUDNN(cudnnConvolutionBackwardBias(ctx.cudnn, &one,
                                                  y->desc.get(), y->f(), &zero,
                                                  bias->desc.get(), bias->f()));
      return llvm::Error::success();
    });
    if (!t)
      return t.takeError();
    biasSeconds = *t;
  }

  std::vector<AlgoMeasurement> out;
  for (const auto &[algo, secs] : times)
    out.push_back(
        {algo, median(secs) + biasSeconds, static_cast<int64_t>(memory[algo])});
  return out;
}

} // namespace memfit::profiler
