//===- CudaSupport.cpp - Errors, buffers, descriptors, timing -------------===//
#include "tools/profiler/CudaSupport.h"

#include "compiler/support/Diagnostics.h"

#include <algorithm>
#include <climits>

namespace memfit::profiler {

char OutOfDeviceMemory::ID = 0;

void OutOfDeviceMemory::log(llvm::raw_ostream &os) const {
  os << "out of device memory (" << call << ")";
}

llvm::Error cudaFailure(cudaError_t e, const char *call) {
  if (e == cudaErrorMemoryAllocation)
    return llvm::make_error<OutOfDeviceMemory>(call);
  return makeErrorF("{0} failed: {1}", call, cudaGetErrorString(e));
}

llvm::Error cudnnFailure(cudnnStatus_t s, const char *call) {
  if (s == CUDNN_STATUS_ALLOC_FAILED)
    return llvm::make_error<OutOfDeviceMemory>(call);
  return makeErrorF("{0} failed: {1}", call, cudnnGetErrorString(s));
}

llvm::Error cublasFailure(cublasStatus_t s, const char *call) {
  if (s == CUBLAS_STATUS_ALLOC_FAILED)
    return llvm::make_error<OutOfDeviceMemory>(call);
  return makeErrorF("{0} failed: {1}", call, cublasGetStatusString(s));
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
  std::swap(ptr, o.ptr);
  std::swap(size, o.size);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr)
    cudaFree(ptr);
}

llvm::Expected<DeviceBuffer> DeviceBuffer::alloc(size_t bytes) {
  DeviceBuffer b;
  b.size = std::max<size_t>(bytes, 1);
  MEMFIT_CUDA(cudaMalloc(&b.ptr, b.size));
  MEMFIT_CUDA(cudaMemset(b.ptr, 0, b.size));
  return b;
}

static llvm::Expected<std::vector<int>> toInts(std::vector<int64_t> dims) {
  while (dims.size() < 4)
    dims.push_back(1);
  std::vector<int> out;
  for (int64_t d : dims) {
    if (d <= 0 || d > INT_MAX)
      return makeErrorF("dimension {0} does not fit a cuDNN descriptor", d);
    out.push_back(static_cast<int>(d));
  }
  return out;
}

llvm::Expected<TensorDesc> makeTensor(std::vector<int64_t> dims) {
  auto d = toInts(std::move(dims));
  if (!d)
    return d.takeError();
  std::vector<int> strides(d->size());
  int64_t stride = 1;
  for (size_t i = d->size(); i-- > 0;) {
    if (stride > INT_MAX)
      return makeError("tensor too large for a cuDNN descriptor");
    strides[i] = static_cast<int>(stride);
    stride *= (*d)[i];
  }
  cudnnTensorDescriptor_t raw;
  MEMFIT_CUDNN(cudnnCreateTensorDescriptor(&raw));
  TensorDesc desc(raw);
  MEMFIT_CUDNN(cudnnSetTensorNdDescriptor(raw, CUDNN_DATA_FLOAT,
                                          static_cast<int>(d->size()),
                                          d->data(), strides.data()));
  return desc;
}

llvm::Expected<FilterDesc> makeFilter(std::vector<int64_t> dims) {
  auto d = toInts(std::move(dims));
  if (!d)
    return d.takeError();
  cudnnFilterDescriptor_t raw;
  MEMFIT_CUDNN(cudnnCreateFilterDescriptor(&raw));
  FilterDesc desc(raw);
  MEMFIT_CUDNN(
      cudnnSetFilterNdDescriptor(raw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                 static_cast<int>(d->size()), d->data()));
  return desc;
}

llvm::Expected<Tensor> makeDeviceTensor(std::vector<int64_t> dims) {
  Tensor t;
  auto desc = makeTensor(dims);
  if (!desc)
    return desc.takeError();
  auto buf = DeviceBuffer::alloc(static_cast<size_t>(elementsOf(dims)) * 4);
  if (!buf)
    return buf.takeError();
  t.dims = std::move(dims);
  t.desc = std::move(*desc);
  t.buf = std::move(*buf);
  return t;
}

std::vector<int64_t> dimsAt(const Value &v, int64_t b) {
  std::vector<int64_t> d = v.dims;
  if (v.batched && !d.empty())
    d[0] = b;
  if (d.empty())
    d.push_back(1);
  return d;
}

int64_t elementsOf(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Context::~Context() {
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  if (cublas)
    cublasDestroy(cublas);
  if (cudnn)
    cudnnDestroy(cudnn);
  if (stream)
    cudaStreamDestroy(stream);
}

llvm::Error Context::init() {
  MEMFIT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  MEMFIT_CUDA(cudaEventCreate(&start));
  MEMFIT_CUDA(cudaEventCreate(&stop));
  MEMFIT_CUDNN(cudnnCreate(&cudnn));
  MEMFIT_CUDNN(cudnnSetStream(cudnn, stream));
  MEMFIT_CUBLAS(cublasCreate(&cublas));
  MEMFIT_CUBLAS(cublasSetStream(cublas, stream));
  MEMFIT_CUBLAS(cublasSetMathMode(cublas, allowTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_PEDANTIC_MATH));
  return llvm::Error::success();
}

llvm::Expected<double>
Context::timeMedian(llvm::function_ref<llvm::Error()> enqueue) {
  for (int i = 0; i < warmup; ++i)
    if (auto err = enqueue())
      return err;
  MEMFIT_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    MEMFIT_CUDA(cudaEventRecord(start, stream));
    if (auto err = enqueue())
      return err;
    MEMFIT_CUDA(cudaEventRecord(stop, stream));
    MEMFIT_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    MEMFIT_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(static_cast<double>(ms) * 1e-3);
  }
  return median(std::move(times));
}

} // namespace memfit::profiler
