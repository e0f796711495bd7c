//===- Order.cpp - Execution order of one round ---------------------------===//
#include "passes/analysis/Order.h"

#include "passes/analysis/Liveness.h"

#include <algorithm>
#include <cassert>

namespace memfit {

std::vector<TaskId> joinAwareOrder(const TaskGraph &tg) {
  size_t nops = tg.layers.size();
  // Weight of an op's subgraph: activation bytes per sample of every op it
  // depends on (counted once per path; only used to rank branches).
  constexpr int64_t kCap = int64_t(1) << 60; // saturate: paths multiply
  std::vector<int64_t> weight(nops, 0);
  for (OpId i = 0; i < (OpId)nops; ++i) {
    int64_t w = tg.layers[i].outputBytesPerSample;
    for (OpId p : tg.layers[i].producers)
      if (p >= 0)
        w = std::min(kCap, w + weight[p]);
    weight[i] = w;
  }
  // Iterative post-order DFS from the ops nothing consumes (the output
  // first), inputs visited heaviest first, ties by operand position.
  std::vector<uint8_t> state(nops, 0); // 0 new, 1 open, 2 done
  std::vector<OpId> fwd;
  std::vector<OpId> roots;
  if (tg.outputLayer >= 0)
    roots.push_back(tg.outputLayer);
  for (OpId i = (OpId)nops - 1; i >= 0; --i)
    roots.push_back(i); // ops not reaching the output still run
  for (OpId root : roots) {
    if (state[root])
      continue;
    std::vector<std::pair<OpId, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto &[op, next] = stack.back();
      std::vector<OpId> preds;
      for (OpId p : tg.layers[op].producers)
        if (p >= 0 && std::find(preds.begin(), preds.end(), p) == preds.end())
          preds.push_back(p);
      std::stable_sort(preds.begin(), preds.end(),
                       [&](OpId a, OpId b) { return weight[a] > weight[b]; });
      while (next < preds.size() && state[preds[next]])
        ++next;
      if (next < preds.size()) {
        OpId p = preds[next++];
        state[p] = 1;
        stack.push_back({p, 0});
        continue;
      }
      state[op] = 2;
      fwd.push_back(op);
      stack.pop_back();
    }
  }
  assert(fwd.size() == nops);
  std::vector<int32_t> pos(nops);
  for (size_t i = 0; i < fwd.size(); ++i)
    pos[fwd[i]] = static_cast<int32_t>(i);

  std::vector<TaskId> forward, loss, backward, update;
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    switch (tg.tasks[t].kind) {
    case TaskKind::Forward:
      forward.push_back(t);
      break;
    case TaskKind::Loss:
      loss.push_back(t);
      break;
    case TaskKind::Update:
      update.push_back(t);
      break;
    default:
      backward.push_back(t);
      break;
    }
  }
  auto byPos = [&](TaskId a, TaskId b) {
    return pos[tg.tasks[a].op] < pos[tg.tasks[b].op];
  };
  std::stable_sort(forward.begin(), forward.end(), byPos);
  // Backward mirrors the forward order; within an op, BP-data before
  // BP-weight as built.
  std::stable_sort(backward.begin(), backward.end(), [&](TaskId a, TaskId b) {
    return pos[tg.tasks[a].op] > pos[tg.tasks[b].op];
  });
  std::vector<TaskId> order;
  for (auto *list : {&forward, &loss, &backward, &update})
    order.insert(order.end(), list->begin(), list->end());
  return order;
}

std::vector<TaskId> taskOrder(const TaskGraph &tg, OrderKind kind) {
  return kind == OrderKind::Built ? builtOrder(tg) : joinAwareOrder(tg);
}

} // namespace memfit
