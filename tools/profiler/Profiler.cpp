//===- Profiler.cpp - Measure task costs on a GPU -------------------------===//
//
// The driver: checks the device, measures every (task signature, sub-batch)
// of a model once, the copy engines and the launch floor, and collects it
// all into a Profile. A measurement that fails is reported and skipped; a
// failure that leaves the device unusable ends the run.
//
//===----------------------------------------------------------------------===//
#include "tools/profiler/Profiler.h"

#include "compiler/support/Diagnostics.h"
#include "tools/profiler/Measure.h"

#include "llvm/Support/Format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <optional>

namespace memfit {

using namespace profiler;

llvm::Error checkCudaDevice() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver)
    return makeError("no CUDA device found (no NVIDIA driver is loaded, or "
                     "it is older than this build's CUDA runtime)");
  if (e != cudaSuccess && e != cudaErrorNoDevice)
    return makeErrorF("no CUDA device found ({0})", cudaGetErrorString(e));
  if (e == cudaErrorNoDevice || count == 0)
    return makeError("no CUDA device found");
  return llvm::Error::success();
}

namespace profiler {

llvm::Expected<TransferMeasurement> measureTransfers(Context &ctx) {
  // A large copy gives the rate, a tiny one the fixed cost per copy.
  size_t big = size_t(256) << 20;
  size_t freeBytes = 0, total = 0;
  MEMFIT_CUDA(cudaMemGetInfo(&freeBytes, &total));
  big = std::min(big, freeBytes / 4);
  void *host = nullptr;
  MEMFIT_CUDA(cudaMallocHost(&host, big));
  struct HostFree {
    void *p;
    ~HostFree() { cudaFreeHost(p); }
  } hostGuard{host};
  auto dev = DeviceBuffer::alloc(big);
  if (!dev)
    return dev.takeError();
  std::memset(host, 0, big);

  auto copy = [&](size_t bytes, cudaMemcpyKind kind) {
    return ctx.timeMedian([&]() -> llvm::Error {
      if (kind == cudaMemcpyHostToDevice)
        MEMFIT_CUDA(cudaMemcpyAsync(dev->get(), host, bytes, kind, ctx.stream));
      else
        MEMFIT_CUDA(cudaMemcpyAsync(host, dev->get(), bytes, kind, ctx.stream));
      return llvm::Error::success();
    });
  };
  TransferMeasurement m;
  double latency[2];
  int i = 0;
  for (cudaMemcpyKind kind : {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost}) {
    auto small = copy(4, kind);
    if (!small)
      return small.takeError();
    auto large = copy(big, kind);
    if (!large)
      return large.takeError();
    double rate =
        static_cast<double>(big - 4) / std::max(*large - *small, 1e-9);
    (kind == cudaMemcpyHostToDevice ? m.h2dBytesPerSecond
                                    : m.d2hBytesPerSecond) = rate;
    latency[i++] = *small;
  }
  m.latencySeconds = (latency[0] + latency[1]) / 2;
  return m;
}

llvm::Expected<double> measureLaunchFloor(Context &ctx) {
  constexpr int kKernels = 100;
  auto a = makeDeviceTensor({1, 1, 1, 1}), c = makeDeviceTensor({1, 1, 1, 1});
  if (!a)
    return a.takeError();
  if (!c)
    return c.takeError();
  const float one = 1;
  auto t = ctx.timeMedian([&]() -> llvm::Error {
    for (int i = 0; i < kKernels; ++i)
      MEMFIT_CUDNN(cudnnAddTensor(ctx.cudnn, &one, a->desc.get(), a->f(), &one,
                                  c->desc.get(), c->f()));
    return llvm::Error::success();
  });
  if (!t)
    return t.takeError();
  return *t / kKernels;
}

} // namespace profiler

namespace {

std::optional<ConvDirection> convDirection(const Graph &g,
                                           const ProfileRequest &r) {
  if (r.op < 0 || g.op(r.op).kind != OpKind::Conv)
    return std::nullopt;
  switch (r.kind) {
  case TaskKind::Forward:
    return ConvDirection::Forward;
  case TaskKind::BackwardData:
    return ConvDirection::BackwardData;
  case TaskKind::BackwardWeight:
    return ConvDirection::BackwardFilter;
  default:
    return std::nullopt;
  }
}

llvm::Expected<std::vector<AlgoMeasurement>>
measure(Context &ctx, const Graph &g, const ProfileRequest &r, int64_t b) {
  if (auto dir = convDirection(g, r))
    return timeConv(ctx, convShape(g, r.op, b), *dir);
  auto t = timeTask(ctx, g, r, b);
  if (!t)
    return t.takeError();
  return std::vector<AlgoMeasurement>{{0, *t, 0}};
}

std::string versionString(int v, int majorDiv, int minorDiv) {
  return std::to_string(v / majorDiv) + "." +
         std::to_string(v % majorDiv / minorDiv) +
         (minorDiv > 1 ? "." + std::to_string(v % minorDiv) : "");
}

} // namespace

llvm::Expected<Profile> runProfiler(const Graph &g, const ProfilerOptions &opts,
                                    llvm::raw_ostream &progress) {
  if (auto err = checkCudaDevice())
    return err;
  Profile p;
  int device = 0;
  MEMFIT_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  MEMFIT_CUDA(cudaGetDeviceProperties(&prop, device));
  int runtime = 0;
  MEMFIT_CUDA(cudaRuntimeGetVersion(&runtime));
  p.device.name = prop.name;
  p.device.computeCapability =
      std::to_string(prop.major) + "." + std::to_string(prop.minor);
  p.device.smCount = prop.multiProcessorCount;
  p.device.memoryBytes = static_cast<int64_t>(prop.totalGlobalMem);
  p.device.cudaRuntime = versionString(runtime, 1000, 10);
  p.device.cudnn =
      versionString(static_cast<int>(cudnnGetVersion()), 10000, 100);
  p.device.math = opts.allowTf32 ? "default" : "fma";
  progress << "memfit profile: " << p.device.name << " (sm "
           << p.device.computeCapability << ", " << p.device.smCount
           << " SMs), cuDNN " << p.device.cudnn << "\n";

  Context ctx;
  ctx.warmup = opts.warmup;
  ctx.repeats = opts.repeats;
  ctx.allowTf32 = opts.allowTf32;
  ctx.workspaceFraction = opts.workspaceFraction;
  if (auto err = ctx.init())
    return err;

  std::vector<ProfileRequest> requests = profileRequests(g);
  size_t total = requests.size() * opts.subBatches.size(), done = 0;
  size_t skipped = 0;
  for (const ProfileRequest &r : requests) {
    // An update does not depend on the sub-batch: measured once, recorded
    // for each so every lookup finds it.
    std::optional<std::vector<AlgoMeasurement>> once;
    for (int64_t b : opts.subBatches) {
      ++done;
      progress << "[" << done << "/" << total << "] " << taskKindKey(r.kind)
               << " " << r.signature << " at sub-batch " << b << ": ";
      llvm::Expected<std::vector<AlgoMeasurement>> m =
          once ? llvm::Expected<std::vector<AlgoMeasurement>>(*once)
               : measure(ctx, g, r, b);
      if (!m) {
        llvm::Error err = m.takeError();
        bool oom = err.isA<OutOfDeviceMemory>();
        std::string why = llvm::toString(std::move(err));
        // An error that poisoned the context makes every later
        // measurement meaningless.
        if (!oom) {
          cudaError_t sticky = cudaDeviceSynchronize();
          if (sticky != cudaSuccess)
            return makeErrorF("the device failed while measuring {0} {1} at "
                              "sub-batch {2}: {3}",
                              taskKindKey(r.kind), r.signature, b, why);
        }
        progress << "skipped (" << why << ")\n";
        ++skipped;
        continue;
      }
      if (m->empty()) {
        progress << "skipped (no algorithm ran)\n";
        ++skipped;
        continue;
      }
      if (r.kind == TaskKind::Update)
        once = *m;
      const AlgoMeasurement *best = &m->front();
      for (const AlgoMeasurement &a : *m)
        if (a.seconds < best->seconds)
          best = &a;
      progress << m->size() << (m->size() == 1 ? " algorithm" : " algorithms")
               << ", fastest " << llvm::format("%.3f", best->seconds * 1e3)
               << " ms\n";
      p.add({r.kind, r.signature, b, std::move(*m)});
    }
  }

  progress << "host-device copies: ";
  auto transfers = measureTransfers(ctx);
  if (!transfers)
    return transfers.takeError();
  p.transfer = *transfers;
  progress << llvm::format("%.1f GB/s to the device, %.1f GB/s back, "
                           "%.1f us per copy\n",
                           transfers->h2dBytesPerSecond / 1e9,
                           transfers->d2hBytesPerSecond / 1e9,
                           transfers->latencySeconds * 1e6);
  auto launch = measureLaunchFloor(ctx);
  if (!launch)
    return launch.takeError();
  p.calibration = nlohmann::json{{"launch_us", *launch * 1e6}}.dump();
  progress << llvm::format("kernel launch floor: %.2f us\n", *launch * 1e6);
  if (skipped)
    progress << skipped << " of " << total
             << " measurements skipped; the analytic model estimates them\n";
  return p;
}

} // namespace memfit
