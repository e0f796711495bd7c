//===- TiersRoundedCopiesTest.cpp - Working copies rounded from masters ---===//
#include "TiersTestUtil.h"

#include "codegen/Emit.h"
#include "codegen/PlanJson.h"
#include "codegen/PlanReport.h"
#include "passes/analysis/Simulate.h"
#include "passes/analysis/Verify.h"

using namespace memfit;
using memfit::test::HostPlanned;
using memfit::test::occurrences;

namespace {

/// gpt2-tiny in bf16, four sub-batches of one under 120 KiB of GPU memory:
/// every weight homed. With AdamW a homed weight takes 18 bytes a
/// parameter at home (master, copy, gradient, two moments): 466.3 KiB.
constexpr int64_t kGpu = 120 << 10;

} // namespace

TEST_CASE("where the host budget cannot hold the 16-bit copies beside their "
          "masters, each copy in sends the master and the device rounds it",
          "[tiers]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::BF16);
  auto roomy = p.planBytes(kGpu, int64_t(1) << 30, 1);
  if (!roomy)
    FAIL(llvm::toString(roomy.takeError()));
  const TaskGraph &rg = roomy->scheduledGraph(p.tg);
  CHECK(!rg.copiesFromMaster);

  // 420 KiB: the masters, gradients and moments (16 bytes a parameter,
  // 414.5 KiB), not the copies too. No gradient pool: four rounds.
  const int64_t host = 420 << 10;
  auto out = p.planBytes(kGpu, host, 1);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const Plan &plan = out->plan;
  REQUIRE(tg.copiesFromMaster);
  CHECK(plan.gradPoolBytes == 0);
  if (auto err = verifyPlan(tg, plan))
    FAIL(llvm::toString(std::move(err)));
  int64_t rounded = 0, roundedBytes = 0, largestMaster = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.roundsFromMaster(b)) {
      INFO(tg.blocks[b].name);
      CHECK(tg.homeOf(tg.masterOf(b)) == Tier::Host);
      CHECK(tg.linkBytes(b, tg.blocks[b].bytesAt(1)) ==
            2 * tg.blocks[b].bytesAt(1));
      ++rounded;
      roundedBytes += tg.blocks[b].bytesAt(1);
      largestMaster =
          std::max(largestMaster, tg.blocks[tg.masterOf(b)].bytesAt(1));
    }
  REQUIRE(rounded > 0);
  // The copies take nothing at home; the staging is the largest master
  // (under the cap), resident on the device, in the budget.
  CHECK(tg.hostBytes() == tg.homedBytes(Tier::Host) - roundedBytes);
  CHECK(plan.hostHomeBytes == tg.hostBytes());
  CHECK(plan.hostMemoryBytes() <= host);
  CHECK(plan.hostHomeBytes < roomy->plan.hostHomeBytes);
  CHECK(tg.copyStagingBytes() == std::min(largestMaster, kCopyStagingBytes));
  TaskGraph unstaged = tg;
  unstaged.copiesFromMaster = false;
  CHECK(tg.weightSideBytes() ==
        unstaged.weightSideBytes() + tg.copyStagingBytes());
  CHECK(plan.totalBytes() <= kGpu);

  // The link carries the master for each such copy in: the simulator's
  // bytes to the device are the plan's copies with those priced at the
  // master's size, and more than the same homes with copies at home would
  // move.
  const CostTable &t = p.nvmeTable(plan.subBatch);
  int64_t sent = 0, asCopies = 0, roundedIns = 0;
  for (const Instr &in : plan.round)
    if (in.kind == InstrKind::CopyIn) {
      const BlockId b = plan.residencies[in.residency].block;
      const int64_t bytes = tg.blocks[b].bytesAt(t.subBatch);
      sent += tg.linkBytes(b, bytes);
      asCopies += bytes;
      roundedIns += tg.roundsFromMaster(b);
    }
  CHECK(roundedIns > 0);
  Simulation sim = simulate(tg, plan, t);
  CHECK(sim.bytesToDevice == sent * plan.numSubBatches);
  CHECK(sent > asCopies);
  // Each such copy in takes the master's time on the link and its
  // rounding's in device memory (one stream, one after the other).
  REQUIRE(t.deviceBytesPerSecond > 0);
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::CopyIn)
      continue;
    const BlockId b = plan.residencies[in.residency].block;
    if (!tg.roundsFromMaster(b))
      continue;
    const int64_t copy = tg.blocks[b].bytesAt(1), master = 2 * copy;
    CHECK(sim.end[i] - sim.start[i] ==
          Approx(t.copyInSeconds(master) +
                 double(master + copy) / t.deviceBytesPerSecond));
  }
  // The proven bound counts the masters' bytes too, and holds.
  INFO(out->boundWhy);
  REQUIRE(out->bound.has_value());
  CHECK(out->bound->seconds <= plan.summary.plannedSeconds * (1 + 1e-9));

  // The generated trainer rounds those copies and stages them.
  auto files = emitTrainer(tg, plan, EmitOptions{});
  REQUIRE(static_cast<bool>(files));
  CHECK(occurrences(*files, ".copyFromMaster = true") == rounded);
  const bool staged =
      occurrences(*files, ".copyStagingBytes = " +
                              std::to_string(tg.copyStagingBytes())) > 0;
  CHECK(staged);
  // The report and plan.json say so.
  PlanReport r = buildPlanReport(tg, plan, out->sim, PlanContext{});
  CHECK(r.summary.roundedCopyWeights == rounded);
  CHECK(r.summary.roundedCopyBytes == roundedBytes);
  CHECK(r.summary.copyStagingBytes == tg.copyStagingBytes());
  auto back = parsePlanJson(planToJson(r), "plan.json");
  if (!back)
    FAIL(llvm::toString(back.takeError()));
  CHECK(back->summary.roundedCopyWeights == rounded);
  CHECK(back->summary.copyStagingBytes == tg.copyStagingBytes());

  // Below the masters, gradients and moments nothing fits, and the error
  // says what was tried.
  auto tight = p.planBytes(kGpu, 400 << 10, 1);
  REQUIRE(!tight);
  CHECK_THAT(llvm::toString(tight.takeError()),
             Catch::Contains("rounded from the masters") &&
                 Catch::Contains("--host-budget"));
}

TEST_CASE("where the host cannot hold even the working copies of masters on "
          "NVMe, each copy in reads its master from the drive first",
          "[tiers]") {
  HostPlanned p("gpt2-tiny", 4, "h100-sxm", Precision::BF16);
  p.nvmeRead = 6e9;
  p.nvmeWrite = 4e9;
  const int64_t nvme = int64_t(1) << 30;
  // 160 KiB: the gradients (4 bytes a parameter: four rounds, so no pool)
  // and the copies of the masters still at home; not the copies of those
  // on NVMe too (the plan with them at home takes 171.3 KiB).
  const int64_t host = 160 << 10;
  auto out = p.planBytes(kGpu, host, 1, -1, nvme);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  const Plan &plan = out->plan;
  REQUIRE(tg.copiesFromMaster);
  REQUIRE(tg.copiesFromNvmeMaster);
  if (auto err = verifyPlan(tg, plan))
    FAIL(llvm::toString(std::move(err)));
  int64_t fromDrive = 0, roundedBytes = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b) {
    if (!tg.roundsFromMaster(b))
      continue;
    roundedBytes += tg.blocks[b].bytesAt(1);
    const BlockId m = tg.masterOf(b);
    INFO(tg.blocks[b].name);
    CHECK(tg.nvmeCopyReadBytes(b) ==
          (tg.homeOf(m) == Tier::Nvme ? tg.blocks[m].bytesAt(1) : 0));
    fromDrive += tg.homeOf(m) == Tier::Nvme;
  }
  REQUIRE(fromDrive > 0);
  // Nothing of those copies at home; the pinned staging the drive reads
  // into is, in whole 4 KiB transfers.
  const int64_t pinned = tg.copyStagingHostBytes();
  CHECK(pinned >= tg.copyStagingBytes());
  CHECK(pinned % 4096 == 0);
  CHECK(pinned < tg.copyStagingBytes() + 4096);
  CHECK(tg.hostBytes() == tg.homedBytes(Tier::Host) - roundedBytes + pinned);
  CHECK(plan.hostMemoryBytes() <= host);
  CHECK(plan.totalBytes() <= kGpu);

  // Each such copy in takes the drive's read, the link's master and the
  // rounding, one after another; the drive's reads of every round and the
  // host updates' state through it bound the iteration from below.
  const CostTable &t = p.nvmeTable(plan.subBatch);
  Simulation sim = simulate(tg, plan, t);
  double drive = 0;
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    if (in.kind != InstrKind::CopyIn)
      continue;
    const BlockId b = plan.residencies[in.residency].block;
    const int64_t read = tg.nvmeCopyReadBytes(b);
    if (read == 0)
      continue;
    const int64_t copy = tg.blocks[b].bytesAt(1), master = 2 * copy;
    CHECK(read == master);
    CHECK(sim.end[i] - sim.start[i] ==
          Approx(t.copyInSeconds(master) +
                 double(master + copy) / t.deviceBytesPerSecond +
                 double(read) / p.nvmeRead));
    drive += double(read) / p.nvmeRead;
  }
  REQUIRE(drive > 0);
  drive *= plan.numSubBatches;
  for (const Instr &in : plan.update)
    if (in.onHost)
      drive += t.nvmeUpdateSeconds(nvmeUpdateBytes(tg, tg.tasks[in.task]));
  CHECK(sim.iterationSeconds >= drive * (1 - 1e-9));
  INFO(out->boundWhy);
  REQUIRE(out->bound.has_value());
  CHECK(out->bound->seconds >= drive * (1 - 1e-9));
  CHECK(out->bound->seconds <= plan.summary.plannedSeconds * (1 + 1e-9));

  // The trainer reads those masters from the drive and rounds them.
  auto files = emitTrainer(tg, plan, EmitOptions{});
  REQUIRE(static_cast<bool>(files));
  CHECK(occurrences(*files, ".masterOnNvme = true, .copyFromMaster = true") ==
        fromDrive);
  PlanReport r = buildPlanReport(tg, plan, out->sim, PlanContext{});
  CHECK(r.summary.nvmeRoundedCopyWeights == fromDrive);
  auto back = parsePlanJson(planToJson(r), "plan.json");
  if (!back)
    FAIL(llvm::toString(back.takeError()));
  CHECK(back->summary.nvmeRoundedCopyWeights == fromDrive);

  // Without the drive those masters and copies have nowhere to go.
  auto noDrive = p.planBytes(kGpu, host, 1);
  REQUIRE(!noDrive);
  CHECK_THAT(llvm::toString(noDrive.takeError()),
             Catch::Contains("--host-budget"));
}

TEST_CASE("an fp32 plan has no working copies to round: a host budget short "
          "of its homes is refused as before",
          "[tiers][slow]") {
  HostPlanned p("gpt2-tiny", 4);
  // fp32 homes 16 bytes a parameter (437.6 KiB): 420 KiB holds it only
  // without copies, which fp32 has none of.
  auto out = p.planBytes(kGpu, 420 << 10, 1);
  REQUIRE(!out);
  const std::string why = llvm::toString(out.takeError());
  CHECK_THAT(why, Catch::Contains("--host-budget"));
  CHECK_THAT(why, !Catch::Contains("rounded"));
}
