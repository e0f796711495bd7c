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
#include "runtime/emu/EmuImpl.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <vector>

namespace memfit::rt {

Exec::Exec(const ProgramInfo &info, const WeightInfo *weights,
           const HostSlot *slots)
    : prog(info), wInfo(weights, weights + info.numWeights),
      slotInfo(slots, slots + info.numHostSlots), impl(new Impl) {
  impl->precision = info.precision;
  impl->slotBytes = stores16Bit(info.precision) ? 2 : 4;
  impl->arena.assign(static_cast<size_t>(info.arenaBytes / impl->slotBytes + 1),
                     kPoison);
  for (const WeightInfo &wi : wInfo) {
    impl->w.emplace_back(wi.count, 0.0f);
    impl->g.emplace_back(wi.trainable ? wi.count : 0, 0.0f);
    impl->m.emplace_back(wi.trainable && info.hasMomentum ? wi.count : 0, 0.0f);
    impl->v.emplace_back(
        wi.trainable && info.optimizer != Optimizer::SGD ? wi.count : 0, 0.0f);
    impl->gSlice.emplace_back(wi.trainable && info.shard >= 2
                                  ? (wi.count + info.ranks - 1) / info.ranks
                                  : 0,
                              0.0f);
    impl->wCopy.emplace_back(wi.workingCopy ? wi.count : 0, 0.0f);
  }
  impl->copyStale.assign(wInfo.size(), true);
  for (const HostSlot &s : slotInfo)
    impl->slots.emplace_back(impl->real(s.perSample * info.subBatch + s.fixed));
  impl->input.assign(info.batch * info.inputPerSample, 0.0f);
  impl->labels.assign(info.batch * info.labelPerSample * 4, 0);
  impl->events.assign(info.numEvents, {0, 0});
  impl->recorded.assign(info.numEvents, false);
}

Exec::~Exec() = default;

void Exec::fatal(const std::string &what) const {
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
float *Exec::hostInput() { return impl->input.data(); }
void *Exec::hostLabels() { return impl->labels.data(); }
float *Exec::lossValue() { return &impl->loss; }
float Exec::readLoss() { return impl->loss; }

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
      std::memcpy(p.dst, a, im.real(p.bytes)); // read as late as allowed
      for (auto [offset, bytes] : p.thenPoison)
        poison(im, offset, bytes);
    } else if (p.kind == Pending::In)
      std::memcpy(a, p.src, p.realBytes ? p.realBytes : im.real(p.bytes));
    else
      poison(im, p.offset, p.bytes);
    ++im.done[s];
  }
}

static void enqueue(Exec::Impl &im, int s, Pending p) {
  im.settle();
  if (p.kind == Pending::In)
    poison(im, p.offset, p.bytes); // NaN until waited for
  im.queue[s].push_back(p);
  ++im.issued[s];
}

void Exec::copyOut(int64_t offset, int32_t slot) {
  const HostSlot &hs = slotInfo[slot];
  int64_t bytes = hs.perSample * n + hs.fixed;
  enqueue(*impl, CopyOut,
          {Pending::Out, offset, bytes, nullptr, impl->slots[slot].data()});
}

void Exec::copyIn(int32_t slot, int64_t offset) {
  const HostSlot &hs = slotInfo[slot];
  int64_t bytes = hs.perSample * n + hs.fixed;
  enqueue(*impl, CopyIn,
          {Pending::In, offset, bytes, impl->slots[slot].data(), nullptr});
}

void Exec::loadInput(int64_t offset) {
  // The host holds fp32 values or int32 ids, 4 bytes each; a 16-bit
  // program's float input is stored rounded, as the host would convert it.
  int64_t per = prog.inputPerSample * 4;
  float *src = impl->input.data() + prog.inputPerSample * firstSample;
  bool narrow = stores16Bit(prog.precision) && !prog.intInput;
  if (narrow)
    roundTo16Bit(prog.precision, src, prog.inputPerSample * n);
  Pending p{Pending::In, offset, per * n / (narrow ? 2 : 1),
            reinterpret_cast<const char *>(src), nullptr};
  p.realBytes = per * n;
  enqueue(*impl, CopyIn, p);
}

void Exec::loadLabels(int64_t offset) {
  int64_t per = prog.labelPerSample * 4;
  Pending p{Pending::In, offset, per * n,
            impl->labels.data() + per * firstSample, nullptr};
  p.realBytes = per * n;
  enqueue(*impl, CopyIn, p);
}

void Exec::setTask(const char *name) {
  impl->settle();
  task = name;
}

void Exec::record(StreamId s, int32_t event) {
  impl->settle();
  impl->events[event] = {s, impl->issued[s]};
  impl->recorded[event] = true;
}

void Exec::wait(StreamId s, int32_t event) {
  if (!impl->recorded[event])
    fatal("wait for an event that was never recorded");
  impl->settle();
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
  int64_t total = prog.arenaBytes + 4;
  for (size_t i = 0; i < wInfo.size(); ++i)
    total += 4 * (impl->w[i].size() + impl->g[i].size() + impl->m[i].size() +
                  impl->v[i].size()) +
             2 * impl->wCopy[i].size();
  return total;
}

int64_t Exec::measuredDeviceBytes() const { return deviceBytes(); }

void Exec::readWeight(int32_t id, float *out) {
  std::memcpy(out, impl->w[id].data(), impl->w[id].size() * 4);
}
void Exec::writeWeight(int32_t id, const float *in) {
  std::memcpy(impl->w[id].data(), in, impl->w[id].size() * 4);
  impl->copyStale[id] = true;
}
void Exec::readMomentum(int32_t id, float *out) {
  std::memcpy(out, impl->m[id].data(), impl->m[id].size() * 4);
}
void Exec::writeMomentum(int32_t id, const float *in) {
  std::memcpy(impl->m[id].data(), in, impl->m[id].size() * 4);
}
void Exec::readSecondMoment(int32_t id, float *out) {
  std::memcpy(out, impl->v[id].data(), impl->v[id].size() * 4);
}
void Exec::writeSecondMoment(int32_t id, const float *in) {
  std::memcpy(impl->v[id].data(), in, impl->v[id].size() * 4);
}

// --- operations: the reference kernels, run at issue ---

void Exec::convForward(const ConvParams &p, int32_t, const float *x,
                       const float *w, const float *b, float *y, int64_t wsOff,
                       int64_t wsBytes) {
  x = impl->tensorCoreInput(0, x, n * p.cin * p.hin * p.win);
  w = impl->tensorCoreInput(1, w, convWeightCount(p));
  rt::convForward(p, n, x, w, b, y);
  if (wsBytes > 0)
    poison(*impl, wsOff, wsBytes);
}
void Exec::convBackwardData(const ConvParams &p, int32_t, const float *w,
                            const float *dy, float *dx, bool acc, int64_t wsOff,
                            int64_t wsBytes) {
  w = impl->tensorCoreInput(1, w, convWeightCount(p));
  dy = impl->tensorCoreInput(2, dy, n * p.cout * p.hout * p.wout);
  rt::convBackwardData(p, n, w, dy, dx, acc);
  if (wsBytes > 0)
    poison(*impl, wsOff, wsBytes);
}
void Exec::convBackwardFilter(const ConvParams &p, int32_t, const float *x,
                              const float *dy, float *dw, float *db, bool acc,
                              int64_t wsOff, int64_t wsBytes) {
  x = impl->tensorCoreInput(0, x, n * p.cin * p.hin * p.win);
  dy = impl->tensorCoreInput(2, dy, n * p.cout * p.hout * p.wout);
  rt::convBackwardFilter(p, n, x, dy, dw, db, acc);
  if (wsBytes > 0)
    poison(*impl, wsOff, wsBytes);
}
void Exec::convTransposeBackwardData(const ConvParams &p, const float *dy,
                                     const float *w, float *dx, bool acc) {
  if (!dx)
    return;
  dy = impl->tensorCoreInput(0, dy, n * p.cin * p.hin * p.win);
  w = impl->tensorCoreInput(1, w, convWeightCount(p));
  if (!acc) {
    rt::convForward(p, n, dy, w, nullptr, dx);
    return;
  }
  std::vector<float> t(static_cast<size_t>(n * p.cout * p.hout * p.wout));
  rt::convForward(p, n, dy, w, nullptr, t.data());
  for (size_t i = 0; i < t.size(); ++i)
    dx[i] += t[i];
}
void Exec::poolForward(const PoolParams &p, const float *x, float *y) {
  rt::poolForward(p, n, x, y);
}
void Exec::poolBackward(const PoolParams &p, const float *x, const float *y,
                        const float *dy, float *dx, bool acc) {
  rt::poolBackward(p, n, x, y, dy, dx, acc);
}
void Exec::gapForward(int64_t c, int64_t spatial, const float *x, float *y) {
  rt::globalAvgPoolForward(n, c, spatial, x, y);
}
void Exec::gapBackward(int64_t c, int64_t spatial, const float *dy, float *dx,
                       bool acc) {
  rt::globalAvgPoolBackward(n, c, spatial, dy, dx, acc);
}
void Exec::actForward(const ActParams &p, int64_t perSample, const float *x,
                      float *y) {
  rt::activationForward(p, perSample * n, x, y);
}
void Exec::actBackward(const ActParams &p, int64_t perSample, const float *src,
                       const float *dy, float *dx, bool acc) {
  rt::activationBackward(p, perSample * n, src, dy, dx, acc);
}
void Exec::bnForward(const BatchNormParams &p, const float *x,
                     const float *scale, const float *bias, float *runMean,
                     float *runVar, float *y, float *saved,
                     bool updateRunning) {
  rt::batchNormForward(p, n, x, scale, bias, runMean, runVar, y, saved,
                       saved + p.c, updateRunning);
}
void Exec::bnApply(const BatchNormParams &p, const float *x, const float *scale,
                   const float *bias, const float *saved, float *y) {
  rt::batchNormApply(p, n, x, scale, bias, saved, saved + p.c, y);
}
void Exec::bnBackwardData(const BatchNormParams &p, const float *x,
                          const float *scale, const float *saved,
                          const float *dy, float *dx, bool acc) {
  rt::batchNormBackwardData(p, n, x, scale, saved, saved + p.c, dy, dx, acc);
}
void Exec::bnBackwardWeight(const BatchNormParams &p, const float *x,
                            const float *saved, const float *dy, float *dscale,
                            float *dbias, bool acc) {
  rt::batchNormBackwardWeight(p, n, x, saved, saved + p.c, dy, dscale, dbias,
                              acc);
}
void Exec::bnStatistics(const BatchNormParams &p, const float *x, float *stats,
                        bool acc) {
  rt::batchNormChunkStatistics(p, n, x, stats, acc);
}
void Exec::bnFinalize(const BatchNormParams &p, float *stats, float *runMean,
                      float *runVar) {
  rt::batchNormFinalize(p, stats, runMean, runVar);
}
void Exec::bnBackwardDataBatch(const BatchNormParams &p, const float *x,
                               const float *scale, const float *saved,
                               const float *dscale, const float *dbias,
                               const float *dy, float *dx, bool acc) {
  if (!dx)
    return;
  rt::batchNormBackwardDataBatch(p, n, double(prog.batch * p.spatial), x, scale,
                                 saved, dscale, dbias, dy, dx, acc);
}
void Exec::lrnForward(const LRNParams &p, const float *x, float *y) {
  rt::lrnForward(p, n, x, y);
}
void Exec::lrnBackward(const LRNParams &p, const float *x, const float *y,
                       const float *dy, float *dx, bool acc) {
  rt::lrnBackward(p, n, x, y, dy, dx, acc);
}
void Exec::dropoutForward(const DropoutParams &p, uint64_t taskKey,
                          const float *x, float *y) {
  rt::dropoutForward(p, n, dropoutKey(seed, iteration, taskKey), firstSample, x,
                     y);
}
void Exec::dropoutBackward(const DropoutParams &p, uint64_t taskKey,
                           const float *dy, float *dx, bool acc) {
  rt::dropoutBackward(p, n, dropoutKey(seed, iteration, taskKey), firstSample,
                      dy, dx, acc);
}
void Exec::gemmForward(const GemmParams &p, const float *x, const float *w,
                       const float *b, float *y) {
  x = impl->tensorCoreInput(0, x, n * p.rows * p.k);
  w = impl->tensorCoreInput(1, w, p.k * p.m);
  rt::gemmForward(p, n * p.rows, x, w, b, y);
}
void Exec::gemmBackwardData(const GemmParams &p, const float *w,
                            const float *dy, float *dx, bool acc) {
  w = impl->tensorCoreInput(1, w, p.k * p.m);
  dy = impl->tensorCoreInput(2, dy, n * p.rows * p.m);
  rt::gemmBackwardData(p, n * p.rows, w, dy, dx, acc);
}
void Exec::gemmBackwardWeight(const GemmParams &p, const float *x,
                              const float *dy, float *dw, float *db, bool acc) {
  x = impl->tensorCoreInput(0, x, n * p.rows * p.k);
  dy = impl->tensorCoreInput(2, dy, n * p.rows * p.m);
  rt::gemmBackwardWeight(p, n * p.rows, x, dy, dw, db, acc);
}
void Exec::binaryForward(const BinaryParams &p, const float *a, const float *b,
                         float *y) {
  rt::binaryForward(p, n, a, b, y);
}
void Exec::binaryBackward(const BinaryParams &p, const float *a, const float *b,
                          const float *dy, float *da, float *db, bool accA,
                          bool accB) {
  rt::binaryBackward(p, n, a, b, dy, da, db, accA, accB);
}
void Exec::concatForward(int64_t numInputs, const int64_t *parts,
                         const float *const *inputs, float *y, int64_t rows) {
  rt::concatForward(n * rows, numInputs, parts, inputs, y);
}
void Exec::concatBackward(int64_t numInputs, const int64_t *parts,
                          const float *dy, float *const *dInputs,
                          const bool *acc, int64_t rows) {
  rt::concatBackward(n * rows, numInputs, parts, dy, dInputs, acc);
}
void Exec::padForward(const PadParams &p, const float *x, float *y) {
  rt::padForward(p, n, x, y);
}
void Exec::padBackward(const PadParams &p, const float *dy, float *dx,
                       bool acc) {
  rt::padBackward(p, n, dy, dx, acc);
}
void Exec::softmaxForward(int64_t features, bool log, const float *x, float *y,
                          int64_t rows) {
  rt::softmaxForward(n * rows, features, log, x, y);
}
void Exec::softmaxBackward(int64_t features, bool log, const float *y,
                           const float *dy, float *dx, bool acc, int64_t rows) {
  rt::softmaxBackward(n * rows, features, log, y, dy, dx, acc);
}
void Exec::transposeForward(const TransposeParams &p, const float *x,
                            float *y) {
  rt::transposeForward(p, n, x, y);
}
void Exec::transposeBackward(const TransposeParams &p, const float *dy,
                             float *dx, bool acc) {
  rt::transposeBackward(p, n, dy, dx, acc);
}
void Exec::sliceForward(const SliceParams &p, const float *x, float *y) {
  rt::sliceForward(p, n, x, y);
}
void Exec::expandForward(const ExpandParams &p, const float *x, float *y) {
  rt::expandForward(p, n, x, y);
}
void Exec::expandBackward(const ExpandParams &p, const float *dy, float *dx,
                          bool acc) {
  rt::expandBackward(p, n, dy, dx, acc);
}
void Exec::sliceBackward(const SliceParams &p, const float *dy, float *dx,
                         bool acc) {
  rt::sliceBackward(p, n, dy, dx, acc);
}
void Exec::attentionForward(const AttentionParams &p, uint64_t taskKey,
                            const float *q, const float *k, const float *v,
                            const float *mask, float *o, float *lse) {
  rt::attentionForward(p, n, dropoutKey(seed, iteration, taskKey), firstSample,
                       q, k, v, mask, o, lse);
}
void Exec::attentionBackward(const AttentionParams &p, uint64_t taskKey,
                             const float *q, const float *k, const float *v,
                             const float *mask, const float *o,
                             const float *lse, const float *dO, float *dq,
                             float *dk, float *dv, bool accQ, bool accK,
                             bool accV) {
  rt::attentionBackward(p, n, dropoutKey(seed, iteration, taskKey), firstSample,
                        q, k, v, mask, o, lse, dO, dq, dk, dv, accQ, accK,
                        accV);
}
void Exec::batchMatMulForward(const BatchMatMulParams &p, const float *a,
                              const float *b, float *y) {
  a = impl->tensorCoreInput(0, a, n * p.aBatch * p.m * p.k);
  b = impl->tensorCoreInput(1, b, n * p.bBatch * p.k * p.cols);
  rt::batchMatMulForward(p, n, a, b, y);
}
void Exec::batchMatMulBackward(const BatchMatMulParams &p, const float *a,
                               const float *b, const float *dy, float *da,
                               float *db, bool accA, bool accB) {
  // The sum of a shared operand's gradients compares a with b: keep it.
  bool same = a == b;
  a = impl->tensorCoreInput(0, a, n * p.aBatch * p.m * p.k);
  b = same ? a : impl->tensorCoreInput(1, b, n * p.bBatch * p.k * p.cols);
  dy = impl->tensorCoreInput(2, dy, n * p.batch * p.m * p.cols);
  rt::batchMatMulBackward(p, n, a, b, dy, da, db, accA, accB);
}
void Exec::layerNormForward(const LayerNormParams &p, const float *x,
                            const float *scale, const float *bias, float *y) {
  rt::layerNormForward(p, n, x, scale, bias, y);
}
void Exec::layerNormBackwardData(const LayerNormParams &p, const float *x,
                                 const float *scale, const float *dy, float *dx,
                                 bool acc) {
  rt::layerNormBackwardData(p, n, x, scale, dy, dx, acc);
}
void Exec::layerNormBackwardWeight(const LayerNormParams &p, const float *x,
                                   const float *dy, float *dscale, float *dbias,
                                   bool acc) {
  rt::layerNormBackwardWeight(p, n, x, dy, dscale, dbias, acc);
}
void Exec::resizeForward(const ResizeParams &p, const float *x, float *y) {
  rt::resizeForward(p, n, x, y);
}
void Exec::resizeBackward(const ResizeParams &p, const float *dy, float *dx,
                          bool acc) {
  rt::resizeBackward(p, n, dy, dx, acc);
}
void Exec::whereForward(const WhereParams &p, const float *mask, const float *x,
                        float *y) {
  rt::whereForward(p, n, mask, x, y);
}
void Exec::whereBackward(const WhereParams &p, const float *mask,
                         const float *dy, float *dx, bool acc) {
  rt::whereBackward(p, n, mask, dy, dx, acc);
}
void Exec::embeddingForward(const EmbeddingParams &p, const int32_t *ids,
                            const float *fixedIds, const float *table,
                            float *y) {
  if (ids && !rt::validateIds(n * p.rows, p.vocab, ids))
    fatal("a token id is outside [0, " + std::to_string(p.vocab) + ")");
  rt::embeddingForward(p, n, ids, fixedIds, table, y);
}
void Exec::embeddingBackward(const EmbeddingParams &p, const int32_t *ids,
                             const float *fixedIds, const float *dy,
                             float *dtable, bool acc) {
  rt::embeddingBackward(p, n, ids, fixedIds, dy, dtable, acc);
}
void Exec::copy(int64_t perSample, const float *x, float *y) {
  if (x != y)
    std::memmove(y, x, perSample * n * 4);
}
void Exec::accumulateInto(int64_t perSample, const float *x, float *y) {
  rt::accumulate(perSample * n, x, y);
}
void Exec::loss(const float *logits, const void *labels, float *loss,
                float *dlogits) {
  if (firstSample == 0) // the first sub-batch or chunk starts the sum
    *loss = 0;
  if (prog.mseLoss) {
    rt::meanSquaredError(n, prog.labelPerSample, prog.batch, logits,
                         static_cast<const float *>(labels), loss, dlogits);
    scaleLossGradient(dlogits, n * prog.labelPerSample, lossScale);
    return;
  }
  auto *lab = static_cast<const int32_t *>(labels);
  if (!rt::validateLabels(n * prog.labelPerSample, prog.classes, lab))
    fatal("a label is outside [0, " + std::to_string(prog.classes) + ")");
  rt::softmaxCrossEntropy({prog.lossOuter, prog.classes, prog.lossInner}, n,
                          prog.batch, logits, lab, loss, dlogits);
  scaleLossGradient(dlogits, n * prog.lossOuter * prog.classes * prog.lossInner,
                    lossScale);
}
/// The elements of weight `id` this rank updates: all, or its slice when
/// the optimizer state is sharded.
static std::pair<int64_t, int64_t> updated(Exec &x, int64_t count) {
  return x.info().shard >= 1 ? x.comm->mySlice(count)
                             : std::pair<int64_t, int64_t>{0, count};
}

void Exec::adam(int32_t id) {
  AdamParams p{lr,
               beta1,
               beta2,
               eps,
               weightDecay,
               step,
               prog.optimizer == Optimizer::AdamW};
  auto [lo, hi] = updated(*this, static_cast<int64_t>(impl->w[id].size()));
  rt::adamUpdate(p, hi - lo, impl->w[id].data() + lo, impl->g[id].data() + lo,
                 impl->m[id].data() + lo, impl->v[id].data() + lo);
  impl->copyStale[id] = true;
}
void Exec::sgd(int32_t id) {
  bool useBuf = prog.hasMomentum && momentum != 0;
  auto [lo, hi] = updated(*this, static_cast<int64_t>(impl->w[id].size()));
  rt::sgdUpdate(hi - lo, lr, momentum, weightDecay, firstIteration,
                impl->w[id].data() + lo, impl->g[id].data() + lo,
                useBuf ? impl->m[id].data() + lo : nullptr);
  impl->copyStale[id] = true;
}

} // namespace memfit::rt
