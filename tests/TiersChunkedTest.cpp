//===- TiersChunkedTest.cpp - The homing search meets a plan in chunks ----===//
#include "TiersTestUtil.h"

#include "compiler/ir/OffloadSlots.h"
#include "passes/analysis/Verify.h"

using namespace memfit;
using memfit::test::HostPlanned;

TEST_CASE("with every weight on the GPU the plan may be in chunks; the host "
          "budget's check reads that plan's own graph",
          "[tiers]") {
  // tiny-bn at batch 16 under 6.27 KiB (10% of its ideal peak) plans best
  // as 16 chunks of one with no weight homed. The host-slot check once
  // read the chunked plan's blocks as the model's, past the model's end
  // (AddressSanitizer: heap-buffer-overflow in offloadSlotBlocks).
  HostPlanned p("tiny-bn", 16);
  auto out = p.planBytes(6420, int64_t(1) << 30);
  if (!out)
    FAIL(llvm::toString(out.takeError()));
  REQUIRE(out->plan.chunks > 1);
  CHECK(!out->homed);
  const TaskGraph &tg = out->scheduledGraph(p.tg);
  CHECK(tg.blocks.size() > p.tg.blocks.size());
  if (auto err = verifyPlan(tg, out->plan))
    FAIL(llvm::toString(std::move(err)));
  for (BlockId b : offloadSlotBlocks(tg, out->plan))
    CHECK(b < (BlockId)tg.blocks.size());
}
