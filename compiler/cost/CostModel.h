//===- CostModel.h - Task time, workspace and transfer cost -----*- C++ -*-===//
//
// The one interface the planner asks about costs: the algorithms a task may
// use (for convolutions the cuDNN algorithms of its direction, the
// zero-workspace baseline marked, as moDNN does; one algorithm, id 0, for
// every other task), the time and workspace of (task, algorithm, sub-batch),
// and the time of a host-device copy.
//
// Two implementations: the analytic model (AnalyticCost.h) from a DeviceSpec,
// and the profiled model, which answers from a measured profile entry by
// entry and falls back to the analytic model for what the profile lacks,
// counting every fallback so the driver can report it.
//
// Guarantees: taskSeconds is non-decreasing in b and has a positive
// per-kernel floor, so K sub-batches always cost at least K launches; the
// baseline's analytic workspace is zero; results depend only on the task's
// kind, op signature, algorithm and b (never on op names or pointers).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_COSTMODEL_H
#define MEMFIT_COMPILER_COST_COSTMODEL_H

#include "compiler/cost/DeviceSpec.h"
#include "compiler/cost/Profile.h"
#include "compiler/ir/CostTable.h"
#include "compiler/ir/TaskGraph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memfit {

enum class CopyDirection : uint8_t { HostToDevice, DeviceToHost };

struct CopyRates {
  double h2dBytesPerSecond = 0, d2hBytesPerSecond = 0;
  double latencySeconds = 0; // fixed cost of one copy
};

struct AlgoChoice {
  int id = 0;            // cuDNN algorithm id for conv tasks, 0 otherwise
  std::string_view name; // "implicit_gemm", "winograd", ...; "default"
  bool baseline = false; // zero-workspace fallback; exactly one per task
  bool deterministic = true;
};

/// How a profiled model answered so far: distinct (task kind, signature,
/// sub-batch) queries found measured, interpolated, or missing (analytic).
struct ProfileUsage {
  bool hasProfile = false;
  size_t exact = 0, interpolated = 0, missing = 0;
  /// Up to a few missing queries, sorted, for the message.
  std::vector<std::string> missingExamples;
};

class CostModel {
public:
  virtual ~CostModel();

  /// Algorithms task `t` may use, ascending ids, exactly one baseline.
  virtual std::vector<AlgoChoice> algorithms(const TaskGraph &tg,
                                             TaskId t) const = 0;
  /// Seconds task `t` takes with algorithm `algo` at sub-batch `b`.
  virtual double taskSeconds(const TaskGraph &tg, TaskId t, int algo,
                             int64_t b) const = 0;
  /// Workspace bytes task `t` needs with `algo` at sub-batch `b`.
  virtual int64_t workspaceBytes(const TaskGraph &tg, TaskId t, int algo,
                                 int64_t b) const = 0;
  /// Pinned host-device copy rates (effective, i.e. what copies reach).
  virtual CopyRates copyRates() const = 0;
  /// Seconds one copy of `bytes` takes on its direction's copy engine:
  /// latency + bytes / rate, zero for no bytes.
  double transferSeconds(int64_t bytes, CopyDirection d) const;
  /// Fallback statistics; hasProfile is false for the analytic model.
  virtual ProfileUsage profileUsage() const { return {}; }

  const DeviceSpec &device() const { return spec; }
  /// The baseline algorithm of task `t`.
  AlgoChoice baseline(const TaskGraph &tg, TaskId t) const;
  /// The fastest algorithm at b (ties: smaller workspace, then lower id).
  AlgoChoice fastest(const TaskGraph &tg, TaskId t, int64_t b) const;

protected:
  explicit CostModel(DeviceSpec spec) : spec(std::move(spec)) {}
  DeviceSpec spec;
};

/// The analytic model alone.
std::unique_ptr<CostModel> makeAnalyticCostModel(DeviceSpec spec);
/// Measured entries of `profile` first, the analytic model for the rest.
/// The profile's calibration is applied to `spec` (errors name
/// `profileName`).
llvm::Expected<std::unique_ptr<CostModel>>
makeProfiledCostModel(DeviceSpec spec, Profile profile,
                      llvm::StringRef profileName);
/// The driver's entry point: `device` is a built-in name or a JSON file,
/// `profilePath` a profile file or empty.
llvm::Expected<std::unique_ptr<CostModel>>
makeCostModel(llvm::StringRef device, llvm::StringRef profilePath);

/// The planner's table at sub-batch `b`: every task's algorithms with time
/// and workspace, fastest first (ties: smaller workspace, then lower id), and
/// the copy rates. Both directions are linear in the bytes (latency plus
/// bytes over rate), as transferSeconds is.
CostTable buildCostTable(const CostModel &m, const TaskGraph &tg, int64_t b);
/// How the device's links price the collectives of `dp` (its link chosen:
/// NVLink where the device has it, else PCIe, unless `dp` names one).
CollectiveCost collectiveCost(const DeviceSpec &d, const DataParallel &dp);

/// One copy engine per direction: copies on the same engine run one after
/// another in issue order, the two directions overlap each other and
/// compute. Host memory is pinned, so a copy's time is transferSeconds.
class CopyEngines {
public:
  /// Issues a copy that may start at `ready` and takes `seconds`; returns
  /// when it finishes.
  double issue(CopyDirection d, double ready, double seconds);
  double busyUntil(CopyDirection d) const { return busy[static_cast<int>(d)]; }

private:
  std::array<double, 2> busy{0, 0};
};

} // namespace memfit

#endif
