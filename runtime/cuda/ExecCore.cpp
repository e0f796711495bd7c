//===- ExecCore.cpp - CUDA backend: device, memory, streams, events -------===//
//
// Construction does every device allocation the trainer makes: the arena
// (exactly ProgramInfo::arenaBytes) and one pool for the resident tensors
// (weights, their gradients, optimizer state when planned) and the loss
// block; host slots, the batch's inputs and labels are pinned so copies
// are truly asynchronous. Streams are created non-blocking, so nothing
// orders them but the plan's events.
//
// Everything Trainer.cpp calls lives in this file: the trainer's link line
// names this archive before memfit_runtime, and the generated schedule
// always references this object (x.lossValue() at least), so the linker
// has it when Trainer.o asks.
//
//===----------------------------------------------------------------------===//
#include "runtime/TrainerOptions.h"
#include "runtime/cuda/Impl.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace memfit::rt {

namespace cuda {

void check(const Exec &x, cudaError_t e, const char *call) {
  if (e == cudaSuccess)
    return;
  std::string msg = std::string(call) + " failed: " + cudaGetErrorName(e) +
                    " (" + cudaGetErrorString(e) + ")";
  // An operation the stream capture of an iteration graph does not take.
  if (e == cudaErrorStreamCaptureUnsupported ||
      e == cudaErrorStreamCaptureInvalidated ||
      e == cudaErrorStreamCaptureIsolation ||
      e == cudaErrorStreamCaptureImplicit ||
      e == cudaErrorStreamCaptureUnjoined || e == cudaErrorStreamCaptureMerge ||
      e == cudaErrorStreamCaptureUnmatched)
    msg += "; MEMFIT_CUDA_GRAPHS=0 issues iterations without CUDA graphs";
  x.fatal(msg);
}

void check(const Exec &x, cudnnStatus_t s, const char *call) {
  if (s == CUDNN_STATUS_SUCCESS)
    return;
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string msg = std::string(call) + " failed: " + cudnnGetErrorString(s);
  if (detail[0])
    msg += std::string(" (") + detail + ")";
  x.fatal(msg);
}

void check(const Exec &x, cublasStatus_t s, const char *call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    x.fatal(std::string(call) + " failed: " + cublasGetStatusString(s));
}

ConvEntry::~ConvEntry() {
  if (x)
    cudnnDestroyTensorDescriptor(x);
  if (y)
    cudnnDestroyTensorDescriptor(y);
  if (bias)
    cudnnDestroyTensorDescriptor(bias);
  if (w)
    cudnnDestroyFilterDescriptor(w);
  if (conv)
    cudnnDestroyConvolutionDescriptor(conv);
}

} // namespace cuda

using cuda::check;

namespace {
double secondsNow() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// An environment switch: set, and not "0".
bool envOn(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}
} // namespace

void Exec::Impl::done(const Exec &x, const char *what) const {
  check(x, cudaGetLastError(), what);
  if (!syncEachOp)
    return;
  // Profiling waits for every stream: a copy is an operation too.
  check(x,
        profile ? cudaDeviceSynchronize()
                : cudaStreamSynchronize(stream[Compute]),
        what);
  if (profile) {
    const double now = secondsNow();
    OpTime &t = opTimes[what];
    ++t.calls;
    t.seconds += now - lastMark;
    lastMark = now;
  }
}

/// The profile, slowest operation first, on stderr.
static void printProfile(const Exec::Impl &im) {
  if (!im.profile || im.opTimes.empty())
    return;
  std::vector<std::pair<std::string, Exec::Impl::OpTime>> rows(
      im.opTimes.begin(), im.opTimes.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.seconds != b.second.seconds
               ? a.second.seconds > b.second.seconds
               : a.first < b.first;
  });
  double total = 0;
  for (const auto &r : rows)
    total += r.second.seconds;
  std::fprintf(stderr,
               "profile (MEMFIT_CUDA_PROFILE: each operation waited for, its "
               "launch included; every iteration summed):\n"
               "  %-36s %8s %12s %10s %6s\n",
               "operation", "calls", "total ms", "mean us", "share");
  for (const auto &[name, t] : rows)
    std::fprintf(stderr, "  %-36s %8lld %12.3f %10.1f %5.1f%%\n", name.c_str(),
                 static_cast<long long>(t.calls), t.seconds * 1e3,
                 t.seconds * 1e6 / std::max<int64_t>(t.calls, 1),
                 total > 0 ? 100 * t.seconds / total : 0.0);
}

namespace {

std::string mib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  return buf;
}

/// A device allocation the plan counts; failure is the user's budget
/// meeting a smaller device, so it says how much is free.
void *deviceAlloc(int64_t bytes, const char *what, int64_t planned) {
  if (bytes <= 0)
    return nullptr;
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (e == cudaSuccess)
    e = cudaMemset(p, 0, static_cast<size_t>(bytes));
  if (e != cudaSuccess) {
    size_t freeB = 0, totalB = 0;
    cudaMemGetInfo(&freeB, &totalB);
    std::fprintf(stderr,
                 "trainer: error: cannot allocate %s (%lld bytes) on the "
                 "device: %s; the plan needs %s in all and %s are free; "
                 "recompile the model with a smaller budget\n",
                 what, static_cast<long long>(bytes), cudaGetErrorString(e),
                 mib(planned).c_str(),
                 mib(static_cast<int64_t>(freeB)).c_str());
    std::exit(1);
  }
  return p;
}

void *hostAlloc(const Exec &x, int64_t bytes) {
  void *p = nullptr;
  check(x, cudaMallocHost(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))),
        "cudaMallocHost");
  std::memset(p, 0, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  return p;
}

int64_t slotBytes(const HostSlot &s, int64_t n) {
  return s.perSample * n + s.fixed;
}

int64_t usedNow(const Exec &x) {
  size_t freeB = 0, totalB = 0;
  check(x, cudaMemGetInfo(&freeB, &totalB), "cudaMemGetInfo");
  return static_cast<int64_t>(totalB - freeB);
}

/// Gives cuBLAS the planned workspace, so that it allocates none of its
/// own, and measures what the libraries took (docs/memory.md, "The library
/// reserve"). After cublasSetStream, which resets the workspace to
/// cuBLAS's own pool: any later cublasSetStream must call this again. A
/// zero size leaves cuBLAS without workspace rather than with its pool.
void setUpLibraryMemory(const Exec &x, Exec::Impl &im, const ProgramInfo &info,
                        int64_t planned) {
  im.blasWorkspace =
      deviceAlloc(info.blasWorkspaceBytes, "cuBLAS's workspace", planned);
  check(x,
        cublasSetWorkspace(
            im.cublas, im.blasWorkspace,
            static_cast<size_t>(std::max<int64_t>(info.blasWorkspaceBytes, 0))),
        "cublasSetWorkspace");
  im.libraryBytes = usedNow(x) - im.usedAtStart;
  im.peakBytes = im.libraryBytes;
}

} // namespace

Exec::Exec(const ProgramInfo &info, const WeightInfo *weights,
           const HostSlot *slots)
    : prog(info), wInfo(weights, weights + info.numWeights),
      slotInfo(slots, slots + info.numHostSlots), impl(new Impl) {
  Impl &im = *impl;
  im.narrow = info.precision == Precision::BF16   ? cuda::Store::BF16
              : info.precision == Precision::FP16 ? cuda::Store::FP16
                                                  : cuda::Store::F32;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "trainer: error: no CUDA device (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e)
                                  : "the driver reports none");
    std::exit(1);
  }
  setTask("device setup");
  // Ranks on one node take a GPU each (mpirun's local rank).
  for (const char *var :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *v = std::getenv(var); info.ranks > 1 && v) {
      im.device = std::atoi(v) % count;
      break;
    }
  MEMFIT_CHECK(cudaSetDevice(im.device));
  MEMFIT_CHECK(cudaFree(nullptr)); // creates the context
  size_t freeB = 0, totalB = 0;
  MEMFIT_CHECK(cudaMemGetInfo(&freeB, &totalB));
  im.usedAtStart = static_cast<int64_t>(totalB - freeB);
  im.profile = envOn("MEMFIT_CUDA_PROFILE");
  im.syncEachOp = im.profile || envOn("MEMFIT_CUDA_SYNC");
  im.lastMark = secondsNow();

  for (cudaStream_t &s : im.stream)
    MEMFIT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The evaluation's batch buffer exists only with an evaluation round.
  const int32_t batchBuffers =
      info.evalSubBatch > 0 ? kHostBatchBuffers : kBatchBuffers;
  for (int32_t b = 0; b < batchBuffers; ++b)
    MEMFIT_CHECK(
        cudaEventCreateWithFlags(&im.batchFree[b], cudaEventDisableTiming));
  for (cudaEvent_t *ev : {&im.fork, &im.join[0], &im.join[1]})
    MEMFIT_CHECK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  im.events.assign(info.numEvents, nullptr);
  im.recorded.assign(info.numEvents, false);
  for (cudaEvent_t &ev : im.events)
    MEMFIT_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  MEMFIT_CHECK(cudnnCreate(&im.cudnn));
  MEMFIT_CHECK(cudnnSetStream(im.cudnn, im.compute()));
  MEMFIT_CHECK(cublasCreate(&im.cublas));
  MEMFIT_CHECK(cublasSetStream(im.cublas, im.compute()));
  // Plain fp32: no TF32 tensor-core rounding, as the profiler measured;
  // a TF32 plan's matrix products on tensor cores; 16-bit inputs on tensor
  // cores with fp32 accumulation (the default math; pedantic math is for
  // numerical studies and may leave them off).
  MEMFIT_CHECK(cublasSetMathMode(
      im.cublas, info.precision == Precision::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                 : stores16Bit(info.precision)     ? CUBLAS_DEFAULT_MATH
                                                   : CUBLAS_PEDANTIC_MATH));

  const int64_t planned = deviceBytes();
  setUpLibraryMemory(*this, im, info, planned);
  im.arena =
      static_cast<char *>(deviceAlloc(info.arenaBytes, "the arena", planned));
  auto paddedCount = [&](int64_t c) {
    int64_t r = std::max<int64_t>(1, info.ranks);
    return (c + r - 1) / r * r;
  };
  // Two passes over the same walk: the first sizes the pool, the second
  // carves it. Each piece starts on a 256-byte boundary, as cudaMalloc's
  // would (vector loads want 16); the padding, under 256 bytes a tensor,
  // is within the reserve's margin.
  int64_t poolBytes = 0;
  char *pool = nullptr;
  bool carving = false; // the second walk: pieces and host memory are real
  for (const WeightInfo &wi : wInfo)
    if (wi.copyFromMaster && (wi.home != Home::Host || !wi.workingCopy ||
                              wi.copyOnGpu || info.copyStagingBytes < 4))
      fatal(std::string("weight '") + wi.onnxName +
            "' rounds its working copy from its master but is not homed on "
            "the host with both, or the program has no staging for it");
  // A master on NVMe is read into pinned memory on its way to the device.
  if (int64_t bytes = host::masterStagingBytes(info, wInfo))
    im.copyStagingHost = static_cast<char *>(hostAlloc(*this, bytes));
  for (const WeightInfo &wi : wInfo)
    if (wi.gradPoolOffset >= 0 &&
        (wi.home != Home::Host || !wi.trainable || wi.gradPoolOffset % 4 != 0 ||
         wi.gradPoolOffset + wi.count * 4 > info.gradPoolBytes))
      fatal(std::string("weight '") + wi.onnxName +
            "' has a gradient pool range outside the pool, or is not a "
            "trained weight homed on the host");
  if (info.gradPoolBytes > 0)
    im.gradPool = static_cast<char *>(hostAlloc(*this, info.gradPoolBytes));
  auto carve = [&](int64_t b) -> void * {
    if (b <= 0)
      return nullptr;
    void *p = carving ? pool + poolBytes : nullptr;
    poolBytes += (b + 255) / 256 * 256;
    return p;
  };
  auto walk = [&]() {
    im.w.clear(), im.g.clear(), im.m.clear(), im.v.clear();
    im.wCopy.clear(), im.copyStale.clear(), im.gSlice.clear();
    im.wCopyDev.clear();
    for (const WeightInfo &wi : wInfo) {
      // NCCL's reduce-scatter and all-gather move equal slices.
      int64_t bytes = paddedCount(wi.count) * 4;
      // A weight homed on the host has every tensor in pinned host memory
      // and none on the device.
      const bool host = wi.home == Home::Host;
      auto alloc = [&](int64_t b) {
        return host ? (carving ? hostAlloc(*this, b) : nullptr) : carve(b);
      };
      // A master on NVMe lives in the tier's file (openNvme), not here.
      im.w.push_back(wi.masterOnNvme ? nullptr
                                     : static_cast<float *>(alloc(bytes)));
      // A pooled gradient is its range of the gradient pool.
      im.g.push_back(!wi.trainable ? nullptr
                     : wi.gradPoolOffset >= 0
                         ? (carving ? reinterpret_cast<float *>(
                                          im.gradPool + wi.gradPoolOffset)
                                    : nullptr)
                         : static_cast<float *>(alloc(bytes)));
      // State on NVMe lives in the tier's file (openNvme), not here.
      const bool inMemory = wi.trainable && !wi.stateOnNvme;
      im.m.push_back(inMemory && info.hasMomentum
                         ? static_cast<float *>(alloc(bytes))
                         : nullptr);
      im.v.push_back(inMemory && info.optimizer != Optimizer::SGD
                         ? static_cast<float *>(alloc(bytes))
                         : nullptr);
      // The 16-bit working copy: rounded from the master before its first
      // reader after every change (weightCopy; at home, refreshHomeCopy).
      // None at home where each copy in rounds it from the master. An f32
      // one (fp32 and tf32 programs) is the master itself but where that
      // is on NVMe.
      const int64_t copyBytes = wi.count * workingCopyBytes(info.precision);
      im.wCopy.push_back(!wi.workingCopy || (host && wi.copyFromMaster)
                             ? nullptr
                         : copyIsMaster(info.precision, wi)
                             ? reinterpret_cast<char *>(im.w.back())
                             : static_cast<char *>(alloc(copyBytes)));
      // Kept on the device too while the weight is homed on the host.
      im.wCopyDev.push_back(wi.workingCopy && host && wi.copyOnGpu
                                ? static_cast<char *>(carve(copyBytes))
                                : nullptr);
      // One whose master is on NVMe is rounded by every write and update
      // of the master (writeWeight, the host's update), never from memory.
      im.copyStale.push_back(!wi.masterOnNvme);
      im.gSlice.push_back(wi.trainable && info.shard >= 2
                              ? static_cast<float *>(carve(bytes / info.ranks))
                              : nullptr);
    }
    im.copyStaging = static_cast<char *>(carve(info.copyStagingBytes));
    return static_cast<char *>(carve(cuda::kLossBytes));
  };
  walk();
  const int64_t sized = poolBytes;
  im.weightPool = static_cast<char *>(deviceAlloc(
      sized, "the weights, their gradients and optimizer state", planned));
  pool = im.weightPool;
  poolBytes = 0;
  carving = true;
  char *lossBytes = walk();
  assert(poolBytes == sized && "the pool's two walks carve alike");
  (void)sized;
  im.loss = reinterpret_cast<float *>(lossBytes);
  im.lossPartials =
      reinterpret_cast<float *>(lossBytes + cuda::kLossPartialsOffset);
  static_assert(sizeof(kernels::BnPartial) == cuda::kBnPartialBytes);
  im.bnPartials = reinterpret_cast<kernels::BnPartial *>(
      lossBytes + cuda::kBnPartialsOffset);
  if (info.precision == Precision::FP16) {
    // GradScaler's found-inf flag: a few bytes the plan does not count,
    // as it does not count cuDNN's handle either.
    MEMFIT_CHECK(cudaMalloc(&im.nonFinite, sizeof(int)));
  }
  if (info.clipGradNorm > 0 && !wInfo.empty())
    MEMFIT_CHECK(cudaMalloc(&im.gradNorms, wInfo.size() * sizeof(float)));
  if (info.evalSubBatch > 0) {
    // The evaluation's sums and their partials: about 16 KiB the plan
    // does not count, as it does not count the loss scale's flag.
    MEMFIT_CHECK(cudaMalloc(&im.evalSums, sizeof(EvalSums)));
    MEMFIT_CHECK(cudaMemset(im.evalSums, 0, sizeof(EvalSums)));
    MEMFIT_CHECK(
        cudaMalloc(&im.evalPartials, cuda::kLossBlocks * 2 * sizeof(double)));
  }
  for (const HostSlot &s : slotInfo)
    im.slots.push_back(hostAlloc(*this, slotBytes(s, info.subBatch)));
  // Host memory, not the device's: two of each so that the next batch is
  // filled while the current one is read, and a third the evaluation
  // fills without waiting for either.
  for (int32_t b = 0; b < batchBuffers; ++b) {
    im.input[b] = static_cast<float *>(
        hostAlloc(*this, info.batch * info.inputPerSample * 4));
    im.labels[b] = hostAlloc(*this, info.batch * info.labelPerSample * 4);
    if (stores16Bit(info.precision) && !info.intInput)
      im.input16[b] = static_cast<uint16_t *>(
          hostAlloc(*this, info.batch * info.inputPerSample * 2));
  }
  // What replayed graphs read per iteration (Graph.cu): 24 bytes the plan
  // does not count, as it does not count the loss scale's flag.
  MEMFIT_CHECK(cudaMalloc(&im.stateDev, sizeof(cuda::IterationState)));
  MEMFIT_CHECK(
      cudaEventCreateWithFlags(&im.roundsDone, cudaEventDisableTiming));
  if (hostHomeBytes() > 0)
    im.hostOpt =
        std::make_unique<host::HostOptimizer>(host::defaultHostThreads());
  cuda::initGraphs(*this, im);
  cuda::initUpdateTable(*this, im);
  if (info.clipGradNorm > 0 && im.updateTableBytes > 0)
    MEMFIT_CHECK(cudaMalloc(&im.chunkSquares, im.updateTableBytes /
                                                  sizeof(cuda::UpdateChunk) *
                                                  sizeof(double)));
  // The zero fills ran on the legacy stream, which the non-blocking
  // streams do not wait for.
  MEMFIT_CHECK(cudaDeviceSynchronize());
  im.setupBytes = measuredDeviceBytes();
  setTask("");
}

Exec::~Exec() {
  Impl &im = *impl;
  cudaDeviceSynchronize();
  printProfile(im);
  if (im.hostOpt)
    im.hostOpt->waitAll();
  if (im.roundsDone)
    cudaEventDestroy(im.roundsDone);
  cuda::destroyConvs(im);
  for (void *p : im.slots)
    cudaFreeHost(p);
  cuda::destroyGraphs(im);
  cuda::destroyUpdateTable(im);
  for (int32_t b = 0; b < kHostBatchBuffers; ++b)
    for (void *p : {static_cast<void *>(im.input[b]), im.labels[b],
                    static_cast<void *>(im.input16[b])})
      if (p)
        cudaFreeHost(p);
  if (im.stateDev)
    cudaFree(im.stateDev);
  for (cudaEvent_t ev :
       {im.batchFree[0], im.batchFree[1], im.batchFree[kEvalBuffer], im.fork,
        im.join[0], im.join[1]})
    if (ev)
      cudaEventDestroy(ev);
  if (im.nonFinite)
    cudaFree(im.nonFinite);
  if (im.gradNorms)
    cudaFree(im.gradNorms);
  if (im.chunkSquares)
    cudaFree(im.chunkSquares);
  if (im.evalSums)
    cudaFree(im.evalSums);
  if (im.evalPartials)
    cudaFree(im.evalPartials);
  // Device tensors are pieces of the pool; host-homed ones are their own.
  auto release = [&](size_t id, void *p) {
    if (p && id < wInfo.size() && wInfo[id].home == Home::Host)
      cudaFreeHost(p);
  };
  for (size_t id = 0; id < im.wCopy.size(); ++id)
    if (im.wCopy[id] != reinterpret_cast<char *>(im.w[id])) // not a master
      release(id, im.wCopy[id]);
  for (auto *list : {&im.w, &im.g, &im.m, &im.v})
    for (size_t id = 0; id < list->size(); ++id)
      if (list != &im.g || wInfo[id].gradPoolOffset < 0)
        release(id, (*list)[id]);
  if (im.gradPool)
    cudaFreeHost(im.gradPool);
  if (im.copyStagingHost)
    cudaFreeHost(im.copyStagingHost);
  cuda::destroyCollectives(im);
  if (im.weightPool)
    cudaFree(im.weightPool);
  if (im.arena)
    cudaFree(im.arena);
  if (im.cublas)
    cublasDestroy(im.cublas);
  if (im.blasWorkspace)
    cudaFree(im.blasWorkspace);
  if (im.cudnn)
    cudnnDestroy(im.cudnn);
  for (cudaEvent_t ev : im.events)
    if (ev)
      cudaEventDestroy(ev);
  for (cudaStream_t s : im.stream)
    if (s)
      cudaStreamDestroy(s);
}

void Exec::fatal(const std::string &what) const {
  throwIfFailuresThrow(
      task && *task ? "in " + std::string(task) + ": " + what : what, 2);
  if (task && *task)
    std::fprintf(stderr, "trainer: error in %s: %s\n", task, what.c_str());
  else
    std::fprintf(stderr, "trainer: error: %s\n", what.c_str());
  std::exit(2);
}

// --- memory ---

float *Exec::arena(int64_t offset) {
  if (offset < 0 || offset > prog.arenaBytes || offset % 4)
    fatal("arena offset out of range");
  return reinterpret_cast<float *>(impl->arena + offset);
}
int32_t *Exec::arenaInt(int64_t offset) {
  return reinterpret_cast<int32_t *>(arena(offset));
}
float *Exec::arena16(int64_t offset, int64_t bytes) {
  if (!stores16Bit(prog.precision))
    fatal("a 16-bit block in a program of fp32 storage");
  if (offset < 0 || bytes < 0 || offset + bytes > prog.arenaBytes ||
      offset % 2 || bytes % 2)
    fatal("16-bit block out of the arena");
  char *p = impl->arena + offset;
  impl->narrowNow.push_back(p);
  return reinterpret_cast<float *>(p);
}

float *Exec::weightCopy(int32_t id) {
  if (id < 0 || id >= (int32_t)wInfo.size() || !impl->wCopy[id])
    fatal("weight " + std::to_string(id) + " has no 16-bit working copy");
  // Kept on the device while its weight is homed on the host: uploaded
  // from home after every change (cuda::uploadHomeCopy).
  if (wInfo[id].copyOnGpu) {
    if (!impl->wCopyDev[id])
      fatal(std::string("weight '") + wInfo[id].onnxName +
            "' keeps its working copy on the device but is not homed on the "
            "host");
    if (stores16Bit(prog.precision))
      impl->narrowNow.push_back(impl->wCopyDev[id]);
    return reinterpret_cast<float *>(impl->wCopyDev[id]);
  }
  char *c = impl->wCopy[id];
  if (!stores16Bit(prog.precision)) // an f32 copy: the master on the device
    return reinterpret_cast<float *>(c);
  // Refreshed on the compute stream, ahead of the operation that reads it.
  if (impl->copyStale[id]) {
    cuda::putInto(*impl, wInfo[id].count,
                  {reinterpret_cast<char *>(impl->w[id]), cuda::Store::F32},
                  {c, impl->narrow}, false);
    MEMFIT_CHECK(cudaGetLastError());
    impl->copyStale[id] = false;
  }
  impl->narrowNow.push_back(c);
  return reinterpret_cast<float *>(c);
}

void Exec::setTask(const char *name) {
  task = name;
  impl->narrowNow.clear();
  if (graph)
    graph->task(name);
}
float *Exec::weight(int32_t id) { return impl->w[id]; }
float *Exec::grad(int32_t id) { return impl->g[id]; }
float *Exec::momentumBuf(int32_t id) { return impl->m[id]; }
float *Exec::secondMomentBuf(int32_t id) { return impl->v[id]; }
float *Exec::lossValue() { return impl->loss; }

float Exec::readLoss() {
  float v = 0;
  MEMFIT_CHECK(cudaMemcpyAsync(&v, impl->loss, 4, cudaMemcpyDeviceToHost,
                               impl->compute()));
  MEMFIT_CHECK(cudaStreamSynchronize(impl->compute()));
  return v;
}

// Without an evaluation round there is nothing on the device to sum into:
// the sums stay zero, as the emulation's do when evalLoss never runs.
void Exec::resetEvalSums() {
  if (impl->evalSums)
    MEMFIT_CHECK(
        cudaMemsetAsync(impl->evalSums, 0, sizeof(EvalSums), impl->compute()));
}

EvalSums Exec::readEvalSums() {
  EvalSums s;
  if (!impl->evalSums)
    return s;
  MEMFIT_CHECK(cudaMemcpyAsync(&s, impl->evalSums, sizeof s,
                               cudaMemcpyDeviceToHost, impl->compute()));
  MEMFIT_CHECK(cudaStreamSynchronize(impl->compute()));
  return s;
}

int64_t Exec::deviceBytes() const {
  // The plan counts the loss scalar in the weight side; the partial sums
  // beside it, the multi-tensor update table and fp16's found-inf flag are
  // the runtime's fixed buffers, inside the library reserve's margin
  // (docs/memory.md).
  int64_t total = prog.arenaBytes + cuda::kLossBytes + impl->updateTableBytes +
                  prog.copyStagingBytes +
                  (prog.precision == Precision::FP16 ? 4 : 0);
  for (const WeightInfo &wi : wInfo) {
    if (wi.home == Home::Host) {
      // Pinned host memory (hostHomeBytes), but for a working copy kept on
      // the device.
      total += wi.copyOnGpu && wi.workingCopy
                   ? wi.count * workingCopyBytes(prog.precision)
                   : 0;
      continue;
    }
    const bool state = wi.trainable && !wi.stateOnNvme; // else on NVMe
    int64_t copies = 1 + (wi.trainable ? 1 : 0) +
                     (state && prog.hasMomentum ? 1 : 0) +
                     (state && prog.optimizer != Optimizer::SGD ? 1 : 0);
    total += copies * wi.count * 4 +
             (wi.workingCopy && !copyIsMaster(prog.precision, wi)
                  ? wi.count * workingCopyBytes(prog.precision)
                  : 0);
  }
  return total + prog.gradPoolBytes;
}

int64_t Exec::measuredDeviceBytes() const {
  return usedNow(*this) - impl->usedAtStart;
}

int64_t Exec::contextBytes() const { return impl->usedAtStart; }
int64_t Exec::measuredLibraryBytes() const { return impl->libraryBytes; }
int64_t Exec::measuredSetupBytes() const { return impl->setupBytes; }

void Exec::sampleDeviceMemory() {
  impl->peakBytes = std::max(impl->peakBytes, measuredDeviceBytes());
}
int64_t Exec::peakDeviceBytes() const { return impl->peakBytes; }

// Host copies of resident tensors, outside the iteration: ordered after
// everything already issued on the compute stream (the only stream that
// touches weights).
namespace {
void toHost(const Exec &x, const Exec::Impl &im, float *out, const float *dev,
            int64_t count) {
  if (count <= 0)
    return;
  if (cuda::atHome(x, im, dev)) {
    std::memcpy(out, dev, count * 4);
    return;
  }
  check(x,
        cudaMemcpyAsync(out, dev, count * 4, cudaMemcpyDeviceToHost,
                        im.compute()),
        "cudaMemcpyAsync (device to host)");
  check(x, cudaStreamSynchronize(im.compute()), "cudaStreamSynchronize");
}
void toDevice(const Exec &x, const Exec::Impl &im, float *dev, const float *in,
              int64_t count) {
  if (count <= 0)
    return;
  if (cuda::atHome(x, im, dev)) {
    std::memcpy(dev, in, count * 4);
    return;
  }
  check(
      x,
      cudaMemcpyAsync(dev, in, count * 4, cudaMemcpyHostToDevice, im.compute()),
      "cudaMemcpyAsync (host to device)");
  check(x, cudaStreamSynchronize(im.compute()), "cudaStreamSynchronize");
}
} // namespace

/// Weight id's tensor at offsets `at` of the NVMe tier's file, read into
/// `out` or written from `in` (host::NvmeState::transfer).
static void nvmeTensor(Exec &x, host::NvmeState &nv,
                       const std::vector<int64_t> &at, int32_t id, float *out,
                       const float *in) {
  std::string err = nv.transfer(at, id, x.weightInfo()[id].count, out, in);
  if (!err.empty())
    x.fatal(err);
}

void Exec::readWeight(int32_t id, float *out) {
  if (wInfo[id].masterOnNvme) {
    if (impl->hostOpt)
      impl->hostOpt->waitAll();
    return nvmeTensor(*this, impl->nvme, impl->nvme.w, id, out, nullptr);
  }
  toHost(*this, *impl, out, impl->w[id], wInfo[id].count);
}
void Exec::writeWeight(int32_t id, const float *in) {
  if (wInfo[id].masterOnNvme) {
    if (impl->hostOpt)
      impl->hostOpt->waitAll();
    nvmeTensor(*this, impl->nvme, impl->nvme.w, id, nullptr, in);
    cuda::narrowHomeCopy(*impl, id, 0, wInfo[id].count, in);
    cuda::uploadHomeCopy(*this, *impl, id, true);
    return;
  }
  toDevice(*this, *impl, impl->w[id], in, wInfo[id].count);
  impl->copyStale[id] = true;
  if (wInfo[id].home == Home::Host && impl->wCopy[id]) {
    cuda::refreshHomeCopy(*this, *impl, id);
    cuda::uploadHomeCopy(*this, *impl, id, true);
  }
}

void Exec::openNvme(const std::string &dir) {
  std::string err;
  if (host::hasNvmeState(wInfo) && !impl->nvme.open(prog, wInfo, dir, err))
    fatal(err);
}

int64_t Exec::nvmeHomeBytes() const {
  return impl->nvme.opened() ? impl->nvme.store->size() : 0;
}

void Exec::readMomentum(int32_t id, float *out) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.m, id, out, nullptr);
  if (!impl->m[id])
    fatal("weight " + std::to_string(id) + " has no momentum buffer");
  toHost(*this, *impl, out, impl->m[id], wInfo[id].count);
}
void Exec::readSecondMoment(int32_t id, float *out) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.v, id, out, nullptr);
  if (!impl->v[id])
    fatal("weight " + std::to_string(id) + " has no second-moment buffer");
  toHost(*this, *impl, out, impl->v[id], wInfo[id].count);
}
void Exec::writeSecondMoment(int32_t id, const float *in) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.v, id, nullptr, in);
  if (!impl->v[id])
    fatal("weight " + std::to_string(id) + " has no second-moment buffer");
  toDevice(*this, *impl, impl->v[id], in, wInfo[id].count);
}
void Exec::writeMomentum(int32_t id, const float *in) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.m, id, nullptr, in);
  if (!impl->m[id])
    fatal("weight " + std::to_string(id) + " has no momentum buffer");
  toDevice(*this, *impl, impl->m[id], in, wInfo[id].count);
}

// --- streams ---

namespace {
void checkRange(const Exec &x, int64_t offset, int64_t bytes, int64_t arena) {
  if (offset < 0 || bytes < 0 || offset + bytes > arena)
    x.fatal("a copy of " + std::to_string(bytes) + " bytes at arena offset " +
            std::to_string(offset) + " leaves the arena of " +
            std::to_string(arena) + " bytes");
}
} // namespace

void Exec::copyOut(int64_t offset, int32_t slot) {
  if (slot < 0 || slot >= (int32_t)slotInfo.size())
    fatal("host slot " + std::to_string(slot) + " does not exist");
  int64_t bytes = slotBytes(slotInfo[slot], n);
  checkRange(*this, offset, bytes, prog.arenaBytes);
  if (graph)
    graph->copy(IterationGraph::Kind::CopyOut, CopyOut, slot, offset, bytes);
  MEMFIT_CHECK(cudaMemcpyAsync(impl->slots[slot], impl->arena + offset, bytes,
                               cudaMemcpyDeviceToHost, impl->stream[CopyOut]));
}

void Exec::copyIn(int32_t slot, int64_t offset) {
  if (slot < 0 || slot >= (int32_t)slotInfo.size())
    fatal("host slot " + std::to_string(slot) + " does not exist");
  int64_t bytes = slotBytes(slotInfo[slot], n);
  checkRange(*this, offset, bytes, prog.arenaBytes);
  if (graph)
    graph->copy(IterationGraph::Kind::CopyIn, CopyIn, slot, offset, bytes);
  MEMFIT_CHECK(cudaMemcpyAsync(impl->arena + offset, impl->slots[slot], bytes,
                               cudaMemcpyHostToDevice, impl->stream[CopyIn]));
}

void Exec::loadInput(int64_t offset) {
  const int32_t b = impl->batch;
  if (uint16_t *staged = impl->input16[b]) {
    // A 16-bit program's float input block: converted on the host when
    // the buffer was filled (Exec::prepareBatch); 2 bytes a value cross
    // the link.
    const int64_t count = prog.inputPerSample * n,
                  first = prog.inputPerSample * firstSample;
    checkRange(*this, offset, count * 2, prog.arenaBytes);
    if (graph)
      graph->copy(IterationGraph::Kind::LoadInput, CopyIn, -1, offset,
                  count * 2);
    MEMFIT_CHECK(cudaMemcpyAsync(impl->arena + offset, staged + first,
                                 count * 2, cudaMemcpyHostToDevice,
                                 impl->stream[CopyIn]));
    return;
  }
  int64_t per = prog.inputPerSample * 4;
  checkRange(*this, offset, per * n, prog.arenaBytes);
  if (graph)
    graph->copy(IterationGraph::Kind::LoadInput, CopyIn, -1, offset, per * n);
  MEMFIT_CHECK(cudaMemcpyAsync(
      impl->arena + offset,
      reinterpret_cast<char *>(impl->input[b]) + per * firstSample, per * n,
      cudaMemcpyHostToDevice, impl->stream[CopyIn]));
}

void Exec::loadLabels(int64_t offset) {
  int64_t per = prog.labelPerSample * 4;
  checkRange(*this, offset, per * n, prog.arenaBytes);
  if (graph)
    graph->copy(IterationGraph::Kind::LoadLabels, CopyIn, -1, offset, per * n);
  MEMFIT_CHECK(cudaMemcpyAsync(
      impl->arena + offset,
      static_cast<char *>(impl->labels[impl->batch]) + per * firstSample,
      per * n, cudaMemcpyHostToDevice, impl->stream[CopyIn]));
}

void Exec::record(StreamId s, int32_t event) {
  if (event < 0 || event >= (int32_t)impl->events.size())
    fatal("event " + std::to_string(event) + " does not exist");
  if (graph)
    graph->record(s, event);
  MEMFIT_CHECK(cudaEventRecord(impl->events[event], impl->stream[s]));
  impl->recorded[event] = true;
}

void Exec::wait(StreamId s, int32_t event) {
  if (event < 0 || event >= (int32_t)impl->events.size())
    fatal("event " + std::to_string(event) + " does not exist");
  // CUDA treats a wait for a never-recorded event as satisfied; the plan
  // would then race, so it is refused as the emulation refuses it.
  if (!impl->recorded[event])
    fatal("wait for an event that was never recorded");
  if (graph)
    graph->wait(s, event);
  MEMFIT_CHECK(cudaStreamWaitEvent(impl->stream[s], impl->events[event], 0));
}

// The plan's release points matter to the emulation's poisoning only: on
// the device the bytes are simply reused by whoever the plan gives them to
// next, after the events it waits for.
void Exec::release(StreamId, int64_t, int64_t) {}

// The plan joins its streams at the end of every round with events.
void Exec::endRound() {}

void Exec::synchronize() {
  for (cudaStream_t s : impl->stream)
    MEMFIT_CHECK(cudaStreamSynchronize(s));
  if (impl->coll)
    MEMFIT_CHECK(cudaStreamSynchronize(impl->coll));
}

// --- copies on the compute stream ---

void Exec::copy(int64_t perSample, const float *x, float *y) {
  if (x == y)
    return;
  const cuda::View vx = impl->view(x), vy = impl->view(y);
  if (vx.t != vy.t)
    fatal("a copy between blocks of different storage");
  const int64_t bytes = perSample * n * cuda::storeBytes(vx.t);
  const char *a = vx.p, *b = vy.p;
  if (a < b + bytes && b < a + bytes)
    fatal("copy between overlapping ranges");
  MEMFIT_CHECK(cudaMemcpyAsync(vy.p, vx.p, bytes, cudaMemcpyDeviceToDevice,
                               impl->compute()));
  impl->done(*this, "copy");
}

// Here, not in Homes.cpp: the trainer calls it, and this object is the one
// its link always has (see the top of this file).
int64_t Exec::hostHomeBytes() const {
  int64_t total = 0;
  for (const WeightInfo &wi : wInfo) {
    if (wi.home != Home::Host)
      continue;
    const bool state = wi.trainable && !wi.stateOnNvme; // else on NVMe
    int64_t copies = (wi.masterOnNvme ? 0 : 1) +
                     (wi.trainable && wi.gradPoolOffset < 0 ? 1 : 0) +
                     (state && prog.hasMomentum ? 1 : 0) +
                     (state && prog.optimizer != Optimizer::SGD ? 1 : 0);
    const bool ownCopy = wi.workingCopy && !wi.copyFromMaster &&
                         !copyIsMaster(prog.precision, wi);
    total += copies * wi.count * 4 +
             (ownCopy ? wi.count * workingCopyBytes(prog.precision) : 0);
  }
  // Where a master on NVMe is read before it is sent (copyInFromMaster).
  return total + host::masterStagingBytes(prog, wInfo);
}

} // namespace memfit::rt
