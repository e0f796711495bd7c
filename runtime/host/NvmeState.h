//===- NvmeState.h - Where each weight's state lies in the NVMe file -*- C++
//-*-===//
//
// The layout of the NVMe tier's file (NvmeStore.h): one kAlign-aligned
// region per tensor the plan homes there (the moments of a weight with
// WeightInfo::stateOnNvme, the master of one with masterOnNvme), in weight
// order, and whole-tensor transfers for start-up and checkpoints. Both
// backends keep one and hand its offsets to the host optimizer.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_HOST_NVMESTATE_H
#define MEMFIT_RUNTIME_HOST_NVMESTATE_H

#include "runtime/Exec.h"
#include "runtime/host/NvmeStore.h"

#include <memory>
#include <string>
#include <vector>

namespace memfit::rt::host {

/// Whether the program keeps any tensor (optimizer state, a master) on
/// NVMe.
bool hasNvmeState(const std::vector<WeightInfo> &weights);

/// Pinned host bytes a master on NVMe is read into on its way to the
/// device (a weight with both WeightInfo::copyFromMaster and masterOnNvme):
/// ProgramInfo::copyStagingBytes in whole transfers; 0 when no weight reads
/// its master from the drive.
int64_t masterStagingBytes(const ProgramInfo &p,
                           const std::vector<WeightInfo> &weights);

struct NvmeState {
  std::unique_ptr<NvmeStore> store;
  /// Per weight, the byte offsets of its master, momentum and second
  /// moment in the store; -1 where the weight keeps none there.
  std::vector<int64_t> w, m, v;

  /// Lays the state out and opens the file in `dir` (NvmeStore::open's
  /// errors, and a program without a directory).
  bool open(const ProgramInfo &p, const std::vector<WeightInfo> &weights,
            const std::string &dir, std::string &err);
  bool opened() const { return store != nullptr; }
  /// `count` floats of the tensor at `offset`, through an aligned buffer;
  /// false on an I/O error (store->error() says which).
  bool readTensor(int64_t offset, int64_t count, float *out);
  bool writeTensor(int64_t offset, int64_t count, const float *in);
  /// Reads (`out`) or writes (`in`) the whole tensor of weight `id` of
  /// `count` floats whose offsets are `at` (w, m or v), for start-up and
  /// checkpoints. "" on success, else what went wrong (no such tensor, or
  /// the store's I/O error).
  std::string transfer(const std::vector<int64_t> &at, int32_t id,
                       int64_t count, float *out, const float *in);
};

} // namespace memfit::rt::host

#endif
