//===- Simulate.cpp - Replay a finished plan on the cost model ------------===//
#include "passes/analysis/Simulate.h"

#include "passes/analysis/Collectives.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>

namespace memfit {
namespace {

struct RoundTimes {
  double seconds = 0, stall = 0, compute = 0, recompute = 0;
  /// The drive's time in the round's copies in (masters read from NVMe).
  double drive = 0;
  int64_t toHost = 0, toDevice = 0;
  std::vector<double> start, end;
  std::vector<double> eventTime; // when each event's Record fired
};

/// The host's updates, one tensor after another on its cores in the update
/// list's order, each from when it may start: its ready event in the last
/// round, else the end of the rounds (and the gradient clipping after
/// them). Times are from the iteration's start; a round with WaitHost
/// asks for an update's end while it is being replayed.
class HostQueue {
public:
  HostQueue(const TaskGraph &tg, const Plan &plan, const CostTable &costs)
      : start(plan.update.size(), 0), end(plan.update.size(), 0), tg(tg),
        plan(plan), costs(costs) {}

  /// Times the host's updates up to and including update `u` (all of them
  /// when u is past the list); `readyAt` gives when one may start. Returns
  /// u's end, or the last one's.
  template <class Ready> double finish(size_t u, const Ready &readyAt) {
    for (; next <= u && next < plan.update.size(); ++next) {
      const Instr &in = plan.update[next];
      if (!in.onHost)
        continue;
      start[next] = std::max(free, readyAt(in));
      const Task &t = tg.tasks[in.task];
      free = start[next] + costs.hostUpdateSeconds(updatedParams(tg, t),
                                                   nvmeUpdateBytes(tg, t));
      end[next] = free;
    }
    return u < end.size() ? end[u] : free;
  }
  /// The update list's index of host update task `t`.
  size_t indexOf(TaskId t) const {
    for (size_t i = 0; i < plan.update.size(); ++i)
      if (plan.update[i].task == t)
        return i;
    assert(false && "WaitHost names no update");
    return plan.update.size();
  }
  double hostFree() const { return free; }

  std::vector<double> start, end; // per update, from the iteration's start

private:
  const TaskGraph &tg;
  const Plan &plan;
  const CostTable &costs;
  size_t next = 0;
  double free = 0;
};

/// One round's instructions on the cost model. `host`, for the iteration's
/// last round of a plan whose copy-out stream waits for host updates (a
/// one-round plan: it starts the iteration), times those updates as the
/// round goes.
RoundTimes replay(const TaskGraph &tg, const Plan &plan,
                  const std::vector<Instr> &instrs, const CostTable &costs,
                  HostQueue *host = nullptr) {
  RoundTimes rt;
  std::array<double, kNumStreams> free{};
  std::vector<double> eventTime(plan.numEvents, 0);
  double computeEnd = 0;
  for (const Instr &in : instrs) {
    int s = static_cast<int>(in.stream);
    double start = free[s], dur = 0;
    if (in.onHost) {
      // The host's cores: timed by HostQueue, beside the streams.
      rt.start.push_back(0);
      rt.end.push_back(0);
      continue;
    }
    switch (in.kind) {
    case InstrKind::Run: {
      const AlgoCost *a = costs.find(in.task, in.algo);
      assert(a && "plan uses an algorithm the cost table lacks");
      dur = a ? a->seconds : 0;
      rt.stall += std::max(0.0, start - computeEnd);
      rt.compute += dur;
      if (in.recompute)
        rt.recompute += dur;
      computeEnd = start + dur;
      break;
    }
    case InstrKind::CopyOut:
    case InstrKind::CopyIn: {
      // Copies are priced from the block's size at the table's sub-batch
      // (a working copy rounded from its master: the master's, and the
      // rounding).
      const BlockId b = plan.residencies[in.residency].block;
      const int64_t bytes = tg.blocks[b].bytesAt(costs.subBatch);
      bool out = in.kind == InstrKind::CopyOut;
      dur =
          out ? costs.copyOutSeconds(bytes) : costs.copyInSeconds(tg, b, bytes);
      (out ? rt.toHost : rt.toDevice) += tg.linkBytes(b, bytes);
      if (!out)
        rt.drive += costs.nvmeCopyReadSeconds(tg, b);
      break;
    }
    case InstrKind::Record:
      eventTime[in.event] = free[s];
      break;
    case InstrKind::Wait:
      start = std::max(start, eventTime[in.event]);
      break;
    case InstrKind::WaitHost:
      if (host)
        start = std::max(
            start, host->finish(host->indexOf(in.task), [&](const Instr &up) {
              assert(up.event >= 0 && "a WaitHost for an update after the "
                                      "rounds");
              return up.event >= 0 ? eventTime[up.event] : 0.0;
            }));
      break;
    }
    rt.start.push_back(start);
    rt.end.push_back(start + dur);
    free[s] = start + dur;
  }
  rt.seconds = instrs.empty() ? 0 : *std::max_element(free.begin(), free.end());
  rt.eventTime = std::move(eventTime);
  return rt;
}

/// The rest of the host's updates after the last round (`lastRound`,
/// starting `lastStart` into the iteration) and the rounds' end at
/// `roundsEnd`, the gradient clipping's `clip` seconds after it. Fills
/// every host update's start and end in `upd` (relative to the rounds'
/// end) and returns when the host is done, from the iteration's start.
double hostTimes(const Plan &plan, HostQueue &host, const RoundTimes &lastRound,
                 double lastStart, double roundsEnd, double clip,
                 RoundTimes &upd) {
  host.finish(plan.update.size(), [&](const Instr &in) {
    return in.event >= 0 && in.event < (EventId)lastRound.eventTime.size()
               ? lastStart + lastRound.eventTime[in.event]
               : roundsEnd + clip;
  });
  for (size_t i = 0; i < plan.update.size(); ++i)
    if (plan.update[i].onHost) {
      upd.start[i] = host.start[i] - roundsEnd;
      upd.end[i] = host.end[i] - roundsEnd;
    }
  return host.hostFree();
}

/// One drive serves the copies in that read masters from NVMe (`reads`
/// seconds of them over the rounds) and the host updates that stream state
/// through it. Each is timed as if the drive were its own; where they
/// overlap, the iteration ends no sooner than the drive's whole work, which
/// this returns (it may end later: the overlap is not replayed). 0 where
/// no copy in reads the drive.
double driveSeconds(const TaskGraph &tg, const Plan &plan,
                    const CostTable &full, double reads) {
  double drive = reads;
  if (drive > 0)
    for (const Instr &in : plan.update)
      if (in.onHost)
        drive += full.nvmeUpdateSeconds(nvmeUpdateBytes(tg, tg.tasks[in.task]));
  return drive;
}

} // namespace

Simulation simulate(const TaskGraph &tg, const Plan &plan,
                    const CostTable &full, const CostTable *last) {
  Simulation sim;
  auto roundAt = [&](const CostTable &costs) {
    return replay(tg, plan, plan.round, costs);
  };
  // Host updates that a round's copy-out stream waits for are timed as
  // the round is (plans with a gradient pool have one round).
  HostQueue host(tg, plan, full);
  const bool waitsForHost = plan.pooledGradBytes > 0;
  assert((!waitsForHost || plan.numSubBatches == 1) &&
         "a gradient pool in a plan of several rounds");
  RoundTimes fullRound = waitsForHost && !last
                             ? replay(tg, plan, plan.round, full, &host)
                             : roundAt(full);
  RoundTimes lastRound = !last ? fullRound
                         : waitsForHost
                             ? replay(tg, plan, plan.round, *last, &host)
                             : roundAt(*last);
  RoundTimes upd = replay(tg, plan, plan.update, full);
  // Clipping's norm over every gradient comes first: the device's updates
  // start after it.
  const double clip = full.gradientClipSeconds(tg);
  for (size_t i = 0; i < upd.start.size(); ++i)
    if (!plan.update[i].onHost) {
      upd.start[i] += clip;
      upd.end[i] += clip;
    }
  upd.seconds += clip;
  int64_t k = plan.numSubBatches;
  const double lastStart = (k - 1) * fullRound.seconds;
  const double roundsEnd = lastStart + lastRound.seconds;
  const double hostEnd =
      hostTimes(plan, host, lastRound, lastStart, roundsEnd, clip, upd);
  // Working copies kept on the GPU are uploaded once the rounds are over,
  // each after its host update, one after another on the host-to-device
  // link (the trainer's runHostUpdates).
  double uploadEnd = roundsEnd;
  int64_t uploaded = 0;
  for (size_t i = 0; i < plan.update.size(); ++i)
    if (plan.update[i].onHost)
      if (int64_t bytes = hostUploadBytes(tg, tg.tasks[plan.update[i].task])) {
        uploadEnd =
            std::max(uploadEnd, host.end[i]) + full.copyInSeconds(bytes);
        uploaded += bytes;
      }
  const double drive =
      driveSeconds(tg, plan, full, (k - 1) * fullRound.drive + lastRound.drive);
  sim.roundSeconds = fullRound.seconds;
  sim.lastRoundSeconds = lastRound.seconds;
  sim.clipSeconds = clip;
  sim.updateSeconds = std::max({upd.seconds, hostEnd - roundsEnd,
                                uploadEnd - roundsEnd, drive - roundsEnd});
  sim.iterationSeconds = roundsEnd + sim.updateSeconds;
  sim.stallSeconds = (k - 1) * fullRound.stall + lastRound.stall;
  sim.computeSeconds =
      (k - 1) * fullRound.compute + lastRound.compute + upd.compute;
  sim.recomputeSeconds = (k - 1) * fullRound.recompute + lastRound.recompute;
  sim.bytesToHost = (k - 1) * fullRound.toHost + lastRound.toHost;
  sim.bytesToDevice =
      (k - 1) * fullRound.toDevice + lastRound.toDevice + uploaded;
  sim.start = fullRound.start;
  sim.end = fullRound.end;
  sim.updateStart = upd.start;
  sim.updateEnd = upd.end;
  simulateCollectives(
      tg, plan, full,
      {&fullRound.end, &lastRound.end, fullRound.seconds, lastRound.seconds},
      sim);

  // Live bytes over time: a residency holds its bytes from the start of its
  // first access to the end of its last; a workspace for its task's run.
  std::vector<std::pair<double, double>> spanOf(plan.residencies.size(),
                                                {-1, -1});
  std::vector<std::pair<double, int64_t>> deltas;
  auto span = [&](ResidencyId r, size_t i) {
    auto &sp = spanOf[r];
    if (sp.first < 0 || sim.start[i] < sp.first)
      sp.first = sim.start[i];
    sp.second = std::max(sp.second, sim.end[i]);
  };
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind == InstrKind::Run) {
      // An input overwritten in place ends as its output begins.
      ResidencyId over = inPlaceInput(tg, plan, in);
      for (ResidencyId r : in.operands)
        if (r >= 0 && r != over)
          span(r, i);
      if (over >= 0) {
        auto &sp = spanOf[over];
        if (sp.first < 0 || sim.start[i] < sp.first)
          sp.first = sim.start[i];
        sp.second = std::max(sp.second, sim.start[i]);
      }
      if (in.workspaceBytes > 0) {
        deltas.push_back({sim.start[i], in.workspaceBytes});
        deltas.push_back({sim.end[i], -in.workspaceBytes});
      }
    } else if (in.residency >= 0) {
      span(in.residency, i);
    }
  }
  for (ResidencyId r = 0; r < (ResidencyId)plan.residencies.size(); ++r)
    if (spanOf[r].first >= 0) {
      deltas.push_back({spanOf[r].first, plan.residencies[r].bytes});
      deltas.push_back({spanOf[r].second, -plan.residencies[r].bytes});
    }
  // Frees before allocations at the same instant.
  std::sort(deltas.begin(), deltas.end());
  int64_t live = 0;
  for (auto [t, d] : deltas) {
    live += d;
    sim.maxLiveBytes = std::max(sim.maxLiveBytes, live);
  }
  sim.residencySpan = std::move(spanOf);
  sim.allocationEfficiency =
      plan.arenaBytes > 0 ? double(sim.maxLiveBytes) / double(plan.arenaBytes)
                          : 1.0;
  return sim;
}

void summarize(Plan &plan, const Simulation &sim, double idealSeconds) {
  PlanSummary &s = plan.summary;
  s.idealSeconds = idealSeconds;
  s.plannedSeconds = sim.iterationSeconds;
  s.stallSeconds = sim.stallSeconds;
  s.bytesToHost = sim.bytesToHost;
  s.bytesToDevice = sim.bytesToDevice;
  s.peakArenaBytes = plan.arenaBytes;
  s.maxLiveBytes = sim.maxLiveBytes;
}

} // namespace memfit
