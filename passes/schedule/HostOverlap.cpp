//===- HostOverlap.cpp - Host updates started inside the last round -------===//
#include "passes/schedule/HostOverlap.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>

namespace memfit {

namespace {

using Clock = std::array<int32_t, kNumStreams>;

/// Happens-before over one round's instructions: what each stream has
/// completed when an instruction starts (streams in order, events across).
class RoundOrder {
public:
  RoundOrder(const std::vector<Instr> &list, int32_t numEvents)
      : seq(list.size()), at(list.size()) {
    std::array<Clock, kNumStreams> stream{};
    std::vector<Clock> event(numEvents, Clock{});
    for (size_t i = 0; i < list.size(); ++i) {
      const Instr &in = list[i];
      auto s = static_cast<int>(in.stream);
      Clock &c = stream[s];
      ++c[s];
      if (in.kind == InstrKind::Record && in.event >= 0)
        event[in.event] = c;
      if (in.kind == InstrKind::Wait && in.event >= 0)
        for (int k = 0; k < kNumStreams; ++k)
          c[k] = std::max(c[k], event[in.event][k]);
      seq[i] = c[s];
      at[i] = c;
      streamOf.push_back(s);
    }
  }
  /// Instruction a is complete before b starts (or is b).
  bool before(size_t a, size_t b) const {
    return a == b || (a < b && at[b][streamOf[a]] >= seq[a]);
  }

private:
  std::vector<int32_t> seq;
  std::vector<Clock> at;
  std::vector<int> streamOf;
};

} // namespace

int32_t overlapHostUpdates(const TaskGraph &tg, Plan &plan) {
  if (tg.homes.empty() || tg.precision == Precision::FP16 ||
      tg.clipGradNorm > 0)
    return 0;
  const RoundOrder order(plan.round, plan.numEvents);
  // Per block, the round's copies of it, in list order.
  std::vector<std::vector<size_t>> copies(tg.blocks.size());
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind == InstrKind::CopyIn || in.kind == InstrKind::CopyOut)
      copies[plan.residencies[in.residency].block].push_back(i);
  }
  // Ready points: the copy-out a Record follows -> the updates it starts.
  std::map<size_t, std::vector<size_t>> readyAfter;
  for (size_t u = 0; u < plan.update.size(); ++u) {
    const Instr &up = plan.update[u];
    if (up.kind != InstrKind::Run || !up.onHost)
      continue;
    std::vector<size_t> mine;
    for (BlockId b : hostUpdateBlocks(tg, tg.tasks[up.task]))
      mine.insert(mine.end(), copies[b].begin(), copies[b].end());
    if (mine.empty())
      continue;
    size_t last = *std::max_element(mine.begin(), mine.end());
    if (plan.round[last].kind != InstrKind::CopyOut)
      continue; // a copy-in after the gradient went home: after the rounds
    bool ordered = std::all_of(mine.begin(), mine.end(),
                               [&](size_t c) { return order.before(c, last); });
    if (ordered)
      readyAfter[last].push_back(u);
  }
  if (readyAfter.empty())
    return 0;
  std::vector<Instr> round;
  round.reserve(plan.round.size() + readyAfter.size());
  std::vector<size_t> readyOrder;
  for (size_t i = 0; i < plan.round.size(); ++i) {
    round.push_back(std::move(plan.round[i]));
    auto it = readyAfter.find(i);
    if (it == readyAfter.end())
      continue;
    Instr rec;
    rec.kind = InstrKind::Record;
    rec.stream = Stream::CopyOut;
    rec.event = plan.numEvents++;
    round.push_back(rec);
    for (size_t u : it->second) {
      plan.update[u].event = rec.event;
      readyOrder.push_back(u);
    }
  }
  plan.round = std::move(round);
  // The device's updates first, as they were; then the host's, in the order
  // they become ready, the ones that wait for the rounds last.
  std::vector<Instr> update;
  std::vector<bool> placed(plan.update.size(), false);
  for (size_t u : readyOrder)
    placed[u] = true;
  for (size_t u = 0; u < plan.update.size(); ++u)
    if (!plan.update[u].onHost)
      update.push_back(plan.update[u]);
  for (size_t u : readyOrder)
    update.push_back(plan.update[u]);
  for (size_t u = 0; u < plan.update.size(); ++u)
    if (plan.update[u].onHost && !placed[u])
      update.push_back(plan.update[u]);
  assert(update.size() == plan.update.size());
  plan.update = std::move(update);
  return static_cast<int32_t>(readyOrder.size());
}

} // namespace memfit
