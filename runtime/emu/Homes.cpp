//===- Homes.cpp - The emulation's weights homed on the host --------------===//
//
// A weight homed on the host keeps its tensors in the emulation's host
// vectors (Exec::Impl's w, wCopy, g, m, v) and has none on the device: the
// plan copies the master, the working copy and the gradient between them
// and the arena on the copy streams, with the emulation's adversarial
// copies (an arena destination is NaN until its copy is waited for, a
// copy-out reads its source as late as the plan allows), and the host's
// cores update it (runtime/host's HostOptimizer, on real threads), after
// the rounds (hostUpdate) or from inside the last one (hostReady) while
// the emulation goes on with the round. A weight whose optimizer state or
// fp32 master is homed on NVMe keeps it in the tier's file, which its
// update streams through (HostOptimizer::submitAdamNvme); a master there
// has its working copy rounded by the update, chunk by chunk.
//
// Two checks of the host side: a copy of a weight whose host update is
// running (started too early, or not joined) is an error, and a homed gradient
// is NaN once its update has read it, so a round that added to last iteration's
// gradient instead of overwriting it computes NaN.
//
//===----------------------------------------------------------------------===//
#include "runtime/emu/EmuImpl.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace memfit::rt {

namespace {

/// The host memory of `what` for weight `id`, checked to be homed there.
std::span<float> homeOf(Exec &x, Exec::Impl &im, HomeTensor what, int32_t id) {
  if (id < 0 || id >= (int32_t)x.weightInfo().size() ||
      x.weightInfo()[id].home != Home::Host)
    x.fatal("weight " + std::to_string(id) + " is not homed on the host");
  if (im.hostPending[id])
    x.fatal(std::string("weight '") + x.weightInfo()[id].onnxName +
            "' is copied while its host update runs: the plan started the "
            "update before the round's last copy of it, or did not join the "
            "host's updates");
  std::span<float> v = what == HomeTensor::Weight        ? im.w[id]
                       : what == HomeTensor::WorkingCopy ? im.wCopy[id]
                                                         : im.g[id];
  if (v.empty())
    x.fatal(std::string("weight '") + x.weightInfo()[id].onnxName +
            "' has no such tensor at home");
  return v;
}

/// A gradient copied into the pool takes bytes no other gradient still
/// needs: every one there whose update started has been waited for.
void checkPoolFree(Exec &x, Exec::Impl &im, int32_t id) {
  const std::vector<WeightInfo> &wInfo = x.weightInfo();
  const int64_t lo = wInfo[id].gradPoolOffset;
  if (lo < 0)
    return;
  const int64_t hi = lo + wInfo[id].count * 4;
  for (size_t j = 0; j < wInfo.size(); ++j) {
    const int64_t jlo = wInfo[j].gradPoolOffset;
    if ((int32_t)j == id || jlo < 0 || !im.hostPending[j] || im.hostWaited[j])
      continue;
    if (jlo < hi && lo < jlo + wInfo[j].count * 4)
      x.fatal(std::string("the gradient of '") + wInfo[id].onnxName +
              "' is copied into the gradient pool over that of '" +
              wInfo[j].onnxName +
              "', whose host update has not been waited for (waitHost)");
  }
}

/// Planned arena bytes of `what`: 16-bit in a working copy, else fp32.
int64_t plannedBytes(HomeTensor what, int64_t count) {
  return count * (what == HomeTensor::WorkingCopy ? 2 : 4);
}

} // namespace

void Exec::copyInHome(HomeTensor what, int32_t id, int64_t offset) {
  std::span<float> src = homeOf(*this, *impl, what, id);
  if (what == HomeTensor::WorkingCopy && wInfo[id].copyOnGpu)
    fatal(std::string("weight '") + wInfo[id].onnxName +
          "' keeps its working copy on the device: no round copies it in");
  if (what == HomeTensor::WorkingCopy) {
    // No copy at home where it is rounded from the master: the master,
    // rounded as it lands (the vector stands for the device's staging),
    // read from the drive first where it lives on NVMe.
    if (wInfo[id].copyFromMaster && wInfo[id].masterOnNvme) {
      readWeight(id, src.data());
      roundTo16Bit(prog.precision, src.data(),
                   static_cast<int64_t>(src.size()));
    } else {
      if (wInfo[id].copyFromMaster)
        impl->copyStale[id] = true;
      weightCopy(id); // the host's rounding of a changed master
    }
  }
  const int64_t bytes = plannedBytes(what, wInfo[id].count);
  if (offset < 0 || offset + bytes > prog.arenaBytes)
    fatal("a copy into the arena leaves it");
  if (graph)
    graph->copy(IterationGraph::Kind::CopyIn, CopyIn, -1, offset, bytes);
  Pending p{Pending::In, offset, bytes,
            reinterpret_cast<const char *>(src.data()), nullptr};
  p.realBytes = static_cast<int64_t>(src.size()) * 4;
  enqueue(*impl, CopyIn, p);
}

void Exec::copyOutHome(int64_t offset, HomeTensor what, int32_t id) {
  std::span<float> dst = homeOf(*this, *impl, what, id);
  if (what != HomeTensor::Grad)
    fatal("only a gradient is copied home: the weight changes at home");
  checkPoolFree(*this, *impl, id);
  const int64_t bytes = plannedBytes(what, wInfo[id].count);
  if (offset < 0 || offset + bytes > prog.arenaBytes)
    fatal("a copy out of the arena leaves it");
  if (graph)
    graph->copy(IterationGraph::Kind::CopyOut, CopyOut, -1, offset, bytes);
  Pending p{Pending::Out, offset, bytes, nullptr,
            reinterpret_cast<char *>(dst.data())};
  p.realBytes = static_cast<int64_t>(dst.size()) * 4;
  enqueue(*impl, CopyOut, p);
}

namespace {

/// Submits weight id's update to the host optimizer: its gradient at home
/// is the batch's.
void submitHostUpdate(Exec &x, Exec::Impl &im, int32_t id) {
  const ProgramInfo &prog = x.info();
  const std::vector<WeightInfo> &wInfo = x.weightInfo();
  if (id < 0 || id >= (int32_t)wInfo.size() || wInfo[id].home != Home::Host ||
      !wInfo[id].trainable)
    x.fatal("a host update of weight " + std::to_string(id) +
            ", which is not a trained weight homed on the host");
  if (im.hostPending[id])
    x.fatal(std::string("weight '") + wInfo[id].onnxName +
            "' is updated twice in one iteration");
  const float lr = x.lr, momentum = x.momentum,
              weightDecay = x.weightDecayOf(id);
  const bool firstIteration = x.firstIteration;
  const int64_t count = wInfo[id].count;
  const WeightInfo &wi = wInfo[id];
  const bool nvme = wi.stateOnNvme || wi.masterOnNvme;
  if (nvme && !im.nvme.opened())
    x.fatal("the plan keeps weights' tensors on NVMe and the trainer opened "
            "no NVMe directory (Exec::openNvme)");
  host::HostOptimizer::NvmeAt at;
  host::HostOptimizer::MasterOut out;
  float *w = im.w[id].data();
  if (wi.masterOnNvme) {
    at.w = im.nvme.w[id];
    w = nullptr;
    // A copy rounded from the master on each copy in is not kept: its
    // vector then keeps what the last copy in read, stale once this runs.
    const Precision precision = prog.precision;
    float *copy = im.wCopy[id].data();
    if (!wi.copyFromMaster)
      out = [precision, copy](int64_t lo, int64_t hi, const float *chunk) {
        std::copy(chunk, chunk + (hi - lo), copy + lo);
        roundTo16Bit(precision, copy + lo, hi - lo);
      };
    else
      std::fill(im.wCopy[id].begin(), im.wCopy[id].end(), kPoison);
  }
  if (prog.optimizer == Optimizer::SGD) {
    const bool useBuf = prog.hasMomentum && momentum != 0;
    host::SgdParams p{lr, useBuf ? momentum : 0.0f, weightDecay,
                      firstIteration};
    if (useBuf && wi.stateOnNvme)
      at.m = im.nvme.m[id];
    if (at.w >= 0 || at.m >= 0)
      im.hostJob[id] = im.hostOpt->submitSgdNvme(p, count, w, im.g[id].data(),
                                                 *im.nvme.store, at, out);
    else
      im.hostJob[id] = im.hostOpt->submitSgd(
          p, count, w, im.g[id].data(), useBuf ? im.m[id].data() : nullptr);
  } else if (wi.stateOnNvme) {
    at.m = im.nvme.m[id];
    at.v = im.nvme.v[id];
    im.hostJob[id] = im.hostOpt->submitAdamNvme(
        x.adamParams(id), count, w, im.g[id].data(), *im.nvme.store, at, out);
  } else {
    // NvmeState::open refuses a stored master with state in memory.
    assert(!wi.masterOnNvme && "a stored master streams with its state");
    im.hostJob[id] =
        im.hostOpt->submitAdam(x.adamParams(id), count, w, im.g[id].data(),
                               im.m[id].data(), im.v[id].data());
  }
  im.hostPending[id] = true;
}

} // namespace

void Exec::hostUpdate(int32_t id) {
  impl->settle();
  // The rounds ended with every copy complete (endRound).
  submitHostUpdate(*this, *impl, id);
}

void Exec::hostReady(StreamId s, int32_t id) {
  impl->settle();
  if (s != CopyOut && s != CopyIn)
    fatal("a host update starts after a copy stream's work");
  if (subBatchIndex != prog.numSubBatches - 1)
    return;
  // The stream's copies so far are done, the gradient's copy home among
  // them; the update then runs on the host's threads beside the round, and
  // a later copy of this weight in the round is an error (homeOf).
  completeStream(*impl, s);
  submitHostUpdate(*this, *impl, id);
}

void Exec::waitHost(StreamId s, int32_t id) {
  impl->settle();
  if (s != CopyOut && s != CopyIn)
    fatal("only a copy stream waits for a host update");
  if (subBatchIndex != prog.numSubBatches - 1)
    return;
  Impl &im = *impl;
  if (id < 0 || id >= (int32_t)wInfo.size() || !im.hostPending[id])
    fatal("a wait for the host update of weight " + std::to_string(id) +
          ", which has not started in this round");
  // The issuing thread stands in for the stream: the stream's later copies
  // are issued after this returns.
  im.hostOpt->wait(im.hostJob[id]);
  im.hostWaited[id] = true;
  // Its update has read the gradient: what stays in its bytes is stale.
  std::fill(im.g[id].begin(), im.g[id].end(), kPoison);
}

void Exec::joinHost() {
  Impl &im = *impl;
  if (!im.hostOpt)
    return;
  im.hostOpt->waitAll();
  if (im.nvme.opened() && im.nvme.store->failed())
    fatal(im.nvme.store->error() + "; the last checkpoint, if any, is intact");
  for (size_t id = 0; id < wInfo.size(); ++id) {
    if (!im.hostPending[id])
      continue;
    im.hostPending[id] = false;
    im.hostWaited[id] = false;
    // The update rounded a working copy whose master is on NVMe.
    im.copyStale[id] = !wInfo[id].masterOnNvme;
    // The trainer uploads a copy kept on the device once the update is done.
    im.devStale[id] = true;
    std::fill(im.g[id].begin(), im.g[id].end(), kPoison);
  }
}

} // namespace memfit::rt
