//===- ProfileTest.cpp - Profiles: JSON, signatures, override, fallback ---===//
#include "compiler/cost/Profile.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/cost/AnalyticCost.h"
#include "compiler/cost/CostModel.h"
#include "compiler/ops/OpSignature.h"
#include "tests/GraphLiteral.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

using namespace memfit;
using memfit::test::conv3x3;
using memfit::test::GraphLiteral;

namespace {

/// Model A: x -> conv(16->16, bias) -> relu -> conv(16->16) -> gap -> flat.
Graph modelA() {
  GraphLiteral L(8);
  ValueId x = L.input("x", {16, 32, 32});
  x = L.op(OpKind::Conv, "conv1",
           {x, L.weight("w1", {16, 16, 3, 3}), L.weight("b1", {16})},
           {16, 32, 32}, conv3x3());
  x = L.op(OpKind::Relu, "relu1", {x}, {16, 32, 32});
  x = L.op(OpKind::Conv, "conv2", {x, L.weight("w2", {16, 16, 3, 3})},
           {16, 32, 32}, conv3x3());
  x = L.op(OpKind::GlobalAveragePool, "gap", {x}, {16, 1, 1});
  L.op(OpKind::Flatten, "flat", {x}, {16});
  return std::move(L.g);
}

/// Model B: other names, other neighbours, one conv with the shape of A's
/// conv2 (no bias), placed after a Sigmoid.
Graph modelB() {
  GraphLiteral L(8);
  ValueId x = L.input("image", {16, 32, 32});
  x = L.op(OpKind::Conv, "stem", {x, L.weight("k0", {16, 16, 3, 3})},
           {16, 32, 32}, conv3x3());
  x = L.op(OpKind::Sigmoid, "act", {x}, {16, 32, 32});
  x = L.op(OpKind::Conv, "block7/conv", {x, L.weight("kernel", {16, 16, 3, 3})},
           {16, 32, 32}, conv3x3());
  x = L.op(OpKind::GlobalAveragePool, "pool", {x}, {16, 1, 1});
  L.op(OpKind::Flatten, "flatten", {x}, {16});
  return std::move(L.g);
}

TaskGraph build(const Graph &g) {
  auto tg = buildTaskGraph(g);
  REQUIRE(static_cast<bool>(tg));
  return std::move(*tg);
}

TaskId findTask(const TaskGraph &tg, const std::string &name) {
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t)
    if (tg.tasks[t].name == name)
      return t;
  FAIL("no task " << name);
  return -1;
}

OpId findOp(const Graph &g, const std::string &name) {
  for (OpId i = 0; i < (OpId)g.ops.size(); ++i)
    if (g.ops[i].name == name)
      return i;
  FAIL("no op " << name);
  return -1;
}

std::unique_ptr<CostModel> profiled(const Profile &p,
                                    const char *device = "a100-40g") {
  auto m = makeProfiledCostModel(*builtinDevice(device), p, "test.json");
  REQUIRE(static_cast<bool>(m));
  return std::move(*m);
}

std::string errorOf(llvm::Expected<Profile> p) {
  REQUIRE_FALSE(static_cast<bool>(p));
  return llvm::toString(p.takeError());
}

std::string writeTemp(const std::string &text, const char *suffix) {
  llvm::SmallString<128> path;
  int fd;
  REQUIRE_FALSE(
      llvm::sys::fs::createTemporaryFile("memfit-cost", suffix, fd, path));
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << text;
  return std::string(path);
}

const char *kConvSig =
    "Conv(f32[N,16,32,32],f32[16,16,3,3])->(f32[N,16,32,32]) kernel=3,3 "
    "strides=1,1 pads=1,1,1,1 dilations=1,1 group=1";

} // namespace

TEST_CASE("signatures name shapes and attributes, never op names",
          "[profile]") {
  Graph a = modelA(), b = modelB();
  OpId a2 = findOp(a, "conv2"), b7 = findOp(b, "block7/conv");
  CHECK(opSignature(a, a2) == kConvSig);
  CHECK(opSignature(b, b7) == kConvSig);
  // The bias and the pads are part of it.
  CHECK(opSignature(a, findOp(a, "conv1")) != kConvSig);
  Graph c = modelB();
  c.ops[findOp(c, "block7/conv")].attrs.pads = {0, 0, 2, 2};
  CHECK(opSignature(c, findOp(c, "block7/conv")) != kConvSig);

  TaskGraph tg = build(a);
  CHECK(taskSignature(tg, findTask(tg, "BP-weight(conv2)")) == kConvSig);
  CHECK(taskSignature(tg, findTask(tg, "update(w2)")) ==
        "SGDMomentum(f32[16,16,3,3])");
  CHECK(taskSignature(tg, findTask(tg, "loss(loss)")) ==
        "SoftmaxCrossEntropy(f32[N,16])");
}

TEST_CASE("profile requests: each distinct task once, in op order",
          "[profile]") {
  Graph b = modelB();
  std::vector<ProfileRequest> reqs = profileRequests(b);
  int convFwd = 0, convBwdData = 0, updates = 0, losses = 0;
  for (const ProfileRequest &r : reqs) {
    if (r.signature == kConvSig && r.kind == TaskKind::Forward)
      ++convFwd;
    if (r.signature == kConvSig && r.kind == TaskKind::BackwardData)
      ++convBwdData;
    updates += r.kind == TaskKind::Update;
    losses += r.kind == TaskKind::Loss;
  }
  // stem and block7/conv have the same signature: measured once (by stem).
  CHECK(convFwd == 1);
  CHECK(reqs.front().op == findOp(b, "stem"));
  // The stem reads the data input: block7/conv supplies the BP-data request.
  CHECK(convBwdData == 1);
  // k0 and kernel have one shape: one update signature per momentum mode.
  CHECK(updates == 2);
  CHECK(losses == 2);
  // FP stem, BP-weight stem, FP act, BP-data act, BP-data conv, FP pool,
  // BP-data pool, FP flatten, BP-data flatten, 2 losses, 2 updates.
  CHECK(reqs.size() == 13);
}

TEST_CASE("profile JSON round trip", "[profile]") {
  Profile p;
  p.device.name = "NVIDIA H100 80GB HBM3";
  p.device.computeCapability = "9.0";
  p.device.smCount = 132;
  p.device.memoryBytes = 85'000'000'000;
  p.device.cudnn = "9.19.0";
  p.device.math = "fma";
  p.transfer = TransferMeasurement{2.5e10, 2.4e10, 9e-6};
  p.calibration = R"({"launch_us":2.5})";
  p.add({TaskKind::Forward, kConvSig, 4, {{6, 2e-4, 262144}, {0, 1e-3, 0}}});
  p.add({TaskKind::Forward, kConvSig, 1, {{0, 4e-4, 0}}});
  p.add({TaskKind::Update, "SGD(f32[16])", 1, {{0, 3e-6, 0}}});
  std::string text = profileToJson(p);
  auto q = parseProfile(text, "p.json");
  REQUIRE(static_cast<bool>(q));
  CHECK(profileToJson(*q) == text);
  CHECK(q->device.name == p.device.name);
  CHECK(q->device.smCount == 132);
  REQUIRE(q->transfer);
  CHECK(q->transfer->d2hBytesPerSecond == 2.4e10);
  REQUIRE(q->size() == 3);
  std::vector<ProfileEntry> e = q->entries();
  // Sorted by kind, signature, sub-batch; algorithms by id.
  CHECK(e[0].subBatch == 1);
  CHECK(e[1].subBatch == 4);
  REQUIRE(e[1].algorithms.size() == 2);
  CHECK(e[1].algorithms[0].algo == 0);
  CHECK(e[1].algorithms[1].algo == 6);
  CHECK(e[1].algorithms[1].seconds == 2e-4);
  CHECK(e[1].algorithms[1].workspaceBytes == 262144);
  CHECK(e[2].kind == TaskKind::Update);
  // The algorithm name is written for people.
  CHECK(text.find("\"winograd\"") != std::string::npos);
}

TEST_CASE("profile lookup: exact, interpolated, missing", "[profile]") {
  Profile p;
  p.add({TaskKind::Forward, kConvSig, 2, {{0, 1e-3, 0}, {2, 6e-4, 1000}}});
  p.add({TaskKind::Forward, kConvSig, 4, {{0, 2e-3, 0}, {2, 1e-3, 2000}}});
  ProfileLookup exact = p.lookup(TaskKind::Forward, kConvSig, 4);
  CHECK(exact.kind == LookupKind::Exact);
  CHECK(exact.find(2)->seconds == 1e-3);
  ProfileLookup mid = p.lookup(TaskKind::Forward, kConvSig, 3);
  CHECK(mid.kind == LookupKind::Interpolated);
  CHECK(mid.find(0)->seconds == Approx(1.5e-3));
  CHECK(mid.find(2)->seconds == Approx(8e-4));
  // Workspace never underestimated: the larger neighbour.
  CHECK(mid.find(2)->workspaceBytes == 2000);
  CHECK(p.lookup(TaskKind::Forward, kConvSig, 1).kind == LookupKind::Missing);
  CHECK(p.lookup(TaskKind::Forward, kConvSig, 8).kind == LookupKind::Missing);
  CHECK(p.lookup(TaskKind::BackwardData, kConvSig, 4).kind ==
        LookupKind::Missing);
  CHECK(p.commonAlgorithms(TaskKind::Forward, kConvSig) ==
        std::vector<int>{0, 2});
}

TEST_CASE("a profile taken on one model serves the same conv shape in "
          "another",
          "[profile]") {
  // Measured on model A's conv2.
  Graph a = modelA();
  std::string sig = opSignature(a, findOp(a, "conv2"));
  Profile p;
  p.add({TaskKind::Forward,
         sig,
         8,
         {{0, 1e-3, 0}, {1, 7e-4, 4608}, {6, 4e-4, 65536}}});
  auto m = profiled(p);

  // Used on model B's block7/conv.
  Graph b = modelB();
  TaskGraph tg = build(b);
  TaskId fp = findTask(tg, "FP(block7/conv)");
  CHECK(m->taskSeconds(tg, fp, 6, 8) == 4e-4);
  CHECK(m->workspaceBytes(tg, fp, 6, 8) == 65536);
  // The measured list replaces the analytic one (which has 7 algorithms).
  std::vector<AlgoChoice> algos = m->algorithms(tg, fp);
  REQUIRE(algos.size() == 3);
  CHECK(algos[0].id == 0);
  CHECK(algos[0].baseline);
  CHECK(algos[2].name == "winograd");
  CHECK(m->fastest(tg, fp, 8).id == 6);
  // The stem has the same shape too.
  CHECK(m->taskSeconds(tg, findTask(tg, "FP(stem)"), 0, 8) == 1e-3);
  // Both convs share one measurement: usage counts distinct (task kind,
  // signature, sub-batch) keys.
  ProfileUsage u = m->profileUsage();
  CHECK(u.hasProfile);
  CHECK(u.exact == 1);
  CHECK(u.missing == 0);
}

TEST_CASE("outside the measured sub-batches, the analytic model's shape at "
          "the measured level",
          "[profile]") {
  // Measured at sub-batch 8 only: algorithm 1 at twice the analytic
  // model's time there.
  Graph a = modelA();
  TaskGraph tg = build(a);
  TaskId fp = findTask(tg, "FP(conv2)");
  auto analytic = makeAnalyticCostModel(*builtinDevice("a100-40g"));
  const double at8 = analytic->taskSeconds(tg, fp, 1, 8);
  REQUIRE(at8 > 0);
  Profile p;
  p.add({TaskKind::Forward, kConvSig, 8, {{1, 2 * at8, 4608}}});
  auto m = profiled(p);
  // At 4 and 16, twice the model's own estimate there, not the model's
  // level (which made a split batch look cheaper than the measured whole).
  for (int64_t b : {int64_t(4), int64_t(16)})
    CHECK(m->taskSeconds(tg, fp, 1, b) ==
          Approx(2 * analytic->taskSeconds(tg, fp, 1, b)));
  // An algorithm measured at two sizes scales from the nearer.
  Profile q;
  q.add({TaskKind::Forward, kConvSig, 2, {{1, 5 * at8, 4608}}});
  q.add({TaskKind::Forward, kConvSig, 8, {{1, 2 * at8, 4608}}});
  CHECK(profiled(q)->taskSeconds(tg, fp, 1, 16) ==
        Approx(2 * analytic->taskSeconds(tg, fp, 1, 16)));
  CHECK(profiled(q)->taskSeconds(tg, fp, 1, 1) ==
        Approx(5 * at8 / at8 * analytic->taskSeconds(tg, fp, 1, 1) * at8 /
               analytic->taskSeconds(tg, fp, 1, 2)));
}

TEST_CASE("measured entries override, missing ones fall back and are "
          "counted",
          "[profile]") {
  Graph b = modelB();
  TaskGraph tg = build(b);
  Profile p;
  p.add({TaskKind::Forward, kConvSig, 4, {{0, 1e-3, 0}, {2, 5e-4, 123456}}});
  p.add({TaskKind::Forward, kConvSig, 8, {{0, 2e-3, 0}, {2, 9e-4, 246912}}});
  auto m = profiled(p);
  AnalyticCostModel analytic(*builtinDevice("a100-40g"));
  TaskId conv = findTask(tg, "FP(block7/conv)");
  TaskId act = findTask(tg, "FP(act)");

  CHECK(m->taskSeconds(tg, conv, 2, 4) == 5e-4);         // measured
  CHECK(m->workspaceBytes(tg, conv, 2, 4) == 123456);    // measured
  CHECK(m->taskSeconds(tg, conv, 2, 6) == Approx(7e-4)); // interpolated
  // Not measured: the analytic model answers, scaled to the nearest
  // measured sub-batch's level where the task was measured at all.
  CHECK(m->taskSeconds(tg, act, 0, 4) == analytic.taskSeconds(tg, act, 0, 4));
  CHECK(m->taskSeconds(tg, conv, 0, 16) ==
        Approx(analytic.taskSeconds(tg, conv, 0, 16) * 2e-3 /
               analytic.taskSeconds(tg, conv, 0, 8)));
  CHECK(m->workspaceBytes(tg, conv, 2, 16) ==
        analytic.workspaceBytes(tg, conv, 2, 16));
  // Asked for an algorithm the profile did not measure at b = 4.
  CHECK(m->taskSeconds(tg, conv, 1, 4) == analytic.taskSeconds(tg, conv, 1, 4));
  // Views cost nothing whatever the profile says.
  CHECK(m->taskSeconds(tg, findTask(tg, "FP(flatten)"), 0, 4) == 0);
  // Asking again does not count again.
  m->taskSeconds(tg, act, 0, 4);

  ProfileUsage u = m->profileUsage();
  CHECK(u.exact == 1);
  CHECK(u.interpolated == 1);
  CHECK(u.missing == 3); // act at 4, conv at 16, conv algorithm 1 at 4
  // The summary names a few of the estimated ones (SummaryTextTest).
  CHECK(u.missingExamples.size() == 3);
  CHECK(llvm::any_of(u.missingExamples, [](const std::string &e) {
    return llvm::StringRef(e).startswith("forward Sigmoid(");
  }));

  // The analytic model reports no profile.
  CHECK(!analytic.profileUsage().hasProfile);
}

TEST_CASE("profiled baseline, transfers and calibration", "[profile]") {
  Graph b = modelB();
  TaskGraph tg = build(b);
  TaskId conv = findTask(tg, "FP(block7/conv)");
  TaskId act = findTask(tg, "FP(act)");
  AnalyticCostModel analytic(*builtinDevice("a100-40g"));

  // cuDNN reported workspace for implicit GEMM but none for the
  // precomputed variant: the latter becomes the baseline.
  Profile p;
  p.add({TaskKind::Forward, kConvSig, 4, {{0, 1e-3, 1024}, {1, 8e-4, 0}}});
  p.transfer = TransferMeasurement{2e10, 1e10, 5e-6};
  p.calibration = R"({"launch_us": 50})";
  auto m = profiled(p);
  CHECK(m->baseline(tg, conv).id == 1);
  CHECK(m->transferSeconds(1'000'000, CopyDirection::HostToDevice) ==
        Approx(5e-6 + 1e6 / 2e10));
  CHECK(m->transferSeconds(1'000'000, CopyDirection::DeviceToHost) ==
        Approx(5e-6 + 1e6 / 1e10));
  // The profile's launch cost (50 us instead of the device's) reaches the
  // fallback: the activation runs one kernel.
  CHECK(m->device().launchSeconds == Approx(50e-6));
  CHECK(m->taskSeconds(tg, act, 0, 4) ==
        Approx(analytic.taskSeconds(tg, act, 0, 4) + 50e-6 -
               analytic.device().launchSeconds));
  // Measured values are not touched by it.
  CHECK(m->taskSeconds(tg, conv, 1, 4) == 8e-4);

  Profile tie;
  tie.add({TaskKind::Forward, kConvSig, 4, {{0, 1e-3, 0}, {1, 8e-4, 0}}});
  CHECK(profiled(tie)->baseline(tg, conv).id == 0);

  Profile bad;
  bad.calibration = R"({"launch_us": "fast"})";
  auto err = makeProfiledCostModel(*builtinDevice("v100"), bad, "q.json");
  REQUIRE_FALSE(static_cast<bool>(err));
  CHECK(llvm::toString(err.takeError()) ==
        "q.json: calibration: field 'launch_us' must be a number, not a "
        "string");
}

TEST_CASE("profile errors name the file, the entry and the field",
          "[profile]") {
  auto parse = [](const std::string &text) {
    return parseProfile(text, "prof.json");
  };
  CHECK(errorOf(parse("{")).find("prof.json: invalid JSON") == 0);
  CHECK(errorOf(parse(R"({"schema_version": 2, "entries": []})")) ==
        "prof.json: profile schema_version 2 is not supported (this memfit "
        "reads version 1); profile the device again");
  CHECK(errorOf(parse(R"({"entries": []})")) ==
        "prof.json: field 'schema_version' is missing");
  const std::string head = R"J({"schema_version": 1, "entries": [)J";
  const std::string okEntry =
      R"J({"task": "forward", "signature": "Relu(f32[N,4])->(f32[N,4])",
          "sub_batch": 2, "algorithms": [{"algo": 0, "seconds": 1e-6,
          "workspace_bytes": 0}]})J";
  REQUIRE(static_cast<bool>(parse(head + okEntry + "]}")));
  const std::string noSeconds =
      R"J({"task": "forward", "signature": "Conv(x)", "sub_batch": 2,
          "algorithms": [{"algo": 1, "seconds": 1e-6, "workspace_bytes": 0},
          {"algo": 2, "workspace_bytes": 8}]})J";
  CHECK(errorOf(parse(head + okEntry + "," + noSeconds + "]}")) ==
        "prof.json: entries[1].algorithms[1]: field 'seconds' is missing");
  const std::string textBatch =
      R"J({"task": "forward", "signature": "Relu(x)", "sub_batch": "2",
          "algorithms": []})J";
  CHECK(errorOf(parse(head + textBatch + "]}")) ==
        "prof.json: entries[0]: field 'sub_batch' must be an integer, not a "
        "string");
  const std::string badTask =
      R"J({"task": "sideways", "signature": "Relu(x)", "sub_batch": 2,
          "algorithms": []})J";
  CHECK(errorOf(parse(head + badTask + "]}")) ==
        "prof.json: entries[0]: field 'task' names an unknown task kind "
        "'sideways' (expected forward, backward_data, backward_weight, loss "
        "or update)");
  // cuDNN has no backward-data algorithm 7.
  const std::string badAlgo =
      R"J({"task": "backward_data", "signature": "Conv(x)", "sub_batch": 2,
          "algorithms": [{"algo": 7, "seconds": 1e-6, "workspace_bytes": 0}]})J";
  CHECK(errorOf(parse(head + badAlgo + "]}")) ==
        "prof.json: entries[0].algorithms[0]: field 'algo' is not a cuDNN "
        "conv_bwd_data algorithm id (got 7)");
  CHECK(errorOf(parse(head + okEntry + "," + okEntry + "]}")) ==
        "prof.json: entries[1]: a second entry for the same task, signature "
        "and sub_batch");
  CHECK(errorOf(parse(head + okEntry + R"J(], "extra": 1})J")) ==
        "prof.json: unknown field 'extra'");
  CHECK(errorOf(parse(R"({"schema_version": 1, "entries": [],
      "transfer": {"h2d_bytes_per_second": 0, "d2h_bytes_per_second": 1,
      "latency_seconds": 0}})")) ==
        "prof.json: transfer: field 'h2d_bytes_per_second' must be positive, "
        "got 0");
}

TEST_CASE("makeCostModel reads device and profile files", "[profile]") {
  DeviceSpec spec = *builtinDevice("h100-pcie");
  spec.name = "my-gpu";
  std::string devPath = writeTemp(deviceToJson(spec), "json");
  Profile p;
  p.add({TaskKind::Forward, kConvSig, 4, {{0, 1e-3, 0}}});
  std::string profPath = writeTemp(profileToJson(p), "json");

  auto m = makeCostModel(devPath, profPath);
  REQUIRE(static_cast<bool>(m));
  CHECK((*m)->device().name == "my-gpu");
  CHECK((*m)->profileUsage().hasProfile);
  Graph b = modelB();
  TaskGraph tg = build(b);
  CHECK((*m)->taskSeconds(tg, findTask(tg, "FP(stem)"), 0, 4) == 1e-3);

  auto analytic = makeCostModel("h200", "");
  REQUIRE(static_cast<bool>(analytic));
  CHECK_FALSE((*analytic)->profileUsage().hasProfile);

  auto missing = makeCostModel("h200", "/nonexistent/profile.json");
  REQUIRE_FALSE(static_cast<bool>(missing));
  CHECK(llvm::toString(missing.takeError())
            .find("/nonexistent/profile.json: cannot read profile") == 0);
  llvm::sys::fs::remove(devPath);
  llvm::sys::fs::remove(profPath);
}
