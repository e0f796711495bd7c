//===- ChainDP.cpp - Keep, recompute or offload along a chain -------------===//
#include "passes/search/ChainDP.h"

#include "passes/analysis/Liveness.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

namespace memfit {
namespace {

/// Offload totals tried, as shares of what the copy streams can hide.
constexpr double kVolumeShares[] = {0.0, 0.25, 0.5, 1.0};
/// An offloaded byte costs this share of its copy-out time: a copy that
/// hides is nearly free, but it still takes room while it is prefetched
/// and adds latencies, so a re-run of the same price is preferred.
constexpr double kOffloadPenalty = 0.05;

enum class Offload : uint8_t { None, Boundary, EveryKept };

struct Option {
  int32_t dropped = 0; // index in Chain::dropSets
  Offload offload = Offload::None;
  int64_t hold = 0, off = 0; // bytes kept across, bytes copied out
  double rerun = 0;
};

struct Segment {
  std::vector<BlockId> crossing;  // forward outputs the backward pass needs
  std::vector<BlockId> droppable; // of them: recomputable, not the boundary
  int64_t local = 0; // live beyond what earlier segments hold across
  int64_t full = 0;  // bytes of `crossing`
  double fwdSeconds = 0, bwdSeconds = 0;
  /// Pareto-filtered; a try without offload takes those that copy nothing
  /// (the frontier of those alone: no option that copies dominates one
  /// that does not).
  std::vector<Option> options;
  /// Ranges of 2, 3, ... segments ending here, re-run as one from the
  /// boundary before them: everything recomputable in them dropped but
  /// this segment's boundary.
  std::vector<std::vector<Option>> spanOptions;
};

/// The segments with their blocks, times and options for one round, built
/// once and solved per try (arena share, offload or not).
class Chain {
public:
  Chain(const TaskGraph &tg, const std::vector<TaskId> &order,
        const CostTable &costs, const ChainOptions &opts)
      : tg(tg), order(order), costs(costs), opts(opts),
        recomputable(recomputableBlocks(tg)),
        neededBack(tg.blocks.size(), false), boundary(tg.blocks.size(), false),
        taskSeen(tg.tasks.size(), 0), blockDropped(tg.blocks.size(), 0) {}

  bool build();
  std::optional<ChainDecisions> solve(int64_t arenaBytes, double arenaFraction,
                                      bool offload) const;
  /// The decisions of the ranges `choice` leads back through from final
  /// state `at` (memory levels of `unit` bytes, offload levels of `vunit`).
  ChainDecisions decisions(const std::vector<std::vector<uint32_t>> &choice,
                           size_t at, size_t width, int64_t unit,
                           double vunit) const;

private:
  int32_t segmentOfTask(TaskId t) const {
    OpId op = tg.tasks[t].op;
    int32_t s = op != kNoId ? segs.ofOp[op] : -1;
    return s >= 0 ? s : segs.count - 1;
  }
  int64_t bytes(BlockId b) const {
    return tg.blocks[b].bytesAt(costs.subBatch);
  }
  double rerunSeconds(const std::vector<BlockId> &dropped);
  void addOptions(Segment &seg);
  void addSpanOptions(size_t c);
  void offloadModes(std::vector<BlockId> dropped, int64_t all, int64_t bound,
                    std::vector<Option> &out);
  /// The candidates' Pareto frontier over (re-run time, bytes held, bytes
  /// copied).
  static std::vector<Option> frontier(std::vector<Option> cand);
  void localPeaks();
  /// What the copy streams can hide: per segment, the bytes after it (cap)
  /// and over the whole round (volume).
  struct CopyRoom {
    std::vector<double> cap;
    double volume = 0;
  };
  CopyRoom copyRoom() const;

  const TaskGraph &tg;
  const std::vector<TaskId> &order;
  const CostTable &costs;
  const ChainOptions &opts;
  ChainSegments segs;
  std::vector<Segment> chain;
  /// The drop sets the options name (shared by an option's offload modes).
  std::vector<std::vector<BlockId>> dropSets;
  std::vector<bool> recomputable, neededBack, boundary;
  std::vector<int32_t> taskSeen, blockDropped;
  int32_t stamp = 0;
};

double Chain::rerunSeconds(const std::vector<BlockId> &dropped) {
  // The producers of the dropped blocks re-run, and so do those of their
  // inputs that are dropped too or gone by the backward pass.
  ++stamp;
  for (BlockId d : dropped)
    blockDropped[d] = stamp;
  std::vector<TaskId> stack;
  auto visit = [&](BlockId b) {
    TaskId w = tg.blocks[b].writers[0];
    if (taskSeen[w] != stamp) {
      taskSeen[w] = stamp;
      stack.push_back(w);
    }
  };
  for (BlockId d : dropped)
    visit(d);
  double secs = 0;
  while (!stack.empty()) {
    TaskId t = stack.back();
    stack.pop_back();
    secs += costs.fastest(t).seconds;
    for (BlockId in : tg.tasks[t].reads) {
      BlockId x = storageOf(tg, in);
      if (recomputable[x] && (!neededBack[x] || blockDropped[x] == stamp))
        visit(x);
    }
  }
  return secs;
}

void Chain::addOptions(Segment &seg) {
  std::vector<std::vector<BlockId>> sets;
  size_t k = seg.droppable.size();
  if (k <= static_cast<size_t>(opts.maxExactBlocks)) {
    for (uint32_t mask = 0; mask < (1u << k); ++mask) {
      std::vector<BlockId> s;
      for (size_t j = 0; j < k; ++j)
        if (mask & (1u << j))
          s.push_back(seg.droppable[j]);
      sets.push_back(std::move(s));
    }
  } else {
    // Too many to enumerate (a DenseNet's dense block): SuperNeurons' split
    // (re-run what is not a convolution), and prefixes of the blocks in
    // the order of their producer's time per byte, cheapest first, at 32
    // evenly spaced lengths.
    std::vector<BlockId> cheap;
    for (BlockId b : seg.droppable)
      if (!isConvolution(tg.layers[tg.tasks[tg.blocks[b].writers[0]].op].kind))
        cheap.push_back(b);
    if (!cheap.empty() && cheap.size() != k)
      sets.push_back(cheap);
    std::vector<std::pair<double, BlockId>> byCost;
    for (BlockId b : seg.droppable)
      byCost.push_back({costs.fastest(tg.blocks[b].writers[0]).seconds /
                            double(std::max<int64_t>(1, bytes(b))),
                        b});
    std::sort(byCost.begin(), byCost.end()); // ties: lower block id
    constexpr size_t kPrefixes = 32;
    for (size_t p = 0; p <= kPrefixes; ++p) {
      size_t len = (k * p + kPrefixes - 1) / kPrefixes;
      std::vector<BlockId> s;
      for (size_t j = 0; j < len; ++j)
        s.push_back(byCost[j].second);
      std::sort(s.begin(), s.end());
      if (sets.empty() || sets.back() != s)
        sets.push_back(std::move(s));
    }
  }
  int64_t bound = 0;
  for (BlockId b : seg.crossing)
    bound += boundary[b] ? bytes(b) : 0;
  std::vector<Option> cand;
  for (auto &s : sets)
    offloadModes(std::move(s), seg.full, bound, cand);
  seg.options = frontier(std::move(cand));
}

std::vector<Option> Chain::frontier(std::vector<Option> cand) {
  // The sort is stable so ties keep the enumeration order.
  std::stable_sort(cand.begin(), cand.end(),
                   [](const Option &a, const Option &b) {
                     if (a.rerun != b.rerun)
                       return a.rerun < b.rerun;
                     if (a.hold != b.hold)
                       return a.hold < b.hold;
                     return a.off < b.off;
                   });
  std::vector<Option> front;
  for (const Option &o : cand) {
    bool dominated = false;
    for (const Option &p : front)
      dominated = dominated || (p.hold <= o.hold && p.off <= o.off);
    if (!dominated)
      front.push_back(o);
  }
  return front;
}

void Chain::offloadModes(std::vector<BlockId> dropped, int64_t all,
                         int64_t bound, std::vector<Option> &out) {
  double rerun = rerunSeconds(dropped);
  int64_t kept = all;
  for (BlockId b : dropped)
    kept -= bytes(b);
  auto set = int32_t(dropSets.size());
  dropSets.push_back(std::move(dropped));
  for (Offload mode : {Offload::None, Offload::Boundary, Offload::EveryKept}) {
    int64_t off = mode == Offload::None       ? 0
                  : mode == Offload::Boundary ? bound
                                              : kept;
    if (mode != Offload::None &&
        (off == 0 || (mode == Offload::EveryKept && off == bound)))
      continue;
    out.push_back({set, mode, kept - off, off, rerun});
  }
}

void Chain::addSpanOptions(size_t c) {
  int64_t all = 0, bound = 0;
  std::vector<BlockId> dropped;
  for (BlockId b : chain[c].crossing)
    bound += boundary[b] ? bytes(b) : 0;
  for (size_t span = 2; span <= size_t(opts.maxSpan) && span <= c + 1; ++span) {
    dropped.clear();
    all = 0;
    for (size_t i = c + 1 - span; i <= c; ++i) {
      all += chain[i].full;
      for (BlockId b : chain[i].crossing)
        if (recomputable[b] && (i < c || !boundary[b]))
          dropped.push_back(b);
    }
    std::sort(dropped.begin(), dropped.end());
    offloadModes(dropped, all, bound, chain[c].spanOptions.emplace_back());
  }
}

void Chain::localPeaks() {
  // local(i): at each step of segment i, the live bytes less what earlier
  // segments' crossing blocks hold there (a Fenwick tree over segments).
  Liveness lv = computeLiveness(tg, order, costs.subBatch, opts.inPlace);
  size_t n = chain.size(), steps = order.size();
  std::vector<std::vector<std::pair<int32_t, int64_t>>> events(steps + 1);
  for (size_t i = 0; i < n; ++i)
    for (BlockId b : chain[i].crossing)
      if (lv.start[b] >= 0) {
        events[lv.start[b]].push_back({int32_t(i), bytes(b)});
        events[lv.end[b] + 1].push_back({int32_t(i), -bytes(b)});
      }
  std::vector<int64_t> tree(n + 1, 0);
  for (size_t s = 0; s < steps; ++s) {
    for (auto [i, delta] : events[s])
      for (size_t k = i + 1; k <= n; k += k & -k)
        tree[k] += delta;
    int32_t seg = segmentOfTask(order[s]);
    int64_t earlier = 0;
    for (size_t k = seg; k > 0; k -= k & -k)
      earlier += tree[k];
    // The fastest algorithm's workspace is taken while the task runs.
    int64_t live = lv.liveBytes[s] + costs.fastest(order[s]).workspace;
    chain[seg].local = std::max(chain[seg].local, live - earlier);
  }
}

bool Chain::build() {
  segs = chainSegments(tg, order);
  if (segs.count == 0)
    return false;
  chain.assign(segs.count, {});
  for (TaskId t : order) {
    const Task &task = tg.tasks[t];
    if (task.kind != TaskKind::Forward && task.kind != TaskKind::Update)
      for (BlockId b : task.reads)
        neededBack[storageOf(tg, b)] = true;
    if (task.kind == TaskKind::Forward)
      chain[segmentOfTask(t)].fwdSeconds += costs.fastest(t).seconds;
    else if (task.kind != TaskKind::Update)
      chain[segmentOfTask(t)].bwdSeconds += costs.fastest(t).seconds;
  }
  bool any = false;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const Block &blk = tg.blocks[b];
    if (blk.viewOf >= 0 || blk.kind != BlockKind::Activation ||
        blk.writers.empty() || !neededBack[b])
      continue;
    const Task &w = tg.tasks[blk.writers[0]];
    if (w.kind != TaskKind::Forward || segs.ofOp[w.op] < 0)
      continue;
    Segment &seg = chain[segs.ofOp[w.op]];
    boundary[b] = segs.ends[segs.ofOp[w.op]] == w.op;
    seg.crossing.push_back(b);
    seg.full += bytes(b);
    if (recomputable[b] && !boundary[b])
      seg.droppable.push_back(b);
    any = true;
  }
  if (!any)
    return false;
  for (size_t c = 0; c < chain.size(); ++c) {
    addOptions(chain[c]);
    addSpanOptions(c);
  }
  localPeaks();
  return true;
}

Chain::CopyRoom Chain::copyRoom() const {
  // What the copy streams can hide after each segment: the forward time
  // after it (copies out) and the backward time before its own (copies in).
  CopyRoom r{std::vector<double>(chain.size(), 0), 0};
  double fAfter = 0, bBefore = 0;
  for (size_t i = chain.size(); i-- > 0;) {
    r.cap[i] = std::min(fAfter * costs.d2hBytesPerSecond,
                        bBefore * costs.h2dBytesPerSecond);
    fAfter += chain[i].fwdSeconds;
    bBefore += chain[i].bwdSeconds;
  }
  r.volume = std::min(fAfter * costs.d2hBytesPerSecond,
                      bBefore * costs.h2dBytesPerSecond);
  return r;
}

/// The memory levels of `unit` bytes an option holds across, and the
/// offload levels of `vunit` bytes it copies out: what a move through
/// solve's states adds, and what decisions takes off again.
int64_t holdUnits(const Option &o, int64_t unit) {
  return (o.hold + unit - 1) / unit;
}
size_t offUnits(const Option &o, double vunit) {
  return o.off > 0 ? size_t(std::ceil(double(o.off) / vunit)) : 0;
}

/// An option's move through solve's states: the memory and offload units
/// it adds, and its cost in the parts the sum always added them in (so
/// that ties break as they always did).
struct OptionStep {
  int64_t hold;
  size_t off;
  double rerun, penalty;
  bool offloads;
};

std::optional<ChainDecisions>
Chain::solve(int64_t arenaBytes, double arenaFraction, bool offload) const {
  const auto arena = static_cast<int64_t>(double(arenaBytes) * arenaFraction);
  if (arena <= 0)
    return std::nullopt;
  const int levels = opts.memoryLevels;
  const int64_t unit = (arena + levels - 1) / levels;
  const size_t n = chain.size();
  const CopyRoom room = copyRoom();
  const std::vector<double> &cap = room.cap;
  const double volumeCap = room.volume;
  const double penalty = kOffloadPenalty / costs.d2hBytesPerSecond;
  const size_t spans = static_cast<size_t>(std::max(1, opts.maxSpan));
  constexpr double kInf = std::numeric_limits<double>::infinity();

  std::optional<ChainDecisions> best;
  double bestCost = kInf;
  std::vector<OptionStep> steps;
  std::vector<double> least;
  for (double share : kVolumeShares) {
    if (share > 0 && (!offload || volumeCap <= 0))
      break;
    const double total = share * volumeCap;
    const int vl = share > 0 ? std::max(1, opts.volumeLevels) : 0;
    const double vunit = share > 0 ? total / vl : 1;
    const size_t width = vl + 1, states = size_t(levels + 1) * width;
    // D[i]: the least re-run cost of segments before i per state (bytes
    // held, bytes offloaded); a ring of the last `spans` + 1.
    std::vector<std::vector<double>> ring(spans + 1,
                                          std::vector<double>(states, kInf));
    // choice[c][state]: span << 16 | option of the range ending at c.
    std::vector<std::vector<uint32_t>> choice(n);
    ring[0][0] = 0;
    for (size_t c = 0; c < n; ++c) {
      std::vector<double> &next = ring[(c + 1) % (spans + 1)];
      std::fill(next.begin(), next.end(), kInf);
      choice[c].assign(states, 0);
      // need: the most a step of the range has live beyond what the
      // segments before it hold (its recomputed blocks all come back when
      // its backward pass starts).
      int64_t need = 0;
      for (size_t span = 1; span <= spans && span <= c + 1; ++span) {
        size_t a = c + 1 - span;
        need = span == 1 ? chain[c].local
                         : std::max(chain[a].local, chain[a].full + need);
        // Without offload only share 0 is solved, where no option copies.
        const std::vector<Option> &options =
            span == 1 ? chain[c].options : chain[c].spanOptions[span - 2];
        assert(options.size() < (1u << 16) && "choice packs it in 16 bits");
        const std::vector<double> &from = ring[a % (spans + 1)];
        // A range that alone exceeds the arena leaves its excess to the
        // scheduler's evictions: what earlier segments hold cannot fix it.
        int64_t limit = need < arena ? levels - need / unit : levels;
        // Per option once, not per state: the divisions dominated.
        steps.clear();
        for (const Option &o : options)
          steps.push_back({holdUnits(o, unit), offUnits(o, vunit), o.rerun,
                           penalty * double(o.off), o.off > 0});
        // A state costing no less than one holding fewer levels at the same
        // offload level is dominated: each move from it is open to the
        // other too, at no more cost and to a lower state, so skipping it
        // changes neither the optimum nor which of its ties is chosen.
        least.assign(width, kInf);
        for (int64_t m = 0; m <= limit; ++m)
          for (size_t v = 0; v < width; ++v) {
            double cost = from[m * width + v];
            if (cost >= least[v])
              continue;
            least[v] = cost;
            const bool offloadFits =
                share != 0 && total - double(v) * vunit <= cap[c];
            for (size_t oi = 0; oi < options.size(); ++oi) {
              const OptionStep &o = steps[oi];
              size_t v2 = v + o.off;
              if (o.offloads && (!offloadFits || v2 >= width))
                continue;
              int64_t m2 = m + o.hold;
              if (m2 > levels)
                continue;
              double c2 = cost + o.rerun + o.penalty;
              size_t idx = m2 * width + v2;
              if (c2 < next[idx]) {
                next[idx] = c2;
                choice[c][idx] = uint32_t(span << 16 | oi);
              }
            }
          }
      }
    }
    const std::vector<double> &last = ring[n % (spans + 1)];
    size_t at = states;
    for (size_t idx = 0; idx < states; ++idx)
      if (last[idx] < kInf && (at == states || last[idx] < last[at]))
        at = idx;
    if (at == states || last[at] >= bestCost)
      continue;
    bestCost = last[at];
    best = decisions(choice, at, width, unit, vunit);
  }
  return best;
}

ChainDecisions
Chain::decisions(const std::vector<std::vector<uint32_t>> &choice, size_t at,
                 size_t width, int64_t unit, double vunit) const {
  const size_t n = chain.size();
  ChainDecisions d{.drop = std::vector<bool>(tg.blocks.size(), false),
                   .offload = std::vector<bool>(tg.blocks.size(), false),
                   .segments = int32_t(n)};
  for (size_t c = n; c > 0;) {
    uint32_t ch = choice[c - 1][at];
    size_t span = ch >> 16, oi = ch & 0xffff;
    const Option &o = span == 1 ? chain[c - 1].options[oi]
                                : chain[c - 1].spanOptions[span - 2][oi];
    for (BlockId b : dropSets[o.dropped])
      d.drop[b] = true;
    for (size_t i = c - span; i < c; ++i)
      for (BlockId b : chain[i].crossing)
        if (!d.drop[b] &&
            (o.offload == Offload::EveryKept ||
             (o.offload == Offload::Boundary && i == c - 1 && boundary[b])))
          d.offload[b] = true;
    d.rerunSeconds += o.rerun;
    d.offloadBytes += o.off;
    d.checkpoints += 1;
    // The state before the range: what it added taken off.
    at = (at / width - size_t(holdUnits(o, unit))) * width +
         (at % width - offUnits(o, vunit));
    c -= span;
  }
  return d;
}

} // namespace

ChainSegments chainSegments(const TaskGraph &tg,
                            const std::vector<TaskId> &order) {
  // Ops in the order of their first forward task; an op ends a segment when
  // no value made before it (the input included) is read by a later op.
  ChainSegments cs;
  cs.ofOp.assign(tg.layers.size(), -1);
  std::vector<int32_t> pos(tg.layers.size(), -1);
  std::vector<OpId> ops;
  for (TaskId t : order)
    if (tg.tasks[t].kind == TaskKind::Forward && pos[tg.tasks[t].op] < 0) {
      pos[tg.tasks[t].op] = int32_t(ops.size());
      ops.push_back(tg.tasks[t].op);
    }
  // lastReader[p + 1]: the last op position reading what op p made (index
  // 0 for the input, which no op makes).
  std::vector<int32_t> lastReader(ops.size() + 1, -1);
  for (TaskId t : order) {
    const Task &task = tg.tasks[t];
    if (task.kind != TaskKind::Forward)
      continue;
    for (BlockId b : task.reads) {
      const Block &s = tg.blocks[storageOf(tg, b)];
      if (s.kind != BlockKind::Activation && s.kind != BlockKind::Input)
        continue;
      int32_t p = -1;
      if (!s.writers.empty() &&
          tg.tasks[s.writers[0]].kind == TaskKind::Forward)
        p = pos[tg.tasks[s.writers[0]].op];
      int32_t &r = lastReader[p + 1];
      r = std::max(r, pos[task.op]);
    }
  }
  int32_t seg = 0, reach = lastReader[0];
  for (size_t k = 0; k < ops.size(); ++k) {
    cs.ofOp[ops[k]] = seg;
    if (reach <= int32_t(k)) {
      cs.ends.push_back(ops[k]);
      ++seg;
    }
    reach = std::max(reach, lastReader[k + 1]);
  }
  cs.count = int32_t(cs.ends.size());
  return cs;
}

std::optional<ChainDecisions> solveChain(const TaskGraph &tg,
                                         const std::vector<TaskId> &order,
                                         const CostTable &costs,
                                         int64_t arenaBytes,
                                         const ChainOptions &opts) {
  Chain chain(tg, order, costs, opts);
  if (!chain.build())
    return std::nullopt;
  return chain.solve(arenaBytes, opts.arenaFraction, opts.offload);
}

std::vector<std::optional<ChainDecisions>>
solveChainTries(const TaskGraph &tg, const std::vector<TaskId> &order,
                const CostTable &costs, int64_t arenaBytes,
                const ChainOptions &opts, const std::vector<ChainTry> &tries,
                const SideBySide &sideBySide) {
  std::vector<std::optional<ChainDecisions>> solved(tries.size());
  Chain chain(tg, order, costs, opts);
  if (!chain.build())
    return solved;
  sideBySide(tries.size(), [&](size_t k) {
    solved[k] =
        chain.solve(arenaBytes, tries[k].arenaFraction, tries[k].offload);
  });
  return solved;
}

} // namespace memfit
