//===- Homes.cpp - The emulation's weights homed on the host --------------===//
//
// A weight homed on the host keeps its tensors in the emulation's host
// vectors (Exec::Impl's w, wCopy, g, m, v) and has none on the device: the
// plan copies the master, the working copy and the gradient between them
// and the arena on the copy streams, with the emulation's adversarial
// copies (an arena destination is NaN until its copy is waited for, a
// copy-out reads its source as late as the plan allows), and the host's
// cores update it (runtime/host's HostOptimizer, on real threads).
//
// Two checks of the host side: a copy of a weight whose host update was
// not joined is an error, and a homed gradient is NaN once its update has
// read it, so a round that added to last iteration's gradient instead of
// overwriting it computes NaN.
//
//===----------------------------------------------------------------------===//
#include "runtime/emu/EmuImpl.h"

#include <string>

namespace memfit::rt {

namespace {

/// The host vector of `what` for weight `id`, checked to be homed there.
std::vector<float> &homeOf(Exec &x, Exec::Impl &im, HomeTensor what,
                           int32_t id) {
  if (id < 0 || id >= (int32_t)x.weightInfo().size() ||
      x.weightInfo()[id].home != Home::Host)
    x.fatal("weight " + std::to_string(id) + " is not homed on the host");
  if (im.hostPending[id])
    x.fatal(std::string("weight '") + x.weightInfo()[id].onnxName +
            "' is copied while its host update runs: the update section "
            "did not join the host's updates");
  std::vector<float> &v = what == HomeTensor::Weight        ? im.w[id]
                          : what == HomeTensor::WorkingCopy ? im.wCopy[id]
                                                            : im.g[id];
  if (v.empty())
    x.fatal(std::string("weight '") + x.weightInfo()[id].onnxName +
            "' has no such tensor at home");
  return v;
}

/// Planned arena bytes of `what`: 16-bit in a working copy, else fp32.
int64_t plannedBytes(HomeTensor what, int64_t count) {
  return count * (what == HomeTensor::WorkingCopy ? 2 : 4);
}

} // namespace

void Exec::copyInHome(HomeTensor what, int32_t id, int64_t offset) {
  std::vector<float> &src = homeOf(*this, *impl, what, id);
  if (what == HomeTensor::WorkingCopy)
    weightCopy(id); // the host's rounding of a changed master
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
  std::vector<float> &dst = homeOf(*this, *impl, what, id);
  if (what != HomeTensor::Grad)
    fatal("only a gradient is copied home: the weight changes at home");
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

void Exec::hostUpdate(int32_t id) {
  impl->settle();
  if (id < 0 || id >= (int32_t)wInfo.size() || wInfo[id].home != Home::Host ||
      !wInfo[id].trainable)
    fatal("a host update of weight " + std::to_string(id) +
          ", which is not a trained weight homed on the host");
  // The rounds ended with every copy complete (endRound), so the gradient
  // at home is the batch's.
  Impl &im = *impl;
  const int64_t count = wInfo[id].count;
  if (prog.optimizer == Optimizer::SGD) {
    const bool useBuf = prog.hasMomentum && momentum != 0;
    host::SgdParams p{lr, useBuf ? momentum : 0.0f, weightDecay,
                      firstIteration};
    im.hostOpt->submitSgd(p, count, im.w[id].data(), im.g[id].data(),
                          useBuf ? im.m[id].data() : nullptr);
  } else {
    im.hostOpt->submitAdam(adamParams(), count, im.w[id].data(),
                           im.g[id].data(), im.m[id].data(), im.v[id].data());
  }
  im.hostPending[id] = true;
}

void Exec::joinHost() {
  Impl &im = *impl;
  if (!im.hostOpt)
    return;
  im.hostOpt->waitAll();
  for (size_t id = 0; id < wInfo.size(); ++id) {
    if (!im.hostPending[id])
      continue;
    im.hostPending[id] = false;
    im.copyStale[id] = true;
    std::fill(im.g[id].begin(), im.g[id].end(), kPoison);
  }
}

} // namespace memfit::rt
