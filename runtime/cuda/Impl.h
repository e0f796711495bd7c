//===- Impl.h - The CUDA backend's state, shared by its files ---*- C++ -*-===//
//
// Internal to runtime/cuda. Exec::Impl holds everything the CUDA backend
// owns: the three streams and the plan's events, the cuDNN and cuBLAS
// handles (both bound to the compute stream), the one arena allocation, one
// allocation per resident tensor, pinned host memory, and the cuDNN
// convolution descriptors, created on first use and cached by the call's
// ConvParams and `n` (host memory only).
// Every device allocation happens in the constructor; an iteration only
// issues work.
//
// Every CUDA, cuDNN and cuBLAS status goes through check(), which reports
// the failing call with the current task's name (Exec::fatal). Kernels are
// asynchronous: a fault inside one surfaces at a later call; with
// MEMFIT_CUDA_SYNC=1 in the environment every operation is followed by a
// stream synchronisation, so the error names the task that caused it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_IMPL_H
#define MEMFIT_RUNTIME_CUDA_IMPL_H

#include "runtime/Exec.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memfit::rt {

namespace cuda {

void check(const Exec &x, cudaError_t e, const char *call);
/// Frees NCCL's communicator, stream and events (Collectives.cu; the call
/// also brings that file's Exec members into every trainer's link).
void destroyCollectives(Exec::Impl &im);
void check(const Exec &x, cudnnStatus_t s, const char *call);
void check(const Exec &x, cublasStatus_t s, const char *call);

/// Checks a status inside an Exec member function.
#define MEMFIT_CHECK(call) ::memfit::rt::cuda::check(*this, (call), #call)

/// cuDNN descriptors of one convolution at one sub-batch size, and the
/// algorithm actually run per (direction, planned algorithm).
struct ConvEntry {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::map<std::pair<int, int32_t>, int32_t> algoUsed;
  ConvEntry() = default;
  ConvEntry(const ConvEntry &) = delete;
  ConvEntry &operator=(const ConvEntry &) = delete;
  ~ConvEntry();
};

/// A convolution at one sub-batch size, keyed by value (ConvParams holds
/// only int64_t, so it has no padding to compare): identical convolutions
/// share descriptors, and no address reuse can alias two of them.
struct ConvKey {
  ConvParams p;
  int64_t n;
  bool operator==(const ConvKey &o) const {
    return n == o.n && std::memcmp(&p, &o.p, sizeof p) == 0;
  }
};
struct ConvKeyHash {
  size_t operator()(const ConvKey &k) const {
    static_assert(sizeof(ConvParams) == 15 * sizeof(int64_t),
                  "ConvParams must stay padding-free int64_t fields");
    const auto *v = reinterpret_cast<const int64_t *>(&k.p);
    uint64_t h = static_cast<uint64_t>(k.n);
    for (size_t i = 0; i < sizeof(ConvParams) / sizeof(int64_t); ++i)
      h = (h ^ static_cast<uint64_t>(v[i])) * 0x100000001b3ULL;
    return static_cast<size_t>(h);
  }
};

/// Threads per block of the element-wise kernels.
constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `count` items.
inline unsigned gridFor(int64_t count, int threads = kThreads) {
  int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 1 << 16));
}

} // namespace cuda

struct Exec::Impl {
  int device = 0;
  cudaStream_t stream[3] = {nullptr, nullptr, nullptr};
  std::vector<cudaEvent_t> events;
  std::vector<bool> recorded;
  cudnnHandle_t cudnn = nullptr;
  // Data parallelism (Collectives.cu): NCCL on a stream of its own, made
  // at the first collective. Weight-side buffers hold `ranks` equal slices.
  ncclComm_t nccl = nullptr;
  cudaStream_t coll = nullptr;
  cudaEvent_t computeMark = nullptr, collDone = nullptr;
  std::vector<float *> gSlice; // shard 2: this rank's accumulated slices
  cublasHandle_t cublas = nullptr;

  char *arena = nullptr;
  // Device; g, m and v null where not planned.
  std::vector<float *> w, g, m, v;
  float *loss = nullptr;
  std::vector<void *> slots; // pinned host
  float *input = nullptr;
  void *labels = nullptr;

  int64_t usedAtStart = 0; // device bytes in use once the context existed
  bool syncEachOp = false;

  std::unordered_map<cuda::ConvKey, std::unique_ptr<cuda::ConvEntry>,
                     cuda::ConvKeyHash>
      convs;

  cudaStream_t compute() const { return stream[Compute]; }
  /// Ends every operation: reports a failed kernel launch, and with
  /// MEMFIT_CUDA_SYNC waits for the operation so a fault names its task.
  void done(const Exec &x, const char *what) const;
};

} // namespace memfit::rt

#endif
