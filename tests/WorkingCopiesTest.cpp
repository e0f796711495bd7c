//===- WorkingCopiesTest.cpp - f32 working copies of homed weights --------===//
#include "TiersTestUtil.h"

#include "codegen/Emit.h"
#include "codegen/PlanReport.h"
#include "codegen/SummaryText.h"
#include "compiler/ir/WorkingCopies.h"
#include "passes/analysis/Verify.h"
#include "passes/search/Tiers.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace memfit;
using memfit::test::HostPlanned;
using memfit::test::occurrences;

namespace {

/// The weight block named `name` of `tg`.
BlockId weightNamed(const TaskGraph &tg, const std::string &name) {
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.blocks[b].kind == BlockKind::Weight && tg.blocks[b].name == name)
      return b;
  FAIL("no weight " << name);
  return -1;
}

} // namespace

TEST_CASE("an fp32 weight homed on the host gets an f32 working copy that "
          "every task but its update reads",
          "[tiers][copies]") {
  // The zoo's mlp: Gemm(fc1) - Relu - Gemm(fc2), SGD with momentum. Only
  // fc1.weight is homed: it alone gets a copy, homed with it.
  HostPlanned p("mlp", 4, "h100-sxm");
  TaskGraph tg = p.tg;
  tg.homes.assign(tg.blocks.size(), Tier::Gpu);
  const BlockId w = weightNamed(tg, "fc1.weight");
  const BlockId other = weightNamed(tg, "fc2.weight");
  const ValueId v = tg.blocks[w].value;
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (tg.blocks[b].value == v && isWeightSide(tg.blocks[b].kind))
      tg.homes[b] = Tier::Host;
  const std::vector<TaskId> readersBefore = tg.blocks[w].readers;
  const size_t blocksBefore = tg.blocks.size();

  REQUIRE(addFullPrecisionCopies(tg) == 1);
  REQUIRE(tg.blocks.size() == blocksBefore + 1);
  const BlockId c = tg.weightCopyBlock[v];
  const int64_t masterHomes = tg.hostBytes() - tg.blocks[c].bytesAt(1);
  REQUIRE(c == BlockId(blocksBefore));
  const Block &copy = tg.blocks[c];
  CHECK(copy.kind == BlockKind::WeightCopy);
  CHECK(copy.dtype == DType::F32);
  CHECK(copy.name == "f32(fc1.weight)");
  CHECK(copy.bytesAt(7) == tg.blocks[w].bytesAt(1)); // no batch
  CHECK(tg.homes[c] == Tier::Host);
  CHECK(tg.weightCopyBlock[tg.blocks[other].value] < 0);
  // FP(fc1) and BP-data(fc1) read the copy now, the update the master,
  // which it writes with the copy.
  std::vector<TaskId> all = copy.readers;
  all.insert(all.end(), tg.blocks[w].readers.begin(),
             tg.blocks[w].readers.end());
  std::sort(all.begin(), all.end());
  CHECK(all == readersBefore);
  REQUIRE(tg.blocks[w].readers.size() == 1);
  const Task &update = tg.tasks[tg.blocks[w].readers[0]];
  CHECK(update.kind == TaskKind::Update);
  CHECK(copy.writers == std::vector<TaskId>{tg.blocks[w].readers[0]});
  CHECK(std::count(update.writes.begin(), update.writes.end(), c) == 1);
  for (TaskId t : copy.readers) {
    const Task &task = tg.tasks[t];
    CHECK(task.kind != TaskKind::Update);
    CHECK(std::count(task.reads.begin(), task.reads.end(), w) == 0);
  }
  CHECK_FALSE(verifyTaskGraph(tg).has_value());
  // Kept on the GPU it is ZeRO-Offload's layout; the host's copy of it is
  // the master, so the homes take no more host bytes than without it.
  std::vector<Tier> homes = tg.homes;
  CHECK(keepCopiesOnGpu(tg, homes) == copy.bytesAt(1));
  tg.homes = homes;
  CHECK(tg.copyStaysOnGpu(c));
  CHECK(tg.hostBytes() == masterHomes);
  CHECK(hostUploadBytes(tg, update) == copy.bytesAt(1));
  // Once more: nothing left to copy.
  CHECK(addFullPrecisionCopies(tg) == 0);
}

TEST_CASE("16-bit graphs and graphs without homes get no f32 copies",
          "[tiers][copies]") {
  HostPlanned bf16("mlp", 4, "h100-sxm", Precision::BF16);
  TaskGraph a = bf16.tg;
  a.homes.assign(a.blocks.size(), Tier::Host);
  CHECK(addFullPrecisionCopies(a) == 0);
  HostPlanned fp32("mlp", 4, "h100-sxm");
  TaskGraph b = fp32.tg;
  CHECK(addFullPrecisionCopies(b) == 0); // every block on the GPU
  CHECK(b.blocks.size() == fp32.tg.blocks.size());
}

TEST_CASE("an fp32 plan keeps f32 working copies on the GPU where copying "
          "homed weights in every sub-batch costs more",
          "[tiers][copies]") {
  // gpt2-tiny in fp32 (weight side 437 KiB) under 150 KiB, four
  // sub-batches of one, on a 50 MB/s link.
  HostPlanned p("gpt2-tiny", 4, "h100-sxm");
  p.link = 50e6;
  auto out = p.planBytes(150 << 10, int64_t(1) << 30, 1);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  REQUIRE(out->homed);
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  if (auto err = verifyPlan(tg, out->plan))
    FAIL(llvm::toString(std::move(err)));
  int64_t kept = 0, keptBytes = 0;
  for (BlockId b = 0; b < (BlockId)tg.homes.size(); ++b)
    if (tg.copyStaysOnGpu(b)) {
      ++kept;
      keptBytes += tg.blocks[b].bytesAt(1);
      CHECK(tg.blocks[b].dtype == DType::F32);
    }
  REQUIRE(kept > 0);
  CHECK(out->plan.numSubBatches == 4);
  // No round copies a kept copy in, and the host holds no second copy.
  for (const Instr &in : out->plan.round)
    if (in.kind == InstrKind::CopyIn)
      CHECK(!tg.copyStaysOnGpu(out->plan.residencies[in.residency].block));
  CHECK(tg.hostBytes() == tg.homedBytes(Tier::Host));
  CHECK(out->plan.residentBytes >= keptBytes);
  // Each host update of such a weight uploads its copy after the rounds.
  int64_t uploads = 0;
  for (const Instr &in : out->plan.update)
    if (in.onHost)
      uploads += hostUploadBytes(tg, tg.tasks[in.task]);
  CHECK(uploads == keptBytes);
  // The trainer keeps them on the device; the summary says how.
  auto files = emitTrainer(tg, out->plan, EmitOptions{});
  REQUIRE(static_cast<bool>(files));
  CHECK(occurrences(*files, ".copyOnGpu = true") == kept);
  PlanReport r = buildPlanReport(tg, out->plan, out->sim, PlanContext{});
  std::string text;
  llvm::raw_string_ostream os(text);
  printPlanSummary(os, r);
  CHECK_THAT(os.str(), Catch::Contains("as an f32 working copy"));
  CHECK_THAT(os.str(), Catch::Contains("writes its master at home"));
}
