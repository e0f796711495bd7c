//===- OpTiming.cpp - Non-convolution tasks, timed with events ------------===//
//
// Each task is timed as the library kernels a CUDA trainer runs for it:
// cuDNN activations, pooling, batch normalisation, LRN, softmax and tensor
// arithmetic, cuBLAS SGEMM, and CUDA copies for Concat/Pad/Reshape. Where
// no library kernel computes exactly the op (LeakyRelu, Dropout masks,
// broadcasts, the loss gradient, bias-style weight gradients), a kernel
// with the same memory traffic stands in; docs/cost-model.md lists them.
// Buffers are zero-filled, which no kernel here branches on.
//
//===----------------------------------------------------------------------===//
#include "tools/profiler/Measure.h"

#include "compiler/ops/OpDef.h"
#include "compiler/support/Diagnostics.h"

#include <algorithm>
#include <climits>

namespace memfit::profiler {

namespace {

const float kOne = 1, kZero = 0;

/// `dims` as [d0, rest, 1, 1]: the shape elementwise kernels see.
std::vector<int64_t> flat(const std::vector<int64_t> &dims) {
  int64_t n = dims.empty() ? 1 : dims[0];
  return {n, elementsOf(dims) / std::max<int64_t>(n, 1), 1, 1};
}

llvm::Expected<int> toInt(int64_t v) {
  if (v <= 0 || v > INT_MAX)
    return makeErrorF("size {0} does not fit a cuBLAS call", v);
  return static_cast<int>(v);
}

/// C[m x n] = A[m x k] * B[k x n], column-major, on fresh buffers.
llvm::Expected<double> timeGemms(Context &ctx, int64_t m, int64_t n, int64_t k,
                                 int count) {
  auto mi = toInt(m), ni = toInt(n), ki = toInt(k);
  if (!mi)
    return mi.takeError();
  if (!ni)
    return ni.takeError();
  if (!ki)
    return ki.takeError();
  auto a = DeviceBuffer::alloc(static_cast<size_t>(m * k) * 4);
  if (!a)
    return a.takeError();
  auto b = DeviceBuffer::alloc(static_cast<size_t>(k * n) * 4);
  if (!b)
    return b.takeError();
  auto c = DeviceBuffer::alloc(static_cast<size_t>(m * n) * 4);
  if (!c)
    return c.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    for (int i = 0; i < count; ++i)
      MEMFIT_CUBLAS(cublasSgemm(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, *mi, *ni,
                                *ki, &kOne, a->f(), *mi, b->f(), *ki, &kZero,
                                c->f(), *mi));
    return llvm::Error::success();
  });
}

/// dB[1, c, 1, 1] = sum of dY[n, c, h, w] over n, h, w: the reduction every
/// bias-style weight gradient is.
llvm::Error reduceToChannels(Context &ctx, const Tensor &dy, const Tensor &db) {
  MEMFIT_CUDNN(cudnnConvolutionBackwardBias(
      ctx.cudnn, &kOne, dy.desc.get(), dy.f(), &kZero, db.desc.get(), db.f()));
  return llvm::Error::success();
}

llvm::Expected<OpTensorDesc> makeOpTensor(cudnnOpTensorOp_t op) {
  cudnnOpTensorDescriptor_t raw;
  MEMFIT_CUDNN(cudnnCreateOpTensorDescriptor(&raw));
  OpTensorDesc d(raw);
  MEMFIT_CUDNN(cudnnSetOpTensorDescriptor(raw, op, CUDNN_DATA_FLOAT,
                                          CUDNN_NOT_PROPAGATE_NAN));
  return d;
}

/// `count` times C = op(A, B) over tensors of `dims`.
llvm::Expected<double> timeOpTensor(Context &ctx, cudnnOpTensorOp_t op,
                                    const std::vector<int64_t> &dims,
                                    int count) {
  auto desc = makeOpTensor(op);
  if (!desc)
    return desc.takeError();
  auto a = makeDeviceTensor(flat(dims)), b = makeDeviceTensor(flat(dims)),
       c = makeDeviceTensor(flat(dims));
  if (!a)
    return a.takeError();
  if (!b)
    return b.takeError();
  if (!c)
    return c.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    for (int i = 0; i < count; ++i)
      MEMFIT_CUDNN(cudnnOpTensor(ctx.cudnn, desc->get(), &kOne, a->desc.get(),
                                 a->f(), &kOne, b->desc.get(), b->f(), &kZero,
                                 c->desc.get(), c->f()));
    return llvm::Error::success();
  });
}

/// `count` device-to-device copies of `bytes`.
llvm::Expected<double> timeCopies(Context &ctx, size_t bytes, int count,
                                  bool clearFirst = false) {
  auto src = DeviceBuffer::alloc(bytes), dst = DeviceBuffer::alloc(bytes);
  if (!src)
    return src.takeError();
  if (!dst)
    return dst.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    if (clearFirst)
      MEMFIT_CUDA(cudaMemsetAsync(dst->get(), 0, dst->bytes(), ctx.stream));
    for (int i = 0; i < count; ++i)
      MEMFIT_CUDA(cudaMemcpyAsync(dst->get(), src->get(), bytes,
                                  cudaMemcpyDeviceToDevice, ctx.stream));
    return llvm::Error::success();
  });
}

llvm::Expected<double> timeActivation(Context &ctx, const Op &op,
                                      const std::vector<int64_t> &dims,
                                      bool forward) {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  double coef = 0;
  if (op.kind == OpKind::Sigmoid)
    mode = CUDNN_ACTIVATION_SIGMOID;
  else if (op.kind == OpKind::Tanh)
    mode = CUDNN_ACTIVATION_TANH;
  else if (op.kind == OpKind::Clip && op.attrs.minValue == 0 &&
           op.attrs.maxValue > 0) {
    mode = CUDNN_ACTIVATION_CLIPPED_RELU;
    coef = op.attrs.maxValue;
  }
  // LeakyRelu and other Clip bounds: ReLU moves the same bytes.
  cudnnActivationDescriptor_t raw;
  MEMFIT_CUDNN(cudnnCreateActivationDescriptor(&raw));
  ActivationDesc act(raw);
  MEMFIT_CUDNN(
      cudnnSetActivationDescriptor(raw, mode, CUDNN_NOT_PROPAGATE_NAN, coef));
  auto x = makeDeviceTensor(flat(dims)), y = makeDeviceTensor(flat(dims));
  if (!x)
    return x.takeError();
  if (!y)
    return y.takeError();
  if (forward)
    return ctx.timeMedian([&]() -> llvm::Error {
      MEMFIT_CUDNN(cudnnActivationForward(ctx.cudnn, raw, &kOne, x->desc.get(),
                                          x->f(), &kZero, y->desc.get(),
                                          y->f()));
      return llvm::Error::success();
    });
  auto dy = makeDeviceTensor(flat(dims)), dx = makeDeviceTensor(flat(dims));
  if (!dy)
    return dy.takeError();
  if (!dx)
    return dx.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    MEMFIT_CUDNN(cudnnActivationBackward(
        ctx.cudnn, raw, &kOne, y->desc.get(), y->f(), dy->desc.get(), dy->f(),
        x->desc.get(), x->f(), &kZero, dx->desc.get(), dx->f()));
    return llvm::Error::success();
  });
}

/// Spatial tensors get a unit axis when 1-D (cuDNN wants 4-D at least).
std::vector<int64_t> atLeast4(std::vector<int64_t> d) {
  while (d.size() < 4)
    d.push_back(1);
  return d;
}

llvm::Expected<double> timePooling(Context &ctx, const Op &op,
                                   const std::vector<int64_t> &xDims,
                                   bool forward) {
  std::vector<int64_t> xd = atLeast4(xDims);
  int spatial = static_cast<int>(xd.size()) - 2;
  std::vector<int> window(spatial, 1), pad(spatial, 0), stride(spatial, 1);
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  if (op.kind == OpKind::GlobalAveragePool) {
    mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    for (int i = 0; i < spatial; ++i)
      window[i] = static_cast<int>(xd[i + 2]);
  } else {
    if (op.kind == OpKind::AveragePool)
      mode = op.attrs.countIncludePad
                 ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    size_t rank = op.attrs.kernel.size();
    for (size_t i = 0; i < rank && i < (size_t)spatial; ++i) {
      window[i] = static_cast<int>(op.attrs.kernel[i]);
      if (op.attrs.strides.size() == rank)
        stride[i] = static_cast<int>(op.attrs.strides[i]);
      if (op.attrs.pads.size() == 2 * rank)
        pad[i] = static_cast<int>(op.attrs.pads[i]);
    }
  }
  cudnnPoolingDescriptor_t raw;
  MEMFIT_CUDNN(cudnnCreatePoolingDescriptor(&raw));
  PoolingDesc pool(raw);
  MEMFIT_CUDNN(cudnnSetPoolingNdDescriptor(raw, mode, CUDNN_NOT_PROPAGATE_NAN,
                                           spatial, window.data(), pad.data(),
                                           stride.data()));
  auto x = makeDeviceTensor(xd);
  if (!x)
    return x.takeError();
  std::vector<int> yDimsI(xd.size());
  MEMFIT_CUDNN(cudnnGetPoolingNdForwardOutputDim(
      raw, x->desc.get(), static_cast<int>(xd.size()), yDimsI.data()));
  std::vector<int64_t> yd(yDimsI.begin(), yDimsI.end());
  auto y = makeDeviceTensor(yd);
  if (!y)
    return y.takeError();
  if (forward)
    return ctx.timeMedian([&]() -> llvm::Error {
      MEMFIT_CUDNN(cudnnPoolingForward(ctx.cudnn, raw, &kOne, x->desc.get(),
                                       x->f(), &kZero, y->desc.get(), y->f()));
      return llvm::Error::success();
    });
  auto dy = makeDeviceTensor(yd), dx = makeDeviceTensor(xd);
  if (!dy)
    return dy.takeError();
  if (!dx)
    return dx.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    MEMFIT_CUDNN(cudnnPoolingBackward(
        ctx.cudnn, raw, &kOne, y->desc.get(), y->f(), dy->desc.get(), dy->f(),
        x->desc.get(), x->f(), &kZero, dx->desc.get(), dx->f()));
    return llvm::Error::success();
  });
}

llvm::Expected<double> timeBatchNorm(Context &ctx, const Op &op,
                                     const std::vector<int64_t> &xDims,
                                     TaskKind kind) {
  std::vector<int64_t> xd = atLeast4(xDims);
  std::vector<int64_t> cd(xd.size(), 1);
  cd[1] = xd[1];
  auto x = makeDeviceTensor(xd), y = makeDeviceTensor(xd);
  if (!x)
    return x.takeError();
  if (!y)
    return y.takeError();
  if (kind == TaskKind::BackwardWeight) {
    // dgamma = sum(dY * xhat), dbeta = sum(dY): two channel reductions.
    auto g = makeDeviceTensor(cd);
    if (!g)
      return g.takeError();
    return ctx.timeMedian([&]() -> llvm::Error {
      if (auto err = reduceToChannels(ctx, *y, *g))
        return err;
      return reduceToChannels(ctx, *x, *g);
    });
  }
  cudnnTensorDescriptor_t rawBn;
  MEMFIT_CUDNN(cudnnCreateTensorDescriptor(&rawBn));
  TensorDesc bn(rawBn);
  MEMFIT_CUDNN(cudnnDeriveBNTensorDescriptor(rawBn, x->desc.get(),
                                             CUDNN_BATCHNORM_SPATIAL));
  size_t cBytes = static_cast<size_t>(xd[1]) * 4;
  std::vector<DeviceBuffer> params;
  for (int i = 0; i < 6; ++i) {
    auto p = DeviceBuffer::alloc(cBytes);
    if (!p)
      return p.takeError();
    params.push_back(std::move(*p));
  }
  double eps = std::max<double>(op.attrs.epsilon, 1e-5);
  if (kind == TaskKind::Forward)
    return ctx.timeMedian([&]() -> llvm::Error {
      MEMFIT_CUDNN(cudnnBatchNormalizationForwardTraining(
          ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x->desc.get(),
          x->f(), y->desc.get(), y->f(), rawBn, params[0].get(),
          params[1].get(), 1.0 - op.attrs.momentum, params[2].get(),
          params[3].get(), eps, params[4].get(), params[5].get()));
      return llvm::Error::success();
    });
  auto dx = makeDeviceTensor(xd);
  if (!dx)
    return dx.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    MEMFIT_CUDNN(cudnnBatchNormalizationBackward(
        ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero,
        x->desc.get(), x->f(), y->desc.get(), y->f(), dx->desc.get(), dx->f(),
        rawBn, params[0].get(), params[1].get(), params[2].get(), eps,
        params[4].get(), params[5].get()));
    return llvm::Error::success();
  });
}

llvm::Expected<double> timeLrn(Context &ctx, const Op &op,
                               const std::vector<int64_t> &xDims,
                               bool forward) {
  std::vector<int64_t> xd = atLeast4(xDims);
  cudnnLRNDescriptor_t raw;
  MEMFIT_CUDNN(cudnnCreateLRNDescriptor(&raw));
  LrnDesc lrn(raw);
  unsigned n = static_cast<unsigned>(
      std::clamp<int64_t>(op.attrs.size, CUDNN_LRN_MIN_N, CUDNN_LRN_MAX_N));
  MEMFIT_CUDNN(
      cudnnSetLRNDescriptor(raw, n, op.attrs.alpha,
                            std::max<double>(op.attrs.beta, CUDNN_LRN_MIN_BETA),
                            std::max<double>(op.attrs.bias, CUDNN_LRN_MIN_K)));
  auto x = makeDeviceTensor(xd), y = makeDeviceTensor(xd);
  if (!x)
    return x.takeError();
  if (!y)
    return y.takeError();
  if (forward)
    return ctx.timeMedian([&]() -> llvm::Error {
      MEMFIT_CUDNN(cudnnLRNCrossChannelForward(
          ctx.cudnn, raw, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x->desc.get(),
          x->f(), &kZero, y->desc.get(), y->f()));
      return llvm::Error::success();
    });
  auto dy = makeDeviceTensor(xd), dx = makeDeviceTensor(xd);
  if (!dy)
    return dy.takeError();
  if (!dx)
    return dx.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    MEMFIT_CUDNN(cudnnLRNCrossChannelBackward(
        ctx.cudnn, raw, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, y->desc.get(),
        y->f(), dy->desc.get(), dy->f(), x->desc.get(), x->f(), &kZero,
        dx->desc.get(), dx->f()));
    return llvm::Error::success();
  });
}

/// Softmax over `axis`, as [outer, axis, inner, 1] in channel mode.
llvm::Expected<double> timeSoftmax(Context &ctx,
                                   const std::vector<int64_t> &dims,
                                   int64_t axis, cudnnSoftmaxAlgorithm_t algo,
                                   bool forward) {
  int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < 0)
    axis += rank;
  axis = std::clamp<int64_t>(axis, 0, rank - 1);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= dims[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= dims[i];
  std::vector<int64_t> d{outer, dims[axis], inner, 1};
  auto x = makeDeviceTensor(d), y = makeDeviceTensor(d);
  if (!x)
    return x.takeError();
  if (!y)
    return y.takeError();
  if (forward)
    return ctx.timeMedian([&]() -> llvm::Error {
      MEMFIT_CUDNN(cudnnSoftmaxForward(
          ctx.cudnn, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, x->desc.get(),
          x->f(), &kZero, y->desc.get(), y->f()));
      return llvm::Error::success();
    });
  auto dx = makeDeviceTensor(d);
  if (!dx)
    return dx.takeError();
  return ctx.timeMedian([&]() -> llvm::Error {
    MEMFIT_CUDNN(cudnnSoftmaxBackward(
        ctx.cudnn, algo, CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, y->desc.get(),
        y->f(), x->desc.get(), x->f(), &kZero, dx->desc.get(), dx->f()));
    return llvm::Error::success();
  });
}

/// Concat forward (or its backward, reversed): one strided copy per operand
/// between the operand and its slice of the output.
llvm::Expected<double> timeConcat(Context &ctx, const Graph &g, const Op &op,
                                  int64_t b, bool forward) {
  std::vector<int64_t> yd = dimsAt(g.value(op.outputs[0]), b);
  int64_t rank = static_cast<int64_t>(yd.size());
  int64_t axis = op.attrs.axis < 0 ? op.attrs.axis + rank : op.attrs.axis;
  axis = std::clamp<int64_t>(axis, 0, rank - 1);
  int64_t rows = 1;
  for (int64_t i = 0; i < axis; ++i)
    rows *= yd[i];
  size_t rowBytes = static_cast<size_t>(elementsOf(yd) / rows) * 4;
  auto y = DeviceBuffer::alloc(static_cast<size_t>(elementsOf(yd)) * 4);
  if (!y)
    return y.takeError();
  std::vector<DeviceBuffer> parts;
  std::vector<size_t> widths;
  for (ValueId in : op.inputs) {
    std::vector<int64_t> d = dimsAt(g.value(in), b);
    size_t width = static_cast<size_t>(elementsOf(d) / rows) * 4;
    auto p = DeviceBuffer::alloc(width * rows);
    if (!p)
      return p.takeError();
    parts.push_back(std::move(*p));
    widths.push_back(width);
  }
  return ctx.timeMedian([&]() -> llvm::Error {
    size_t offset = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      char *slice = static_cast<char *>(y->get()) + offset;
      if (forward)
        MEMFIT_CUDA(cudaMemcpy2DAsync(slice, rowBytes, parts[i].get(),
                                      widths[i], widths[i], rows,
                                      cudaMemcpyDeviceToDevice, ctx.stream));
      else
        MEMFIT_CUDA(cudaMemcpy2DAsync(parts[i].get(), widths[i], slice,
                                      rowBytes, widths[i], rows,
                                      cudaMemcpyDeviceToDevice, ctx.stream));
      offset += widths[i];
    }
    return llvm::Error::success();
  });
}

int dataGradients(const Graph &g, const Op &op) {
  int n = 0;
  for (ValueId in : op.inputs)
    n += g.value(in).kind == ValueKind::Activation;
  return std::max(n, 1);
}

llvm::Expected<double> timeOp(Context &ctx, const Graph &g, OpId id,
                              TaskKind kind, int64_t b) {
  const Op &op = g.op(id);
  std::vector<int64_t> yd = dimsAt(g.value(op.outputs.at(0)), b);
  std::vector<int64_t> xd =
      op.inputs.empty() ? yd : dimsAt(g.value(op.inputs[0]), b);
  bool fwd = kind == TaskKind::Forward;
  bool weightGrad = kind == TaskKind::BackwardWeight;
  size_t xBytes = static_cast<size_t>(elementsOf(xd)) * 4;
  size_t yBytes = static_cast<size_t>(elementsOf(yd)) * 4;

  switch (op.kind) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Clip:
    return timeActivation(ctx, op, yd, fwd);
  case OpKind::Dropout:
    // Y = X * mask, dX = dY * mask.
    return timeOpTensor(ctx, CUDNN_OP_TENSOR_MUL, yd, 1);
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Sum:
  case OpKind::Mul: {
    cudnnOpTensorOp_t top =
        op.kind == OpKind::Mul ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD;
    if (fwd)
      return timeOpTensor(ctx, top, yd,
                          std::max<int>((int)op.inputs.size() - 1, 1));
    if (!weightGrad) {
      // Add/Sub pass dY on (one copy per operand), Mul multiplies by the
      // other operand.
      if (op.kind == OpKind::Mul)
        return timeOpTensor(ctx, CUDNN_OP_TENSOR_MUL, yd, dataGradients(g, op));
      return timeCopies(ctx, yBytes, dataGradients(g, op));
    }
    // A bias-style weight: its gradient reduces dY over the batch.
    auto dy = makeDeviceTensor(flat(yd));
    if (!dy)
      return dy.takeError();
    std::vector<int64_t> wd = flat(yd);
    wd[0] = 1;
    auto dw = makeDeviceTensor(wd);
    if (!dw)
      return dw.takeError();
    return ctx.timeMedian(
        [&]() -> llvm::Error { return reduceToChannels(ctx, *dy, *dw); });
  }
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
    return timePooling(ctx, op, xd, fwd);
  case OpKind::BatchNorm:
    return timeBatchNorm(ctx, op, xd, kind);
  case OpKind::LRN:
    return timeLrn(ctx, op, xd, fwd);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return timeSoftmax(ctx, yd, op.attrs.axis,
                       op.kind == OpKind::Softmax ? CUDNN_SOFTMAX_ACCURATE
                                                  : CUDNN_SOFTMAX_LOG,
                       fwd);
  case OpKind::Gemm:
  case OpKind::MatMul: {
    const Value &a = g.value(op.inputs.at(0));
    int64_t kred = a.dims.empty() ? 1 : a.dims.back();
    if (op.kind == OpKind::Gemm && op.attrs.transA && a.dims.size() >= 2)
      kred = a.dims[a.dims.size() - 2];
    int64_t m = yd.back(), rows = elementsOf(yd) / std::max<int64_t>(m, 1);
    bool bias = op.kind == OpKind::Gemm && op.inputs.size() >= 3;
    llvm::Expected<double> t =
        fwd          ? timeGemms(ctx, m, rows, kred, 1)
        : weightGrad ? timeGemms(ctx, m, kred, rows, 1)
                     : timeGemms(ctx, kred, rows, m, dataGradients(g, op));
    if (!t || !bias || kind == TaskKind::BackwardData)
      return t;
    // Y starts as the broadcast bias; dB is the column sum of dY.
    auto yt = makeDeviceTensor({rows, m, 1, 1});
    auto bt = makeDeviceTensor({1, m, 1, 1});
    if (!yt)
      return yt.takeError();
    if (!bt)
      return bt.takeError();
    auto extra = ctx.timeMedian([&]() -> llvm::Error {
      if (fwd) {
        MEMFIT_CUDNN(cudnnAddTensor(ctx.cudnn, &kOne, bt->desc.get(), bt->f(),
                                    &kZero, yt->desc.get(), yt->f()));
        return llvm::Error::success();
      }
      return reduceToChannels(ctx, *yt, *bt);
    });
    if (!extra)
      return extra.takeError();
    return *t + *extra;
  }
  case OpKind::Concat:
    return timeConcat(ctx, g, op, b, fwd);
  case OpKind::Flatten:
  case OpKind::Reshape:
    return timeCopies(ctx, yBytes, 1);
  case OpKind::Pad:
    // Forward clears the padded output and copies the input in; backward
    // copies the inner part of dY out.
    return timeCopies(ctx, xBytes, 1, /*clearFirst=*/fwd);
  case OpKind::Conv:
    return makeInternalError("conv tasks are measured by timeConv");
  default:
    break;
  }
  // Transformer and layout kinds are not measured one by one yet.
  return makeErrorF("no microbenchmark for {0}", opKindName(op.kind));
}

} // namespace

llvm::Expected<double> timeTask(Context &ctx, const Graph &g,
                                const ProfileRequest &r, int64_t b) {
  if (r.kind == TaskKind::Loss) {
    ValueId in = lossInput(g, r.loss);
    std::vector<int64_t> d = flat(dimsAt(g.value(in), b));
    if (r.loss == LossKind::MSE)
      // The difference, then its square for the loss value.
      return timeOpTensor(ctx, CUDNN_OP_TENSOR_ADD, d, 2);
    // Log-softmax over the classes, then the gradient (p - onehot) / b.
    auto soft = timeSoftmax(ctx, d, 1, CUDNN_SOFTMAX_LOG, true);
    if (!soft)
      return soft.takeError();
    auto grad = timeOpTensor(ctx, CUDNN_OP_TENSOR_ADD, d, 1);
    if (!grad)
      return grad.takeError();
    return *soft + *grad;
  }
  if (r.kind == TaskKind::Update) {
    const Value &w = g.value(r.weight);
    std::vector<int64_t> d{1, w.elementsPerSample(), 1, 1};
    auto wt = makeDeviceTensor(d), dw = makeDeviceTensor(d),
         mt = makeDeviceTensor(d);
    if (!wt)
      return wt.takeError();
    if (!dw)
      return dw.takeError();
    if (!mt)
      return mt.takeError();
    const float lr = -0.01f, mu = 0.9f;
    bool momentum = r.momentum;
    // v = dW + mu v; w = w - lr v (or w = w - lr dW without momentum).
    return ctx.timeMedian([&]() -> llvm::Error {
      if (momentum) {
        MEMFIT_CUDNN(cudnnAddTensor(ctx.cudnn, &kOne, dw->desc.get(), dw->f(),
                                    &mu, mt->desc.get(), mt->f()));
        MEMFIT_CUDNN(cudnnAddTensor(ctx.cudnn, &lr, mt->desc.get(), mt->f(),
                                    &kOne, wt->desc.get(), wt->f()));
      } else {
        MEMFIT_CUDNN(cudnnAddTensor(ctx.cudnn, &lr, dw->desc.get(), dw->f(),
                                    &kOne, wt->desc.get(), wt->f()));
      }
      return llvm::Error::success();
    });
  }
  return timeOp(ctx, g, r.op, r.kind, b);
}

} // namespace memfit::profiler
