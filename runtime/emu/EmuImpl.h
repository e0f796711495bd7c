//===- EmuImpl.h - The CPU emulation's state ------------------*- C++ -*-===//
//
// What the emulation's Exec holds, shared by its files: Exec.cpp (memory,
// streams, updates, collectives), Ops.cpp (the operations) and
// Precision.cpp (16-bit storage, TF32 inputs, the loss scale).
//
// Arena addressing: the arena is a vector of floats, one float slot per
// `slotBytes` planned bytes: 4 in fp32 and tf32 programs, 2 in bf16 and
// fp16 ones. A 16-bit block of k elements then fills exactly the k slots
// its planned bytes map to and holds each element as the fp32 value of its
// 16-bit pattern (exact), so a wrong offset or an overlap corrupts real
// data as in fp32 programs. A 4-byte block in a 16-bit program fills the
// first half of its slots.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_EMU_EMUIMPL_H
#define MEMFIT_RUNTIME_EMU_EMUIMPL_H

#include "runtime/Exec.h"
#include "runtime/host/HostOptimizer.h"
#include "runtime/host/NvmeState.h"

#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace memfit::rt {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

struct Pending {
  enum Kind { Out, In, Poison } kind;
  int64_t offset = 0, bytes = 0;
  const char *src = nullptr; // In: host source
  char *dst = nullptr;       // Out: host destination
  // Out: ranges released on another stream while this copy was pending;
  // poisoned once it has read them.
  std::vector<std::pair<int64_t, int64_t>> thenPoison = {};
  // Real bytes to copy when the host side is smaller than the planned
  // range's real bytes (4-byte host values into 16-bit slots of the input,
  // ids and labels; a homed fp32 tensor in a 16-bit program, which fills
  // the first half of its slots); 0: the range's.
  int64_t realBytes = 0;
};

struct Exec::Impl {
  std::vector<float> arena;
  int64_t slotBytes = 4; // planned bytes per float slot of the arena
  std::vector<std::vector<float>> w, m, v;
  /// Each weight's gradient: its own buffer in gStore, or (a gradient
  /// homed on the host that streams through the pool, WeightInfo::
  /// gradPoolOffset) its range of gradPool.
  std::vector<std::span<float>> g;
  std::vector<std::vector<float>> gStore;
  std::vector<float> gradPool;
  /// Shard 2: this rank's slice of each gradient, summed over the ranks and
  /// accumulated over the sub-batches.
  std::vector<std::vector<float>> gSlice;
  std::vector<std::vector<char>> slots;
  std::vector<float> input[kHostBatchBuffers];
  std::vector<char> labels[kHostBatchBuffers];
  int32_t batch = 0; // the buffer loadInput and loadLabels read
  float loss = 0;
  EvalSums evalSums;
  // Per copy stream: issued copies, how many are complete.
  std::deque<Pending> queue[3];
  int64_t issued[3] = {0, 0, 0}, done[3] = {0, 0, 0};
  // Per event: stream and the count of that stream's copies it covers.
  std::vector<std::pair<int, int64_t>> events;
  std::vector<bool> recorded;

  // --- weights homed on the host (Homes.cpp) ---
  /// Made when a weight is homed on the host; w, g, m, v and wCopy of such
  /// a weight are its host memory.
  std::unique_ptr<host::HostOptimizer> hostOpt;
  /// Per weight: a host update submitted and not yet joined.
  std::vector<bool> hostPending;
  /// Per weight: its submitted host update, and whether a copy stream has
  /// waited for it to finish (waitHost) since.
  std::vector<host::JobId> hostJob;
  std::vector<bool> hostWaited;
  /// The optimizer state homed on NVMe (Exec::openNvme); m and v of such a
  /// weight are empty.
  host::NvmeState nvme;

  // --- precision (Precision.cpp) ---
  Precision precision = Precision::FP32;
  /// 16-bit working copies; stale after the master changed.
  std::vector<std::vector<float>> wCopy;
  std::vector<bool> copyStale;
  /// The device's copy of a working copy kept there while its weight is
  /// homed on the host (WeightInfo::copyOnGpu); stale from the upload
  /// after each host update (joinHost) or weight write until its next read.
  std::vector<std::vector<float>> wCopyDev;
  std::vector<bool> devStale;
  /// 16-bit blocks handed to the operation now running: rounded when it
  /// is done (settle).
  std::vector<std::pair<float *, int64_t>> stores16;
  /// TF32: rounded copies of a tensor-core operation's inputs.
  std::vector<float> tf32In[3];

  /// Real bytes of the emulation for planned arena bytes.
  int64_t real(int64_t planned) const { return planned * 4 / slotBytes; }
  /// Rounds the 16-bit blocks the last operation received.
  void settle();
  /// TF32 programs: `count` values at p rounded to TF32 in scratch k (what
  /// a tensor core reads); others: p itself.
  const float *tensorCoreInput(int k, const float *p, int64_t count);
};

void poison(Exec::Impl &im, int64_t offset, int64_t bytes);
/// Issues a copy or a poisoning on copy stream s (Exec.cpp).
void enqueue(Exec::Impl &im, int s, Pending p);
/// Completes everything issued on copy stream s so far (Exec.cpp).
void completeStream(Exec::Impl &im, int s);
/// Rounds `count` values to the program's 16-bit format.
void roundTo16Bit(Precision p, float *values, int64_t count);
/// The loss gradient times the loss scale (fp16), before it is stored.
void scaleLossGradient(float *d, int64_t count, float scale);
int64_t convWeightCount(const ConvParams &p);

} // namespace memfit::rt

#endif
