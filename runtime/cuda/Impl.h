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
#include "runtime/cuda/View.h"

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
  Store store; // the data's storage (the descriptors' data type)
  bool operator==(const ConvKey &o) const {
    return n == o.n && store == o.store && std::memcmp(&p, &o.p, sizeof p) == 0;
  }
};
struct ConvKeyHash {
  size_t operator()(const ConvKey &k) const {
    static_assert(sizeof(ConvParams) == 15 * sizeof(int64_t),
                  "ConvParams must stay padding-free int64_t fields");
    const auto *v = reinterpret_cast<const int64_t *>(&k.p);
    uint64_t h =
        static_cast<uint64_t>(k.n) * 3 + static_cast<uint64_t>(k.store);
    for (size_t i = 0; i < sizeof(ConvParams) / sizeof(int64_t); ++i)
      h = (h ^ static_cast<uint64_t>(v[i])) * 0x100000001b3ULL;
    return static_cast<size_t>(h);
  }
};

/// C = alpha op(A) op(B) + beta C in cuBLAS's column-major terms, `batch`
/// products strided by the stride arguments, each operand in its own
/// storage (fp32, or 16-bit inputs with a 16-bit or fp32 result), fp32
/// accumulation (Dense.cu). Other mixes are refused.
void gemm(const Exec &x, const Exec::Impl &im, bool transA, bool transB, int m,
          int n, int k, float alpha, View a, int lda, long long strideA, View b,
          int ldb, long long strideB, float beta, View c, int ldc,
          long long strideC, int batch = 1);

/// 16-bit convolutions' own pieces, where cuDNN wants one data type
/// throughout (Elementwise.cu): y[s, ch, :] += bias[ch]; db[ch] (put) the
/// sum of dy over samples and positions, in double; dst[i] (put) src[i].
void channelBiasAdd(const Exec::Impl &im, int64_t n, int64_t c, int64_t spatial,
                    View bias, View y);
void channelSum(const Exec::Impl &im, int64_t n, int64_t c, int64_t spatial,
                View dy, View db, bool acc);
void putInto(const Exec::Impl &im, int64_t count, View src, View dst, bool acc);

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
  /// cuBLAS's workspace (ProgramInfo::blasWorkspaceBytes), out of the
  /// library reserve; and what the handles and it measured to take.
  void *blasWorkspace = nullptr;
  int64_t libraryBytes = 0;
  /// The most device bytes in use (minus usedAtStart) at any sample.
  int64_t peakBytes = 0;
  bool syncEachOp = false;

  std::unordered_map<cuda::ConvKey, std::unique_ptr<cuda::ConvEntry>,
                     cuda::ConvKeyHash>
      convs;

  // --- 16-bit programs (runtime/cuda/View.h) ---
  /// The program's 16-bit storage (F32 in fp32 and tf32 programs).
  cuda::Store narrow = cuda::Store::F32;
  /// Start addresses of the 16-bit operands handed out for the current
  /// task (Exec::arena16, Exec::weightCopy), cleared by the next setTask:
  /// all of a task's blocks are live together, so an address names one
  /// block for the whole task.
  std::vector<const char *> narrowNow;
  /// 16-bit working copies of the weights tensor-core operations read,
  /// null where WeightInfo::workingCopy is false.
  std::vector<char *> wCopy;
  std::vector<bool> copyStale; // the master changed since the copy
  /// Pinned host staging of the batch's float inputs in 16 bits: the
  /// host-side conversion a 16-bit program's input block is loaded from.
  uint16_t *input16 = nullptr;
  /// fp16 loss scaling: one flag set by any non-finite unscaled gradient.
  int *nonFinite = nullptr;

  /// The operand at p as the operation receives it: 16-bit when the
  /// generated code handed it out as such for this operation.
  cuda::View view(const void *p) const {
    const char *c = static_cast<const char *>(p);
    for (const char *q : narrowNow)
      if (q == c)
        return {const_cast<char *>(c), narrow};
    return {const_cast<char *>(c), cuda::Store::F32};
  }

  cudaStream_t compute() const { return stream[Compute]; }
  /// Ends every operation: reports a failed kernel launch, and with
  /// MEMFIT_CUDA_SYNC waits for the operation so a fault names its task.
  void done(const Exec &x, const char *what) const;
};

} // namespace memfit::rt

#endif
