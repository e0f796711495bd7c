//===- CostTable.h - Task costs at one sub-batch ----------------*- C++ -*-===//
//
// The planner's whole view of the device: for every task, the algorithms it
// may run with their time and workspace at sub-batch b, and the cost of host
// transfers. A CostModel fills it (analytic or measured); tests write it as
// a literal. Algorithms are listed fastest first; exactly one per task is
// the zero-workspace baseline.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_COSTTABLE_H
#define MEMFIT_COMPILER_IR_COSTTABLE_H

#include "compiler/ir/TaskGraph.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace memfit {

struct AlgoCost {
  int32_t algo = 0;      // the cost model's id (0 for non-convolutions)
  std::string name;      // e.g. "implicit_gemm"
  double seconds = 0;    // run time at the table's sub-batch
  int64_t workspace = 0; // bytes at the table's sub-batch
  bool baseline = false; // the zero-workspace algorithm
};

/// Ring collectives among data-parallel ranks (NCCL's ring algorithm):
/// each of the R ranks sends (R - 1) / R of the buffer per phase, at
/// `bytesPerSecond` per direction, with `stepLatencySeconds` per ring step.
struct CollectiveCost {
  int32_t ranks = 1;
  double bytesPerSecond = 0;
  double stepLatencySeconds = 0;
  std::string link; // what carries it: "nvlink", "pcie", "infiniband"

  double phaseSeconds(int64_t bytes) const {
    if (ranks <= 1)
      return 0;
    double r = ranks;
    return (r - 1) * stepLatencySeconds +
           (r - 1) / r * static_cast<double>(bytes) / bytesPerSecond;
  }
  double allReduceSeconds(int64_t bytes) const {
    return 2 * phaseSeconds(bytes);
  }
  double reduceScatterSeconds(int64_t bytes) const {
    return phaseSeconds(bytes);
  }
  double allGatherSeconds(int64_t bytes) const { return phaseSeconds(bytes); }
};

struct CostTable {
  int64_t subBatch = 1;
  CollectiveCost collective;
  std::vector<std::vector<AlgoCost>> tasks; // per TaskId, fastest first
  double d2hBytesPerSecond = 12e9, h2dBytesPerSecond = 12e9;
  double copyLatencySeconds = 10e-6; // per transfer
  /// The host optimizer's rate (the updates of weights homed on the host,
  /// run by its cores): parameters per second; 0 where the device states
  /// no host, and then nothing may be homed there.
  double hostUpdateParamsPerSecond = 0;
  /// The NVMe drive's rates (bytes/s) for optimizer state homed there; 0
  /// where the device states none, and then nothing may be homed there.
  double nvmeReadBytesPerSecond = 0, nvmeWriteBytesPerSecond = 0;
  /// Device memory's and the host's DRAM's rates (bytes/s) and one kernel
  /// launch, for the passes over every gradient that clipping adds.
  double deviceBytesPerSecond = 0, hostBytesPerSecond = 0;
  double launchSeconds = 0;

  double copyOutSeconds(int64_t bytes) const {
    return copyLatencySeconds + static_cast<double>(bytes) / d2hBytesPerSecond;
  }
  double copyInSeconds(int64_t bytes) const {
    return copyLatencySeconds + static_cast<double>(bytes) / h2dBytesPerSecond;
  }
  /// A copy of `bytes` of block `b` into the arena: a working copy rounded
  /// from its master (TaskGraph::roundsFromMaster) sends the master and,
  /// on the same stream, rounds it (reads the master, writes the copy in
  /// device memory), first reading it from the drive where it lives on
  /// NVMe; anything else is copyInSeconds.
  double copyInSeconds(const TaskGraph &tg, BlockId b, int64_t bytes) const {
    const int64_t sent = tg.linkBytes(b, bytes);
    double t = copyInSeconds(sent);
    if (sent != bytes && deviceBytesPerSecond > 0)
      t += static_cast<double>(sent + bytes) / deviceBytesPerSecond;
    return t + nvmeCopyReadSeconds(tg, b);
  }
  /// The drive's part of a copy in of block `b` (a master on NVMe read into
  /// pinned staging, piece by piece, each piece then sent: the drive and
  /// the link take turns, so their times add); 0 for any other block.
  double nvmeCopyReadSeconds(const TaskGraph &tg, BlockId b) const {
    const int64_t read = tg.nvmeCopyReadBytes(b);
    return read > 0 && nvmeReadBytesPerSecond > 0
               ? static_cast<double>(read) / nvmeReadBytesPerSecond
               : 0.0;
  }
  /// A host update of `params` parameters whose optimizer state, `nvme`
  /// bytes of it, lives on NVMe: the host optimizer streams it through in
  /// chunks on every thread, so the drive's read and write of the state
  /// overlap the arithmetic of other chunks but not each other (one drive).
  double hostUpdateSeconds(int64_t params, int64_t nvme = 0) const {
    double compute = static_cast<double>(params) / hostUpdateParamsPerSecond;
    return nvme <= 0 ? compute : std::max(compute, nvmeUpdateSeconds(nvme));
  }
  /// The drive's part of a host update whose `nvme` bytes live on NVMe:
  /// read and written back.
  double nvmeUpdateSeconds(int64_t nvme) const {
    if (nvme <= 0)
      return 0;
    return static_cast<double>(nvme) / nvmeReadBytesPerSecond +
           static_cast<double>(nvme) / nvmeWriteBytesPerSecond;
  }
  /// Gradient clipping by global norm (TaskGraph::clipGradNorm): after
  /// the rounds every gradient is read once for its norm and scaled in
  /// place (read and written) where it lives, the GPU's by two multi-tensor
  /// launches with a copy of the sums between, the host's by its cores; 0
  /// when the plan does not clip. The parts on the GPU and the host run one
  /// after the other (the norm joins them).
  double gradientClipSeconds(const TaskGraph &tg) const {
    if (!(tg.clipGradNorm > 0))
      return 0;
    int64_t gpu = 0, host = 0;
    for (BlockId b = 0; b < static_cast<BlockId>(tg.blocks.size()); ++b) {
      if (tg.blocks[b].kind != BlockKind::WeightGrad)
        continue;
      (tg.homeOf(b) == Tier::Gpu ? gpu : host) += tg.blocks[b].bytesAt(1);
    }
    auto over = [](int64_t bytes, double rate) {
      return bytes > 0 && rate > 0 ? 3.0 * static_cast<double>(bytes) / rate
                                   : 0.0;
    };
    return over(gpu, deviceBytesPerSecond) + over(host, hostBytesPerSecond) +
           (gpu > 0 ? 2.0 * launchSeconds + copyLatencySeconds : 0.0);
  }
  const AlgoCost &fastest(TaskId t) const { return tasks[t].front(); }
  const AlgoCost &baseline(TaskId t) const {
    for (const AlgoCost &a : tasks[t])
      if (a.baseline)
        return a;
    return tasks[t].front();
  }
  const AlgoCost *find(TaskId t, int32_t algo) const {
    for (const AlgoCost &a : tasks[t])
      if (a.algo == algo)
        return &a;
    return nullptr;
  }
};

} // namespace memfit

#endif
