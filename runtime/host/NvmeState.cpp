//===- NvmeState.cpp - Where each weight's state lies in the NVMe file ----===//
#include "runtime/host/NvmeState.h"

#include <algorithm>
#include <cstring>

namespace memfit::rt::host {

int64_t masterStagingBytes(const ProgramInfo &p,
                           const std::vector<WeightInfo> &weights) {
  for (const WeightInfo &w : weights)
    if (w.copyFromMaster && w.masterOnNvme)
      return NvmeStore::regionBytes(p.copyStagingBytes);
  return 0;
}

bool hasNvmeState(const std::vector<WeightInfo> &weights) {
  return std::any_of(weights.begin(), weights.end(), [](const WeightInfo &w) {
    return w.stateOnNvme || w.masterOnNvme;
  });
}

bool NvmeState::open(const ProgramInfo &p,
                     const std::vector<WeightInfo> &weights,
                     const std::string &dir, std::string &err) {
  if (dir.empty()) {
    err = "the plan keeps weights' tensors on NVMe and no directory was "
          "named: give --nvme DIR";
    return false;
  }
  // The search moves every homed weight's state before any master, so
  // the update streams a stored master with stored state (HostOptimizer's
  // NVMe jobs take both from the file or neither).
  const bool hasState = p.hasMomentum || p.optimizer != Optimizer::SGD;
  for (const WeightInfo &wi : weights)
    if (wi.masterOnNvme && !wi.stateOnNvme && hasState) {
      err = std::string("weight '") + wi.onnxName +
            "' has its master on NVMe and its optimizer state in memory, "
            "which no plan does";
      return false;
    }
  w.assign(weights.size(), -1);
  m.assign(weights.size(), -1);
  v.assign(weights.size(), -1);
  int64_t end = 0;
  for (size_t id = 0; id < weights.size(); ++id) {
    const WeightInfo &wi = weights[id];
    if (!wi.trainable)
      continue;
    const int64_t region = NvmeStore::regionBytes(wi.count * 4);
    if (wi.masterOnNvme) {
      w[id] = end;
      end += region;
    }
    if (!wi.stateOnNvme)
      continue;
    if (p.hasMomentum) {
      m[id] = end;
      end += region;
    }
    if (p.optimizer != Optimizer::SGD) {
      v[id] = end;
      end += region;
    }
  }
  store = NvmeStore::open(dir, end, err);
  return store != nullptr;
}

bool NvmeState::readTensor(int64_t offset, int64_t count, float *out) {
  AlignedBuffer buf = alignedFloats(count);
  if (!store->read(offset, buf.get(), NvmeStore::regionBytes(count * 4)))
    return false;
  std::memcpy(out, buf.get(), static_cast<size_t>(count) * 4);
  return true;
}

bool NvmeState::writeTensor(int64_t offset, int64_t count, const float *in) {
  const int64_t bytes = NvmeStore::regionBytes(count * 4);
  AlignedBuffer buf = alignedFloats(count);
  std::memset(buf.get(), 0, static_cast<size_t>(bytes));
  std::memcpy(buf.get(), in, static_cast<size_t>(count) * 4);
  return store->write(offset, buf.get(), bytes);
}

std::string NvmeState::transfer(const std::vector<int64_t> &at, int32_t id,
                                int64_t count, float *out, const float *in) {
  if (!opened() || id < 0 || id >= (int32_t)at.size() || at[id] < 0)
    return "weight " + std::to_string(id) +
           " has no such tensor on NVMe (Exec::openNvme not called?)";
  bool ok =
      out ? readTensor(at[id], count, out) : writeTensor(at[id], count, in);
  return ok ? std::string() : store->error();
}

} // namespace memfit::rt::host
