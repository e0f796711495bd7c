//===- CudaSupport.h - Errors, buffers, descriptors, timing -----*- C++ -*-===//
//
// The small pieces every measurement needs: CUDA/cuDNN/cuBLAS status codes
// turned into llvm::Error naming the call, owning wrappers for device
// memory and cuDNN descriptors (released on every path), and the timing
// loop (warm-up, then the median of repeats between two CUDA events).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_PROFILER_CUDASUPPORT_H
#define MEMFIT_TOOLS_PROFILER_CUDASUPPORT_H

#include "compiler/ir/Graph.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memfit::profiler {

/// A failed device allocation: the measurement is skipped, not the run.
class OutOfDeviceMemory : public llvm::ErrorInfo<OutOfDeviceMemory> {
public:
  static char ID;
  explicit OutOfDeviceMemory(std::string call) : call(std::move(call)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  std::string call;
};

llvm::Error cudaFailure(cudaError_t e, const char *call);
llvm::Error cudnnFailure(cudnnStatus_t s, const char *call);
llvm::Error cublasFailure(cublasStatus_t s, const char *call);

#define MEMFIT_CUDA(call)                                                      \
  do {                                                                         \
    if (cudaError_t e_ = (call); e_ != cudaSuccess)                            \
      return ::memfit::profiler::cudaFailure(e_, #call);                       \
  } while (0)
#define MEMFIT_CUDNN(call)                                                     \
  do {                                                                         \
    if (cudnnStatus_t s_ = (call); s_ != CUDNN_STATUS_SUCCESS)                 \
      return ::memfit::profiler::cudnnFailure(s_, #call);                      \
  } while (0)
#define MEMFIT_CUBLAS(call)                                                    \
  do {                                                                         \
    if (cublasStatus_t s_ = (call); s_ != CUBLAS_STATUS_SUCCESS)               \
      return ::memfit::profiler::cublasFailure(s_, #call);                     \
  } while (0)

/// Owning device allocation, zero-filled so kernels read finite values.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&o) noexcept : ptr(o.ptr), size(o.size) {
    o.ptr = nullptr;
  }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  /// At least one byte is allocated so the pointer is never null.
  static llvm::Expected<DeviceBuffer> alloc(size_t bytes);
  void *get() const { return ptr; }
  float *f() const { return static_cast<float *>(ptr); }
  size_t bytes() const { return size; }

private:
  void *ptr = nullptr;
  size_t size = 0;
};

/// Owning cuDNN descriptors.
template <typename T, cudnnStatus_t (*Destroy)(T)> class Descriptor {
public:
  Descriptor() = default;
  explicit Descriptor(T d) : d(d) {}
  Descriptor(Descriptor &&o) noexcept : d(o.d) { o.d = nullptr; }
  Descriptor &operator=(Descriptor &&o) noexcept {
    std::swap(d, o.d);
    return *this;
  }
  ~Descriptor() {
    if (d)
      Destroy(d);
  }
  T get() const { return d; }

private:
  T d = nullptr;
};
using TensorDesc =
    Descriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Descriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc =
    Descriptor<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
using PoolingDesc =
    Descriptor<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using LrnDesc = Descriptor<cudnnLRNDescriptor_t, cudnnDestroyLRNDescriptor>;
using OpTensorDesc =
    Descriptor<cudnnOpTensorDescriptor_t, cudnnDestroyOpTensorDescriptor>;

/// A zero-filled device tensor with its descriptor.
struct Tensor {
  std::vector<int64_t> dims;
  DeviceBuffer buf;
  TensorDesc desc;
  float *f() const { return buf.f(); }
  size_t bytes() const { return buf.bytes(); }
};
llvm::Expected<Tensor> makeDeviceTensor(std::vector<int64_t> dims);

/// A packed float tensor of `dims` (padded with trailing 1s to 4-D, as
/// cuDNN's N-d descriptors want at least 4 dimensions).
llvm::Expected<TensorDesc> makeTensor(std::vector<int64_t> dims);
llvm::Expected<FilterDesc> makeFilter(std::vector<int64_t> dims);

/// `v`'s dims with the batch replaced by `b`.
std::vector<int64_t> dimsAt(const Value &v, int64_t b);
int64_t elementsOf(const std::vector<int64_t> &dims);

/// Handles, stream and events shared by all measurements.
struct Context {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  int warmup = 3, repeats = 10;
  bool allowTf32 = false;
  double workspaceFraction = 0.5;

  Context() = default;
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;
  ~Context();
  llvm::Error init();

  /// Runs `enqueue` warmup times, then times it `repeats` times between
  /// two events on the stream; returns the median in seconds.
  llvm::Expected<double> timeMedian(llvm::function_ref<llvm::Error()> enqueue);
};

/// Median of a non-empty list.
double median(std::vector<double> v);

} // namespace memfit::profiler

#endif
