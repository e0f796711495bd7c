//===- ConvCheckTest.cpp - Planned convolutions against what cuDNN runs ---===//
//
// The trainer's start-up check without a GPU: its choice over cuDNN's
// ranked list, its file read back as a profile, and a plan made with that
// file (runtime/ConvCheck.h, compiler/cost/Profile.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/ConvCheck.h"
#include "compiler/cost/AnalyticCost.h"
#include "compiler/cost/Profile.h"
#include "compiler/ops/OpSignature.h"
#include "tests/PlanTestUtil.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <catch2/catch.hpp>

using namespace memfit;
using rt::ConvCandidate;
using rt::ConvChoice;

TEST_CASE("the start-up choice: the planned algorithm, else cuDNN's "
          "best-ranked that fits",
          "[convcheck]") {
  // cuDNN's rank order (best first), as cudnnGet*Algorithm_v7 returns it:
  // 7 is refused, 1 needs 300 bytes, 2 needs 100, 0 (the slowest) none.
  const std::vector<ConvCandidate> ranked = {
      {7, false, 0}, {1, true, 300}, {2, true, 100}, {0, true, 0}};
  // The planned algorithm runs within its workspace: kept.
  ConvChoice keep = rt::chooseConvAlgo(1, true, 300, 300, ranked);
  CHECK(keep.algo == 1);
  CHECK_FALSE(keep.changed);
  // Refused: the best-ranked algorithm that fits, not algorithm 0.
  ConvChoice refused = rt::chooseConvAlgo(7, false, 0, 1000, ranked);
  CHECK(refused.algo == 1);
  CHECK(refused.changed);
  // Too little workspace for the planned one (and for the next ranked):
  // the first that fits, still not the slowest.
  ConvChoice small = rt::chooseConvAlgo(1, true, 300, 200, ranked);
  CHECK(small.algo == 2);
  CHECK(small.changed);
  // Only the slowest fits: it runs, and the change is reported.
  ConvChoice last = rt::chooseConvAlgo(1, true, 300, 50, ranked);
  CHECK(last.algo == 0);
  CHECK(last.changed);
  // Nothing fits: no choice (the trainer stops naming the task).
  CHECK(rt::chooseConvAlgo(1, true, 300, 50, {{1, true, 300}, {2, false, 0}})
            .algo == -1);
}

namespace {

rt::ConvCheckResult sampleResult(const std::string &sig) {
  rt::ConvCheckResult r;
  r.checked = true;
  r.calls = 12;
  r.tasks = 6;
  r.gpu = "NVIDIA H200";
  r.computeCapability = "9.0";
  r.cudnn = "9.19.0";
  rt::ConvSubstitution a;
  a.direction = rt::ConvBwdData;
  a.task = "BP-data(conv \"2\")";
  a.signature = sig;
  a.subBatch = 16;
  a.planned = 5;
  a.ran = 1;
  a.askedBytes = -1; // not run at all
  a.plannedBytes = 138'000'000;
  rt::ConvSubstitution b = a;
  b.direction = rt::ConvBwdFilter;
  b.task = "BP-weight(conv1)";
  b.planned = 1;
  b.ran = 0;
  b.askedBytes = 263ll << 20;
  b.plannedBytes = 0;
  r.changed = {a, b};
  return r;
}

/// The first convolution task of direction `d`, -1 if none.
TaskId firstConvTask(const TaskGraph &tg, ConvDirection d) {
  for (TaskId i = 0; i < (TaskId)tg.tasks.size(); ++i)
    if (convDirectionOf(tg, i) == d)
      return i;
  return -1;
}

} // namespace

TEST_CASE("the trainer's conv-algos file is a profile memfit reads back",
          "[convcheck]") {
  const std::string sig =
      "Conv(f32[N,64,56,56],f32[64,64,3,3])->(f32[N,64,56,56]) kernel=3,3 "
      "strides=1,1 pads=1,1,1,1 dilations=1,1 group=1";
  rt::ConvCheckResult r = sampleResult(sig);
  CHECK(r.changedTasks() == 2);
  llvm::SmallString<128> path;
  REQUIRE_FALSE(
      llvm::sys::fs::createTemporaryFile("memfit-convalgos", "json", path));
  std::string err;
  REQUIRE(rt::writeConvSubstitutions(r, std::string(path), err));
  auto p = loadProfile(path);
  llvm::sys::fs::remove(path);
  REQUIRE(static_cast<bool>(p));
  CHECK(p->device.computeCapability == "9.0");
  CHECK(p->device.cudnn == "9.19.0");
  CHECK(p->size() == 0);
  std::vector<ConvRefusal> got = p->refusals();
  REQUIRE(got.size() == 2);
  // Sorted by task kind: backward-data, then backward-weight.
  CHECK(got[0].kind == TaskKind::BackwardData);
  CHECK(got[0].signature == sig);
  CHECK(got[0].subBatch == 16);
  CHECK(got[0].algo == 5);
  CHECK(got[0].unsupported());
  CHECK(got[0].ran == 1);
  CHECK(got[0].plannedBytes == 138'000'000);
  CHECK(got[1].kind == TaskKind::BackwardWeight);
  CHECK(got[1].askedBytes == (263ll << 20));
  CHECK(p->unsupported(TaskKind::BackwardData, sig, 5));
  CHECK_FALSE(p->unsupported(TaskKind::BackwardWeight, sig, 1));
  // A workspace refusal scales with the sub-batch.
  CHECK(p->askedWorkspace(TaskKind::BackwardWeight, sig, 1, 16) ==
        (263ll << 20));
  CHECK(p->askedWorkspace(TaskKind::BackwardWeight, sig, 1, 32) ==
        (263ll << 21));
  CHECK(p->askedWorkspace(TaskKind::BackwardWeight, sig, 0, 16) == 0);
  // The compiler writes it back in its own order and reads that again.
  std::string text = profileToJson(*p);
  auto q = parseProfile(text, "again.json");
  REQUIRE(static_cast<bool>(q));
  CHECK(profileToJson(*q) == text);
  CHECK(q->refusals().size() == 2);
}

TEST_CASE("a refusal file is checked like any profile", "[convcheck]") {
  auto parse = [](const std::string &refused) {
    std::string text = "{\"schema_version\": 1, \"entries\": [], "
                       "\"refused\": [" +
                       refused + "]}";
    auto p = parseProfile(text, "ca.json");
    REQUIRE_FALSE(static_cast<bool>(p));
    return llvm::toString(p.takeError());
  };
  const std::string sig = "\"signature\": \"Conv(f32[N,3,8,8])\", ";
  CHECK(parse("{\"task\": \"loss\", " + sig +
              "\"sub_batch\": 1, \"algo\": 0, \"reason\": \"unsupported\"}") ==
        "ca.json: refused[0]: field 'task' must name a convolution direction "
        "(forward, backward_data or backward_weight), got 'loss'");
  CHECK(parse("{\"task\": \"backward_weight\", " + sig +
              "\"sub_batch\": 1, \"algo\": 7, \"reason\": "
              "\"unsupported\"}") ==
        "ca.json: refused[0]: field 'algo' is not a cuDNN conv_bwd_filter "
        "algorithm id (got 7)");
  CHECK(parse("{\"task\": \"forward\", " + sig +
              "\"sub_batch\": 1, \"algo\": 1, \"reason\": \"workspace\"}") ==
        "ca.json: refused[0]: field 'workspace_bytes' is missing");
  CHECK(parse("{\"task\": \"forward\", " + sig +
              "\"sub_batch\": 1, \"algo\": 1, \"reason\": \"slow\"}") ==
        "ca.json: refused[0]: field 'reason' must be 'unsupported' or "
        "'workspace', got 'slow'");
}

TEST_CASE("a plan made with the trainer's file no longer chooses the "
          "refused algorithm",
          "[convcheck]") {
  memfit::test::Planned m("resnet18", 32, "h200");
  auto first = m.plan(1.0, false);
  REQUIRE(static_cast<bool>(first));
  // The first convolution task that plans an algorithm other than the
  // baseline: what a trainer would have found cuDNN refusing.
  TaskId refusedTask = -1;
  int refusedAlgo = -1;
  for (const Instr &in : first->plan.round) {
    if (in.kind != InstrKind::Run || !convDirectionOf(m.tg, in.task) ||
        in.algo == m.model->baseline(m.tg, in.task).id)
      continue;
    refusedTask = in.task;
    refusedAlgo = in.algo;
    break;
  }
  REQUIRE(refusedTask >= 0);
  const TaskKind kind = m.tg.task(refusedTask).kind;
  const std::string sig = taskSignature(m.tg, refusedTask);

  rt::ConvCheckResult r = sampleResult(sig);
  r.changed.resize(1);
  r.changed[0].direction =
      static_cast<int32_t>(*convDirectionOf(m.tg, refusedTask));
  r.changed[0].planned = refusedAlgo;
  r.changed[0].ran = 0;
  auto profile = parseProfile(rt::convSubstitutionsJson(r), "conv-algos.json");
  REQUIRE(static_cast<bool>(profile));
  auto model = makeProfiledCostModel(llvm::cantFail(builtinDevice("h200")),
                                     *profile, "conv-algos.json");
  REQUIRE(static_cast<bool>(model));
  m.model = std::move(*model);
  m.tables.clear();

  // No task of that signature is offered the algorithm any more...
  int sameSignature = 0;
  for (TaskId t = 0; t < (TaskId)m.tg.tasks.size(); ++t) {
    if (m.tg.task(t).kind != kind || !convDirectionOf(m.tg, t) ||
        taskSignature(m.tg, t) != sig)
      continue;
    ++sameSignature;
    for (const AlgoChoice &a : m.model->algorithms(m.tg, t))
      CHECK(a.id != refusedAlgo);
  }
  CHECK(sameSignature >= 1);
  // ... and the new plan runs it nowhere.
  auto second = m.plan(1.0, false);
  REQUIRE(static_cast<bool>(second));
  for (const Instr &in : second->plan.round)
    if (in.kind == InstrKind::Run && m.tg.task(in.task).kind == kind &&
        convDirectionOf(m.tg, in.task) && taskSignature(m.tg, in.task) == sig)
      CHECK(in.algo != refusedAlgo);
}

TEST_CASE("a workspace refusal prices the algorithm at what cuDNN asked",
          "[convcheck]") {
  memfit::test::Planned m("resnet18", 32, "h200");
  const TaskId t = firstConvTask(m.tg, ConvDirection::Forward);
  REQUIRE(t >= 0);
  const int gemm = (int)FwdAlgo::Gemm;
  const int64_t before = m.model->workspaceBytes(m.tg, t, gemm, 32);
  Profile p;
  p.refuse({TaskKind::Forward, taskSignature(m.tg, t), 16, gemm,
            /*askedBytes=*/before, /*plannedBytes=*/before / 2, 1});
  auto model = llvm::cantFail(makeProfiledCostModel(
      llvm::cantFail(builtinDevice("h200")), p, "conv-algos.json"));
  // Asked `before` at 16: twice that at 32, above the analytic estimate.
  CHECK(model->workspaceBytes(m.tg, t, gemm, 32) == 2 * before);
  CHECK(model->workspaceBytes(m.tg, t, gemm, 16) == before);
  // Still offered: it runs, with more workspace.
  bool offered = false;
  for (const AlgoChoice &a : model->algorithms(m.tg, t))
    offered |= a.id == gemm;
  CHECK(offered);
}

TEST_CASE("measured: the fastest cuDNN timed, unless the settled one is "
          "within noise of it",
          "[convcheck]") {
  using rt::ConvTiming;
  // Planned 1; cuDNN timed 0 at 2 ms, 1 at 1 ms, 6 at 0.5 ms.
  const std::vector<ConvTiming> timed = {
      {6, 0.5e-3, 4096}, {1, 1.0e-3, 0}, {0, 2.0e-3, 0}};
  ConvChoice fast = rt::chooseMeasured(1, 1, timed);
  CHECK(fast.algo == 6);
  CHECK(fast.changed);
  // Within 3% of the fastest: the settled algorithm stays, unchanged.
  ConvChoice noise = rt::chooseMeasured(1, 1, {{6, 0.99e-3, 0}, {1, 1e-3, 0}});
  CHECK(noise.algo == 1);
  CHECK_FALSE(noise.changed);
  // The settled one was a substitute (the planned 7 refused): the fastest
  // replaces it, and the change from the plan is reported either way.
  CHECK(rt::chooseMeasured(7, 0, timed).algo == 6);
  CHECK(rt::chooseMeasured(7, 0, {{0, 1e-3, 0}}).changed);
  // Nothing timed (operands too large for the arena): the settled one.
  ConvChoice none = rt::chooseMeasured(1, 1, {});
  CHECK(none.algo == 1);
  CHECK_FALSE(none.changed);
  // The settled one was not timed (cuDNN's Find skipped it): the fastest.
  CHECK(rt::chooseMeasured(1, 1, {{0, 2e-3, 0}}).algo == 0);
}

TEST_CASE("timed in the arena's room, run within the planned workspace",
          "[convcheck]") {
  using rt::ConvTiming;
  // Timed with all the room there was: 6 needs 64 MiB, 1 needs 4 KiB.
  const std::vector<ConvTiming> wide = {
      {6, 0.5e-3, 64 << 20}, {1, 1.0e-3, 4096}, {0, 2.0e-3, 0}};
  // Planned 4 KiB: 6 is out of reach, 1 stays.
  const std::vector<ConvTiming> fits = rt::withinWorkspace(wide, 4096);
  REQUIRE(fits.size() == 2);
  CHECK(fits[0].algo == 1);
  CHECK(fits[1].algo == 0);
  CHECK(rt::chooseMeasured(1, 1, fits).algo == 1);
  // Planned none: only the one that asks nothing.
  REQUIRE(rt::withinWorkspace(wide, 0).size() == 1);
  CHECK(rt::chooseMeasured(1, 1, rt::withinWorkspace(wide, 0)).algo == 0);
  // Planned enough: the fastest.
  CHECK(rt::chooseMeasured(1, 1, rt::withinWorkspace(wide, 64 << 20)).algo ==
        6);
}

TEST_CASE("the trainer's timings are profile entries memfit plans with",
          "[convcheck]") {
  memfit::test::Planned m("resnet18", 32, "h200");
  const TaskId t = firstConvTask(m.tg, ConvDirection::BackwardFilter);
  REQUIRE(t >= 0);
  const std::string sig = taskSignature(m.tg, t);
  rt::ConvCheckResult r = sampleResult(sig);
  r.tuned = true;
  // Two calls of the same signature and sub-batch: one entry, each
  // algorithm at its fastest time and largest workspace, ids ascending.
  r.measured = {{rt::ConvBwdFilter, sig, 32, {{1, 3e-3, 100}, {0, 9e-3, 0}}},
                {rt::ConvBwdFilter, sig, 32, {{1, 2e-3, 200}}}};
  // A change for speed is no refusal: only the two of sampleResult are.
  rt::ConvSubstitution quick = r.changed[0];
  quick.task = "BP-weight(other)";
  quick.faster = true;
  r.changed.push_back(quick);
  CHECK(r.changedTasks() == 3);
  CHECK(r.changedTasks(false) == 2);
  CHECK(r.changedTasks(true) == 1);
  auto p = parseProfile(rt::convSubstitutionsJson(r), "conv-algos.json");
  REQUIRE(static_cast<bool>(p));
  CHECK(p->refusals().size() == 2);
  std::vector<ProfileEntry> entries = p->entries();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].kind == TaskKind::BackwardWeight);
  CHECK(entries[0].subBatch == 32);
  REQUIRE(entries[0].algorithms.size() == 2);
  CHECK(entries[0].algorithms[0].algo == 0);
  CHECK(entries[0].algorithms[0].seconds == Approx(9e-3));
  CHECK(entries[0].algorithms[1].algo == 1);
  CHECK(entries[0].algorithms[1].seconds == Approx(2e-3));
  CHECK(entries[0].algorithms[1].workspaceBytes == 200);
  // A plan made with the file prices the task at what cuDNN measured.
  auto model = llvm::cantFail(makeProfiledCostModel(
      llvm::cantFail(builtinDevice("h200")), *p, "conv-algos.json"));
  bool priced = false;
  for (const AlgoChoice &a : model->algorithms(m.tg, t))
    if (a.id == 1) {
      CHECK(model->taskSeconds(m.tg, t, 1, 32) == Approx(2e-3));
      priced = true;
    }
  CHECK(priced);
  // The summary line names both reasons and the timing.
  std::string line = rt::convCheckSummary(r, "ca.json");
  CHECK(line.find("3 of 6 tasks changed algorithm") != std::string::npos);
  CHECK(line.find(": 2 refused, 1 measured faster (cuDNN timed 2 calls") !=
        std::string::npos);
  CHECK(line.find("plans with what was measured") != std::string::npos);
}

TEST_CASE("graph API: its fastest plan where it beats the legacy "
          "algorithm by more than noise",
          "[convcheck]") {
  using rt::ConvGraphUse;
  using rt::ConvTiming;
  // The tuning settled on legacy algorithm 1 at 1 ms; 0 took 2 ms.
  const std::vector<ConvTiming> legacy = {{1, 1e-3, 0}, {0, 2e-3, 0}};
  // Plans 0..2 of the graph at 0.9, 0.25 and 0.5 ms: plan 1.
  const std::vector<ConvTiming> plans = {
      {0, 0.9e-3, 0}, {1, 0.25e-3, 512}, {2, 0.5e-3, 0}};
  CHECK(rt::chooseGraphPlan(1, legacy, plans) == 1);
  // Compared with the algorithm that runs, not the slowest timed.
  CHECK(rt::chooseGraphPlan(1, legacy, {{0, 1.5e-3, 0}}) == -1);
  CHECK(rt::chooseGraphPlan(0, legacy, {{0, 1.5e-3, 0}}) == 0);
  // Within 3% of the legacy time: the legacy API stays.
  CHECK(rt::chooseGraphPlan(1, legacy, {{0, 0.98e-3, 0}}) == -1);
  // The legacy algorithm not timed, or no plan: nothing to choose.
  CHECK(rt::chooseGraphPlan(6, legacy, plans) == -1);
  CHECK(rt::chooseGraphPlan(1, legacy, {}) == -1);
  // Always (the self-check): the fastest plan whatever the legacy API did;
  // Off: never.
  CHECK(rt::chooseGraphPlan(1, legacy, {{0, 5e-3, 0}, {1, 4e-3, 0}},
                            ConvGraphUse::Always) == 1);
  CHECK(rt::chooseGraphPlan(6, {}, plans, ConvGraphUse::Always) == 1);
  CHECK(rt::chooseGraphPlan(1, legacy, plans, ConvGraphUse::Off) == -1);
  CHECK(rt::chooseGraphPlan(1, legacy, {}, ConvGraphUse::Always) == -1);
}

TEST_CASE("graph-API engines bound the time of the algorithms with room "
          "for them",
          "[convcheck]") {
  memfit::test::Planned m("resnet18", 32, "h200");
  const TaskId t = firstConvTask(m.tg, ConvDirection::Forward);
  REQUIRE(t >= 0);
  const std::string sig = taskSignature(m.tg, t);
  rt::ConvCheckResult r = sampleResult(sig);
  r.tuned = true;
  r.measured = {{rt::ConvFwd, sig, 32, {{1, 3e-3, 0}, {0, 4e-3, 0}}}};
  rt::ConvEngineUse u;
  u.direction = rt::ConvFwd;
  u.task = "FP(conv1)";
  u.signature = sig;
  u.subBatch = 32;
  u.legacyAlgo = 1;
  u.legacySeconds = 3e-3;
  u.engine = {4, 0.5e-3, 1024, "eng0_k2=3_k3=1\"\\"};
  r.engines = {u, u};
  r.engines[1].task = "FP(conv2)";
  CHECK(r.engineTasks() == 2);
  const std::string json = rt::convSubstitutionsJson(r);
  // The engine's name is cuDNN's: quoted like any other string.
  CHECK(json.find("\"engine\": \"eng0_k2=3_k3=1\\\"\\\\\"") !=
        std::string::npos);
  CHECK(json.find("\"legacy_algo\": 1") != std::string::npos);
  // Still a profile memfit reads. The engine needs 1024 bytes and both
  // legacy algorithms were timed with none. It ran in place of algorithm
  // 1, which is priced as it ran: the engine's time with its 1024 bytes (a
  // plan giving it them gets the engine). Algorithm 0 was not replaced:
  // with no room for the engine its time stands.
  auto p = parseProfile(json, "conv-algos.json");
  REQUIRE(static_cast<bool>(p));
  std::vector<ProfileEntry> entries = p->entries();
  REQUIRE(entries.size() == 1);
  REQUIRE(entries[0].algorithms.size() == 2);
  CHECK(entries[0].algorithms[0].algo == 0);
  CHECK(entries[0].algorithms[0].seconds == Approx(4e-3));
  CHECK(entries[0].algorithms[0].workspaceBytes == 0);
  CHECK(entries[0].algorithms[1].algo == 1);
  CHECK(entries[0].algorithms[1].seconds == Approx(0.5e-3));
  CHECK(entries[0].algorithms[1].workspaceBytes == 1024);
  // An engine that needs no workspace runs in place of either: both cost
  // at most its time. One of another sub-batch changes nothing here.
  rt::ConvCheckResult r2 = r;
  r2.engines[0].engine.bytes = 0;
  r2.engines[1].engine.bytes = 0;
  r2.engines[1].subBatch = 16;
  auto bounded = parseProfile(rt::convSubstitutionsJson(r2), "ca.json");
  REQUIRE(static_cast<bool>(bounded));
  entries = bounded->entries();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].algorithms[0].seconds == Approx(0.5e-3));
  CHECK(entries[0].algorithms[1].seconds == Approx(0.5e-3));
  // A malformed record is an error naming it.
  auto bad = parseProfile(
      "{\"schema_version\": 1, \"entries\": [], \"graph_engines\": "
      "[{\"task\": \"forward\", \"signature\": \"Conv()\", "
      "\"sub_batch\": 4, \"seconds\": -1, \"workspace_bytes\": 0}]}",
      "ca.json");
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK(llvm::toString(bad.takeError()).find("graph_engines[0]") !=
        std::string::npos);
  // The summary's second line: the tasks and what the engines saved.
  std::string line = rt::convCheckSummary(r, "ca.json");
  CHECK(line.find("\nconvolution engines: 2 of 6 tasks run cuDNN graph-API "
                  "engines, measured faster (2 calls: 1.00 ms against the "
                  "legacy API's 6.00 ms)") != std::string::npos);
  // None used: no second line.
  r.engines.clear();
  CHECK(rt::convCheckSummary(r, "ca.json").find('\n') == std::string::npos);
}
