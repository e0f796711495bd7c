//===- TiersTest.cpp - Weights homed in host memory -----------------------===//
#include "TiersTestUtil.h"

#include "codegen/Emit.h"
#include "codegen/PlanJson.h"
#include "codegen/PlanReport.h"
#include "codegen/Trace.h"
#include "compiler/ir/OffloadSlots.h"
#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"
#include "passes/schedule/HostOverlap.h"
#include "passes/search/Tiers.h"

#include <algorithm>
#include <set>

using namespace memfit;
using memfit::test::adamw;
using memfit::test::HostPlanned;
using memfit::test::occurrences;

namespace {

/// The host's updates of `plan`, one after another, at `t`'s host rate.
double hostUpdateSeconds(const Plan &plan, const TaskGraph &tg,
                         const CostTable &t) {
  double host = 0;
  for (const Instr &in : plan.update)
    if (in.onHost)
      host += t.hostUpdateSeconds(updatedParams(tg, tg.tasks[in.task]));
  return host;
}

/// `p` planned under half its weight side in one round of four: homed,
/// with its proven bound.
PlanOutcome homedInOneRound(HostPlanned &p) {
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30, 4);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->homed);
  REQUIRE(out->plan.numSubBatches == 1);
  INFO(out->boundWhy);
  REQUIRE(out->bound.has_value());
  return std::move(*out);
}

/// The round's forward tasks and loss at their fastest, one after another.
double forwardSeconds(const Plan &plan, const TaskGraph &tg,
                      const CostTable &t) {
  double forward = 0;
  for (const Instr &in : plan.round)
    if (in.kind == InstrKind::Run && !in.recompute &&
        (tg.tasks[in.task].kind == TaskKind::Forward ||
         tg.tasks[in.task].kind == TaskKind::Loss))
      forward += t.fastest(in.task).seconds;
  return forward;
}

int64_t count(const Plan &plan, InstrKind k, bool onHost) {
  return std::count_if(
      plan.update.begin(), plan.update.end(),
      [&](const Instr &in) { return in.kind == k && in.onHost == onHost; });
}

/// What the verifier says of `plan` once block `b` of `tg` is homed on
/// NVMe too (the plan's home byte counts following); "" if it accepts it.
std::string verifiedWithOnNvme(TaskGraph tg, Plan plan, BlockId b) {
  tg.homes[b] = Tier::Nvme;
  plan.nvmeHomeBytes = tg.homedBytes(Tier::Nvme);
  plan.hostHomeBytes = tg.homedBytes(Tier::Host);
  llvm::Error err = verifyPlan(tg, plan);
  return err ? llvm::toString(std::move(err)) : std::string();
}

} // namespace

TEST_CASE("a weight's blocks share a home; BatchNorm's running statistics "
          "stay on the GPU",
          "[tiers]") {
  HostPlanned p("resnet18", 2);
  std::vector<WeightBlocks> ws = homeableWeights(p.tg);
  REQUIRE(!ws.empty());
  for (size_t i = 1; i < ws.size(); ++i)
    CHECK(ws[i - 1].bytes >= ws[i].bytes); // largest first
  for (const WeightBlocks &w : ws) {
    INFO(p.tg.blocks[w.weight].name);
    // AdamW: the weight, its gradient and two moments.
    int64_t kinds[4] = {};
    for (BlockId b : w.blocks)
      switch (p.tg.blocks[b].kind) {
      case BlockKind::Weight:
        ++kinds[0];
        break;
      case BlockKind::WeightGrad:
        ++kinds[1];
        break;
      case BlockKind::Momentum:
        ++kinds[2];
        break;
      case BlockKind::SecondMoment:
        ++kinds[3];
        break;
      default:
        FAIL("a block of another kind: " << p.tg.blocks[b].name);
      }
    CHECK((kinds[0] == 1 && kinds[1] == 1 && kinds[2] == 1 && kinds[3] == 1));
    for (TaskId t : p.tg.blocks[w.weight].writers)
      CHECK(p.tg.tasks[t].kind == TaskKind::Update);
  }
  // Every BatchNorm's running mean and variance (written by its forward)
  // is left out: 20 BatchNorms with 4 trained weights and 2 statistics
  // each, 20 convolutions and the classifier's weight and bias.
  int64_t weights = 0;
  for (const Block &b : p.tg.blocks)
    weights += b.kind == BlockKind::Weight;
  CHECK(weights - static_cast<int64_t>(ws.size()) == 2 * 20);
}

TEST_CASE("homesMoving moves whole weights, largest first, until the bytes "
          "have left",
          "[tiers]") {
  HostPlanned p("gpt2-tiny", 2);
  std::vector<WeightBlocks> ws = homeableWeights(p.tg);
  REQUIRE(ws.size() >= 3);
  CHECK(std::count(p.tg.homes.begin(), p.tg.homes.end(), Tier::Host) == 0);
  std::vector<Tier> homes = homesMoving(p.tg, ws, ws[0].bytes + 1);
  TaskGraph homed = p.tg;
  homed.homes = homes;
  CHECK(homed.homedBytes(Tier::Host) == ws[0].bytes + ws[1].bytes);
  CHECK(homed.weightSideBytes() ==
        p.tg.weightSideBytes() - ws[0].bytes - ws[1].bytes);
  CHECK_FALSE(verifyTaskGraph(homed).has_value());
  // Only a weight's blocks may leave.
  homed.homes[homed.lossBlock] = Tier::Host;
  CHECK(verifyTaskGraph(homed).has_value());
}

TEST_CASE("a budget below the weight side plans with weights homed on the "
          "host",
          "[tiers][pipeline][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const int64_t weightSide = p.tg.weightSideBytes();
  // Without the host tier the budget is refused.
  auto gpuOnly = p.planBytes(weightSide / 2, 0);
  REQUIRE_FALSE(static_cast<bool>(gpuOnly));
  CHECK_THAT(llvm::toString(gpuOnly.takeError()),
             Catch::Contains("--host-budget"));

  auto out = p.planBytes(weightSide / 2, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->homed);
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const Plan &plan = out->plan;
  CHECK(plan.hostHomeBytes > 0);
  CHECK(plan.hostHomeBytes == tg.homedBytes(Tier::Host));
  CHECK(plan.deviceBytes() <= plan.budget);
  CHECK(plan.residentBytes + plan.hostHomeBytes == weightSide);
  // One update on the host per trained weight homed there (the model's
  // constants are weights without gradient or update), none on the GPU.
  int64_t homedWeights = 0, homedTrained = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.homeOf(b) == Tier::Host) {
      homedWeights += tg.blocks[b].kind == BlockKind::Weight;
      homedTrained += tg.blocks[b].kind == BlockKind::WeightGrad;
    }
  CHECK(homedTrained > 0);
  CHECK(homedWeights >= homedTrained);
  CHECK(count(plan, InstrKind::Run, true) == homedTrained);
  for (const Instr &in : plan.update)
    CHECK(in.onHost == tg.runsOnHost(tg.tasks[in.task]));
  // Each round copies every homed weight in and every homed gradient out.
  int64_t copiedOut = 0;
  for (const Instr &in : plan.round)
    if (in.kind == InstrKind::CopyOut &&
        tg.blocks[plan.residencies[in.residency].block].kind ==
            BlockKind::WeightGrad)
      ++copiedOut;
  CHECK(copiedOut >= homedTrained);
  CHECK(out->sim.bytesToDevice >= plan.hostHomeBytes / 4);
  // The overhead is over the model's own ideal, every weight on the GPU.
  auto ideal = p.planBytes(weightSide * 10, 0);
  REQUIRE(static_cast<bool>(ideal));
  CHECK(out->idealSeconds == Approx(ideal->idealSeconds));
  CHECK_FALSE(static_cast<bool>(verifyPlan(tg, plan)));
}

TEST_CASE("allowing the host tier never gives a slower plan", "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const int64_t weightSide = p.tg.weightSideBytes();
  auto plain = p.planBytes(weightSide * 3, 0);
  auto tiered = p.planBytes(weightSide * 3, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(plain));
  REQUIRE(static_cast<bool>(tiered));
  CHECK(tiered->plan.summary.plannedSeconds <=
        plain->plan.summary.plannedSeconds);
}

TEST_CASE("the host budget bounds what is homed there", "[tiers]") {
  HostPlanned p("gpt2-tiny", 4);
  const int64_t weightSide = p.tg.weightSideBytes();
  auto out = p.planBytes(weightSide / 2, weightSide / 100);
  REQUIRE_FALSE(static_cast<bool>(out));
  llvm::Error err = out.takeError();
  CHECK(err.isA<Infeasible>());
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("--host-budget"));
}

TEST_CASE("a homed gradient adds to its earlier sub-batches' and goes home "
          "every round",
          "[tiers][verify][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const int64_t weightSide = p.tg.weightSideBytes();
  auto out = p.planBytes(weightSide / 2, int64_t(1) << 30, /*forced=*/2);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->plan.numSubBatches == 2);
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  Plan plan = out->plan;
  REQUIRE_FALSE(static_cast<bool>(verifyPlan(tg, plan)));
  // With two sub-batches each round brings the sum so far in before it
  // adds to it.
  auto isGradCopy = [&](const Instr &in, InstrKind k) {
    return in.kind == k &&
           tg.blocks[plan.residencies[in.residency].block].kind ==
               BlockKind::WeightGrad;
  };
  CHECK(std::any_of(plan.round.begin(), plan.round.end(), [&](auto &in) {
    return isGradCopy(in, InstrKind::CopyIn);
  }));
  // A plan that leaves one gradient on the device is caught.
  auto it = std::find_if(plan.round.begin(), plan.round.end(), [&](auto &in) {
    return isGradCopy(in, InstrKind::CopyOut);
  });
  REQUIRE(it != plan.round.end());
  plan.round.erase(it);
  llvm::Error err = verifyPlan(tg, plan);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("[home]"));
  // An update of a homed weight run on the GPU is caught.
  plan = out->plan;
  for (Instr &in : plan.update)
    if (in.onHost) {
      in.onHost = false;
      break;
    }
  err = verifyPlan(tg, plan);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("[home]"));
}

TEST_CASE("the generated trainer copies homed weights through the arena and "
          "updates them on the host",
          "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30, 2);
  REQUIRE(static_cast<bool>(out));
  CHECK(p.tg.homes.empty()); // the model's graph is left as it was
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  REQUIRE(out->plan.hostHomeBytes > 0);
  REQUIRE(out->plan.numSubBatches > 1);
  auto files = emitTrainer(tg, out->plan, {});
  REQUIRE(static_cast<bool>(files));
  std::string all, update, mainCpp;
  for (const GeneratedFile &f : *files) {
    all += f.contents;
    if (f.path == "src/schedule.cpp")
      update = f.contents.substr(f.contents.find("memfit_update"));
    if (f.path == "src/main.cpp")
      mainCpp = f.contents;
  }
  // Weight ids in emission order are the graph's weights in order.
  int32_t id = 0, homed = 0, hostUpdates = 0;
  for (ValueId w : tg.graph->weights()) {
    const std::string ids = std::to_string(id++);
    if (tg.homeOf(tg.valueBlock[w]) != Tier::Host) {
      CHECK(all.find("x.hostUpdate(" + ids + ")") == std::string::npos);
      continue;
    }
    INFO(tg.graph->values[w].name);
    ++homed;
    // Never a resident pointer: the arena copy of the plan.
    CHECK(all.find("x.weight(" + ids + ")") == std::string::npos);
    CHECK(all.find("x.grad(" + ids + ")") == std::string::npos);
    CHECK(all.find("x.copyInHome(HomeTensor::Weight, " + ids + ", ") !=
          std::string::npos);
    if (tg.graph->values[w].trainable) {
      CHECK(all.find("x.copyOutHome(") != std::string::npos);
      // Several sub-batches: the sum so far comes back in.
      CHECK(all.find("x.copyInHome(HomeTensor::Grad, " + ids + ", ") !=
            std::string::npos);
      // Started in the last round once its gradient is home, or by the
      // update after the rounds.
      CHECK(
          (update.find("x.hostUpdate(" + ids + ")") != std::string::npos) !=
          (all.find("x.hostReady(CopyOut, " + ids + ")") != std::string::npos));
      ++hostUpdates;
    }
  }
  CHECK(homed > 0);
  CHECK(hostUpdates > 0);
  // The host's updates are joined at the update's end, after every one.
  size_t join = update.find("x.joinHost();");
  REQUIRE(join != std::string::npos);
  size_t lastUpdate = update.rfind("x.hostUpdate(");
  CHECK((lastUpdate == std::string::npos || lastUpdate < join));
  CHECK(mainCpp.find(".home = Home::Host") != std::string::npos);
}

TEST_CASE("a device that states no host cannot home weights there", "[tiers]") {
  HostPlanned p("gpt2-tiny", 4, "k40m");
  CHECK(p.table(4).hostUpdateParamsPerSecond == 0);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30);
  REQUIRE_FALSE(static_cast<bool>(out));
  CHECK_THAT(llvm::toString(out.takeError()),
             Catch::Contains("states no host optimizer rate"));
}

TEST_CASE("the host's update is priced at the device's host rate",
          "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const CostTable &t = p.table(4);
  // AdamW: the DGX H100 share's 14 cores (DeviceSpec::hostAdamRate).
  CHECK(t.hostUpdateParamsPerSecond ==
        Approx(14 * kHostAdamParamsPerCoreSecond));
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(out));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  double host = 0;
  for (const Instr &in : out->plan.update)
    if (in.onHost)
      host += static_cast<double>(updatedParams(tg, tg.tasks[in.task])) /
              t.hostUpdateParamsPerSecond;
  REQUIRE(host > 0);
  // The host runs one update after another: busy for their sum, inside the
  // iteration.
  double busy = 0;
  for (size_t i = 0; i < out->plan.update.size(); ++i)
    if (out->plan.update[i].onHost) {
      busy += out->sim.updateEnd[i] - out->sim.updateStart[i];
      CHECK(out->sim.updateEnd[i] <= out->sim.updateSeconds * (1 + 1e-9));
    }
  CHECK(busy == Approx(host));
  CHECK(out->sim.iterationSeconds >= host * (1 - 1e-9));
}

namespace {

/// The round instruction that records event e.
size_t recordOf(const Plan &plan, EventId e) {
  for (size_t i = 0; i < plan.round.size(); ++i)
    if (plan.round[i].kind == InstrKind::Record && plan.round[i].event == e)
      return i;
  return plan.round.size();
}

} // namespace

TEST_CASE("a host update starts inside the last round once its weight's "
          "copies there are done",
          "[tiers][verify][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30, 2);
  REQUIRE(static_cast<bool>(out));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const Plan &plan = out->plan;
  REQUIRE(plan.numSubBatches == 2);
  int64_t overlapped = 0;
  bool gpuSeen = false, hostSeen = false;
  for (const Instr &in : plan.update) {
    // The device's updates first, then the host's.
    CHECK_FALSE((!in.onHost && hostSeen));
    gpuSeen |= !in.onHost;
    hostSeen |= in.onHost;
    if (!in.onHost || in.event < 0)
      continue;
    ++overlapped;
    INFO(tg.tasks[in.task].name);
    // The event is recorded on the copy-out stream right after the copy of
    // this weight's gradient home.
    size_t r = recordOf(plan, in.event);
    REQUIRE(r < plan.round.size());
    REQUIRE(r > 0);
    CHECK(plan.round[r].stream == Stream::CopyOut);
    const Instr &copy = plan.round[r - 1];
    REQUIRE(copy.kind == InstrKind::CopyOut);
    BlockId b = plan.residencies[copy.residency].block;
    std::vector<BlockId> mine = hostUpdateBlocks(tg, tg.tasks[in.task]);
    CHECK(std::binary_search(mine.begin(), mine.end(), b));
    CHECK(tg.blocks[b].kind == BlockKind::WeightGrad);
  }
  CHECK(overlapped > 0);
  REQUIRE_FALSE(static_cast<bool>(verifyPlan(tg, plan)));

  // Started after the rounds instead, the iteration takes no less, and the
  // overlapped host starts before the rounds end.
  Plan after = plan;
  for (Instr &in : after.update)
    in.event = -1;
  REQUIRE_FALSE(static_cast<bool>(verifyPlan(tg, after)));
  const CostTable &full = p.table(plan.subBatch);
  Simulation serial = simulate(tg, after, full, nullptr);
  Simulation overlappedSim = simulate(tg, plan, full, nullptr);
  CHECK(overlappedSim.iterationSeconds <= serial.iterationSeconds);
  CHECK(std::any_of(overlappedSim.updateStart.begin(),
                    overlappedSim.updateStart.end(),
                    [](double t) { return t < 0; }));
  CHECK(std::all_of(serial.updateStart.begin(), serial.updateStart.end(),
                    [](double t) { return t >= 0; }));

  // An update started before its gradient's copy home is caught.
  Plan early = plan;
  for (const Instr &in : early.update)
    if (in.onHost && in.event >= 0) {
      size_t r = recordOf(early, in.event);
      std::swap(early.round[r - 1], early.round[r]);
      break;
    }
  llvm::Error err = verifyPlan(tg, early);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("[home]"));
  // As is one that waits for an event the round never records.
  Plan unrecorded = plan;
  for (Instr &in : unrecorded.update)
    if (in.onHost) {
      in.event = unrecorded.numEvents++;
      break;
    }
  err = verifyPlan(tg, unrecorded);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("[home]"));
}

TEST_CASE("fp16's host updates wait for the rounds: the loss scale decides "
          "after the backward pass whether any update runs",
          "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::FP16);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(out));
  int64_t host = 0;
  for (const Instr &in : out->plan.update)
    if (in.onHost) {
      ++host;
      CHECK(in.event == -1);
    }
  CHECK(host > 0);
}

TEST_CASE("clipping's updates wait for the norm over every gradient, which "
          "the plan prices and the bound counts",
          "[tiers][clip][slow]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::FP32, 1.0);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30, 2);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->homed);
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const Plan &plan = out->plan;
  REQUIRE(plan.numSubBatches == 2);
  int64_t host = 0;
  for (const Instr &in : plan.update)
    if (in.onHost) {
      ++host;
      CHECK(in.event == -1);
    }
  REQUIRE(host > 0);
  REQUIRE_FALSE(static_cast<bool>(verifyPlan(tg, plan)));

  // Three passes over every gradient's bytes where it lives, two launches
  // and a copy: no update, the device's or the host's, starts before.
  const CostTable &full = p.table(plan.subBatch);
  const double clip = full.gradientClipSeconds(tg);
  int64_t gpuGrad = 0, hostGrad = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.blocks[b].kind == BlockKind::WeightGrad)
      (tg.homeOf(b) == Tier::Gpu ? gpuGrad : hostGrad) +=
          tg.blocks[b].bytesAt(1);
  REQUIRE(hostGrad > 0);
  CHECK(
      clip ==
      Approx(3.0 * hostGrad / full.hostBytesPerSecond +
             (gpuGrad > 0 ? 3.0 * gpuGrad / full.deviceBytesPerSecond +
                                2 * full.launchSeconds + full.copyLatencySeconds
                          : 0.0)));
  Simulation sim = simulate(tg, plan, full, nullptr);
  CHECK(sim.clipSeconds == Approx(clip));
  for (double t : sim.updateStart)
    CHECK(t >= clip * (1 - 1e-9));
  CHECK(out->bound.has_value());
  if (out->bound)
    CHECK(out->bound->seconds >=
          (clip + hostUpdateSeconds(plan, tg, full)) * (1 - 1e-9));

  // The same plan without clipping lets host updates start in the last
  // round; with clipping such a start is refused.
  TaskGraph unclipped = tg;
  unclipped.clipGradNorm = 0;
  Plan early = plan;
  REQUIRE(overlapHostUpdates(unclipped, early) > 0);
  REQUIRE_FALSE(static_cast<bool>(verifyPlan(unclipped, early)));
  llvm::Error err = verifyPlan(tg, early);
  REQUIRE(static_cast<bool>(err));
  CHECK_THAT(llvm::toString(std::move(err)), Catch::Contains("global norm"));
  // And the unclipped plan is no slower: nothing waits for a norm.
  CHECK(simulate(unclipped, early, full, nullptr).iterationSeconds <
        sim.iterationSeconds);
}

TEST_CASE("a homing chosen by another graph of the model is tried first, "
          "and only larger ones after it",
          "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const int64_t budget = p.tg.weightSideBytes() / 2;
  auto full = p.planBytes(budget, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(full));
  REQUIRE(full->homed);
  const int64_t chosen = full->homed->homedBytes(Tier::Host);
  auto planFrom = [&](int64_t atLeast) {
    return p.planBytes(budget, int64_t(1) << 30, 0, atLeast);
  };
  // The same homing gives the same plan.
  auto same = planFrom(chosen);
  REQUIRE(static_cast<bool>(same));
  REQUIRE(same->homed);
  CHECK(same->homed->homedBytes(Tier::Host) == chosen);
  CHECK(same->plan.summary.plannedSeconds ==
        Approx(full->plan.summary.plannedSeconds));
  // From 0 bytes: none fits under this budget, so the first that plans is
  // at least the one the full search chose (which is the fastest).
  auto from0 = planFrom(0);
  REQUIRE(static_cast<bool>(from0));
  REQUIRE(from0->homed);
  CHECK(from0->plan.summary.plannedSeconds >=
        full->plan.summary.plannedSeconds * (1 - 1e-9));
  // Every homeable weight: all of them are homed.
  int64_t homeable = 0;
  for (const WeightBlocks &w : homeableWeights(p.tg))
    homeable += w.bytes;
  auto all = planFrom(homeable);
  REQUIRE(static_cast<bool>(all));
  REQUIRE(all->homed);
  CHECK(all->homed->homedBytes(Tier::Host) == homeable);
}

TEST_CASE("the report, plan.json and the trace show the host's updates",
          "[tiers][report][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30, 2);
  REQUIRE(static_cast<bool>(out));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  PlanContext ctx;
  PlanReport r = buildPlanReport(tg, out->plan, out->sim, ctx);
  int64_t host = 0;
  for (const Instr &in : out->plan.update)
    host += in.onHost;
  REQUIRE(host > 0);
  CHECK(r.summary.hostUpdates == host);
  CHECK(r.summary.hostUpdatesOverlapped > 0);
  CHECK(r.summary.hostUpdatesOverlapped <= host);
  int64_t onHostTrack = 0;
  for (const ReportTask &t : r.tasks)
    onHostTrack += t.stream == "host";
  CHECK(onHostTrack == host);
  std::string trace = planToTrace(r);
  CHECK(trace.find("host's cores") != std::string::npos);
  CHECK(trace.find("\"tid\":4") != std::string::npos);
  std::string json = planToJson(r);
  CHECK(json.find("\"host_updates_overlapped\"") != std::string::npos);
  CHECK(json.find("\"after_event\"") != std::string::npos);
  // An update started inside the last round begins before the update
  // section, where its times count from: `memfit report` reads it back.
  bool early = false;
  for (const ReportTask &t : r.tasks)
    early = early || (t.section == "update" && t.start < 0);
  CHECK(early);
  auto back = parsePlanJson(json, "plan.json");
  if (!back)
    FAIL(llvm::toString(back.takeError()));
  CHECK(back->tasks.size() == r.tasks.size());

  // Without tiers: three tracks, no host fields.
  auto plain = p.planBytes(p.tg.weightSideBytes() * 3, 0);
  REQUIRE(static_cast<bool>(plain));
  PlanReport rp = buildPlanReport(p.tg, plain->plan, plain->sim, ctx);
  CHECK(planToTrace(rp).find("host's cores") == std::string::npos);
  CHECK(planToJson(rp).find("host_updates") == std::string::npos);
}

TEST_CASE("a homed plan has a proven bound: its weights leave between uses, "
          "and the host's updates take their time",
          "[tiers][bound][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const PlanOutcome out = homedInOneRound(p);
  INFO(out.boundWhy);
  const double bound = out.bound->seconds;
  CHECK(bound > 0);
  CHECK(bound <= out.plan.summary.plannedSeconds * (1 + 1e-9));
  // One round: no host update starts before its forward pass and loss
  // have run, so the bound is at least those and every host update one
  // after another.
  const TaskGraph &tg = out.scheduledGraph(p.tg);
  const CostTable &t = p.table(4);
  const double host = hostUpdateSeconds(out.plan, tg, t);
  const double forward = forwardSeconds(out.plan, tg, t);
  REQUIRE(host > 0);
  REQUIRE(forward > 0);
  CHECK(bound >= (forward + host) * (1 - 1e-9));
}

TEST_CASE("a homed plan's bound: no host update starts before every homed "
          "block the forward pass reads has crossed the link",
          "[tiers][bound][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  // A link slow enough that the forward pass's copies in take longer than
  // its tasks.
  p.link = 50e6;
  const PlanOutcome out = homedInOneRound(p);
  INFO(out.boundWhy);
  const TaskGraph &tg = out.scheduledGraph(p.tg);
  const CostTable &t = p.nvmeTable(4);
  const double host = hostUpdateSeconds(out.plan, tg, t);
  const double forward = forwardSeconds(out.plan, tg, t);
  double forwardIn = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.homeOf(b) != Tier::Gpu &&
        std::any_of(tg.blocks[b].readers.begin(), tg.blocks[b].readers.end(),
                    [&](TaskId r) {
                      return tg.tasks[r].kind == TaskKind::Forward ||
                             tg.tasks[r].kind == TaskKind::Loss;
                    }))
      forwardIn += t.copyInSeconds(tg, b, tg.blocks[b].bytesAt(1));
  REQUIRE(host > 0);
  REQUIRE(forwardIn > forward);
  CHECK(out.bound->seconds >= (forwardIn + host) * (1 - 1e-9));
  CHECK(out.bound->seconds <= out.plan.summary.plannedSeconds * (1 + 1e-9));
}

TEST_CASE("a homed plan's bound: what the arena cannot keep through the loss "
          "crosses the link again",
          "[tiers][bound][slow]") {
  // One sample in 48 KiB: an arena of about 47 KiB, the weights 106 KiB.
  HostPlanned p("gpt2-tiny", 1);
  p.link = 50e6;
  auto out = p.planBytes(48 << 10, int64_t(1) << 30, 1);
  REQUIRE(static_cast<bool>(out));
  REQUIRE(out->homed);
  INFO(out->boundWhy);
  REQUIRE(out->bound.has_value());
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const CostTable &t = p.nvmeTable(1);
  // A homed block read before the loss and after it stays in the arena
  // through the loss or crosses the link twice; the arena cannot hold
  // them all, so at least the excess crosses again, at no less than the
  // cheapest such block's seconds per byte.
  const Plan &plan = out->plan;
  REQUIRE(plan.numSubBatches == 1);
  std::vector<char> before(tg.blocks.size(), 0), after(tg.blocks.size(), 0);
  bool pastLoss = false;
  for (const Instr &in : plan.round) {
    if (in.kind != InstrKind::Run || in.recompute)
      continue;
    for (BlockId b : tg.tasks[in.task].reads)
      if (tg.homeOf(storageOf(tg, b)) != Tier::Gpu)
        (pastLoss ? after : before)[storageOf(tg, b)] = 1;
    pastLoss = pastLoss || tg.tasks[in.task].kind == TaskKind::Loss;
  }
  double once = 0, cheapest = 1e300;
  int64_t both = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b) {
    if (tg.homeOf(b) == Tier::Gpu ||
        std::none_of(
            tg.blocks[b].readers.begin(), tg.blocks[b].readers.end(),
            [&](TaskId r) { return tg.tasks[r].kind != TaskKind::Update; }))
      continue;
    const int64_t bytes = tg.blocks[b].bytesAt(1);
    const double in = t.copyInSeconds(tg, b, bytes);
    once += in;
    if (before[b] && after[b]) {
      both += bytes;
      cheapest = std::min(cheapest, in / double(bytes));
    }
  }
  const int64_t arena = plan.planBudget() - plan.residentBytes;
  REQUIRE(both > arena);
  CHECK(out->bound->seconds >=
        (once + double(both - arena) * cheapest) * (1 - 1e-9));
  CHECK(out->bound->seconds <= plan.summary.plannedSeconds * (1 + 1e-9));
}

TEST_CASE("an fp16 plan's bound counts every host update after the rounds",
          "[tiers][bound][slow]") {
  // Its loss scale decides after the backward pass whether any update
  // runs, so no host update overlaps a round: the iteration takes at
  // least the round's tasks and every host update, one after the other.
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::FP16);
  const PlanOutcome out = homedInOneRound(p);
  INFO(out.boundWhy);
  const TaskGraph &tg = out.scheduledGraph(p.tg);
  const CostTable &t = p.table(4);
  const double host = hostUpdateSeconds(out.plan, tg, t);
  double round = 0;
  for (const Instr &in : out.plan.round)
    if (in.kind == InstrKind::Run && !in.recompute)
      round += t.fastest(in.task).seconds;
  REQUIRE(host > 0);
  CHECK(out.bound->seconds >= (round + host) * (1 - 1e-9));
  CHECK(out.bound->seconds <= out.plan.summary.plannedSeconds * (1 + 1e-9));
}

TEST_CASE("a homed plan's bound splits the round at its loss: the forward "
          "pass's copies in before it, the gradients' copies home after it",
          "[tiers][bound][slow]") {
  // fp16: every host update after the round, so the round itself is what
  // the bound must see. A slow link makes both directions matter.
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::FP16);
  p.link = 50e6;
  const PlanOutcome out = homedInOneRound(p);
  INFO(out.boundWhy);
  const TaskGraph &tg = out.scheduledGraph(p.tg);
  const CostTable &t = p.nvmeTable(4);
  const double host = hostUpdateSeconds(out.plan, tg, t);
  // Homed blocks read up to the loss (weights: never written there), and
  // homed blocks written after it (gradients), from the order's tasks.
  std::vector<char> readBefore(tg.blocks.size(), 0),
      writtenAfter(tg.blocks.size(), 0);
  bool pastLoss = false;
  double loss = 0;
  for (const Instr &in : out.plan.round) {
    if (in.kind != InstrKind::Run || in.recompute)
      continue;
    const Task &task = tg.tasks[in.task];
    for (BlockId b : pastLoss ? task.writes : task.reads)
      if (tg.homeOf(storageOf(tg, b)) != Tier::Gpu)
        (pastLoss ? writtenAfter : readBefore)[storageOf(tg, b)] = 1;
    if (task.kind == TaskKind::Loss) {
      loss = t.fastest(in.task).seconds;
      pastLoss = true;
    }
  }
  REQUIRE(pastLoss);
  double in = 0, outHome = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    if (readBefore[b]) {
      CHECK(tg.blocks[b].kind != BlockKind::WeightGrad);
      in += t.copyInSeconds(tg, b, tg.blocks[b].bytesAt(4));
    }
    if (writtenAfter[b])
      outHome += t.copyOutSeconds(tg.blocks[b].bytesAt(4));
  }
  REQUIRE(in > 0);
  REQUIRE(outHome > 0);
  CHECK(out.bound->seconds >= (in + loss + outHome + host) * (1 - 1e-9));
  CHECK(out.bound->seconds <= out.plan.summary.plannedSeconds * (1 + 1e-9));
}

TEST_CASE("offloaded activations' host slots count against the host budget",
          "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  const int64_t budget = p.tg.weightSideBytes() / 2;
  // The homes' pinned memory counts a gradient pool in place of the
  // gradients that stream through it.
  auto hostUse = [&](const PlanOutcome &o) {
    const TaskGraph &tg = o.scheduledGraph(p.tg);
    return o.plan.hostMemoryBytes() + offloadSlotBytes(tg, o.plan) +
           batchBufferBytes(tg, o.plan.batch);
  };
  auto roomy = p.planBytes(budget, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(roomy));
  const int64_t used = hostUse(*roomy);
  REQUIRE(used > 0);
  // Just enough for what the roomy plan uses plans; below it, whatever
  // plans stays within the host budget, or none does and says why.
  auto exact = p.planBytes(budget, used);
  REQUIRE(static_cast<bool>(exact));
  CHECK(hostUse(*exact) <= used);
  for (int64_t host : {used - 1, used / 2, used / 4}) {
    INFO("host budget " << host);
    auto out = p.planBytes(budget, host);
    if (out) {
      CHECK(hostUse(*out) <= host);
      continue;
    }
    llvm::Error err = out.takeError();
    CHECK(err.isA<Infeasible>());
    CHECK_THAT(llvm::toString(std::move(err)),
               Catch::Contains("--host-budget"));
  }
}

TEST_CASE("optimizer state goes to NVMe only where the host budget cannot "
          "hold it",
          "[tiers][nvme][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  p.nvmeRead = 6e9;
  p.nvmeWrite = 4e9;
  const int64_t weightSide = p.tg.weightSideBytes();
  // Room on the host: nothing on NVMe, whatever its budget.
  auto roomy =
      p.planBytes(weightSide / 2, int64_t(1) << 30, 0, -1, int64_t(1) << 30);
  REQUIRE(static_cast<bool>(roomy));
  CHECK(roomy->plan.nvmeHomeBytes == 0);
  // A host budget of 70% of the weight side: with AdamW half of a homed
  // weight's bytes are its moments, so the plan needs NVMe for some.
  const int64_t host = weightSide * 70 / 100;
  auto out = p.planBytes(weightSide / 10, host, 0, -1, int64_t(1) << 30);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  CHECK(out->plan.nvmeHomeBytes > 0);
  CHECK(out->plan.nvmeHomeBytes == tg.homedBytes(Tier::Nvme));
  CHECK(out->plan.hostHomeBytes <= host);
  // Only moments, and only of weights homed on the host.
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b) {
    if (tg.homes[b] != Tier::Nvme)
      continue;
    INFO(tg.blocks[b].name);
    BlockKind k = tg.blocks[b].kind;
    CHECK((k == BlockKind::Momentum || k == BlockKind::SecondMoment));
    CHECK(tg.homeOf(tg.valueBlock[tg.blocks[b].value]) == Tier::Host);
  }
  if (auto err = verifyPlan(tg, out->plan))
    FAIL(llvm::toString(std::move(err)));
  // Each host update streaming state is priced as the slower of its
  // arithmetic and the drive's read and write of that state.
  const CostTable &t = p.nvmeTable(out->plan.subBatch);
  double busy = 0, want = 0;
  int nvmeUpdates = 0;
  for (size_t i = 0; i < out->plan.update.size(); ++i) {
    const Instr &in = out->plan.update[i];
    if (!in.onHost)
      continue;
    const int64_t params = updatedParams(tg, tg.tasks[in.task]);
    const int64_t state = nvmeUpdateBytes(tg, tg.tasks[in.task]);
    nvmeUpdates += state > 0;
    want += std::max(double(params) / t.hostUpdateParamsPerSecond,
                     double(state) / p.nvmeRead + double(state) / p.nvmeWrite);
    busy += out->sim.updateEnd[i] - out->sim.updateStart[i];
  }
  CHECK(nvmeUpdates > 0);
  CHECK(busy == Approx(want));
  // The same homing without NVMe's budget: refused, naming the host's.
  auto noNvme = p.planBytes(weightSide / 10, host);
  REQUIRE_FALSE(static_cast<bool>(noNvme));
  CHECK_THAT(llvm::toString(noNvme.takeError()),
             Catch::Contains("--host-budget"));
  // An NVMe budget too small for the state the host cannot hold.
  auto small = p.planBytes(weightSide / 10, host, 0, -1, 1024);
  REQUIRE_FALSE(static_cast<bool>(small));
  CHECK_THAT(llvm::toString(small.takeError()),
             Catch::Contains("--nvme-budget"));

  // The verifier: only optimizer state lives on NVMe.
  BlockId grad = -1;
  for (BlockId b = 0; b < (BlockId)tg.homes.size() && grad < 0; ++b)
    if (tg.homes[b] == Tier::Host && tg.blocks[b].kind == BlockKind::WeightGrad)
      grad = b;
  REQUIRE(grad >= 0);
  CHECK_THAT(verifiedWithOnNvme(tg, out->plan, grad),
             Catch::Contains("which holds only optimizer state"));
}

TEST_CASE("in 16-bit plans the fp32 master goes to NVMe beside the state: "
          "the GPU reads only the working copy",
          "[tiers][nvme][slow]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::BF16);
  p.nvmeRead = 6e9;
  p.nvmeWrite = 4e9;
  const int64_t weightSide = p.tg.weightSideBytes();
  // A host budget of 45% of the weight side: with AdamW's moments alone on
  // NVMe the host would hold 10 of every 18 bytes of a homed weight with a
  // working copy (56%), and more of the others.
  const int64_t host = weightSide * 45 / 100;
  auto out = p.planBytes(weightSide / 10, host, 0, -1, int64_t(1) << 30);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  CHECK(out->plan.hostHomeBytes <= host);
  if (auto err = verifyPlan(tg, out->plan))
    FAIL(llvm::toString(std::move(err)));
  int masters = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b) {
    if (tg.homes[b] != Tier::Nvme || tg.blocks[b].kind != BlockKind::Weight)
      continue;
    INFO(tg.blocks[b].name);
    ++masters;
    // Its working copy and gradient stay on the host for the rounds, and
    // only the host's update reads the master.
    const ValueId v = tg.blocks[b].value;
    REQUIRE(tg.weightCopyBlock[v] >= 0);
    CHECK(tg.homeOf(tg.weightCopyBlock[v]) == Tier::Host);
    CHECK(tg.homeOf(tg.gradBlock[v]) == Tier::Host);
    for (TaskId t : tg.blocks[b].readers)
      CHECK(tg.runsOnHost(tg.tasks[t]));
  }
  CHECK(masters > 0);
  // Only a trained weight's master may go there: its update streams it. A
  // constant read as its working copy (a mask the fused attention reads)
  // has no update to stream its master, and the trainer refuses one on
  // NVMe (NvmeState::open). The causal mask is a band the kernel applies
  // as a rule; with one key of the last row masked it is an operand.
  Graph masked = p.graph;
  for (const Op &op : masked.ops)
    if (op.kind == OpKind::Where) {
      std::vector<float> &m = masked.values[op.inputs[1]].data;
      const auto s = static_cast<size_t>(std::lround(std::sqrt(m.size())));
      REQUIRE(s * s == m.size());
      m[(s - 1) * s + 1] = 0.0f; // keys 0 and 2.. of the last query
    }
  auto fusedTg = buildTaskGraph(fuseAttention(masked), adamw(Precision::BF16));
  REQUIRE(static_cast<bool>(fusedTg));
  int constants = 0, trained = 0;
  for (BlockId b = 0; b < (BlockId)fusedTg->blocks.size(); ++b) {
    const Block &blk = fusedTg->blocks[b];
    if (blk.kind != BlockKind::Weight || blk.viewOf >= 0 ||
        blk.value == kNoId || fusedTg->weightCopyBlock[blk.value] < 0)
      continue;
    INFO(blk.name);
    bool updated =
        std::any_of(blk.writers.begin(), blk.writers.end(), [&](TaskId t) {
          return fusedTg->tasks[t].kind == TaskKind::Update;
        });
    bool homeable = fusedTg->nvmeHomeable(b);
    constants += !updated;
    trained += updated && homeable;
    CHECK((updated || !homeable));
  }
  CHECK(constants > 0);
  CHECK(trained > 0);
  // Its update streams the master too: read and written beside the state.
  bool priced = false;
  for (const Instr &in : out->plan.update)
    if (in.onHost) {
      const Task &task = tg.tasks[in.task];
      int64_t state = 0, master = 0;
      for (BlockId b : task.writes)
        if (tg.homeOf(b) == Tier::Nvme)
          (tg.blocks[b].kind == BlockKind::Weight ? master : state) +=
              tg.blocks[b].bytesAt(1);
      if (master > 0) {
        CHECK(nvmeUpdateBytes(tg, task) == master + state);
        CHECK(master * 2 == state); // fp32 master, two fp32 moments
        priced = true;
      }
    }
  CHECK(priced);
  // The generated trainer says which masters live there.
  auto files = emitTrainer(tg, out->plan, EmitOptions{});
  REQUIRE(static_cast<bool>(files));
  bool named = false;
  for (const GeneratedFile &f : *files)
    named = named || f.contents.find(".stateOnNvme = true, .masterOnNvme = "
                                     "true") != std::string::npos;
  CHECK(named);

  // The verifier: a master that a GPU task reads cannot live on NVMe. A
  // weight without a working copy (a norm's scale, a bias: the GPU reads
  // the fp32 master) is such a weight.
  BlockId read = -1;
  for (BlockId b = 0; b < (BlockId)tg.homes.size() && read < 0; ++b)
    if (tg.homes[b] == Tier::Host && tg.blocks[b].kind == BlockKind::Weight &&
        !tg.nvmeHomeable(b))
      read = b;
  REQUIRE(read >= 0); // gpt2-tiny's homed embedding and norms have no copy
  CHECK_THAT(verifiedWithOnNvme(tg, out->plan, read),
             Catch::Contains("masters of 16-bit working copies"));
}

TEST_CASE("a device that states no NVMe rates cannot home state there",
          "[tiers][nvme]") {
  HostPlanned p("gpt2-tiny", 4);
  auto out = p.planBytes(p.tg.weightSideBytes() / 2, int64_t(1) << 30, 0, -1,
                         int64_t(1) << 30);
  REQUIRE_FALSE(static_cast<bool>(out));
  CHECK_THAT(llvm::toString(out.takeError()),
             Catch::Contains("states no NVMe read and write rates"));
}

TEST_CASE("the generated trainer names the state on NVMe and its directory",
          "[tiers][nvme][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  p.nvmeRead = 6e9;
  p.nvmeWrite = 4e9;
  const int64_t weightSide = p.tg.weightSideBytes();
  auto out = p.planBytes(weightSide / 10, weightSide * 70 / 100, 0, -1,
                         int64_t(1) << 30);
  REQUIRE(static_cast<bool>(out));
  EmitOptions eo;
  eo.nvmeDir = "/mnt/nvme \"x\"";
  auto files = emitTrainer(out->scheduledGraph(p.tg), out->plan, eo);
  REQUIRE(static_cast<bool>(files));
  std::string mainCpp;
  for (const GeneratedFile &f : *files)
    if (f.path == "src/main.cpp")
      mainCpp = f.contents;
  CHECK(mainCpp.find(".home = Home::Host, .stateOnNvme = true") !=
        std::string::npos);
  // The directory as an escaped literal: a quote cannot end it.
  CHECK(mainCpp.find(".nvmeDir = \"/mnt/nvme \\042x\\042\"") !=
        std::string::npos);
}

TEST_CASE("a 16-bit working copy may stay on the GPU while the rest of its "
          "weight is homed on the host: read in place, uploaded once a step",
          "[tiers]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::BF16);
  // A link slow enough that copying each working copy in for every one of
  // the four sub-batches costs more than a smaller arena.
  p.link = 50e6;
  const int64_t budget = 120 << 10;
  auto out = p.planBytes(budget, int64_t(1) << 30, 1);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  if (auto err = verifyPlan(tg, out->plan))
    FAIL(llvm::toString(std::move(err)));
  int64_t kept = 0, keptBytes = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.copyStaysOnGpu(b)) {
      ++kept;
      keptBytes += tg.blocks[b].bytesAt(1);
      INFO(tg.blocks[b].name);
      CHECK(tg.isResident(b));
      CHECK(tg.homeOf(tg.masterOf(b)) == Tier::Host);
    }
  REQUIRE(kept > 0);
  // No round copies a kept copy in; the host keeps a copy of it, which
  // its update rounds, and the GPU's copy is in the resident bytes.
  for (const Instr &in : out->plan.round)
    if (in.kind == InstrKind::CopyIn)
      CHECK(!tg.copyStaysOnGpu(out->plan.residencies[in.residency].block));
  CHECK(tg.hostBytes() == tg.homedBytes(Tier::Host) + keptBytes);
  CHECK(out->plan.hostHomeBytes == tg.hostBytes());
  CHECK(out->plan.residentBytes >= keptBytes);
  // Each host update of such a weight uploads its copy, after the rounds
  // and after that update: the iteration takes at least the rounds and
  // every upload, one after another.
  int64_t uploads = 0;
  for (const Instr &in : out->plan.update)
    if (in.onHost)
      uploads += hostUploadBytes(tg, tg.tasks[in.task]);
  CHECK(uploads == keptBytes);
  const CostTable &t = p.nvmeTable(out->plan.subBatch);
  Simulation sim = simulate(tg, out->plan, t);
  const double rounds = sim.iterationSeconds - sim.updateSeconds;
  CHECK(sim.updateSeconds >= (kept * t.copyLatencySeconds +
                              double(keptBytes) / t.h2dBytesPerSecond) *
                                 (1 - 1e-9));
  CHECK(rounds > 0);
  // Without the kept layout (the same homes, every copy at home) the
  // search's choice is no faster, and both plan on the host tier.
  TaskGraph plain = tg;
  for (BlockId b = 0; b < (BlockId)plain.homes.size(); ++b)
    if (tg.copyStaysOnGpu(b))
      plain.homes[b] = Tier::Host;
  CHECK(plain.hostBytes() == tg.hostBytes());
  CHECK(plain.weightSideBytes() == tg.weightSideBytes() - keptBytes);
  // The generated trainer keeps those copies on the device.
  auto files = emitTrainer(tg, out->plan, EmitOptions{});
  REQUIRE(static_cast<bool>(files));
  CHECK(occurrences(*files, ".copyOnGpu = true") == kept);
  // The report and plan.json say so.
  PlanReport r = buildPlanReport(tg, out->plan, out->sim, PlanContext{});
  CHECK(r.summary.gpuCopyWeights == kept);
  CHECK(r.summary.gpuCopyBytes == keptBytes);
  auto back = parsePlanJson(planToJson(r), "plan.json");
  if (!back)
    FAIL(llvm::toString(back.takeError()));
  CHECK(back->summary.gpuCopyWeights == kept);
  CHECK(back->summary.gpuCopyBytes == keptBytes);

  // Another graph of the model starting from this homing tries the layout
  // only where this one kept copies (each try is a whole search).
  const int64_t moved = tg.homedBytes(Tier::Host);
  auto told = p.planBytes(budget, int64_t(1) << 30, 1, moved, 0, true);
  auto untold = p.planBytes(budget, int64_t(1) << 30, 1, moved, 0, false);
  REQUIRE(static_cast<bool>(told));
  REQUIRE(static_cast<bool>(untold));
  CHECK(keepsCopiesOnGpu(told->scheduledGraph(p.tg)));
  CHECK(!keepsCopiesOnGpu(untold->scheduledGraph(p.tg)));
  CHECK(told->plan.summary.plannedSeconds <
        untold->plan.summary.plannedSeconds);
}

TEST_CASE("a working copy homed off the GPU needs its master off it too",
          "[tiers]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::BF16);
  TaskGraph tg = p.tg;
  tg.homes.assign(tg.blocks.size(), Tier::Gpu);
  BlockId copy = -1;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size() && copy < 0; ++b)
    if (tg.blocks[b].kind == BlockKind::WeightCopy)
      copy = b;
  REQUIRE(copy >= 0);
  CHECK(!tg.copyStaysOnGpu(copy));
  tg.homes[copy] = Tier::Host; // the GPU's update could not refresh it
  auto why = verifyTaskGraph(tg);
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("its master is on the GPU"));
  // The other way round is ZeRO-Offload's layout.
  tg.homes[copy] = Tier::Gpu;
  tg.homes[tg.masterOf(copy)] = Tier::Host;
  CHECK(tg.copyStaysOnGpu(copy));
  CHECK(!verifyTaskGraph(tg).has_value());
  // keepCopiesOnGpu keeps every copy homed off the GPU, no other block.
  std::vector<Tier> homes(tg.blocks.size(), Tier::Host);
  int64_t kept = keepCopiesOnGpu(tg, homes);
  int64_t copies = 0;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    const bool isCopy = tg.blocks[b].kind == BlockKind::WeightCopy;
    copies += isCopy ? tg.blocks[b].bytesAt(1) : 0;
    CHECK((homes[b] == Tier::Gpu) == isCopy);
  }
  CHECK(kept == copies);
}
