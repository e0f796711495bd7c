//===- Planning.cpp - What plan, compile and compare share ----------------===//
#include "tools/memfit/Planning.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/FreezeOption.h"
#include "tools/memfit/NumericOptions.h"
#include "tools/memfit/PrecisionOption.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/FusedHead.h"
#include "compiler/cost/DeviceSpec.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OpDef.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/MemoryLimit.h"
#include "compiler/support/Units.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/search/GraphVariants.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <map>

using namespace llvm;

namespace memfit::tool {

cl::SubCommand &planCommand() {
  static cl::SubCommand c("plan", "Plan training under a budget and print "
                                  "the summary");
  return c;
}
cl::SubCommand &compileCommand() {
  static cl::SubCommand c("compile", "Plan training under a budget and write "
                                     "the trainer program");
  return c;
}
cl::SubCommand &compareCommand() {
  static cl::SubCommand c("compare", "Compare every policy side by side at "
                                     "several budgets");
  return c;
}

namespace {

cl::OptionCategory Cat("Planning options");

template <typename T> struct Shared : cl::opt<T> {
  template <typename... Mods>
  Shared(const Mods &...mods)
      : cl::opt<T>(mods..., cl::cat(Cat), cl::sub(planCommand()),
                   cl::sub(compileCommand()), cl::sub(compareCommand())) {}
};

Shared<std::string> ModelPath(cl::Positional, cl::desc("<model.onnx>"),
                              cl::Required);
Shared<PositiveCount> Batch("batch",
                            cl::desc("Batch size B (default: the model's "
                                     "fixed batch dimension)"),
                            cl::init(0));
Shared<AttentionMode> FuseAttention(
    "fuse-attention",
    cl::desc("Scaled dot-product attention as one memory-efficient operator "
             "(scores recomputed in the backward)"),
    cl::init(AttentionMode::Auto), cl::ValueOptional,
    cl::values(clEnumValN(AttentionMode::Auto, "auto",
                          "plan and compile choose the faster feasible form "
                          "(compare plans it fused) (default)"),
               clEnumValN(AttentionMode::Fused, "true", "always fused"),
               clEnumValN(AttentionMode::Fused, "", "always fused"),
               clEnumValN(AttentionMode::Materialized, "false",
                          "as the model writes it (the scores stored)")));
Shared<AttentionMode> FuseHead(
    "fuse-head",
    cl::desc("The head's matrix product computed by the cross-entropy "
             "loss in chunks of rows, the logits never stored whole"),
    cl::init(AttentionMode::Auto), cl::ValueOptional,
    cl::values(clEnumValN(AttentionMode::Auto, "auto",
                          "plan both forms and keep the faster feasible one "
                          "(default)"),
               clEnumValN(AttentionMode::Fused, "true", "always fused"),
               clEnumValN(AttentionMode::Fused, "", "always fused"),
               clEnumValN(AttentionMode::Materialized, "false",
                          "as the model writes it (the logits stored)")));
Shared<FuseMode> Fuse(
    "fuse",
    cl::desc("Fused forms: a ReLU run inside the BatchNorm before it (no "
             "pass of its own; its output kept until the BatchNorm's "
             "backward)"),
    cl::init(FuseMode::Auto),
    cl::values(clEnumValN(FuseMode::Auto, "auto",
                          "plan the fused forms, and the model as written "
                          "where the fused plan pays for its memory with "
                          "time; keep the faster (default)"),
               clEnumValN(FuseMode::None, "none", "as the model writes it")));
Shared<PositiveCount> HeadChunkRows(
    "head-chunk-rows",
    cl::desc("Rows of logits the fused head computes at a time (default: "
             "as many as 32 MiB holds, at most a batch's)"),
    cl::init(0));
Shared<std::string> Budget("budget",
                           cl::desc("Device memory budget: a size (12GiB, "
                                    "8000MB) or a percentage of the ideal "
                                    "peak (50%), or lb for the lower bound"),
                           cl::init(""));
Shared<std::string> LibraryReserve(
    "library-reserve",
    cl::desc("Device memory cuDNN's and cuBLAS's handles and cuBLAS's "
             "workspace keep, inside the budget and outside the plan: a size "
             "(144MiB, 0) (default: the device's, 144 MiB unless its file "
             "says otherwise, plus the local memory of fused attention "
             "with heads wider than 128 on a GPU)"),
    cl::init(""));
Shared<std::string> HostBudget(
    "host-budget",
    cl::desc("Pinned host memory that weights, their gradients and "
             "optimizer state may live in (a size: 64GiB, at most the "
             "device's host memory; or 'host': all of it): weights that do "
             "not fit the device budget are homed there, copied in for the "
             "tasks that read them and updated by the host's cores. Default: "
             "none, every weight stays on the GPU"),
    cl::init(""));
Shared<std::string>
    Nvme("nvme",
         cl::desc("A directory on an NVMe drive where the optimizer state "
                  "(momentum, second moment) of weights homed on the host may "
                  "live when --host-budget does not hold it: the host's update "
                  "streams it from a file there and back. Needs a device file "
                  "with nvme_read_gbps and nvme_write_gbps. Default: none"),
         cl::init(""));
Shared<std::string> NvmeBudget(
    "nvme-budget",
    cl::desc("Bytes of optimizer state --nvme's directory may hold (a "
             "size: 500GiB). Default: the device's NVMe size where its file "
             "states one, else the directory's free space; never more than "
             "that free space. Without --nvme: plan for a drive on another "
             "machine (the trainer then needs its own --nvme DIR)"),
    cl::init(""));
// cl::desc keeps a reference: the text lives as long as the option. The
// built-in table is constant-initialized, so it is there to read.
const std::string DeviceHelp =
    "Device model: " + llvm::join(builtinDeviceNames(), ", ") +
    ", or a JSON file";
Shared<std::string> Device("device", cl::desc(DeviceHelp),
                           cl::init("h100-sxm"));
Shared<std::string> ProfilePath("profile",
                                cl::desc("Measured profile (memfit profile) "
                                         "to use before the analytic model"),
                                cl::init(""));
// cl::desc keeps a reference: the text lives as long as the option.
const std::string PolicyHelp = policyNamesText(/*withIdeal=*/true);
Shared<std::string> PolicyName("policy", cl::desc(PolicyHelp),
                               cl::init("memfit"));
Shared<PositiveCount> Accumulate(
    "accumulate",
    cl::desc("Gradient accumulation: each optimizer step takes this many "
             "micro-batches of --batch samples, each micro-batch's loss "
             "divided by it, as a PyTorch loop that steps every N "
             "backward passes (BatchNorm's statistics per micro-batch, as "
             "there). The trainer's batch is then N x --batch samples and "
             "its --iterations count optimizer steps. Default 1"),
    cl::init(0));
Shared<PositiveCount>
    SubBatch("sub-batch",
             cl::desc("Force the sub-batch size (default: chosen)"),
             cl::init(0));
Shared<PositiveCount> Chunks(
    "chunks",
    cl::desc("Split the batch into this many chunks inside one round (it "
             "must divide the batch). Exact: BatchNorm's statistics are "
             "gathered over all chunks. By default memfit's own policy "
             "chooses for models with BatchNorm"),
    cl::init(0));
Shared<bool> Bound(
    "bound",
    cl::desc("Prove a lower bound on the iteration time of the plans with "
             "the chosen plan's order and sub-batch, and report the plan's "
             "gap to it (default true; graphs past a size are skipped)"),
    cl::init(true));
Shared<bool> Refine(
    "refine",
    cl::desc("memfit's last search phase: change the winning plan's keep, "
             "recompute and offload decision of one block at a time and "
             "keep each change that makes the schedule faster (default "
             "true; --refine=false plans faster, graphs past a size skip "
             "it)"),
    cl::init(true));
Shared<bool> SubBatchStatistics(
    "sub-batch-statistics",
    cl::desc("Allow sub-batches smaller than the batch in models with "
             "BatchNorm, which then normalizes each sub-batch by its own "
             "statistics: faster plans at tight budgets, but not what the "
             "model computes (default false: such models run whole batches)"),
    cl::init(false));
Shared<OrderKind> Order(
    "order",
    cl::desc("Task order, kept as given (default: join-aware, or the "
             "model's where it plans faster)"),
    cl::init(OrderKind::JoinAware),
    cl::values(clEnumValN(OrderKind::JoinAware, "join-aware",
                          "depth-first, heavier branch first"),
               clEnumValN(OrderKind::Built, "model", "the model's op order")));
Shared<bool> InPlace("in-place",
                     cl::desc("Run ReLU, dropout and other elementwise ops "
                              "over their input where nothing reads it "
                              "afterwards (default true; --in-place=false "
                              "to keep every output separate)"),
                     cl::init(true));
Shared<LossKind>
    Loss("loss", cl::desc("Training loss"),
         cl::init(LossKind::SoftmaxCrossEntropy),
         cl::values(clEnumValN(LossKind::SoftmaxCrossEntropy, "cross-entropy",
                               "mean softmax cross-entropy, integer labels"),
                    clEnumValN(LossKind::MSE, "mse", "mean squared error")));
Shared<ClassAxis> ClassAxisOpt(
    "class-axis",
    cl::desc("Axis of the output that cross-entropy reads classes from"),
    cl::init(ClassAxis::Auto),
    cl::values(clEnumValN(ClassAxis::Auto, "auto",
                          "the last axis when the model reads token ids, "
                          "else axis 1 (default)"),
               clEnumValN(ClassAxis::Channel, "1",
                          "axis 1, as torch's cross_entropy (images, "
                          "segmentation)"),
               clEnumValN(ClassAxis::Last, "last",
                          "the last axis (sequence models: N x T x V)")));
Shared<OptimizerKind> Optimizer(
    "optimizer", cl::desc("The optimizer whose state is planned"),
    cl::init(OptimizerKind::SGD),
    cl::values(clEnumValN(OptimizerKind::SGD, "sgd",
                          "torch.optim.SGD (a momentum buffer unless "
                          "--momentum 0; default)"),
               clEnumValN(OptimizerKind::Adam, "adam",
                          "torch.optim.Adam (two moment buffers)"),
               clEnumValN(OptimizerKind::AdamW, "adamw",
                          "torch.optim.AdamW (two moment buffers, decoupled "
                          "weight decay)")));
Shared<Precision> PrecisionOpt("precision", cl::desc(kPrecisionHelp),
                               cl::init(Precision::FP32), precisionValues());
Shared<std::string> Freeze("freeze", cl::desc(kFreezeHelp),
                           cl::value_desc("regex"), cl::init(""));
Shared<std::string> TrainOnly("train-only", cl::desc(kTrainOnlyHelp),
                              cl::value_desc("regex"), cl::init(""));
Shared<std::string> Constants("constants", cl::desc(kConstantsHelp),
                              cl::value_desc("regex"), cl::init(""));
cl::list<std::string> FreezeRows("freeze-rows", cl::desc(kFreezeRowsHelp),
                                 cl::value_desc("NAME:ROW"), cl::cat(Cat),
                                 cl::sub(planCommand()),
                                 cl::sub(compileCommand()),
                                 cl::sub(compareCommand()));
Shared<Rate> ClipGradNorm(
    "clip-grad-norm",
    cl::desc("Clip the gradients to this global L2 norm before every update, "
             "as torch.nn.utils.clip_grad_norm_ (the trainer's "
             "--clip-grad-norm may change the value). Every update then "
             "waits for the last gradient, and the plan prices the norm. "
             "Default 0: no clipping"),
    cl::init(0.0));
Shared<int> IgnoreIndex(
    "ignore-index",
    cl::desc("Cross-entropy labels equal to this count for nothing: no loss, "
             "no gradient, and the mean runs over the other positions, as "
             "torch's cross_entropy(ignore_index=...) (padding, prompt "
             "tokens). Default -100, torch's"),
    cl::init(-100));
Shared<Fraction> Momentum("momentum",
                          cl::desc("SGD momentum, in [0, 1) (0 allocates no "
                                   "buffers)"),
                          cl::init(0.9f));
Shared<PositiveCount>
    Ranks("ranks",
          cl::desc("Data-parallel training over this many GPUs: --batch is "
                   "the global batch, split evenly; one plan per rank under "
                   "the per-GPU budget (default 1)"),
          cl::init(0));
Shared<int> Shard("shard",
                  cl::desc("With --ranks: 1 shards the optimizer state over "
                           "the ranks, 2 the gradients too (ZeRO stages 1 and "
                           "2); 0 replicates them (default)"),
                  cl::init(0));
Shared<DataParallel::Link>
    Link("link", cl::desc("With --ranks: what carries the collectives"),
         cl::init(DataParallel::Link::Auto),
         cl::values(clEnumValN(DataParallel::Link::Auto, "auto",
                               "NVLink where the device has it, else PCIe "
                               "(default)"),
                    clEnumValN(DataParallel::Link::NVLink, "nvlink",
                               "NVLink among the GPUs of one node"),
                    clEnumValN(DataParallel::Link::PCIe, "pcie",
                               "PCIe peer to peer"),
                    clEnumValN(DataParallel::Link::InfiniBand, "infiniband",
                               "the network between nodes, one NIC per "
                               "GPU")));
Shared<bool> Quiet("quiet", cl::desc("Print nothing but errors (and what "
                                     "--json asks for)"));
Shared<bool> Verbose("verbose",
                     cl::desc("Say on stderr what each stage does and how "
                              "long it takes"));

} // namespace

const CostTable &PlanningSession::tableAt(int64_t b) {
  auto it = tables.find(b);
  if (it == tables.end())
    it = tables.emplace(b, buildCostTable(*costs, tg, b)).first;
  return it->second;
}

Progress makeProgress() { return Progress(Quiet, Verbose); }

Expected<DataParallel> checkDataParallel(int64_t ranks, int shard,
                                         DataParallel::Link link,
                                         int64_t batch) {
  DataParallel dp;
  if (ranks > 4096)
    return makeErrorF("invalid --ranks {0}: at most 4096", ranks);
  dp.ranks = ranks ? static_cast<int32_t>(ranks) : 1;
  dp.shard = shard;
  dp.link = link;
  if (shard < 0 || shard > 2)
    return makeErrorF("invalid --shard {0}: expected 0 (replicated), 1 "
                      "(optimizer state sharded) or 2 (gradients too)",
                      shard);
  if (dp.ranks == 1 && (shard || link != DataParallel::Link::Auto))
    return makeError("--shard and --link need --ranks of 2 or more");
  if (dp.ranks > 1 && !batch)
    return makeErrorF("--ranks {0} needs --batch, the global batch the ranks "
                      "split",
                      dp.ranks);
  if (dp.ranks > 1 && batch % dp.ranks)
    return makeErrorF("--batch {0} does not split evenly over --ranks {1}",
                      batch, dp.ranks);
  return dp;
}

Expected<DataParallel> dataParallelFlags() {
  return checkDataParallel(Ranks, Shard, Link, Batch);
}
bool quietFlag() { return Quiet; }
int32_t accumulateFlag() {
  return static_cast<int32_t>(std::max<int64_t>(1, Accumulate));
}

Error importInto(PlanningSession &s, bool keepWeightData, bool fuse,
                 Progress &p) {
  if (Quiet && Verbose)
    return makeError("--quiet and --verbose are mutually exclusive");
  if (s.imported)
    return Error::success();
  s.modelPath = ModelPath;
  auto dp = dataParallelFlags();
  if (!dp)
    return dp.takeError();
  ImportOptions io;
  // Each rank's graph holds its slice of the global batch, all of an
  // optimizer step's micro-batches.
  if (Accumulate > 1 && Batch == 0)
    return makeError("--accumulate needs --batch, the micro-batch's size");
  io.batch = Batch / dp->ranks * std::max<int64_t>(1, Accumulate);
  io.keepWeightData = keepWeightData;
  io.fuseAttention = fuse;
  io.constants = Constants;
  auto frozenRows = parseFrozenRows(FreezeRows);
  if (!frozenRows)
    return frozenRows.takeError();
  io.frozenRows = std::move(*frozenRows);
  p.start("importing " + s.modelPath);
  auto g = importOnnxFile(ModelPath, io);
  if (!g)
    return g.takeError();
  s.graph = std::move(*g);
  if (s.fuseEpilogues) {
    s.epilogues = countEpilogues(s.graph);
    s.graph = fuseEpilogues(s.graph);
  }
  p.done();
  return Error::success();
}

namespace {
int64_t attentionOps(const Graph &g) {
  return llvm::count_if(
      g.ops, [](const Op &op) { return op.kind == OpKind::Attention; });
}
} // namespace

bool fuseHeadRequested() { return FuseHead != AttentionMode::Materialized; }
AttentionMode fuseAttentionFlag() { return FuseAttention; }
AttentionMode fuseHeadFlag() { return FuseHead; }
FuseMode fuseFlag() { return Fuse; }
std::string fusedFormsText(int64_t relu, int64_t clip) {
  std::string r = formatv("{0} BatchNorm+ReLU", relu).str();
  std::string c = formatv("{0} BatchNorm+Clip", clip).str();
  return clip == 0 ? r : relu == 0 ? c : r + " and " + c;
}
int64_t headChunkRowsFlag() { return HeadChunkRows; }
bool budgetIsLowerBoundFlag() {
  llvm::StringRef b = llvm::StringRef(Budget).trim();
  return b.equals_insensitive("lb") || b.equals_insensitive("mmin");
}

bool hostTierInBytesFlag() {
  llvm::StringRef b = llvm::StringRef(Budget).trim();
  return !llvm::StringRef(HostBudget).trim().empty() && !b.empty() &&
         !b.endswith("%") && !budgetIsLowerBoundFlag();
}

Error openSession(PlanningSession &s, bool keepWeightData, Progress *progress) {
  Progress silent(true, false);
  Progress &p = progress ? *progress : silent;
  if (auto err = importInto(s, keepWeightData,
                            FuseAttention != AttentionMode::Materialized, p))
    return err;
  int64_t fused = attentionOps(s.graph);
  if (fused)
    s.attentionNote =
        formatv("attention fused ({0} op{1})", fused, fused == 1 ? "" : "s");
  return buildSession(s, p);
}

Error buildSession(PlanningSession &s, Progress &p) {
  p.info(formatv("{0} ops, batch {1}", s.graph.ops.size(), s.graph.batch));
  p.start("building the training graph");
  TrainingConfig tc;
  tc.loss = Loss;
  tc.classAxis = ClassAxisOpt;
  tc.optimizer = Optimizer;
  tc.momentum = Momentum;
  tc.precision = PrecisionOpt;
  tc.clipGradNorm = ClipGradNorm;
  tc.ignoreIndex = IgnoreIndex;
  tc.fuseHead = s.fuseHead;
  tc.headChunkRows =
      s.headChunkRows > 0 ? s.headChunkRows : headChunkRowsFlag();
  tc.dp = cantFail(dataParallelFlags());
  tc.freeze = {Freeze, TrainOnly};
  s.freeze = tc.freeze;
  s.config = tc;
  auto tg = buildTaskGraph(s.graph, tc);
  if (!tg)
    return withContext(tg.takeError(),
                       ModelPath + ": cannot build the training graph: ");
  s.tg = std::move(*tg);
  s.tg.graph = &s.graph;
  p.done();
  p.info(
      formatv("{0} tasks, {1} blocks", s.tg.tasks.size(), s.tg.blocks.size()));
  if (auto err = checkPlanningMemory(s.tg.tasks.size(), s.modelPath))
    return err;
  auto cm = makeCostModel(Device, ProfilePath);
  if (!cm)
    return cm.takeError();
  s.costs = std::move(*cm);
  s.profilePath = ProfilePath;
  if (s.tg.dp.active()) {
    CollectiveCost c = collectiveCost(s.costs->device(), s.tg.dp);
    if (!(c.bytesPerSecond > 0))
      return makeErrorF("device {0} states no {1} bandwidth for the "
                        "collectives (nvlink_gbps, network_gbps in a device "
                        "file); choose another --link",
                        s.costs->device().name, c.link);
  }
  return Error::success();
}

Expected<PlanOutcome> runPlanner(PlanningSession &s, const PlanRequest &req,
                                 Progress &progress) {
  bool large = s.tg.tasks.size() > kLargeTaskCount;
  progress.start(formatv("planning {0} tasks with policy {1}",
                         s.tg.tasks.size(), policyName(req.policy)),
                 large);
  auto out = planTraining(s.tg, s.tableFn(), req);
  if (!out)
    return withContext(out.takeError(), s.modelPath + ": ");
  progress.done();
  return out;
}

std::string trainingRestriction(const TaskGraph &tg) {
  FrozenCount f = countFrozen(tg);
  if (f.frozen == 0)
    return "";
  return describeRestriction({.weights = f.frozen,
                              .bytes = f.frozenBytes,
                              .trainedWeights = f.trained,
                              .trainedBytes = f.trainedBytes,
                              .trainOnly = TrainOnly,
                              .freeze = Freeze});
}

constexpr double kMaxBudgetPercent = 100000;

Error parseBudget(StringRef text, StringRef flag, PlanRequest &r) {
  text = text.trim();
  r.budget = 0;
  r.budgetFraction = 0;
  r.budgetIsLowerBound = false;
  if (text.equals_insensitive("lb") || text.equals_insensitive("mmin")) {
    r.budgetIsLowerBound = true;
    return Error::success();
  }
  if (text.endswith("%")) {
    double pct = 0;
    // NaN and infinities fail these comparisons too; past 1000x the ideal
    // peak a budget means nothing and its bytes could overflow.
    if (text.drop_back().trim().getAsDouble(pct) || !(pct > 0) ||
        !(pct <= kMaxBudgetPercent))
      return makeErrorF("invalid {0} '{1}': expected a positive percentage "
                        "of at most {2}%, such as 50%",
                        flag, text, int64_t(kMaxBudgetPercent));
    r.budgetFraction = pct / 100.0;
    return Error::success();
  }
  auto bytes = parseSize(text.str());
  if (!bytes)
    return makeErrorF("invalid {0} '{1}': {2}", flag, text,
                      toString(bytes.takeError()));
  if (*bytes <= 0)
    return makeErrorF("invalid {0} '{1}': the budget must be positive", flag,
                      text);
  r.budget = *bytes;
  return Error::success();
}

Expected<int64_t> libraryReserve(const PlanningSession &s) {
  StringRef text = StringRef(LibraryReserve).trim();
  if (text.empty()) {
    // A kernel that needs more local memory a thread than the context's
    // makes the driver reserve it for every thread the GPU holds, for the
    // rest of the process: fused attention with heads wider than 128.
    int64_t local = 0;
    for (const Op &op : s.graph.ops)
      local = std::max(local, attentionLocalBytes(s.graph, op));
    const DeviceSpec &dev = s.costs->device();
    return dev.libraryReserveBytes + dev.localMemoryReserveBytes(local);
  }
  auto bytes = parseSize(text.str());
  if (!bytes)
    return makeErrorF("invalid --library-reserve '{0}': {1}", text,
                      toString(bytes.takeError()));
  if (*bytes < 0)
    return makeErrorF("invalid --library-reserve '{0}': must not be "
                      "negative",
                      text);
  return *bytes;
}

Expected<int64_t> hostBudget(const PlanningSession &s) {
  StringRef text = StringRef(HostBudget).trim();
  if (text.empty())
    return 0;
  const DeviceSpec &dev = s.costs->device();
  if (text == "host") {
    if (dev.hostMemoryBytes <= 0)
      return makeErrorF("--host-budget host: device {0} states no host "
                        "memory (host_memory_gib in a device file); give a "
                        "size",
                        dev.name);
    return dev.hostMemoryBytes;
  }
  auto bytes = parseSize(text.str());
  if (!bytes)
    return makeErrorF("invalid --host-budget '{0}': {1}", text,
                      toString(bytes.takeError()));
  if (*bytes <= 0)
    return makeErrorF("invalid --host-budget '{0}': the budget must be "
                      "positive",
                      text);
  // Pinned memory the host does not have would fail at the trainer's
  // start, or page the machine to a halt.
  if (dev.hostMemoryBytes > 0 && *bytes > dev.hostMemoryBytes)
    return makeErrorF("--host-budget {0} is more than device {1}'s host "
                      "memory, {2} (host_memory_gib in its file; give a "
                      "device file that describes your host)",
                      formatBytes(*bytes), dev.name,
                      formatBytes(dev.hostMemoryBytes));
  return *bytes;
}

namespace {

/// Free bytes for an unprivileged writer in `dir`; -1 where unknown.
int64_t freeBytes(const std::string &dir) {
  auto info = sys::fs::disk_space(dir);
  if (!info)
    return -1;
  return static_cast<int64_t>(info->available);
}

/// --nvme and --nvme-budget into `r` (after --host-budget). With a
/// directory: checked, the budget at most its free space. --nvme-budget
/// alone plans for a drive elsewhere (the machine the trainer will run
/// on): nothing here is checked, and the trainer needs its own --nvme.
/// Neither: --host-budget alone decides.
Error nvmeRequest(const PlanningSession &s, PlanRequest &r) {
  StringRef dir = StringRef(Nvme).trim();
  StringRef text = StringRef(NvmeBudget).trim();
  if (dir.empty() && text.empty())
    return Error::success();
  const char *flag = dir.empty() ? "--nvme-budget" : "--nvme";
  const DeviceSpec &dev = s.costs->device();
  if (r.hostBudget <= 0) {
    // The NVMe tier backs the host's: without --host-budget, all of the
    // host's memory.
    if (dev.hostMemoryBytes <= 0)
      return makeErrorF("{0}: device {1} states no host memory "
                        "(host_memory_gib in a device file); give "
                        "--host-budget",
                        flag, dev.name);
    r.hostBudget = dev.hostMemoryBytes;
  }
  int64_t avail = -1;
  if (!dir.empty()) {
    if (!sys::fs::is_directory(dir))
      return makeErrorF("--nvme {0}: not a directory (create it first)", dir);
    if (sys::fs::access(dir, sys::fs::AccessMode::Write))
      return makeErrorF("--nvme {0}: the directory is not writable", dir);
    avail = freeBytes(dir.str());
  }
  if (text.empty()) {
    r.nvmeBudget = dev.nvmeBytes > 0 ? dev.nvmeBytes : avail;
    if (avail >= 0)
      r.nvmeBudget = std::min(r.nvmeBudget, avail);
  } else {
    auto bytes = parseSize(text.str());
    if (!bytes)
      return makeErrorF("invalid --nvme-budget '{0}': {1}", text,
                        toString(bytes.takeError()));
    if (*bytes <= 0)
      return makeErrorF("invalid --nvme-budget '{0}': the budget must be "
                        "positive",
                        text);
    if (avail >= 0 && *bytes > avail)
      return makeErrorF("--nvme-budget {0} is more than the {1} free in {2}",
                        formatBytes(*bytes), formatBytes(avail), dir);
    r.nvmeBudget = *bytes;
  }
  if (r.nvmeBudget <= 0)
    return makeErrorF("--nvme {0}: no space is free there", dir);
  return Error::success();
}

} // namespace

Expected<std::string> nvmeDirectory() {
  StringRef dir = StringRef(Nvme).trim();
  if (dir.empty())
    return std::string();
  SmallString<256> abs(dir);
  if (auto ec = sys::fs::make_absolute(abs))
    return makeErrorF("--nvme {0}: {1}", dir, ec.message());
  sys::path::remove_dots(abs, /*remove_dot_dot=*/true);
  return abs.str().str();
}

/// --accumulate N: the graph holds the step's N micro-batches; each round
/// is one of them, normalized by its own statistics (as PyTorch's loop).
static Error applyAccumulate(const PlanningSession &s, PlanRequest &r) {
  if (Accumulate <= 1)
    return Error::success();
  if (SubBatch || Chunks)
    return makeError("--accumulate runs each micro-batch of --batch as one "
                     "round; give --sub-batch or --chunks without it");
  r.accumulate = static_cast<int32_t>(Accumulate);
  r.forcedSubBatch = s.graph.batch / r.accumulate;
  r.subBatchStatistics = true;
  return Error::success();
}

Expected<PlanRequest> planRequest(const PlanningSession &s) {
  PlanRequest r;
  auto reserve = libraryReserve(s);
  if (!reserve)
    return reserve.takeError();
  r.libraryReserve = *reserve;
  auto host = hostBudget(s);
  if (!host)
    return host.takeError();
  r.hostBudget = *host;
  if (auto err = nvmeRequest(s, r))
    return std::move(err);
  if (!parsePolicy(std::string(PolicyName), r.policy))
    return makeErrorF("unknown --policy '{0}': expected {1}",
                      std::string(PolicyName), PolicyHelp);
  r.batch = s.graph.batch;
  r.forcedSubBatch = SubBatch;
  r.forcedChunks = static_cast<int32_t>(Chunks);
  r.subBatchStatistics = SubBatchStatistics;
  if (auto err = applyAccumulate(s, r))
    return std::move(err);
  r.bound = Bound;
  r.refine = Refine;
  r.order = Order;
  r.forcedOrder = Order.getNumOccurrences() > 0;
  r.inPlace = InPlace;
  StringRef text = StringRef(Budget).trim();
  if (text.empty()) {
    if (r.policy != Policy::Ideal)
      return makeError("--budget is required (a size such as 12GiB, or a "
                       "percentage of the ideal peak such as 50%)");
  } else if (auto err = parseBudget(text, "--budget", r)) {
    return err;
  }
  if (s.budgetBytes > 0 && r.budgetFraction > 0) {
    r.budget = s.budgetBytes;
    r.budgetFraction = 0;
  }
  if (s.homeBytesAtLeast >= 0 && r.hostBudget > 0) {
    r.homeBytesAtLeast = s.homeBytesAtLeast;
    r.homeKeepsCopies = s.homeKeepsCopies;
  }
  return r;
}

Error checkCompareFlags() {
  if (Budget.getNumOccurrences())
    return makeError("memfit compare takes a list of budgets: use --budgets "
                     "(e.g. --budgets 100%,50%,8GiB), not --budget");
  if (PolicyName.getNumOccurrences())
    return makeError("memfit compare takes a list of policies: use "
                     "--policies, not --policy");
  return Error::success();
}

Expected<PlanRequest> compareRequest(const PlanningSession &s) {
  PlanRequest r;
  auto reserve = libraryReserve(s);
  if (!reserve)
    return reserve.takeError();
  r.libraryReserve = *reserve;
  auto host = hostBudget(s);
  if (!host)
    return host.takeError();
  r.hostBudget = *host;
  if (auto err = nvmeRequest(s, r))
    return std::move(err);
  r.policy = Policy::Ideal;
  r.batch = s.graph.batch;
  r.forcedSubBatch = SubBatch;
  r.forcedChunks = static_cast<int32_t>(Chunks);
  r.subBatchStatistics = SubBatchStatistics;
  if (auto err = applyAccumulate(s, r))
    return std::move(err);
  r.order = Order;
  r.forcedOrder = Order.getNumOccurrences() > 0;
  r.inPlace = InPlace;
  r.bound = false; // one table of many plans: not worth the solver
  r.refine = Refine;
  return r;
}

} // namespace memfit::tool
