//===- ScheduleTest.cpp - Algorithm 1, policies, and the plan verifier ----===//
#include "passes/schedule/Schedule.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/search/Pipeline.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

using namespace memfit;
using memfit::test::findTask;
using memfit::test::GraphLiteral;

namespace {

// x[N,4,16,16] -> 6 x (conv 3x3 -> relu) -> gap -> flatten -> fc(10)
Graph convChain(int64_t batch, int layers = 6) {
  GraphLiteral L(batch);
  ValueId x = L.input("x", {4, 16, 16});
  OpAttrs conv;
  conv.kernel = {3, 3};
  conv.pads = {1, 1, 1, 1};
  conv.strides = {1, 1};
  conv.dilations = {1, 1};
  for (int i = 0; i < layers; ++i) {
    std::string n = std::to_string(i);
    x = L.op(OpKind::Conv, "conv" + n, {x, L.weight("k" + n, {4, 4, 3, 3})},
             {4, 16, 16}, conv);
    x = L.op(OpKind::Relu, "relu" + n, {x}, {4, 16, 16});
  }
  L.head4(x);
  return std::move(L.g);
}

// Every task takes 1 ms per sample (so copies can hide behind compute);
// forward convolutions also have a 2x faster algorithm that needs a
// workspace the size of their output.
CostTable table(const TaskGraph &tg, int64_t b) {
  CostTable c;
  c.subBatch = b;
  c.d2hBytesPerSecond = c.h2dBytesPerSecond = 16e6; // 16 KB per ms
  c.copyLatencySeconds = 0;
  for (const Task &t : tg.tasks) {
    std::vector<AlgoCost> algos;
    double secs = 1e-3 * b;
    bool conv = t.kind == TaskKind::Forward && t.op >= 0 &&
                tg.graph->ops[t.op].kind == OpKind::Conv;
    if (conv) {
      int64_t ws = tg.blocks[t.writes[0]].bytesAt(b);
      algos.push_back({1, "fast", secs / 2, ws, false});
    }
    algos.push_back({0, "baseline", secs, 0, true});
    c.tasks.push_back(algos);
  }
  return c;
}

Plan plan(const TaskGraph &tg, Policy p, int64_t budget, int64_t b) {
  CostTable c = table(tg, b);
  auto pl = schedule(tg, c, builtOrder(tg),
                     {.policy = p, .budget = budget, .batch = b});
  if (!pl)
    FAIL(llvm::toString(pl.takeError()));
  return std::move(*pl);
}

std::string verifyMessage(const TaskGraph &tg, const Plan &p) {
  llvm::Error e = verifyPlan(tg, p);
  return e ? llvm::toString(std::move(e)) : std::string();
}

} // namespace

TEST_CASE("ideal plan: liveness only, verified", "[schedule]") {
  Graph g = convChain(4);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  Plan p = plan(*tg, Policy::Ideal, 0, 4);
  CHECK(verifyMessage(*tg, p).empty());
  CHECK(p.summary.bytesToHost == 0);
  // The arena holds at least the liveness peak (fragmentation can only add).
  Liveness lv = computeLiveness(*tg, builtOrder(*tg), 4);
  CHECK(p.arenaBytes >= lv.peakBytes - lv.weightSideBytes);
  Simulation sim = simulate(*tg, p, table(*tg, 4));
  // Fastest algorithms, no stall: compute time = sum over the round's tasks
  // (conv forwards at half price) plus updates.
  double expected = 0;
  for (const Task &t : tg->tasks)
    expected += table(*tg, 4).fastest(&t - tg->tasks.data()).seconds;
  CHECK(sim.computeSeconds == Approx(expected));
}

TEST_CASE("the policy table has one entry per policy, each named once",
          "[schedule][policy]") {
  std::set<std::string_view> names;
  for (size_t i = 0; i < policies().size(); ++i) {
    const PolicyDef &def = policies()[i];
    INFO(def.name);
    CHECK(static_cast<size_t>(def.policy) == i);
    CHECK(&policyDef(def.policy) == &def);
    CHECK(names.insert(def.name).second);
    Policy parsed = Policy::Ideal;
    REQUIRE(parsePolicy(def.name, parsed));
    CHECK(parsed == def.policy);
    CHECK(policyName(def.policy) == def.name);
    // The policy a search runs as runs its own search.
    if (def.searchesAs)
      CHECK_FALSE(policyDef(*def.searchesAs).searchesAs);
  }
  Policy none;
  CHECK_FALSE(parsePolicy("sqrt", none));
}

TEST_CASE("tight budgets force offloads, and every policy's plan verifies",
          "[schedule][policy]") {
  Graph g = convChain(4);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  Plan ideal = plan(*tg, Policy::Ideal, 0, 4);
  const int64_t budget = ideal.residentBytes + ideal.arenaBytes * 6 / 10;
  CostTable c = table(*tg, 4);
  for (const PolicyDef &def : policies()) {
    if (def.rules.unbounded)
      continue;
    INFO(def.name);
    // vDNN offloads by rule, so it may fail where Algorithm 1 succeeds
    // (it gets twice the budget); a policy whose evictions may only drop
    // recomputable blocks needs a drop set to fit. Any plan made verifies
    // and fits.
    const bool byRule =
        def.rules.layerOffload != sched::PolicyRules::LayerOffload::None;
    const bool offloads =
        def.rules.evicts && !def.rules.evictsRecomputableOrCopiedOnly;
    const int64_t b = byRule ? budget * 2 : budget;
    auto pl = schedule(*tg, c, builtOrder(*tg),
                       {.policy = def.policy, .budget = b, .batch = 4});
    if (!pl) {
      CHECK_FALSE(offloads);
      llvm::consumeError(pl.takeError());
      continue;
    }
    CHECK(verifyMessage(*tg, *pl).empty());
    CHECK(pl->totalBytes() <= b);
    // Offloading is how they fit: copies both ways (vDNN's too).
    if (offloads || byRule)
      CHECK(pl->summary.bytesToHost > 0);
    if (offloads)
      CHECK(pl->summary.bytesToDevice > 0);
  }
}

TEST_CASE("a budget below one task's footprint is refused with the task",
          "[schedule]") {
  Graph g = convChain(4);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  CostTable c = table(*tg, 4);
  // Each conv map is 4x4x16x16x4 bytes = 16 KiB; BP-data of a relu touches
  // three of them, or two when it writes dX over dY. Leave room for two.
  int64_t budget = tg->weightSideBytes() + 2 * 16384;
  ScheduleOptions separate{
      .policy = Policy::Memfit, .budget = budget, .batch = 4};
  separate.inPlace = false;
  auto pl = schedule(*tg, c, builtOrder(*tg), separate);
  REQUIRE_FALSE(static_cast<bool>(pl));
  std::string msg = llvm::toString(pl.takeError());
  CHECK(msg.find("alone needs") != std::string::npos);
  CHECK(msg.find("BP-data(relu") != std::string::npos);
  CHECK(msg.find("memfit") != std::string::npos);
  // In place, every task fits in two maps (a convolution reads one and
  // writes another), so the check lets it through to the scheduler.
  auto inPlace =
      schedule(*tg, c, builtOrder(*tg),
               {.policy = Policy::Memfit, .budget = budget, .batch = 4});
  if (!inPlace)
    CHECK(llvm::toString(inPlace.takeError()).find("alone needs") ==
          std::string::npos);
  // One map is below every convolution.
  pl = schedule(*tg, c, builtOrder(*tg),
                {.policy = Policy::Memfit,
                 .budget = tg->weightSideBytes() + 16384,
                 .batch = 4});
  REQUIRE_FALSE(static_cast<bool>(pl));
  CHECK(llvm::toString(pl.takeError()).find("alone needs") !=
        std::string::npos);
}

TEST_CASE("the verifier catches broken plans", "[verify]") {
  Graph g = convChain(4);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  Plan ideal = plan(*tg, Policy::Ideal, 0, 4);
  Plan good = plan(*tg, Policy::Memfit,
                   ideal.residentBytes + ideal.arenaBytes * 6 / 10, 4);
  REQUIRE(verifyMessage(*tg, good).empty());

  SECTION("budget") {
    Plan p = good;
    p.budget = p.totalBytes() - 1;
    CHECK(verifyMessage(*tg, p).find("[budget]") != std::string::npos);
  }
  SECTION("a missing wait") {
    // Drop the first wait that orders a copy-in before the compute stream.
    Plan p = good;
    bool dropped = false;
    for (size_t i = 0; i < p.round.size() && !dropped; ++i)
      if (p.round[i].kind == InstrKind::Wait &&
          p.round[i].stream == Stream::Compute) {
        p.round.erase(p.round.begin() + i);
        dropped = true;
      }
    REQUIRE(dropped);
    std::string msg = verifyMessage(*tg, p);
    INFO(msg);
    // The task now reads bytes a copy may still be writing, or a region a
    // copy may still be reading is reused.
    bool named = msg.find("[ready]") != std::string::npos ||
                 msg.find("[overlap]") != std::string::npos;
    CHECK(named);
  }
  SECTION("an offload that does not wait for its producer") {
    Plan p = good;
    bool dropped = false;
    for (size_t i = 0; i + 1 < p.round.size() && !dropped; ++i)
      if (p.round[i].kind == InstrKind::Wait &&
          p.round[i].stream == Stream::CopyOut &&
          p.round[i + 1].kind == InstrKind::CopyOut) {
        p.round.erase(p.round.begin() + i);
        dropped = true;
      }
    REQUIRE(dropped);
    CHECK(verifyMessage(*tg, p).find("[copy-out]") != std::string::npos);
  }
  SECTION("a task reading a block that is not resident") {
    Plan p = good;
    // Point a read at a residency of another block.
    bool changed = false;
    for (Instr &in : p.round)
      if (!changed && in.kind == InstrKind::Run && !in.operands.empty() &&
          in.operands[0] >= 0) {
        for (ResidencyId r = 0; r < (ResidencyId)p.residencies.size(); ++r)
          if (p.residencies[r].block != p.residencies[in.operands[0]].block) {
            in.operands[0] = r;
            changed = true;
            break;
          }
      }
    REQUIRE(changed);
    CHECK(verifyMessage(*tg, p).find("[ready]") != std::string::npos);
  }
  SECTION("overlapping residencies") {
    Plan p = good;
    // Put every residency at offset 0: blocks live together now collide.
    for (Residency &r : p.residencies)
      r.offset = 0;
    CHECK(verifyMessage(*tg, p).find("[overlap]") != std::string::npos);
  }
  SECTION("a task that never runs") {
    Plan p = good;
    for (size_t i = 0; i < p.round.size(); ++i)
      if (p.round[i].kind == InstrKind::Run &&
          tg->tasks[p.round[i].task].kind == TaskKind::BackwardWeight) {
        p.round.erase(p.round.begin() + i);
        break;
      }
    CHECK(verifyMessage(*tg, p).find("[structure]") != std::string::npos);
  }
  SECTION("reading a block that was dropped without a copy") {
    Plan p = good;
    bool removed = false;
    for (size_t i = 0; i < p.round.size() && !removed; ++i)
      if (p.round[i].kind == InstrKind::CopyOut &&
          p.residencies[p.round[i].residency].block != tg->inputBlock) {
        p.round[i].kind = InstrKind::Record; // no copy any more
        p.round[i].event = 0;
        removed = true;
      }
    REQUIRE(removed);
    std::string msg = verifyMessage(*tg, p);
    CHECK(msg.find("[copy-in]") != std::string::npos);
  }
}

TEST_CASE("plans are deterministic", "[schedule]") {
  Graph g = convChain(4);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  Plan ideal = plan(*tg, Policy::Ideal, 0, 4);
  int64_t budget = ideal.residentBytes + ideal.arenaBytes * 6 / 10;
  Plan a = plan(*tg, Policy::Memfit, budget, 4);
  Plan b = plan(*tg, Policy::Memfit, budget, 4);
  REQUIRE(a.round.size() == b.round.size());
  for (size_t i = 0; i < a.round.size(); ++i) {
    CHECK(a.round[i].kind == b.round[i].kind);
    CHECK(a.round[i].residency == b.round[i].residency);
  }
  REQUIRE(a.residencies.size() == b.residencies.size());
  for (size_t i = 0; i < a.residencies.size(); ++i)
    CHECK(a.residencies[i].offset == b.residencies[i].offset);
}

TEST_CASE("placement of an mlp, offsets stated exactly (no in-place)",
          "[schedule]") {
  // x[2,4] -> fc1 (W1[8,4]) -> relu -> fc2 (W2[3,8]) with every block under
  // 256 bytes, so each takes one 256-byte slot. Best fit, lowest offset on
  // ties, and a block's bytes are free again right after its last reader.
  GraphLiteral L(2);
  ValueId x = L.input("x", {4});
  OpAttrs gemm;
  gemm.transB = true;
  ValueId h = L.op(OpKind::Gemm, "fc1", {x, L.weight("W1", {8, 4})}, {8}, gemm);
  ValueId r = L.op(OpKind::Relu, "relu", {h}, {8});
  L.op(OpKind::Gemm, "fc2", {r, L.weight("W2", {3, 8})}, {3}, gemm);
  auto tg = buildTaskGraph(L.g);
  REQUIRE(static_cast<bool>(tg));
  CostTable c = table(*tg, 2);
  ScheduleOptions opts{.policy = Policy::Ideal, .budget = 0, .batch = 2};
  opts.inPlace = false;
  auto p = schedule(*tg, c, builtOrder(*tg), opts);
  REQUIRE(static_cast<bool>(p));
  CHECK(verifyMessage(*tg, *p).empty());
  std::map<std::string, int64_t> offsets;
  for (const Residency &res : p->residencies)
    offsets[tg->blocks[res.block].name] = res.offset;
  // FP(fc1): x is loaded at 0, fc1_out at 256. FP(relu): relu_out at 512;
  // fc1_out dies. FP(fc2): fc2_out reuses 256. loss: labels at 768,
  // d(fc2_out) at 1024; fc2_out and labels die. BP-data(fc2): d(relu_out)
  // takes the lowest of the two free slots, 256. BP-data(relu): after
  // d(fc2_out) died, [768, ...) is one free run: d(fc1_out) at 768.
  std::map<std::string, int64_t> expected{{"x", 0},
                                          {"fc1_out", 256},
                                          {"relu_out", 512},
                                          {"fc2_out", 256},
                                          {"labels", 768},
                                          {"d(fc2_out)", 1024},
                                          {"d(relu_out)", 256},
                                          {"d(fc1_out)", 768}};
  CHECK(offsets == expected);
  CHECK(p->arenaBytes == 1280);
}

namespace {

// x[2,32] -> fc1 -> relu1 -> fc2 -> relu2 -> fc3(10): every activation is
// 256 bytes at batch 2, one arena slot. Every task takes 2 ms; copies move
// 256 bytes per ms, so one block's copy takes 1 ms either way.
struct SlowCopyMlp {
  Graph g;
  TaskGraph tg;
  CostTable costs;
  SlowCopyMlp() {
    GraphLiteral L(2);
    ValueId x = L.input("x", {32});
    OpAttrs gemm;
    gemm.transB = true;
    x = L.op(OpKind::Gemm, "fc1", {x, L.weight("W1", {32, 32})}, {32}, gemm);
    x = L.op(OpKind::Relu, "relu1", {x}, {32});
    x = L.op(OpKind::Gemm, "fc2", {x, L.weight("W2", {32, 32})}, {32}, gemm);
    x = L.op(OpKind::Relu, "relu2", {x}, {32});
    L.op(OpKind::Gemm, "fc3", {x, L.weight("W3", {10, 32})}, {10}, gemm);
    g = std::move(L.g);
    auto built = buildTaskGraph(g);
    REQUIRE(static_cast<bool>(built));
    tg = std::move(*built);
    costs.subBatch = 2;
    costs.d2hBytesPerSecond = costs.h2dBytesPerSecond = 256e3;
    costs.copyLatencySeconds = 0;
    for (size_t t = 0; t < tg.tasks.size(); ++t)
      costs.tasks.push_back({{0, "baseline", 2e-3, 0, true}});
  }
  /// A plan that the budget of `slots` arena slots allows and the verifier
  /// passes (the ideal plan for Policy::Ideal), and its simulation.
  std::pair<Plan, Simulation> plan(Policy policy, int slots,
                                   bool inPlace = true) const {
    ScheduleOptions opts{.policy = policy,
                         .budget = tg.weightSideBytes() + slots * 256,
                         .batch = 2};
    opts.inPlace = inPlace;
    auto p = schedule(tg, costs, builtOrder(tg), opts);
    if (!p)
      FAIL(llvm::toString(p.takeError()));
    CHECK(verifyMessage(tg, *p).empty());
    Simulation sim = simulate(tg, *p, costs);
    return {std::move(*p), std::move(sim)};
  }
  /// Every copy of a plan: direction, block, offset, start and end in ms.
  struct Copy {
    std::string what;
    int64_t offset;
    double start, end;
    bool operator==(const Copy &o) const {
      return what == o.what && offset == o.offset &&
             std::abs(start - o.start) < 1e-9 && std::abs(end - o.end) < 1e-9;
    }
  };
  std::vector<Copy> copies(const Plan &p, const Simulation &sim) const {
    std::vector<Copy> out;
    for (size_t i = 0; i < p.round.size(); ++i) {
      const Instr &in = p.round[i];
      if (in.kind != InstrKind::CopyIn && in.kind != InstrKind::CopyOut)
        continue;
      const Residency &r = p.residencies[in.residency];
      out.push_back(
          {std::string(in.kind == InstrKind::CopyIn ? "in " : "out ") +
               tg.blocks[r.block].name,
           r.offset, sim.start[i] * 1e3, sim.end[i] * 1e3});
    }
    return out;
  }
};

std::ostream &operator<<(std::ostream &os, const SlowCopyMlp::Copy &c) {
  return os << c.what << "@" << c.offset << " [" << c.start << ", " << c.end
            << "] ms";
}

} // namespace

TEST_CASE("moDNN on four slots, no in-place: offloads, offsets and prefetch "
          "times stated exactly",
          "[schedule]") {
  SlowCopyMlp m;
  // The ideal plan needs six slots; give four.
  auto [p, sim] = m.plan(Policy::Modnn, 4, /*inPlace=*/false);
  // - x loads at 0-1 ms. After FP(fc1) the labels are prefetched (Eq. 4)
  //   into x's slot: x has a host copy, so it leaves for free.
  // - FP(fc3) fits in the slot fc1_out and fc2_out used. loss needs one
  //   more slot: relu1_out (needed again at BP-weight(fc2)) and relu2_out
  //   both copy out with no delay, since each copy could run as soon as its
  //   block was written; the tie goes to the lower offset, relu1_out at 512,
  //   copied out at 5-6 ms, right after FP(relu1).
  // - Eq. 4 issues relu1_out's prefetch after BP-data(relu2) (issued one
  //   task later, it would end at 22 ms, after BP-weight(fc2) starts at
  //   21 ms). The copy waits only for the last use of the bytes it fills,
  //   done at 17 ms, not for a neighbouring segment's use merged into the
  //   same free run: 17-18 ms. x comes back into relu2_out's old slot right
  //   after, 19-20 ms, ahead of BP-weight(fc1) at 25 ms.
  std::vector<SlowCopyMlp::Copy> expected{{"in x", 0, 0, 1},
                                          {"in labels", 0, 3, 3.03125},
                                          {"out relu1_out", 512, 5, 6},
                                          {"in relu1_out", 512, 17, 18},
                                          {"in x", 768, 19, 20}};
  CHECK(m.copies(p, sim) == expected);
  // The only wait is the first load of x, as in the ideal plan: 13 tasks
  // of 2 ms after 1 ms.
  CHECK(sim.stallSeconds == Approx(1e-3));
  CHECK(sim.roundSeconds == Approx(27e-3));
  CHECK(p.arenaBytes == 4 * 256);
}

TEST_CASE("moDNN on three slots, no in-place: a second offload and a stall",
          "[schedule]") {
  SlowCopyMlp m;
  auto [p, sim] = m.plan(Policy::Modnn, 3, /*inPlace=*/false);
  // - FP(fc3) writes fc3_out where fc2_out was. loss needs two more slots,
  //   for the labels and d(fc3_out): relu2_out copies out at 9-10 ms and
  //   relu1_out behind it at 10-11 ms. The labels take relu2_out's slot,
  //   but FP(fc3) reads relu2_out until 11 ms, so they arrive at 11.03125
  //   ms and loss starts that much late.
  // - relu2_out and relu1_out come back in time for BP-weight(fc3) and
  //   BP-weight(fc2). x gets a slot only when BP-data(relu1), the last
  //   reader of relu1_out, ends at 25.03125 ms: it arrives 1 ms late.
  std::vector<SlowCopyMlp::Copy> expected{
      {"in x", 0, 0, 1},
      {"out relu2_out", 0, 9, 10},
      {"in labels", 0, 11, 11.03125},
      {"out relu1_out", 512, 10, 11},
      {"in relu2_out", 256, 13.03125, 14.03125},
      {"in relu1_out", 256, 19.03125, 20.03125},
      {"in x", 256, 25.03125, 26.03125}};
  CHECK(m.copies(p, sim) == expected);
  // Waits: the first load of x, the labels, and x again.
  CHECK(sim.stallSeconds == Approx(1e-3 + 0.03125e-3 + 1e-3));
  CHECK(sim.roundSeconds == Approx(28.03125e-3));
  CHECK(p.summary.bytesToHost == 2 * 256);
}

TEST_CASE("in place: relus over their inputs, their backward over dY",
          "[schedule]") {
  SlowCopyMlp m;
  Plan p = m.plan(Policy::Ideal, 0).first;
  std::map<std::string, std::vector<int64_t>> offsets;
  for (const Residency &res : p.residencies)
    offsets[m.tg.blocks[res.block].name].push_back(res.offset);
  CHECK(offsets["fc1_out"] == std::vector<int64_t>{256});
  CHECK(offsets["relu1_out"] == std::vector<int64_t>{256});
  CHECK(offsets["fc2_out"] == std::vector<int64_t>{512});
  CHECK(offsets["relu2_out"] == std::vector<int64_t>{512});
  CHECK(offsets["d(relu2_out)"] == std::vector<int64_t>{768});
  CHECK(offsets["d(fc2_out)"] == std::vector<int64_t>{768});
  CHECK(offsets["d(relu1_out)"] == std::vector<int64_t>{512});
  CHECK(offsets["d(fc1_out)"] == std::vector<int64_t>{512});
  CHECK(p.summary.inPlaceRuns == 4);
}

TEST_CASE("moDNN on three slots, in place: no wait but the first load",
          "[schedule]") {
  SlowCopyMlp m;
  auto [p, sim] = m.plan(Policy::Modnn, 3);
  CHECK(p.summary.inPlaceRuns == 4);
  // - relu1 and relu2 write over fc1_out (256) and fc2_out (512), so FP(fc3)
  //   finds room once x leaves (it has a host copy): fc3_out at 0.
  // - loss needs the labels and d(fc3_out). relu1_out copies out (5-6 ms)
  //   and the labels take its slot as soon as FP(fc2), its last reader so
  //   far, is done at 7 ms: no wait, where the plan without in-place waited
  //   0.03125 ms. relu2_out copies out at 9-10 ms for d(fc3_out).
  // - relu1_out comes back at 17-18 ms, as soon as the bytes it fills are
  //   done with (as in the plan without in-place).
  // - BP-data(relu2) writes d(fc2_out) over d(relu2_out) at 0, so once
  //   BP-weight(fc2) has read it (23 ms) x comes back there, 1 ms before
  //   BP-weight(fc1) needs it: without in-place it came 1 ms late.
  std::vector<SlowCopyMlp::Copy> expected{{"in x", 0, 0, 1},
                                          {"out relu1_out", 256, 5, 6},
                                          {"in labels", 256, 7, 7.03125},
                                          {"out relu2_out", 512, 9, 10},
                                          {"in relu2_out", 256, 13, 14},
                                          {"in relu1_out", 512, 17, 18},
                                          {"in x", 0, 23, 24}};
  CHECK(m.copies(p, sim) == expected);
  CHECK(sim.stallSeconds == Approx(1e-3));
  CHECK(sim.roundSeconds == Approx(27e-3));
}

TEST_CASE("the verifier accepts an overlap in place only where the task "
          "allows it",
          "[verify]") {
  SlowCopyMlp m;
  Plan p = m.plan(Policy::Ideal, 0).first; // verified
  REQUIRE(p.summary.inPlaceRuns > 0);
  // The same plan over a task graph whose relus may not run in place: the
  // output written over the live input is an overlap.
  TaskGraph strict = m.tg;
  for (Task &t : strict.tasks)
    t.mayRunInPlace = false;
  std::string msg = verifyMessage(strict, p);
  CHECK(msg.find("[overlap]") != std::string::npos);
  CHECK(msg.find("relu") != std::string::npos);
}

TEST_CASE("vDNN out of room says how much is free and how fragmented",
          "[schedule]") {
  SlowCopyMlp m;
  // vDNN never evicts beyond its rule: three slots are too few.
  auto p = schedule(m.tg, m.costs, builtOrder(m.tg),
                    {.policy = Policy::VdnnAll,
                     .budget = m.tg.weightSideBytes() + 3 * 256,
                     .batch = 2});
  REQUIRE_FALSE(static_cast<bool>(p));
  llvm::Error err = p.takeError();
  CHECK(err.isA<Infeasible>());
  std::string msg = llvm::toString(std::move(err));
  CHECK(msg.find("vdnn-all cannot meet the budget") != std::string::npos);
  CHECK(msg.find("of the 768-byte arena are free, the largest free run is") !=
        std::string::npos);
}

TEST_CASE("a broken invariant in the scheduler stays an internal error",
          "[schedule][diagnostics]") {
  // FP(conv0) is made to read conv1's output, which nothing has written
  // yet: the block has no copy anywhere. That is memfit's bug, never an
  // infeasible budget, so it must not come back as a user error (exit 1)
  // from the scheduler or from the pipeline around it.
  Graph g = convChain(4);
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  auto forwardOf = [&](const std::string &name) {
    for (TaskId t = 0; t < static_cast<TaskId>(tg->tasks.size()); ++t)
      if (tg->tasks[t].name == "FP(" + name + ")")
        return t;
    FAIL("no task FP(" << name << ")");
    return TaskId(-1);
  };
  TaskId first = forwardOf("conv0");
  BlockId late = tg->tasks[forwardOf("conv1")].writes[0];
  tg->tasks[first].reads.push_back(late);
  std::vector<TaskId> &readers = tg->blocks[late].readers;
  readers.insert(readers.begin(), first);
  CostTable c = table(*tg, 4);
  for (const PolicyDef &def : policies()) {
    INFO(def.name);
    auto pl = schedule(*tg, c, builtOrder(*tg),
                       {.policy = def.policy,
                        .budget = tg->weightSideBytes() + 8 * 16384,
                        .batch = 4});
    REQUIRE_FALSE(static_cast<bool>(pl));
    llvm::Error err = pl.takeError();
    CHECK(err.isA<InternalError>());
    CHECK(llvm::toString(std::move(err)).find("has no copy anywhere") !=
          std::string::npos);
  }
  PlanRequest req;
  req.policy = Policy::Memfit;
  req.budgetFraction = 0.5;
  req.batch = 4;
  auto out = planTraining(
      *tg, [&](int64_t) -> const CostTable & { return c; }, req);
  REQUIRE_FALSE(static_cast<bool>(out));
  llvm::Error err = out.takeError();
  llvm::Error internal = takeInternalErrors(err);
  CHECK(static_cast<bool>(internal));
  llvm::consumeError(std::move(internal));
  llvm::consumeError(std::move(err));
  // In a table of plans it is not a cell's reason: it ends the table.
  auto cell = planOrReason(
      *tg, [&](int64_t) -> const CostTable & { return c; }, req);
  REQUIRE_FALSE(static_cast<bool>(cell));
  int internals = 0, others = 0;
  llvm::handleAllErrors(
      cell.takeError(), [&](const InternalError &) { ++internals; },
      [&](const llvm::ErrorInfoBase &) { ++others; });
  CHECK(internals > 0);
  CHECK(others == 0);
}

TEST_CASE("a task asked to run its fastest algorithm makes room for it",
          "[schedule]") {
  // Copies at 1 KB/s: making room for a workspace costs far more than the
  // fast algorithm saves. The arena holds the liveness peak; conv5's fast
  // algorithm needs 512 bytes more at its step than is free, so Eq. 5 runs
  // conv5 at its baseline. Asked for its fastest algorithm
  // (ScheduleOptions::fastestAlgo), the scheduler evicts for the workspace
  // and runs it; the plan still verifies.
  Graph g = convChain(2);
  auto built = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(built));
  const TaskGraph &tg = *built;
  CostTable c = table(tg, 2);
  c.d2hBytesPerSecond = c.h2dBytesPerSecond = 1e3;
  std::vector<TaskId> order = builtOrder(tg);
  Liveness lv = computeLiveness(tg, order, 2, /*inPlace=*/true);
  TaskId conv5 = findTask(tg, "FP(conv5)");
  size_t step = std::find(order.begin(), order.end(), conv5) - order.begin();
  REQUIRE(step < order.size());
  const int64_t maxLive =
      *std::max_element(lv.liveBytes.begin(), lv.liveBytes.end());
  REQUIRE(c.tasks[conv5].size() == 2);
  c.tasks[conv5][0].workspace = maxLive - lv.liveBytes[step] + 512;
  ScheduleOptions so{.policy = Policy::Memfit,
                     .budget = lv.weightSideBytes + maxLive,
                     .batch = 2};
  auto algoOf = [&](const Plan &p) {
    for (const Instr &in : p.round)
      if (in.kind == InstrKind::Run && in.task == conv5 && !in.recompute)
        return in.algo;
    return -1;
  };
  auto plain = schedule(tg, c, order, so);
  REQUIRE(static_cast<bool>(plain));
  CHECK(algoOf(*plain) == 0);
  so.fastestAlgo.assign(tg.tasks.size(), false);
  so.fastestAlgo[conv5] = true;
  auto fast = schedule(tg, c, order, so);
  REQUIRE(static_cast<bool>(fast));
  CHECK(algoOf(*fast) == 1);
  CHECK(verifyMessage(tg, *fast) == "");
}
