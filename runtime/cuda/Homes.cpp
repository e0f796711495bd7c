//===- Homes.cpp - CUDA backend: weights homed on the host ----------------===//
//
// A weight homed on the host (WeightInfo::home) has its master, working
// copy, gradient and optimizer state in pinned host memory (ExecCore.cpp
// allocates them there), none on the device. The plan copies the master
// and the working copy into the arena, and the gradient out of it (with
// several sub-batches, in again), on the copy streams like any offloaded
// block: cudaMemcpyAsync from and to fixed pinned addresses, which a CUDA
// graph of a round captures as copy nodes.
//
// A weight whose fp32 master the plan homes on NVMe (16-bit programs) has
// none in memory: its update streams it from the tier's file and rounds
// the working copy at home chunk by chunk (narrowHomeCopy).
//
// A weight with WeightInfo::copyFromMaster keeps no working copy at home:
// its copy in sends the master through a device staging buffer and rounds
// it into the arena on the copy-in stream (copyInFromMaster), reading it
// first from the NVMe tier's file where the master lives there.
//
// A weight whose update the plan starts inside the last round
// (Exec::hostReady) has a host function after its final gradient's copy
// on the copy stream, a host node of the round's graph: at the
// iteration's last round it submits the update to the host optimizer's
// threads, which run it beside the rest of the backward pass.
//
// Otherwise the update cannot be in a graph: the host's cores run it. The
// update part's graph (or its eager issue) holds the device's updates only;
// Exec::hostUpdate queues a weight, and after the part is issued
// runHostUpdates waits for an event recorded on the compute stream before
// it (every round joins its copy streams into the compute stream, and a
// replayed round is a graph launched there, so the event covers every
// copy-out of the rounds), then runs the queued updates on the host
// optimizer's threads while the device runs its own, and joins them before
// Exec::issue returns: the next iteration's first copy-in of a homed
// weight is issued after that. Nothing here has run on a GPU yet.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Impl.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace memfit::rt {

using cuda::check;

namespace {

/// Weight `id`, checked to be homed on the host.
void checkHomed(const Exec &x, int32_t id) {
  if (id < 0 || id >= (int32_t)x.weightInfo().size() ||
      x.weightInfo()[id].home != Home::Host)
    x.fatal("weight " + std::to_string(id) + " is not homed on the host");
}

/// Host address and bytes of `what` at weight `id`'s home.
std::pair<char *, int64_t> homeRange(const Exec &x, const Exec::Impl &im,
                                     HomeTensor what, int32_t id) {
  checkHomed(x, id);
  const int64_t count = x.weightInfo()[id].count;
  char *p = what == HomeTensor::Weight ? reinterpret_cast<char *>(im.w[id])
            : what == HomeTensor::WorkingCopy
                ? im.wCopy[id]
                : reinterpret_cast<char *>(im.g[id]);
  if (!p)
    x.fatal(std::string("weight '") + x.weightInfo()[id].onnxName +
            "' has no such tensor at home");
  return {p, count * (what == HomeTensor::WorkingCopy
                          ? workingCopyBytes(x.info().precision)
                          : 4)};
}

void checkArena(const Exec &x, int64_t offset, int64_t bytes) {
  if (offset < 0 || offset + bytes > x.info().arenaBytes)
    x.fatal("a copy of " + std::to_string(bytes) + " bytes at arena offset " +
            std::to_string(offset) + " leaves the arena");
}

} // namespace

bool cuda::atHome(const Exec &x, const Exec::Impl &im, const void *p) {
  for (size_t id = 0; id < x.weightInfo().size(); ++id) {
    if (x.weightInfo()[id].home != Home::Host)
      continue;
    for (const void *q : {static_cast<const void *>(im.w[id]),
                          static_cast<const void *>(im.g[id]),
                          static_cast<const void *>(im.m[id]),
                          static_cast<const void *>(im.v[id])})
      if (q && q == p) {
        if (im.hostOpt)
          im.hostOpt->waitAll();
        return true;
      }
  }
  return false;
}

void cuda::narrowHomeCopy(Exec::Impl &im, int32_t id, int64_t lo, int64_t hi,
                          const float *w) {
  if (!im.wCopy[id]) // rounded from the master on every copy in instead
    return;
  if (im.narrow == cuda::Store::F32) { // an f32 copy, the master's bits
    char *c = im.wCopy[id] + lo * 4;
    if (c != reinterpret_cast<const char *>(w))
      std::memcpy(c, w, static_cast<size_t>(hi - lo) * 4);
    return;
  }
  uint16_t *c = reinterpret_cast<uint16_t *>(im.wCopy[id]) + lo;
  for (int64_t i = 0; i < hi - lo; ++i)
    c[i] = cuda::narrowBits(im.narrow, w[i]);
}

void cuda::refreshHomeCopy(const Exec &x, Exec::Impl &im, int32_t id) {
  narrowHomeCopy(im, id, 0, x.weightInfo()[id].count, im.w[id]);
  im.copyStale[id] = false;
}

void cuda::uploadHomeCopy(const Exec &x, Exec::Impl &im, int32_t id,
                          bool wait) {
  if (!x.weightInfo()[id].copyOnGpu || !im.wCopyDev[id])
    return;
  check(x,
        cudaMemcpyAsync(im.wCopyDev[id], im.wCopy[id],
                        x.weightInfo()[id].count *
                            workingCopyBytes(x.info().precision),
                        cudaMemcpyHostToDevice, im.stream[CopyIn]),
        "cudaMemcpyAsync (a working copy kept on the device)");
  if (wait)
    check(x, cudaStreamSynchronize(im.stream[CopyIn]),
          "cudaStreamSynchronize (a working copy kept on the device)");
}

/// The host function that reads a piece of a master from NVMe (NvmeRead).
static void CUDART_CB onNvmeRead(void *arg) {
  auto *r = static_cast<cuda::NvmeRead *>(arg);
  r->store->read(r->offset, r->dst, r->bytes);
}

/// A working copy with none at home (WeightInfo::copyFromMaster): the
/// master in pieces through the staging buffer, each rounded into the arena
/// on the copy-in stream, so that the stream's order keeps a piece from
/// landing over one not yet rounded. A master on NVMe is first read, piece
/// by piece, into pinned staging by a host function on the same stream
/// (a host node of a captured round), which the stream's order also keeps
/// from overwriting a piece not yet sent.
static void copyInFromMaster(Exec &x, Exec::Impl &im, int32_t id,
                             int64_t offset) {
  const WeightInfo &wi = x.weightInfo()[id];
  const bool nvme = wi.masterOnNvme;
  if (nvme && (!im.nvme.opened() || !im.copyStagingHost))
    x.fatal(std::string("weight '") + wi.onnxName +
            "' rounds its working copy from a master on NVMe, and the "
            "trainer opened no NVMe directory (Exec::openNvme) or has no "
            "pinned staging for it");
  const char *from = nvme ? im.copyStagingHost
                          : homeRange(x, im, HomeTensor::Weight, id).first;
  checkArena(x, offset, wi.count * 2);
  if (!im.copyStaging)
    x.fatal(std::string("weight '") + wi.onnxName +
            "' rounds its working copy from its master, but the program "
            "has no staging buffer for it");
  // Pieces start on the drive's alignment in its file.
  const int64_t staging = x.info().copyStagingBytes;
  const int64_t piece =
      nvme && staging >= host::NvmeStore::kAlign
          ? staging / host::NvmeStore::kAlign * host::NvmeStore::kAlign / 4
          : staging / 4;
  cudaStream_t s = im.stream[CopyIn];
  for (int64_t lo = 0; lo < wi.count; lo += piece) {
    const int64_t n = std::min(piece, wi.count - lo);
    if (nvme) {
      auto &r = im.nvmeReads[{id, lo}];
      if (!r)
        r = std::make_unique<cuda::NvmeRead>(cuda::NvmeRead{
            im.nvme.store.get(), im.nvme.w[id] + lo * 4,
            host::NvmeStore::regionBytes(n * 4), im.copyStagingHost});
      check(x, cudaLaunchHostFunc(s, onNvmeRead, r.get()),
            "cudaLaunchHostFunc (a master read from NVMe)");
    }
    const char *src = nvme ? from : from + lo * 4;
    check(
        x,
        cudaMemcpyAsync(im.copyStaging, src, n * 4, cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync (a master, to be rounded on the device)");
    cuda::putInto(im, n, {im.copyStaging, cuda::Store::F32},
                  {im.arena + offset + lo * 2, im.narrow}, false, s);
    check(x, cudaGetLastError(), "rounding a master into its working copy");
  }
}

void Exec::copyInHome(HomeTensor what, int32_t id, int64_t offset) {
  if (what == HomeTensor::WorkingCopy && wInfo[id].copyFromMaster) {
    if (graph) // one copy of the plan's, however many pieces
      graph->copy(IterationGraph::Kind::CopyIn, CopyIn, -1, offset,
                  wInfo[id].count * 2);
    return copyInFromMaster(*this, *impl, id, offset);
  }
  auto [src, bytes] = homeRange(*this, *impl, what, id);
  checkArena(*this, offset, bytes);
  if (graph)
    graph->copy(IterationGraph::Kind::CopyIn, CopyIn, -1, offset, bytes);
  MEMFIT_CHECK(cudaMemcpyAsync(impl->arena + offset, src, bytes,
                               cudaMemcpyHostToDevice, impl->stream[CopyIn]));
}

void Exec::copyOutHome(int64_t offset, HomeTensor what, int32_t id) {
  if (what != HomeTensor::Grad)
    fatal("only a gradient is copied home: the weight changes at home");
  auto [dst, bytes] = homeRange(*this, *impl, what, id);
  checkArena(*this, offset, bytes);
  if (graph)
    graph->copy(IterationGraph::Kind::CopyOut, CopyOut, -1, offset, bytes);
  MEMFIT_CHECK(cudaMemcpyAsync(dst, impl->arena + offset, bytes,
                               cudaMemcpyDeviceToHost, impl->stream[CopyOut]));
}

/// A weight whose state or master is on NVMe needs the tier's file open.
static void checkNvme(Exec &x, Exec::Impl &im, int32_t id) {
  const WeightInfo &wi = x.weightInfo()[id];
  if ((wi.stateOnNvme || wi.masterOnNvme) && !im.nvme.opened())
    x.fatal("the plan keeps weights' tensors on NVMe and the trainer opened "
            "no NVMe directory (Exec::openNvme)");
}

void Exec::hostUpdate(int32_t id) {
  checkHomed(*this, id);
  checkNvme(*this, *impl, id);
  if (!wInfo[id].trainable)
    fatal(std::string("a host update of '") + wInfo[id].onnxName +
          "', which is not trained");
  impl->hostQueue.push_back(id);
}

namespace {

/// Submits weight id's update to the host optimizer, with this iteration's
/// settings (which the issuing thread leaves alone until the iteration's
/// updates are joined).
host::JobId submitHostUpdate(Exec &x, Exec::Impl &im, int32_t id) {
  const ProgramInfo &p = x.info();
  const int64_t count = x.weightInfo()[id].count;
  // Checked where the update is asked for (hostUpdate, hostReady): this
  // runs on a CUDA host function, where fatal must not be called.
  const WeightInfo &wi = x.weightInfo()[id];
  host::HostOptimizer::NvmeAt at;
  host::HostOptimizer::MasterOut out;
  float *w = im.w[id];
  if (wi.masterOnNvme) {
    at.w = im.nvme.w[id];
    w = nullptr;
    Exec::Impl *impl = &im;
    // None at home where each copy in rounds the master.
    if (!wi.copyFromMaster)
      out = [impl, id](int64_t lo, int64_t hi, const float *chunk) {
        cuda::narrowHomeCopy(*impl, id, lo, hi, chunk);
      };
  }
  if (p.optimizer == Optimizer::SGD) {
    const bool useBuf = p.hasMomentum && x.momentum != 0;
    const host::SgdParams sgd{x.lr, useBuf ? x.momentum : 0.0f,
                              x.weightDecayOf(id), x.firstIteration};
    if (useBuf && wi.stateOnNvme)
      at.m = im.nvme.m[id];
    if (at.w >= 0 || at.m >= 0)
      return im.hostOpt->submitSgdNvme(sgd, count, w, im.g[id], *im.nvme.store,
                                       at, out);
    return im.hostOpt->submitSgd(sgd, count, w, im.g[id],
                                 useBuf ? im.m[id] : nullptr);
  }
  if (wi.stateOnNvme) {
    at.m = im.nvme.m[id];
    at.v = im.nvme.v[id];
    return im.hostOpt->submitAdamNvme(x.adamParams(id), count, w, im.g[id],
                                      *im.nvme.store, at, out);
  }
  return im.hostOpt->submitAdam(x.adamParams(id), count, w, im.g[id], im.m[id],
                                im.v[id]);
}

/// The host function Exec::hostReady enqueues (no CUDA call in it).
void CUDART_CB onHostReady(void *arg) {
  auto *r = static_cast<cuda::HostReady *>(arg);
  if (++r->seen < r->x->info().numSubBatches)
    return;
  r->job = submitHostUpdate(*r->x, *r->im, r->id);
  r->started = true;
}

/// The host function Exec::waitHost enqueues: in the last round, blocks
/// the stream until the update its hostReady submitted has finished. It
/// waits on the host optimizer's threads only, which need no CUDA work, so
/// a callback blocked here cannot hold up what it waits for.
void CUDART_CB onWaitHost(void *arg) {
  auto *r = static_cast<cuda::HostReady *>(arg);
  if (r->started)
    r->im->hostOpt->wait(r->job);
}

} // namespace

void Exec::hostReady(StreamId s, int32_t id) {
  checkHomed(*this, id);
  checkNvme(*this, *impl, id);
  if (!wInfo[id].trainable)
    fatal(std::string("a host update of '") + wInfo[id].onnxName +
          "', which is not trained");
  if (s != CopyOut && s != CopyIn)
    fatal("a host update starts after a copy stream's work");
  Impl &im = *impl;
  if (im.hostReady.size() < wInfo.size())
    im.hostReady.resize(wInfo.size());
  if (!im.hostReady[id])
    im.hostReady[id] = std::make_unique<cuda::HostReady>(
        cuda::HostReady{this, impl.get(), id});
  // A host node when captured: every replay of the round runs it.
  MEMFIT_CHECK(
      cudaLaunchHostFunc(im.stream[s], onHostReady, im.hostReady[id].get()));
}

void Exec::waitHost(StreamId s, int32_t id) {
  checkHomed(*this, id);
  if (s != CopyOut && s != CopyIn)
    fatal("only a copy stream waits for a host update");
  Impl &im = *impl;
  if (id >= (int32_t)im.hostReady.size() || !im.hostReady[id])
    fatal(std::string("a wait for the host update of '") + wInfo[id].onnxName +
          "', which no hostReady starts earlier in the round");
  // After hostReady's host function on the same stream: started is set by
  // then in the iteration's last round.
  MEMFIT_CHECK(
      cudaLaunchHostFunc(im.stream[s], onWaitHost, im.hostReady[id].get()));
}

// The host updates run, and are joined, when the update part has been
// issued (runHostUpdates); nothing is left to join here.
void Exec::joinHost() {}

void cuda::runHostUpdates(Exec &x, Exec::Impl &im) {
  bool started = false;
  for (const auto &r : im.hostReady)
    started = started || (r && r->seen > 0);
  if (im.hostQueue.empty() && !started)
    return;
  // Every round's host functions have run once this has fired (a round
  // joins its copy streams into the compute stream).
  check(x, cudaEventSynchronize(im.roundsDone),
        "cudaEventSynchronize (the rounds' copy-outs)");
  // In the order they were started: those of the last round, then the
  // queued ones (the simulator's order).
  std::vector<std::pair<host::JobId, int32_t>> jobs;
  for (const auto &r : im.hostReady)
    if (r && r->started)
      jobs.push_back({r->job, r->id});
  std::sort(jobs.begin(), jobs.end());
  for (int32_t id : im.hostQueue)
    jobs.push_back({submitHostUpdate(x, im, id), id});
  // Each working copy kept on the device is uploaded as soon as its
  // update is done, while the host runs the next ones. A master on NVMe
  // had its working copy rounded by its update.
  bool uploads = false;
  for (auto [job, id] : jobs) {
    im.hostOpt->wait(job);
    if (im.wCopy[id] && !x.weightInfo()[id].masterOnNvme)
      refreshHomeCopy(x, im, id);
    if (im.nvme.opened() && im.nvme.store->failed())
      break;
    uploadHomeCopy(x, im, id, false);
    uploads = uploads || x.weightInfo()[id].copyOnGpu;
  }
  im.hostOpt->waitAll();
  if (im.nvme.opened() && im.nvme.store->failed())
    x.fatal(im.nvme.store->error() +
            "; the last checkpoint, if any, is intact");
  // The next iteration's rounds read the uploaded copies.
  if (uploads)
    check(x, cudaStreamSynchronize(im.stream[CopyIn]),
          "cudaStreamSynchronize (working copies kept on the device)");
  for (const auto &r : im.hostReady) {
    if (!r)
      continue;
    r->seen = 0;
    r->started = false;
  }
}

} // namespace memfit::rt
