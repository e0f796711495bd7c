//===- GradPool.cpp - Homed gradients through one pinned pool -------------===//
#include "passes/schedule/GradPool.h"

#include <algorithm>
#include <map>

namespace memfit {

namespace {

/// A gradient that may stream through the pool: its copy home and the
/// host update that reads it.
struct Candidate {
  size_t copyOut; // index in plan.round
  BlockId grad;
  TaskId update;
  int64_t bytes;
};

int64_t aligned(int64_t bytes) {
  return (bytes + kGradPoolAlign - 1) / kGradPoolAlign * kGradPoolAlign;
}

std::vector<Candidate> candidates(const TaskGraph &tg, const Plan &plan) {
  const size_t none = plan.round.size();
  std::vector<int32_t> copies(tg.blocks.size(), 0);
  std::vector<size_t> copyOut(tg.blocks.size(), none);
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::CopyIn && in.kind != InstrKind::CopyOut)
      continue;
    BlockId b = plan.residencies[in.residency].block;
    ++copies[b];
    if (in.kind == InstrKind::CopyOut)
      copyOut[b] = i;
  }
  std::vector<Candidate> cs;
  for (const Instr &up : plan.update) {
    if (up.kind != InstrKind::Run || !up.onHost || up.event < 0)
      continue; // an update after the rounds needs its gradient till then
    for (BlockId b : tg.tasks[up.task].reads) {
      const Block &blk = tg.blocks[b];
      if (blk.kind != BlockKind::WeightGrad || tg.homeOf(b) != Tier::Host ||
          copies[b] != 1 || copyOut[b] == none)
        continue;
      int64_t bytes = blk.bytesAt(1);
      if (aligned(bytes) <= tg.gradPoolBytes)
        cs.push_back({copyOut[b], b, up.task, bytes});
    }
  }
  std::sort(cs.begin(), cs.end(), [](const Candidate &a, const Candidate &b) {
    return a.copyOut < b.copyOut;
  });
  return cs;
}

} // namespace

int32_t poolGradients(const TaskGraph &tg, Plan &plan) {
  plan.gradPoolBytes = 0;
  plan.pooledGradBytes = 0;
  plan.gradPoolOffset.clear();
  if (tg.gradPoolBytes <= 0 || plan.numSubBatches != 1 || plan.chunks > 1)
    return 0;
  const std::vector<Candidate> cs = candidates(tg, plan);
  if (cs.empty())
    return 0;
  plan.gradPoolOffset.assign(tg.blocks.size(), -1);
  // A ring in copy-out order: the host updates them in that order too, so
  // the bytes a gradient takes are the oldest ones, whose updates are the
  // first to finish.
  struct Placed {
    int64_t lo, hi;
    TaskId update;
  };
  std::vector<Placed> placed;
  std::vector<bool> waited(tg.tasks.size(), false);
  std::map<size_t, std::vector<TaskId>> waitsBefore;
  int64_t head = 0;
  for (const Candidate &c : cs) {
    const int64_t size = aligned(c.bytes);
    if (head + size > tg.gradPoolBytes)
      head = 0;
    const int64_t lo = head, hi = head + size;
    for (const Placed &p : placed)
      if (p.lo < hi && lo < p.hi && !waited[p.update]) {
        waited[p.update] = true;
        waitsBefore[c.copyOut].push_back(p.update);
      }
    placed.push_back({lo, hi, c.update});
    plan.gradPoolOffset[c.grad] = lo;
    plan.pooledGradBytes += c.bytes;
    head = hi;
  }
  plan.gradPoolBytes = tg.gradPoolBytes;
  std::vector<Instr> round;
  round.reserve(plan.round.size() + waitsBefore.size());
  for (size_t i = 0; i < plan.round.size(); ++i) {
    if (auto it = waitsBefore.find(i); it != waitsBefore.end())
      for (TaskId u : it->second) {
        Instr w;
        w.kind = InstrKind::WaitHost;
        w.stream = Stream::CopyOut;
        w.task = u;
        round.push_back(w);
      }
    round.push_back(std::move(plan.round[i]));
  }
  plan.round = std::move(round);
  return static_cast<int32_t>(cs.size());
}

} // namespace memfit
