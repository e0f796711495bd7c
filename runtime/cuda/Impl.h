//===- Impl.h - The CUDA backend's state, shared by its files ---*- C++ -*-===//
//
// Internal to runtime/cuda. Exec::Impl holds everything the CUDA backend
// owns: the three streams and the plan's events, the cuDNN and cuBLAS
// handles (both bound to the compute stream), the one arena allocation, one
// pool for the device-resident weight side (every resident tensor and the
// loss block carved from it), pinned host memory, and the cuDNN
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
// Iteration graphs (Graph.cu): each round and the update is captured once
// into a CUDA graph and replayed; MEMFIT_CUDA_GRAPHS=0 issues them eagerly.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_IMPL_H
#define MEMFIT_RUNTIME_CUDA_IMPL_H

#include "runtime/Exec.h"
#include "runtime/cuda/View.h"
#include "runtime/host/HostOptimizer.h"
#include "runtime/host/NvmeState.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Norm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memfit::rt {

namespace cuda {

/// What changes between iterations, in device memory: Exec::beginIteration
/// writes it on the compute stream before an iteration's first part, and a
/// replayed graph's kernels read it there instead of the values frozen at
/// capture (Graph.cu).
struct IterationState {
  unsigned long long step = 0;      // Adam's step t
  unsigned long long iteration = 0; // dropout's masks follow it
  float lossScale = 1;              // fp16's dynamic loss scale
  float lr = 0;                     // the step's rate (--lr-schedule)
  double lossCount = 1; // cross-entropy's counted positions (lossPositions)
};

#ifdef __CUDACC__
/// A dropout task's key: as the host computed it for an eager issue, or, in
/// a graph (`state` set), computed on the device from the iteration there;
/// both are kernels::dropoutKeyOf of the same values.
struct DropoutKey {
  uint64_t key = 0, seed = 0, task = 0;
  const IterationState *state = nullptr;
  __device__ uint64_t get() const {
    return state ? kernels::dropoutKeyOf(seed, state->iteration, task) : key;
  }
};
#endif

void check(const Exec &x, cudaError_t e, const char *call);
/// Frees NCCL's communicator, stream and events (Collectives.cu; the call
/// also brings that file's Exec members into every trainer's link).
void destroyCollectives(Exec::Impl &im);
/// Frees the convolution descriptors (Conv.cpp; as destroyCollectives, the
/// call brings that file's Exec members, checkConvolutions among them, into
/// every trainer's link, convolutions or not).
void destroyConvs(Exec::Impl &im);
/// Frees the iteration graphs (Graph.cu; as destroyCollectives, the call
/// brings that file's Exec members, which the trainer calls, into the link).
void destroyGraphs(Exec::Impl &im);
/// Decides whether parts are captured (Graph.cu), after the streams exist.
void initGraphs(const Exec &x, Exec::Impl &im);
/// Builds the multi-tensor update table (MultiTensor.cu) once the
/// weights are allocated; destroyUpdateTable frees it.
void initUpdateTable(const Exec &x, Exec::Impl &im);
/// Runs the host updates of the update just issued (Exec::hostUpdate):
/// after the rounds' copy-outs, on the host's cores, joined before it
/// returns; the working copies of their weights are refreshed on the host.
void runHostUpdates(Exec &x, Exec::Impl &im);
/// What the host function of Exec::hostReady needs: it counts the rounds
/// that reached the weight's ready point and, at the iteration's last,
/// submits its update to the host optimizer. Written by that function's
/// thread only, read by the issuing thread after the rounds are done.
struct HostReady {
  Exec *x = nullptr;
  Exec::Impl *im = nullptr;
  int32_t id = -1;
  int64_t seen = 0;     // rounds this iteration
  bool started = false; // the update was submitted this iteration
  host::JobId job = -1; // the submitted update, when started
};
/// A piece of a master on NVMe to read into pinned staging, by a host
/// function on the copy-in stream (no CUDA call in it). An I/O error is
/// the store's (NvmeStore::failed), which the trainer checks where it waits
/// for the host's updates.
struct NvmeRead {
  host::NvmeStore *store = nullptr;
  int64_t offset = 0, bytes = 0;
  char *dst = nullptr;
};
/// Whether p is a tensor of a weight homed on the host, whose updates
/// (if any run) are then joined: the caller reads or writes it in place.
bool atHome(const Exec &x, const Exec::Impl &im, const void *p);
/// Weight `id`'s 16-bit working copy at home, from its master.
void refreshHomeCopy(const Exec &x, Exec::Impl &im, int32_t id);
/// Rounds elements [lo, hi) of weight id's master (`w` at element lo) into
/// its 16-bit working copy at home: a master on NVMe, whose update and
/// writes hand it over chunk by chunk.
void narrowHomeCopy(Exec::Impl &im, int32_t id, int64_t lo, int64_t hi,
                    const float *w);
/// Copies weight id's working copy at home to the device's copy where it
/// keeps one (WeightInfo::copyOnGpu), on the copy-in stream; `wait`: and
/// waits for it.
void uploadHomeCopy(const Exec &x, Exec::Impl &im, int32_t id, bool wait);
void destroyUpdateTable(Exec::Impl &im);
void check(const Exec &x, cudnnStatus_t s, const char *call);
void check(const Exec &x, cublasStatus_t s, const char *call);

/// Checks a status inside an Exec member function.
#define MEMFIT_CHECK(call) ::memfit::rt::cuda::check(*this, (call), #call)

/// One direction of a convolution through cuDNN's graph API, its plans
/// built for one workspace size (ConvGraph.cpp).
struct ConvGraph;
struct ConvGraphDelete {
  void operator()(ConvGraph *g) const;
};

/// cuDNN descriptors of one convolution at one sub-batch size, and the
/// algorithm actually run per (direction, planned algorithm, the
/// algorithm's workspace bytes), settled before the first iteration; where
/// the tuning measured a graph-API plan faster, that plan (for calls that
/// do not accumulate: the graph's output is written, not blended).
struct ConvEntry {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::map<std::tuple<int, int32_t, int64_t>, int32_t> algoUsed;
  /// Graph-API plans per (direction, workspace bytes).
  std::map<std::pair<int, int64_t>, std::unique_ptr<ConvGraph, ConvGraphDelete>>
      graphs;
  /// The plan a call runs instead of algoUsed's algorithm, same keys.
  std::map<std::tuple<int, int32_t, int64_t>, std::pair<ConvGraph *, int32_t>>
      graphUsed;
  ConvEntry() = default;
  ConvEntry(const ConvEntry &) = delete;
  ConvEntry &operator=(const ConvEntry &) = delete;
  ~ConvEntry();
};

/// The workspace cuDNN demands of `algo` for the call (the figure the call
/// itself is held to); not SUCCESS where cuDNN does not run it.
cudnnStatus_t convWorkspace(const Exec::Impl &im, const ConvEntry &e,
                            int32_t dir, int32_t algo, size_t &bytes);

/// How many algorithms cuDNN may list for direction `dir` (its
/// *AlgorithmMaxCount, at least 1): the size of a ranking or timing answer.
int convAlgoCount(const Exec &x, const Exec::Impl &im, int32_t dir);

/// cuDNN's timings (cudnnFind*AlgorithmEx) of every algorithm of direction
/// `dir` for the convolution `p` at sub-batch `n` stored as `store`, given
/// as much workspace as the arena holds beside the operands (at least
/// `have` bytes), fastest first, each with the workspace it asks
/// (ConvTune.cpp; withinWorkspace keeps those a planned call may run). The
/// operands and workspace are scratch carved from the arena's start: called
/// only before the first iteration, when nothing lives there yet. Empty
/// where the operands and `have` do not fit in the arena.
std::vector<ConvTiming> timeConvAlgos(Exec &x, Exec::Impl &im,
                                      const ConvEntry &e, const ConvParams &p,
                                      int64_t n, Store store, int32_t dir,
                                      int64_t have);

/// cuDNN's graph-API plans for direction `dir` of the convolution `p` at
/// sub-batch `n` that run within `have` bytes of workspace (at most a few,
/// from cuDNN's heuristics, with the numerics the program's precision
/// allows), each timed on the scratch timeConvAlgos uses; `algo` is the
/// plan's index for runConvGraph. Empty where the scratch does not fit or
/// no plan builds. The graph and its timings are kept in `e.graphs` (a
/// call of the same shape gets them without asking cuDNN again); the graph
/// is returned in `graph`, null where it has no plan.
std::vector<ConvTiming> timeConvGraph(Exec &x, Exec::Impl &im, ConvEntry &e,
                                      const ConvParams &p, int64_t n,
                                      Store store, int32_t dir, int64_t have,
                                      ConvGraph *&graph);

/// Runs plan `plan` of `g` on the compute stream: forward y = conv(a = x,
/// b = w); backward-data dx = dgrad(a = dy, b = w); backward-filter dw =
/// wgrad(a = x, b = dy). The output is written (beta 0).
void runConvGraph(const Exec &x, const Exec::Impl &im, const ConvGraph &g,
                  int32_t plan, const void *a, const void *b, void *out,
                  void *workspace);

/// Scratch operands for timing a convolution, carved from the arena's start
/// and filled with 0x3f bytes (ConvTune.cpp): input, output, weight, then
/// `have` bytes of workspace. All null where they do not fit the arena.
struct ConvScratch {
  char *x = nullptr, *y = nullptr, *w = nullptr, *work = nullptr;
  explicit operator bool() const { return x != nullptr; }
};
ConvScratch convScratch(Exec &x, Exec::Impl &im, const ConvParams &p, int64_t n,
                        Store store, int64_t have);
/// The most workspace the arena holds beside a call's scratch operands at
/// sub-batch `n` (0 where they alone do not fit).
int64_t convScratchRoom(const Exec &x, const ConvParams &p, int64_t n,
                        Store store);

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
/// On `stream` where given, else the compute stream.
void putInto(const Exec::Impl &im, int64_t count, View src, View dst, bool acc,
             cudaStream_t stream = nullptr);

/// Threads per block of the element-wise kernels.
constexpr int kThreads = 256;

/// The losses (Dense.cu) reduce in two passes: at most kLossBlocks blocks of
/// kLossThreads each leave one partial sum (two floats) in
/// Exec::Impl::lossPartials, then one block adds them in order.
constexpr int kLossThreads = 256;
constexpr int kLossBlocks = 1024;
/// The loss scalar and, 256 bytes on, its partial sums, then BatchNorm's
/// per-slice partial sums (BatchNorm.cu): one allocation at start-up, the
/// scratch of memfit's deterministic multi-block reductions (about 170 KiB).
constexpr int64_t kLossPartialsOffset = 256;
constexpr int64_t kBnPartialsOffset = kLossPartialsOffset + kLossBlocks * 8;
/// kernels::kBnMaxPartials partials of 16 bytes (four floats).
constexpr int64_t kBnPartialBytes = 16;
constexpr int64_t kLossBytes =
    kBnPartialsOffset + kernels::kBnMaxPartials * kBnPartialBytes;
static_assert(kBnPartialsOffset % 16 == 0, "partials are 16-byte aligned");

/// A piece of one weight's optimizer step in the multi-tensor table
/// (MultiTensor.cu): its master, gradient and state at the piece's start
/// (m and v null where not planned), and how many floats from there.
struct UpdateChunk {
  float *w;
  float *g; // written only by gradient clipping (ScaleMultiKernel)
  float *m, *v;
  int64_t count;
};
/// Floats per chunk: one block of the multi-tensor kernels each, small
/// enough that a ResNet's 11-25M weights make thousands of blocks (the GPU
/// full), large enough that a block's loop amortises reading its entry.
constexpr int64_t kUpdateChunk = 16384;

/// Blocks for a grid-stride loop over `count` items.
inline unsigned gridFor(int64_t count, int threads = kThreads) {
  int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 1 << 16));
}

/// Blocks for a typed kernel (Device.cuh's packsFor): one thread per pack
/// of `width` elements, or per element past the packs, whichever is more.
inline unsigned typedGrid(int64_t count, int64_t packs, int width) {
  return gridFor(std::max<int64_t>(packs, count - packs * width));
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
  /// The device weight side in one allocation: the driver rounds each
  /// allocation up to its page size, which over hundreds of tensors came to
  /// tens of MiB the plan never counted (ResNet-50 on an H200).
  char *weightPool = nullptr;
  // Device (out of weightPool) or, homed on the host, pinned host memory;
  // g, m and v null where not planned.
  std::vector<float *> w, g, m, v;
  float *loss = nullptr;
  /// The losses' partial sums (cuda::kLossBlocks pairs of floats), inside
  /// the loss's allocation.
  float *lossPartials = nullptr;
  /// BatchNorm's per-slice partial sums (kernels::kBnMaxPartials), inside
  /// the loss's allocation.
  kernels::BnPartial *bnPartials = nullptr;
  std::vector<void *> slots; // pinned host
  // The batch in two pinned buffers (Exec::useBatch picks the one read),
  // and the evaluation's third (kEvalBuffer; null without an evaluation
  // round).
  float *input[kHostBatchBuffers] = {nullptr, nullptr, nullptr};
  void *labels[kHostBatchBuffers] = {nullptr, nullptr, nullptr};
  int32_t batch = 0;
  /// Recorded on the compute stream after the iteration reading the
  /// buffer: the feeder thread waits for it before refilling.
  cudaEvent_t batchFree[kHostBatchBuffers] = {nullptr, nullptr, nullptr};

  // --- iteration graphs (Graph.cu) ---
  /// Why parts are issued eagerly; empty while graphs are captured.
  std::string eagerWhy;
  /// Parts issued once already (eagerly: the warm-up).
  std::set<int32_t> warmed;
  /// Per part and batch buffer (a round's copy-in reads one of them).
  std::map<int64_t, cudaGraphExec_t> graphs;
  bool capturing = false;
  /// Set while capturing by an operation that reads a value the host
  /// changes between iterations: the capture is dropped.
  const char *hostValueRead = nullptr;
  cudaEvent_t fork = nullptr, join[2] = {nullptr, nullptr};
  /// Device memory a replayed graph reads what changes per iteration from.
  cuda::IterationState *stateDev = nullptr;
  /// What a kernel issued now reads of it: the device copy while
  /// capturing, null (the host value passed beside it) when eager.
  const cuda::IterationState *stateRead() const {
    return capturing ? stateDev : nullptr;
  }
#ifdef __CUDACC__
  /// The key of dropout task `task`'s masks for a kernel issued now.
  cuda::DropoutKey dropoutKey(const Exec &x, uint64_t task) const {
    cuda::DropoutKey k;
    k.key = rt::dropoutKey(x.seed, x.iteration, task);
    k.seed = x.seed;
    k.task = task;
    k.state = stateRead();
    return k;
  }
#endif

  int64_t usedAtStart = 0; // device bytes in use once the context existed
  /// cuBLAS's workspace (ProgramInfo::blasWorkspaceBytes), out of the
  /// library reserve; and what the handles and it measured to take.
  void *blasWorkspace = nullptr;
  int64_t libraryBytes = 0;
  /// In use at the constructor's end (Exec::measuredSetupBytes).
  int64_t setupBytes = 0;
  /// The most device bytes in use (minus usedAtStart) at any sample.
  int64_t peakBytes = 0;
  bool syncEachOp = false;
  /// MEMFIT_CUDA_PROFILE: every operation waited for (as MEMFIT_CUDA_SYNC)
  /// and its time, launch included, summed by operation; printed when the
  /// trainer ends. A breakdown for a person, not the trainer's speed.
  bool profile = false;
  struct OpTime {
    int64_t calls = 0;
    double seconds = 0;
  };
  mutable std::map<std::string, OpTime> opTimes;
  mutable double lastMark = 0;

  std::unordered_map<cuda::ConvKey, std::unique_ptr<cuda::ConvEntry>,
                     cuda::ConvKeyHash>
      convs;
  /// Convolution calls that ran another algorithm than they named without
  /// the start-up check having settled it (Exec::convAlgoChanges).
  int64_t convChanges = 0;

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
  /// The device's copy of a working copy kept there while its weight is
  /// homed on the host (WeightInfo::copyOnGpu; wCopy is then the host's):
  /// uploaded after each host update (runHostUpdates) and weight write.
  std::vector<char *> wCopyDev;
  /// Pinned host staging of the batch's float inputs in 16 bits, per
  /// buffer: what a 16-bit program's input block is loaded from, converted
  /// by the thread that filled the buffer (Exec::prepareBatch).
  uint16_t *input16[kHostBatchBuffers] = {nullptr, nullptr, nullptr};
  /// fp16 loss scaling: one flag set by any non-finite unscaled gradient.
  int *nonFinite = nullptr;
  /// Gradient clipping (MultiTensor.cu): each weight's gradient norm by
  /// cuBLAS where there is no update table (numWeights floats), else each
  /// table chunk's sum of squares (a double per chunk); bytes the plan
  /// does not count, as nonFinite.
  float *gradNorms = nullptr;
  double *chunkSquares = nullptr;
  /// The evaluation round's sums (Exec::evalLoss) and their per-block
  /// partials (cuda::kLossBlocks pairs of doubles: loss, correct), made
  /// only for a program with an evaluation round; bytes the plan does not
  /// count, as nonFinite.
  EvalSums *evalSums = nullptr;
  double *evalPartials = nullptr;

  // --- weights homed on the host (Homes.cpp) ---
  /// Made when a weight is homed on the host: its w, g, m, v and wCopy are
  /// then pinned host memory, which the copy streams move and the host's
  /// cores update.
  std::unique_ptr<host::HostOptimizer> hostOpt;
  /// The optimizer state homed on NVMe (Exec::openNvme); m and v of such a
  /// weight are null.
  host::NvmeState nvme;
  /// The host updates the update part asked for (Exec::hostUpdate), in
  /// order; kept across replays of its graph, which do not call it.
  std::vector<int32_t> hostQueue;
  /// Recorded on the compute stream before the update is issued: once it
  /// has fired the rounds' copy-outs of the homed gradients are complete.
  cudaEvent_t roundsDone = nullptr;
  /// Per weight started inside the last round (Exec::hostReady): the host
  /// function's argument, at a fixed address a captured graph keeps.
  std::vector<std::unique_ptr<cuda::HostReady>> hostReady;
  /// Pinned host memory the pooled gradients share
  /// (ProgramInfo::gradPoolBytes; WeightInfo::gradPoolOffset); null
  /// without a pool.
  char *gradPool = nullptr;
  /// Device: where a working copy rounded from its master lands before it
  /// is rounded into the arena (ProgramInfo::copyStagingBytes; out of
  /// weightPool); null when no weight has WeightInfo::copyFromMaster.
  char *copyStaging = nullptr;
  /// Pinned host: where a piece of a master on NVMe is read before it is
  /// sent to copyStaging (NvmeStore::regionBytes of copyStagingBytes,
  /// page-aligned as O_DIRECT wants); null when no weight rounds its copy
  /// from a master on NVMe.
  char *copyStagingHost = nullptr;
  /// Per (weight, first element) of each piece a master on NVMe is read in
  /// by a host function on the copy-in stream (copyInFromMaster): the
  /// function's argument, at a fixed address a captured graph keeps.
  std::map<std::pair<int32_t, int64_t>, std::unique_ptr<cuda::NvmeRead>>
      nvmeReads;

  // --- multi-tensor updates (MultiTensor.cu) ---
  /// Device: every trainable weight's chunks, weights in id order, built
  /// once at start-up; null in sharded programs (their slices are the
  /// communicator's, known only once it is set).
  cuda::UpdateChunk *updateTable = nullptr;
  int64_t updateTableBytes = 0;
  /// Per weight id: its chunks are [updateFirst, updateEnd) of the table
  /// (empty for weights without a gradient).
  std::vector<int32_t> updateFirst, updateEnd;

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
  /// An operation reads `what`, a value fixed at issue that the host
  /// changes between iterations: a graph captured now would replay it
  /// stale, so the capture is dropped and parts are issued eagerly.
  void readsHostValue(const char *what) {
    if (capturing && !hostValueRead)
      hostValueRead = what;
  }
  /// Ends every operation: reports a failed kernel launch, and with
  /// MEMFIT_CUDA_SYNC waits for the operation so a fault names its task.
  void done(const Exec &x, const char *what) const;
};

} // namespace memfit::rt

#endif
