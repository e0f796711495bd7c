//===- CostModel.cpp - Task time, workspace and transfer cost -------------===//
//
// The interface's shared helpers and the profiled model: measured entries
// override the analytic model entry by entry, anything missing falls back to
// it and is counted.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/CostModel.h"

#include "compiler/cost/AnalyticCost.h"
#include "compiler/ops/OpSignature.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

namespace memfit {

CostModel::~CostModel() = default;

AlgoChoice CostModel::baseline(const TaskGraph &tg, TaskId t) const {
  for (const AlgoChoice &a : algorithms(tg, t))
    if (a.baseline)
      return a;
  assert(false && "every task has a baseline algorithm");
  return defaultAlgoChoice();
}

AlgoChoice CostModel::fastest(const TaskGraph &tg, TaskId t, int64_t b) const {
  std::vector<AlgoChoice> algos = algorithms(tg, t);
  assert(!algos.empty() && "every task has an algorithm");
  AlgoChoice best = algos.front();
  double bestTime = taskSeconds(tg, t, best.id, b);
  int64_t bestWs = workspaceBytes(tg, t, best.id, b);
  for (size_t i = 1; i < algos.size(); ++i) {
    double time = taskSeconds(tg, t, algos[i].id, b);
    int64_t ws = workspaceBytes(tg, t, algos[i].id, b);
    // Ids ascend, so keeping the earlier one on a full tie picks the
    // lower id.
    if (time < bestTime || (time == bestTime && ws < bestWs)) {
      best = algos[i];
      bestTime = time;
      bestWs = ws;
    }
  }
  return best;
}

double CostModel::transferSeconds(int64_t bytes, CopyDirection d) const {
  if (bytes <= 0)
    return 0;
  CopyRates r = copyRates();
  double rate = d == CopyDirection::HostToDevice ? r.h2dBytesPerSecond
                                                 : r.d2hBytesPerSecond;
  return r.latencySeconds + static_cast<double>(bytes) / rate;
}

double CopyEngines::issue(CopyDirection d, double ready, double seconds) {
  double &busyUntil = busy[static_cast<int>(d)];
  double start = std::max(ready, busyUntil);
  busyUntil = start + seconds;
  return busyUntil;
}

namespace {

class ProfiledCostModel : public CostModel {
public:
  ProfiledCostModel(DeviceSpec spec, Profile profile)
      : CostModel(spec), analytic(std::move(spec)),
        profile(std::move(profile)) {}

  std::vector<AlgoChoice> algorithms(const TaskGraph &tg,
                                     TaskId t) const override {
    if (analytic.isFree(tg, t))
      return analytic.algorithms(tg, t);
    return withoutRefused(tg, t, measuredAlgorithms(tg, t));
  }

  /// The measured algorithms, or the analytic model's where none were.
  std::vector<AlgoChoice> measuredAlgorithms(const TaskGraph &tg,
                                             TaskId t) const {
    TaskKind kind = tg.task(t).kind;
    std::string sig = taskSignature(tg, t);
    std::vector<int> ids = profile.commonAlgorithms(kind, sig);
    if (ids.empty())
      return analytic.algorithms(tg, t);
    auto dir = convDirectionOf(tg, t);
    if (!dir)
      return {defaultAlgoChoice()};
    std::vector<AlgoChoice> out;
    for (int id : ids)
      out.push_back(convAlgoChoice(*dir, id));
    // The baseline is what cuDNN measured as needing the least workspace
    // at the largest measured sub-batch; on a tie cuDNN's implicit GEMM,
    // then the lowest id.
    int64_t largest = profile.subBatches(kind, sig).back();
    ProfileLookup at = profile.lookup(kind, sig, largest);
    int preferred = convBaselineAlgo(*dir);
    auto rank = [&](const AlgoChoice &a) {
      const AlgoMeasurement *m = at.find(a.id);
      return std::make_tuple(m ? m->workspaceBytes : INT64_MAX,
                             a.id == preferred ? 0 : 1, a.id);
    };
    size_t base = 0;
    for (size_t i = 1; i < out.size(); ++i)
      if (rank(out[i]) < rank(out[base]))
        base = i;
    for (size_t i = 0; i < out.size(); ++i)
      out[i].baseline = i == base;
    return out;
  }

  /// `algos` less those a trainer found cuDNN not running for the task's
  /// signature. A refused baseline hands its role to the remaining
  /// algorithm needing the least workspace at the graph's batch (lowest id
  /// on a tie); when every algorithm was refused the list stays as it is,
  /// since a task must have one (the trainer substitutes again).
  std::vector<AlgoChoice> withoutRefused(const TaskGraph &tg, TaskId t,
                                         std::vector<AlgoChoice> algos) const {
    TaskKind kind = tg.task(t).kind;
    std::string sig = taskSignature(tg, t);
    std::vector<AlgoChoice> kept;
    bool lostBaseline = false;
    for (const AlgoChoice &a : algos) {
      if (profile.unsupported(kind, sig, a.id))
        lostBaseline |= a.baseline;
      else
        kept.push_back(a);
    }
    if (kept.empty() || kept.size() == algos.size())
      return algos;
    if (lostBaseline) {
      size_t base = 0;
      int64_t least = INT64_MAX;
      for (size_t i = 0; i < kept.size(); ++i) {
        int64_t ws = workspaceBytes(tg, t, kept[i].id, tg.graph->batch);
        if (ws < least) {
          least = ws;
          base = i;
        }
      }
      for (size_t i = 0; i < kept.size(); ++i)
        kept[i].baseline = i == base;
    }
    return kept;
  }

  double taskSeconds(const TaskGraph &tg, TaskId t, int algo,
                     int64_t b) const override {
    if (analytic.isFree(tg, t))
      return 0;
    if (auto m = measured(tg, t, algo, b))
      return m->seconds;
    const double a = analytic.taskSeconds(tg, t, algo, b);
    auto near = nearestMeasured(tg, t, algo, b);
    if (!near)
      return a;
    const double an = analytic.taskSeconds(tg, t, algo, near->first);
    if (a > 0 && an > 0)
      return a * near->second / an;
    // An algorithm the model does not price (cuDNN ran it, the device
    // model does not offer it): linear in the sub-batch.
    return near->second * static_cast<double>(b) /
           static_cast<double>(near->first);
  }

  int64_t workspaceBytes(const TaskGraph &tg, TaskId t, int algo,
                         int64_t b) const override {
    if (analytic.isFree(tg, t))
      return 0;
    int64_t asked = convDirectionOf(tg, t)
                        ? profile.askedWorkspace(tg.task(t).kind,
                                                 taskSignature(tg, t), algo, b)
                        : 0;
    if (auto m = measured(tg, t, algo, b))
      return std::max(m->workspaceBytes, asked);
    return std::max(analytic.workspaceBytes(tg, t, algo, b), asked);
  }

  CopyRates copyRates() const override {
    if (!profile.transfer)
      return analytic.copyRates();
    return {profile.transfer->h2dBytesPerSecond,
            profile.transfer->d2hBytesPerSecond,
            profile.transfer->latencySeconds};
  }

  ProfileUsage profileUsage() const override {
    std::lock_guard<std::mutex> lock(mu);
    ProfileUsage u;
    u.hasProfile = true;
    u.exact = exact.size();
    u.interpolated = interpolated.size();
    u.missing = missing.size();
    for (const std::string &m : missing) {
      if (u.missingExamples.size() == 3)
        break;
      u.missingExamples.push_back(m);
    }
    return u;
  }

private:
  /// Outside the measured sub-batches (the profile does not extrapolate):
  /// the nearest measured sub-batch of the algorithm (the smaller on a
  /// tie) and its time. taskSeconds scales the analytic model's estimate
  /// by the measured time over the model's at that size, so that the
  /// estimate keeps the model's shape in the sub-batch at the measured
  /// level. Without it a plan splitting the batch would price its tasks at
  /// the model's level and the whole batch's at the device's, two scales
  /// in one comparison.
  std::optional<std::pair<int64_t, double>>
  nearestMeasured(const TaskGraph &tg, TaskId t, int algo, int64_t b) const {
    TaskKind kind = tg.task(t).kind;
    std::string sig = taskSignature(tg, t);
    std::optional<std::pair<int64_t, double>> near;
    for (int64_t s : profile.subBatches(kind, sig)) {
      ProfileLookup at = profile.lookup(kind, sig, s);
      const AlgoMeasurement *m = at.find(algo);
      if (!m || !(m->seconds > 0))
        continue;
      if (!near || std::llabs(s - b) < std::llabs(near->first - b))
        near = std::make_pair(s, m->seconds);
    }
    return near;
  }

  /// The measurement for (task, algo, b), recording whether there was one.
  std::optional<AlgoMeasurement> measured(const TaskGraph &tg, TaskId t,
                                          int algo, int64_t b) const {
    TaskKind kind = tg.task(t).kind;
    std::string sig = taskSignature(tg, t);
    ProfileLookup found = profile.lookup(kind, sig, b);
    std::string key = std::string(taskKindKey(kind)) + " " + sig +
                      " at sub-batch " + std::to_string(b);
    std::lock_guard<std::mutex> lock(mu);
    if (const AlgoMeasurement *m = found.find(algo)) {
      (found.kind == LookupKind::Exact ? exact : interpolated).insert(key);
      return *m;
    }
    if (found.kind != LookupKind::Missing)
      key += " algorithm " + std::to_string(algo);
    missing.insert(key);
    return std::nullopt;
  }

  AnalyticCostModel analytic;
  Profile profile;
  mutable std::mutex mu;
  mutable std::set<std::string> exact, interpolated, missing;
};

} // namespace

std::unique_ptr<CostModel> makeAnalyticCostModel(DeviceSpec spec) {
  return std::make_unique<AnalyticCostModel>(std::move(spec));
}

llvm::Expected<std::unique_ptr<CostModel>>
makeProfiledCostModel(DeviceSpec spec, Profile profile,
                      llvm::StringRef profileName) {
  if (!profile.calibration.empty())
    if (auto err = applyDeviceOverrides(spec, profile.calibration,
                                        (profileName + ": calibration").str()))
      return err;
  return std::make_unique<ProfiledCostModel>(std::move(spec),
                                             std::move(profile));
}

llvm::Expected<std::unique_ptr<CostModel>>
makeCostModel(llvm::StringRef device, llvm::StringRef profilePath) {
  auto spec = resolveDevice(device);
  if (!spec)
    return spec.takeError();
  if (profilePath.empty())
    return makeAnalyticCostModel(std::move(*spec));
  auto profile = loadProfile(profilePath);
  if (!profile)
    return profile.takeError();
  return makeProfiledCostModel(std::move(*spec), std::move(*profile),
                               profilePath);
}

CollectiveCost collectiveCost(const DeviceSpec &d, const DataParallel &dp) {
  CollectiveCost c;
  c.ranks = dp.ranks;
  DataParallel::Link link = dp.link;
  if (link == DataParallel::Link::Auto)
    link = d.nvlinkBandwidth > 0 ? DataParallel::Link::NVLink
                                 : DataParallel::Link::PCIe;
  double rate = link == DataParallel::Link::NVLink       ? d.nvlinkBandwidth
                : link == DataParallel::Link::InfiniBand ? d.networkBandwidth
                                                         : d.h2dBandwidth;
  c.link = std::string(linkName(link));
  c.bytesPerSecond = rate * d.collectiveEfficiency;
  c.stepLatencySeconds = d.collectiveStepLatency;
  return c;
}

CostTable buildCostTable(const CostModel &m, const TaskGraph &tg, int64_t b) {
  CostTable table;
  table.subBatch = b;
  CopyRates rates = m.copyRates();
  table.h2dBytesPerSecond = rates.h2dBytesPerSecond;
  table.d2hBytesPerSecond = rates.d2hBytesPerSecond;
  table.copyLatencySeconds = rates.latencySeconds;
  table.hostUpdateParamsPerSecond = tg.optimizer == OptimizerKind::SGD
                                        ? m.device().hostSgdRate()
                                        : m.device().hostAdamRate();
  table.nvmeReadBytesPerSecond = m.device().nvmeReadBandwidth;
  table.nvmeWriteBytesPerSecond = m.device().nvmeWriteBandwidth;
  table.deviceBytesPerSecond = m.device().memoryBandwidth;
  table.hostBytesPerSecond = m.device().hostMemoryBandwidth;
  table.launchSeconds = m.device().launchSeconds;
  table.collective = collectiveCost(m.device(), tg.dp);
  table.tasks.resize(tg.tasks.size());
  for (TaskId t = 0; t < static_cast<TaskId>(tg.tasks.size()); ++t) {
    std::vector<AlgoCost> &algos = table.tasks[t];
    const int64_t staging = convGradStagingBytes(tg, t);
    for (const AlgoChoice &a : m.algorithms(tg, t))
      algos.push_back({a.id, std::string(a.name), m.taskSeconds(tg, t, a.id, b),
                       m.workspaceBytes(tg, t, a.id, b) + staging, a.baseline});
    std::sort(algos.begin(), algos.end(),
              [](const AlgoCost &x, const AlgoCost &y) {
                return std::tie(x.seconds, x.workspace, x.algo) <
                       std::tie(y.seconds, y.workspace, y.algo);
              });
  }
  return table;
}

} // namespace memfit
