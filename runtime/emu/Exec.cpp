//===- Exec.cpp - CPU emulation backend -----------------------------------===//
//
// Runs a generated schedule on the host, as adversarially as the plan's
// semantics allow: compute runs at issue; copies complete only when an event
// covering them is waited on; copy-in destinations are NaN until then;
// released bytes are NaN at once (or when their stream's earlier work
// completes, and never before a pending copy-out has read them). A plan
// that misses a wait produces wrong numbers here.
//
//===----------------------------------------------------------------------===//
#include "runtime/TrainerOptions.h"
#include "runtime/emu/EmuImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <vector>

namespace memfit::rt {

/// Points each weight's gradient at its buffer, or at its range of the
/// gradient pool (poisoned until a copy home writes it).
static void initGradients(Exec &x, Exec::Impl &im) {
  const ProgramInfo &prog = x.info();
  im.gradPool.assign(static_cast<size_t>(prog.gradPoolBytes / 4), kPoison);
  for (size_t id = 0; id < x.weightInfo().size(); ++id) {
    const WeightInfo &wi = x.weightInfo()[id];
    if (wi.gradPoolOffset < 0) {
      im.g.emplace_back(im.gStore[id]);
      continue;
    }
    if (wi.home != Home::Host || !wi.trainable || wi.gradPoolOffset % 4 != 0 ||
        wi.gradPoolOffset + wi.count * 4 > prog.gradPoolBytes)
      x.fatal(std::string("weight '") + wi.onnxName +
              "' has a gradient pool range outside the pool, or is not a "
              "trained weight homed on the host");
    im.g.emplace_back(im.gradPool.data() + wi.gradPoolOffset / 4,
                      static_cast<size_t>(wi.count));
  }
}

Exec::Exec(const ProgramInfo &info, const WeightInfo *weights,
           const HostSlot *slots)
    : prog(info), wInfo(weights, weights + info.numWeights),
      slotInfo(slots, slots + info.numHostSlots), impl(new Impl) {
  impl->precision = info.precision;
  impl->slotBytes = stores16Bit(info.precision) ? 2 : 4;
  impl->arena.assign(static_cast<size_t>(info.arenaBytes / impl->slotBytes + 1),
                     kPoison);
  for (const WeightInfo &wi : wInfo) {
    // A master on NVMe lives in the tier's file (openNvme), not here.
    impl->w.emplace_back(wi.masterOnNvme ? 0 : wi.count, 0.0f);
    impl->gStore.emplace_back(
        wi.trainable && wi.gradPoolOffset < 0 ? wi.count : 0, 0.0f);
    // State on NVMe lives in the tier's file (openNvme), not here.
    const bool inMemory = wi.trainable && !wi.stateOnNvme;
    impl->m.emplace_back(inMemory && info.hasMomentum ? wi.count : 0, 0.0f);
    impl->v.emplace_back(
        inMemory && info.optimizer != Optimizer::SGD ? wi.count : 0, 0.0f);
    impl->gSlice.emplace_back(wi.trainable && info.shard >= 2
                                  ? (wi.count + info.ranks - 1) / info.ranks
                                  : 0,
                              0.0f);
    impl->wCopy.emplace_back(wi.workingCopy ? wi.count : 0, 0.0f);
    impl->wCopyDev.emplace_back(wi.workingCopy && wi.copyOnGpu ? wi.count : 0,
                                kPoison);
  }
  impl->devStale.assign(wInfo.size(), true);
  // A working copy whose master is on NVMe is written by every write and
  // update of the master (writeWeight, the host's update), never refreshed
  // from a master in memory.
  impl->copyStale.assign(wInfo.size(), true);
  for (size_t id = 0; id < wInfo.size(); ++id)
    if (wInfo[id].masterOnNvme)
      impl->copyStale[id] = false;
  impl->hostPending.assign(wInfo.size(), false);
  impl->hostJob.assign(wInfo.size(), -1);
  impl->hostWaited.assign(wInfo.size(), false);
  initGradients(*this, *impl);
  if (std::any_of(wInfo.begin(), wInfo.end(),
                  [](const WeightInfo &wi) { return wi.home == Home::Host; }))
    impl->hostOpt =
        std::make_unique<host::HostOptimizer>(host::defaultHostThreads());
  for (const HostSlot &s : slotInfo)
    impl->slots.emplace_back(impl->real(s.perSample * info.subBatch + s.fixed));
  const int32_t buffers =
      info.evalSubBatch > 0 ? kHostBatchBuffers : kBatchBuffers;
  for (int32_t b = 0; b < buffers; ++b) {
    impl->input[b].assign(info.batch * info.inputPerSample, 0.0f);
    impl->labels[b].assign(info.batch * info.labelPerSample * 4, 0);
  }
  impl->events.assign(info.numEvents, {0, 0});
  impl->recorded.assign(info.numEvents, false);
}

// Host updates still running read the buffers freed below.
Exec::~Exec() {
  if (impl->hostOpt)
    impl->hostOpt->waitAll();
}

void Exec::fatal(const std::string &what) const {
  throwIfFailuresThrow(task ? "in " + std::string(task) + ": " + what : what,
                       2);
  std::fprintf(stderr, "trainer: error in %s: %s\n", task, what.c_str());
  std::exit(2);
}

float *Exec::arena(int64_t offset) {
  if (offset < 0 || offset > prog.arenaBytes || offset % 4)
    fatal("arena offset out of range");
  return impl->arena.data() + offset / impl->slotBytes;
}
int32_t *Exec::arenaInt(int64_t offset) {
  return reinterpret_cast<int32_t *>(arena(offset));
}
float *Exec::weight(int32_t id) { return impl->w[id].data(); }
float *Exec::grad(int32_t id) { return impl->g[id].data(); }
float *Exec::momentumBuf(int32_t id) { return impl->m[id].data(); }
float *Exec::secondMomentBuf(int32_t id) { return impl->v[id].data(); }
float *Exec::hostInput(int32_t b) { return impl->input[b].data(); }
void *Exec::hostLabels(int32_t b) { return impl->labels[b].data(); }
// The emulation computes at issue: an iteration is done when the trainer
// issues the next, so a buffer is free as soon as the trainer hands it back.
void Exec::prepareBatch(int32_t) {}
void Exec::useBatch(int32_t b) { impl->batch = b; }
void Exec::batchIssued() {}
void Exec::waitBatchFree(int32_t) {}
void Exec::issue(int32_t, void (*fn)(Exec &)) { fn(*this); }
void Exec::beginIteration() {}
std::string Exec::eagerReason() const {
  return "the CPU emulation runs every operation at issue";
}
float *Exec::lossValue() { return &impl->loss; }
float Exec::readLoss() { return impl->loss; }
void Exec::resetEvalSums() { impl->evalSums = {}; }
EvalSums Exec::readEvalSums() { return impl->evalSums; }

/// Planned bytes [offset, offset + bytes) turn to NaN.
void poison(Exec::Impl &im, int64_t offset, int64_t bytes) {
  for (int64_t i = offset / im.slotBytes; i < (offset + bytes) / im.slotBytes;
       ++i)
    im.arena[i] = kPoison;
}

static void complete(Exec::Impl &im, int s, int64_t upTo) {
  while (im.done[s] < upTo) {
    Pending p = im.queue[s].front();
    im.queue[s].pop_front();
    // Copies move the emulation's real bytes of the planned range.
    char *a = reinterpret_cast<char *>(im.arena.data()) + im.real(p.offset);
    if (p.kind == Pending::Out) {
      // Read as late as allowed.
      std::memcpy(p.dst, a, p.realBytes ? p.realBytes : im.real(p.bytes));
      for (auto [offset, bytes] : p.thenPoison)
        poison(im, offset, bytes);
    } else if (p.kind == Pending::In)
      std::memcpy(a, p.src, p.realBytes ? p.realBytes : im.real(p.bytes));
    else
      poison(im, p.offset, p.bytes);
    ++im.done[s];
  }
}

void completeStream(Exec::Impl &im, int s) { complete(im, s, im.issued[s]); }

void enqueue(Exec::Impl &im, int s, Pending p) {
  im.settle();
  if (p.kind == Pending::In)
    poison(im, p.offset, p.bytes); // NaN until waited for
  im.queue[s].push_back(p);
  ++im.issued[s];
}

void Exec::copyOut(int64_t offset, int32_t slot) {
  const HostSlot &hs = slotInfo[slot];
  int64_t bytes = hs.perSample * n + hs.fixed;
  if (graph)
    graph->copy(IterationGraph::Kind::CopyOut, CopyOut, slot, offset, bytes);
  enqueue(*impl, CopyOut,
          {Pending::Out, offset, bytes, nullptr, impl->slots[slot].data()});
}

void Exec::copyIn(int32_t slot, int64_t offset) {
  const HostSlot &hs = slotInfo[slot];
  int64_t bytes = hs.perSample * n + hs.fixed;
  if (graph)
    graph->copy(IterationGraph::Kind::CopyIn, CopyIn, slot, offset, bytes);
  enqueue(*impl, CopyIn,
          {Pending::In, offset, bytes, impl->slots[slot].data(), nullptr});
}

void Exec::loadInput(int64_t offset) {
  // The host holds fp32 values or int32 ids, 4 bytes each; a 16-bit
  // program's float input is stored rounded, as the host would convert it.
  int64_t per = prog.inputPerSample * 4;
  float *src =
      impl->input[impl->batch].data() + prog.inputPerSample * firstSample;
  bool narrow = stores16Bit(prog.precision) && !prog.intInput;
  if (narrow)
    roundTo16Bit(prog.precision, src, prog.inputPerSample * n);
  Pending p{Pending::In, offset, per * n / (narrow ? 2 : 1),
            reinterpret_cast<const char *>(src), nullptr};
  p.realBytes = per * n;
  if (graph)
    graph->copy(IterationGraph::Kind::LoadInput, CopyIn, -1, offset, p.bytes);
  enqueue(*impl, CopyIn, p);
}

void Exec::loadLabels(int64_t offset) {
  int64_t per = prog.labelPerSample * 4;
  Pending p{Pending::In, offset, per * n,
            impl->labels[impl->batch].data() + per * firstSample, nullptr};
  p.realBytes = per * n;
  if (graph)
    graph->copy(IterationGraph::Kind::LoadLabels, CopyIn, -1, offset, p.bytes);
  enqueue(*impl, CopyIn, p);
}

void Exec::setTask(const char *name) {
  impl->settle();
  task = name;
  if (graph)
    graph->task(name);
}

void Exec::record(StreamId s, int32_t event) {
  impl->settle();
  if (graph)
    graph->record(s, event);
  impl->events[event] = {s, impl->issued[s]};
  impl->recorded[event] = true;
}

void Exec::wait(StreamId s, int32_t event) {
  if (!impl->recorded[event])
    fatal("wait for an event that was never recorded");
  impl->settle();
  if (graph)
    graph->wait(s, event);
  auto [es, count] = impl->events[event];
  if (es != Compute)
    complete(*impl, es, count);
  (void)s;
}

void Exec::release(StreamId s, int64_t offset, int64_t bytes) {
  // A release ends the accesses of the stream it is issued on only. A
  // copy-out issued earlier may still read the bytes (a block copied out
  // as soon as it is made, then read again by compute): on a GPU they stay
  // intact until a later writer, which must wait for that copy. So the
  // bytes turn to NaN after the last such copy has read them.
  impl->settle();
  if (s == Compute)
    for (auto it = impl->queue[CopyOut].rbegin();
         it != impl->queue[CopyOut].rend(); ++it)
      if (it->kind == Pending::Out && it->offset < offset + bytes &&
          offset < it->offset + it->bytes) {
        it->thenPoison.push_back({offset, bytes});
        return;
      }
  if (s == Compute)
    poison(*impl, offset, bytes);
  else
    enqueue(*impl, s, {Pending::Poison, offset, bytes, nullptr, nullptr});
}

void Exec::endRound() {
  impl->settle();
  for (int s : {CopyOut, CopyIn})
    if (impl->done[s] != impl->issued[s])
      fatal("a copy is still pending at the end of the round: the plan does "
            "not join its streams");
  // Every arena byte is dead between rounds.
  std::fill(impl->arena.begin(), impl->arena.end(), kPoison);
}

void Exec::synchronize() {
  impl->settle();
  for (int s : {CopyOut, CopyIn})
    complete(*impl, s, impl->issued[s]);
}

int64_t Exec::deviceBytes() const {
  // A sharded plan gives each rank 1/R of the optimizer state (and with
  // shard 2 of the gradients), rounded up to whole floats: the emulation
  // keeps whole replicas to check the collectives' arithmetic, but counts
  // what a rank of the plan holds (docs/data-parallel.md says where the
  // CUDA backend still differs).
  const int64_t ranks = std::max<int64_t>(1, prog.ranks);
  auto held = [&](size_t count, bool sharded) {
    return sharded ? (int64_t(count) + ranks - 1) / ranks
                   : static_cast<int64_t>(count);
  };
  int64_t total = prog.arenaBytes + 4;
  for (size_t i = 0; i < wInfo.size(); ++i)
    if (wInfo[i].home == Home::Gpu)
      total += 4 * (held(impl->w[i].size(), false) +
                    held(impl->g[i].size(), prog.shard >= 2) +
                    held(impl->m[i].size(), prog.shard >= 1) +
                    held(impl->v[i].size(), prog.shard >= 1)) +
               (copyIsMaster(prog.precision, wInfo[i])
                    ? 0
                    : workingCopyBytes(prog.precision) *
                          static_cast<int64_t>(impl->wCopy[i].size()));
    else
      total += workingCopyBytes(prog.precision) *
               static_cast<int64_t>(impl->wCopyDev[i].size());
  return total;
}

int64_t Exec::measuredDeviceBytes() const { return deviceBytes(); }

// The reference kernels compute every algorithm id alike, in no workspace.
ConvCheckResult Exec::checkConvolutions(const ConvTask *, int32_t, bool,
                                        ConvGraphUse) {
  return {};
}
int64_t Exec::convAlgoChanges() const { return 0; }
int64_t Exec::contextBytes() const { return 0; }

// The emulation has no libraries: they take their reserve, unless a test
// says otherwise to see the trainer's over-budget report.
int64_t Exec::measuredLibraryBytes() const {
  const char *v = std::getenv("MEMFIT_EMU_LIBRARY_BYTES");
  if (!v || !*v)
    return prog.libraryReserveBytes;
  char *end = nullptr;
  long long bytes = std::strtoll(v, &end, 10);
  if (*end != '\0' || bytes < 0)
    fatal(std::string("MEMFIT_EMU_LIBRARY_BYTES must be a byte count, got '") +
          v + "'");
  return bytes;
}

// Everything is allocated at construction: the peak is known.
void Exec::sampleDeviceMemory() {}
int64_t Exec::peakDeviceBytes() const {
  return measuredLibraryBytes() + deviceBytes();
}
int64_t Exec::measuredSetupBytes() const { return peakDeviceBytes(); }

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
  if (wInfo[id].masterOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.w, id, out, nullptr);
  std::memcpy(out, impl->w[id].data(), impl->w[id].size() * 4);
}
void Exec::writeWeight(int32_t id, const float *in) {
  if (wInfo[id].masterOnNvme) {
    nvmeTensor(*this, impl->nvme, impl->nvme.w, id, nullptr, in);
    std::vector<float> &c = impl->wCopy[id];
    std::copy(in, in + c.size(), c.begin());
    roundTo16Bit(prog.precision, c.data(), static_cast<int64_t>(c.size()));
    impl->devStale[id] = true;
    return;
  }
  std::memcpy(impl->w[id].data(), in, impl->w[id].size() * 4);
  impl->copyStale[id] = true;
  impl->devStale[id] = true;
}
void Exec::readMomentum(int32_t id, float *out) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.m, id, out, nullptr);
  std::memcpy(out, impl->m[id].data(), impl->m[id].size() * 4);
}
void Exec::writeMomentum(int32_t id, const float *in) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.m, id, nullptr, in);
  std::memcpy(impl->m[id].data(), in, impl->m[id].size() * 4);
}
void Exec::readSecondMoment(int32_t id, float *out) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.v, id, out, nullptr);
  std::memcpy(out, impl->v[id].data(), impl->v[id].size() * 4);
}
void Exec::writeSecondMoment(int32_t id, const float *in) {
  if (wInfo[id].stateOnNvme)
    return nvmeTensor(*this, impl->nvme, impl->nvme.v, id, nullptr, in);
  std::memcpy(impl->v[id].data(), in, impl->v[id].size() * 4);
}
void Exec::openNvme(const std::string &dir) {
  std::string err;
  if (host::hasNvmeState(wInfo) && !impl->nvme.open(prog, wInfo, dir, err))
    fatal(err);
}

/// The elements of weight `id` this rank updates: all, or its slice when
/// the optimizer state is sharded.
static std::pair<int64_t, int64_t> updated(Exec &x, int64_t count) {
  return x.info().shard >= 1 ? x.comm->mySlice(count)
                             : std::pair<int64_t, int64_t>{0, count};
}

void Exec::adam(int32_t id) {
  const AdamParams p = adamParams(id);
  auto [lo, hi] = updated(*this, static_cast<int64_t>(impl->w[id].size()));
  rt::adamUpdate(p, hi - lo, impl->w[id].data() + lo, impl->g[id].data() + lo,
                 impl->m[id].data() + lo, impl->v[id].data() + lo);
  impl->copyStale[id] = true;
}
void Exec::sgd(int32_t id) {
  bool useBuf = prog.hasMomentum && momentum != 0;
  auto [lo, hi] = updated(*this, static_cast<int64_t>(impl->w[id].size()));
  rt::sgdUpdate(hi - lo, lr, momentum, weightDecayOf(id), firstIteration,
                impl->w[id].data() + lo, impl->g[id].data() + lo,
                useBuf ? impl->m[id].data() + lo : nullptr);
  impl->copyStale[id] = true;
}

// Each weight's elements are independent of every other's, so the
// weight-by-weight loop is the multi-tensor launch's result, bit for bit.
void Exec::sgdGroup(std::initializer_list<int32_t> weightIds) {
  for (int32_t id : weightIds)
    sgd(id);
}
void Exec::adamGroup(std::initializer_list<int32_t> weightIds) {
  for (int32_t id : weightIds)
    adam(id);
}

void Exec::gradientsReady(std::initializer_list<int32_t> weightIds) {
  impl->settle();
  if (prog.ranks <= 1)
    return;
  bool last = subBatchIndex + 1 == prog.numSubBatches;
  if (prog.shard < 2 && !last)
    return; // gradients accumulate whole over the sub-batches
  float scale = 1.0f / float(prog.ranks);
  for (int32_t id : weightIds) {
    std::span<float> g = impl->g[id];
    int64_t count = static_cast<int64_t>(g.size());
    if (prog.shard == 0) {
      comm->allReduceSum(g.data(), count);
      for (float &v : g)
        v *= scale;
      continue;
    }
    comm->reduceScatterSum(g.data(), count);
    auto [lo, hi] = comm->mySlice(count);
    if (prog.shard == 2) {
      // Slices accumulate over the sub-batches; the whole gradient starts
      // the next sub-batch from zero, as a fresh bucket would.
      std::vector<float> &acc = impl->gSlice[id];
      for (int64_t i = lo; i < hi; ++i)
        acc[i - lo] = (subBatchIndex ? acc[i - lo] : 0.0f) + g[i];
      std::fill(g.begin(), g.end(), 0.0f);
      if (!last)
        continue;
      std::copy(acc.begin(), acc.begin() + (hi - lo), g.begin() + lo);
    }
    for (int64_t i = lo; i < hi; ++i)
      g[i] *= scale;
  }
}

// Collectives run at once here.
void Exec::waitCollectives() {}

void Exec::gatherWeights() {
  if (prog.ranks <= 1 || prog.shard < 1)
    return;
  for (size_t id = 0; id < wInfo.size(); ++id)
    if (wInfo[id].trainable) {
      comm->allGather(impl->w[id].data(),
                      static_cast<int64_t>(impl->w[id].size()));
      impl->copyStale[id] = true;
    }
}

void Exec::gatherOptimizerState() {
  if (prog.ranks <= 1 || prog.shard < 1)
    return;
  for (size_t id = 0; id < wInfo.size(); ++id)
    for (auto *buf : {&impl->m[id], &impl->v[id]})
      if (!buf->empty())
        comm->allGather(buf->data(), static_cast<int64_t>(buf->size()));
}

// Here, not in Homes.cpp: the trainer calls it, and this object is the one
// its link always has (see the top of this file).
int64_t Exec::nvmeHomeBytes() const {
  return impl->nvme.opened() ? impl->nvme.store->size() : 0;
}

int64_t Exec::hostHomeBytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < wInfo.size(); ++i)
    if (wInfo[i].home == Home::Host)
      total +=
          4 * static_cast<int64_t>(impl->w[i].size() + impl->gStore[i].size() +
                                   impl->m[i].size() + impl->v[i].size()) +
          // A copy rounded from its master is not kept at home: its vector
          // here is what the device would stage it through. An f32 copy's
          // is its master at home.
          (wInfo[i].copyFromMaster || copyIsMaster(prog.precision, wInfo[i])
               ? 0
               : workingCopyBytes(prog.precision) *
                     static_cast<int64_t>(impl->wCopy[i].size()));
  // The pinned staging a master on NVMe is read into on the device backend.
  return total + prog.gradPoolBytes + host::masterStagingBytes(prog, wInfo);
}

} // namespace memfit::rt
