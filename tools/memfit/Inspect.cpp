//===- Inspect.cpp - memfit inspect ---------------------------------------===//
//
// Prints what memfit sees in a model before any planning: the op table with
// output shapes, the training task graph's size, and the memory figures
// every plan is measured against (keep-all bytes, the liveness peak without
// offload, the lower bound Mmin).
//
//===----------------------------------------------------------------------===//
#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/FusedHead.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OpDef.h"
#include "compiler/support/Units.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/MemoryLowerBound.h"
#include "passes/schedule/GradPool.h"
#include "passes/search/Chunk.h"
#include "passes/search/SubBatch.h"
#include "passes/search/Tiers.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/FreezeOption.h"
#include "tools/memfit/NumericOptions.h"
#include "tools/memfit/Planning.h"
#include "tools/memfit/PrecisionOption.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <array>
#include <optional>

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("inspect", "Print the op table, task graph size and "
                              "memory figures of a model");
cl::opt<std::string> ModelPath(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required, cl::sub(Cmd));
cl::opt<PositiveCount> Batch("batch",
                             cl::desc("Batch size (default: the model's "
                                      "fixed batch dimension)"),
                             cl::init(0), cl::sub(Cmd));
cl::opt<bool> Json("json", cl::desc("Print one JSON object"), cl::sub(Cmd));
cl::opt<bool> Summary("summary", cl::desc("Leave out the op table"),
                      cl::sub(Cmd));
cl::opt<LossKind> Loss(
    "loss", cl::desc("Training loss"), cl::init(LossKind::SoftmaxCrossEntropy),
    cl::values(clEnumValN(LossKind::SoftmaxCrossEntropy, "cross-entropy",
                          "mean softmax cross-entropy with integer labels"),
               clEnumValN(LossKind::MSE, "mse", "mean squared error")),
    cl::sub(Cmd));
cl::opt<ClassAxis> ClassAxisOpt(
    "class-axis",
    cl::desc("Axis of the output that cross-entropy reads classes from"),
    cl::init(ClassAxis::Auto),
    cl::values(clEnumValN(ClassAxis::Auto, "auto",
                          "the last axis when the model reads token ids, "
                          "else axis 1 (default)"),
               clEnumValN(ClassAxis::Channel, "1", "axis 1"),
               clEnumValN(ClassAxis::Last, "last", "the last axis")),
    cl::sub(Cmd));

cl::opt<bool> FuseAttention(
    "fuse-attention",
    cl::desc("Show the graph with scaled dot-product attention as one "
             "memory-efficient operator (default true; false: as the "
             "model writes it)"),
    cl::init(true), cl::sub(Cmd));

cl::opt<FuseMode> Fuse(
    "fuse",
    cl::desc("Show the graph with its fused forms (a ReLU run inside the "
             "BatchNorm before it), as plan and compile start from"),
    cl::init(FuseMode::Auto),
    cl::values(clEnumValN(FuseMode::Auto, "auto", "fused (default)"),
               clEnumValN(FuseMode::None, "none", "as the model writes it")),
    cl::sub(Cmd));

cl::opt<bool> FuseHead(
    "fuse-head",
    cl::desc("Show the figures with the head's product computed by the "
             "loss in chunks, the logits never stored whole, where the "
             "model allows it (default true; false: as the model writes "
             "it). Either way the other form's peak and bound are shown "
             "beside"),
    cl::init(true), cl::sub(Cmd));

cl::opt<OptimizerKind> Optimizer(
    "optimizer", cl::desc("The optimizer whose state is planned"),
    cl::init(OptimizerKind::SGD),
    cl::values(clEnumValN(OptimizerKind::SGD, "sgd", "torch.optim.SGD"),
               clEnumValN(OptimizerKind::Adam, "adam", "torch.optim.Adam"),
               clEnumValN(OptimizerKind::AdamW, "adamw", "torch.optim.AdamW")),
    cl::sub(Cmd));

cl::opt<Precision> PrecisionOpt("precision", cl::desc(kPrecisionHelp),
                                cl::init(Precision::FP32), precisionValues(),
                                cl::sub(Cmd));

cl::opt<std::string> Freeze("freeze", cl::desc(kFreezeHelp),
                            cl::value_desc("regex"), cl::init(""),
                            cl::sub(Cmd));
cl::opt<std::string> Constants("constants", cl::desc(kConstantsHelp),
                               cl::value_desc("regex"), cl::init(""),
                               cl::sub(Cmd));
cl::list<std::string> FreezeRows("freeze-rows", cl::desc(kFreezeRowsHelp),
                                 cl::value_desc("NAME:ROW"), cl::sub(Cmd));
cl::opt<std::string> TrainOnly("train-only", cl::desc(kTrainOnlyHelp),
                               cl::value_desc("regex"), cl::init(""),
                               cl::sub(Cmd));

std::string shapeString(const Value &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i)
      s += ",";
    if (v.batched && (int32_t)i == v.batchAxis)
      // The batch with the factors sharing its axis ([T*N, E], [N*2, T, d]).
      s += (v.batchOuter > 1 ? std::to_string(v.batchOuter) + "*" : "") + "N" +
           (v.batchInner > 1 ? "*" + std::to_string(v.batchInner) : "");
    else
      s += std::to_string(v.dims[i]);
  }
  return s + "]";
}

cl::opt<PositiveCount> Ranks("ranks",
                             cl::desc("Data-parallel ranks: --batch is the "
                                      "global batch; figures are per rank "
                                      "(default 1)"),
                             cl::init(0), cl::sub(Cmd));
cl::opt<int> Shard("shard",
                   cl::desc("With --ranks: 1 shards the optimizer state, 2 "
                            "the gradients too (default 0)"),
                   cl::init(0), cl::sub(Cmd));

cl::opt<std::string> HostBudget(
    "host-budget",
    cl::desc("Also show the lower bound with the largest weights, their "
             "gradients and optimizer state homed in this much pinned host "
             "memory (a size: 64GiB), as plan --host-budget may home them"),
    cl::init(""), cl::sub(Cmd));

cl::opt<std::string> NvmeBudget(
    "nvme-budget",
    cl::desc("With --host-budget: the optimizer state of weights homed on "
             "the host may also take this much NVMe (a size: 500GiB), as "
             "plan --nvme may put it there"),
    cl::init(""), cl::sub(Cmd));

cl::opt<std::string> NvmeDir(
    "nvme",
    cl::desc("With --host-budget: a directory on NVMe whose free space "
             "(or --nvme-budget) the optimizer state of homed weights may "
             "take, as plan --nvme may put it there"),
    cl::init(""), cl::sub(Cmd));

/// What homing the largest weights that fit `budget` in host memory (their
/// optimizer state in `nvme` bytes of NVMe while it has room, and their
/// gradients through a pool of the largest one where the host would not
/// hold them all, as plan does where every host update may start inside
/// the round) leaves on the device: the weights homed, their bytes in each
/// tier, and Mmin then.
struct HostedBound {
  int64_t weights = 0, bytes = 0, nvmeBytes = 0;
  /// The gradients of the weights homed and the pool they then need (0:
  /// each its own buffer, within `bytes`).
  int64_t gradBytes = 0, poolBytes = 0;
  LowerBound lb;
  std::string task;
};

HostedBound boundWithHomes(const TaskGraph &tg, int64_t budget, int64_t nvme) {
  HostedBound h;
  TaskGraph homed = tg;
  homed.homes.assign(tg.blocks.size(), Tier::Gpu);
  const bool poolable =
      tg.precision != Precision::FP16 && !(tg.clipGradNorm > 0);
  int64_t others = 0, largest = 0; // host bytes beside the gradients
  for (const WeightBlocks &w : homeableWeights(tg)) {
    int64_t state = 0, grad = 0; // what may go to NVMe; the gradient
    for (BlockId b : w.blocks) {
      if (tg.nvmeHomeable(b))
        state += tg.blocks[b].bytesAt(1);
      if (tg.blocks[b].kind == BlockKind::WeightGrad)
        grad += tg.blocks[b].bytesAt(1);
    }
    const int64_t range =
        (grad + kGradPoolAlign - 1) / kGradPoolAlign * kGradPoolAlign;
    // The host's bytes with `rest` beside the gradients: each its own
    // buffer, or (smaller) a pool of the largest.
    auto hostWith = [&](int64_t rest) {
      int64_t whole = rest + h.gradBytes + grad;
      return poolable ? std::min(whole, rest + std::max(largest, range))
                      : whole;
    };
    // The state on NVMe while it has room: the host then holds more
    // weights, which is what lowers Mmin.
    const int64_t rest = others + w.bytes - grad;
    bool stateOnNvme = state > 0 && h.nvmeBytes + state <= nvme &&
                       hostWith(rest - state) <= budget;
    if (!stateOnNvme && hostWith(rest) > budget)
      continue;
    for (BlockId b : w.blocks)
      homed.homes[b] =
          stateOnNvme && tg.nvmeHomeable(b) ? Tier::Nvme : Tier::Host;
    others = stateOnNvme ? rest - state : rest;
    h.nvmeBytes += stateOnNvme ? state : 0;
    h.gradBytes += grad;
    largest = std::max(largest, range);
    h.bytes = others + h.gradBytes;
    ++h.weights;
  }
  if (poolable && h.bytes > budget)
    h.poolBytes = largest;
  if (h.poolBytes > 0)
    h.bytes = others + h.poolBytes;
  h.lb = computeLowerBound(homed, 1);
  h.task = h.lb.task >= 0 ? homed.tasks[h.lb.task].name : "";
  return h;
}

/// What the importer noticed, as sentences that say what to do.
std::vector<std::string> importWarnings(const ImportNotes &notes) {
  std::vector<std::string> out;
  for (const std::vector<std::string> &group : notes.identicalWeights) {
    std::string names;
    for (size_t i = 0; i < group.size(); ++i)
      names += (i ? i + 1 == group.size() ? " and " : ", " : "") +
               quoteName(group[i]);
    out.push_back(
        "weights " + names +
        " hold the same values (in some order): most likely one tied or "
        "shared weight "
        "that the exporter's constant folding copied, which memfit would "
        "train as separate parameters (PyTorch trains one). Export with "
        "torch.onnx.export(..., do_constant_folding=False); if they are "
        "meant to be apart, ignore this");
  }
  if (size_t n = notes.scalarInitializers.size(); n > 0) {
    std::string names;
    for (size_t i = 0; i < n; ++i)
      names += (i ? i + 1 == n ? " and " : ", " : "") +
               quoteName(notes.scalarInitializers[i]);
    out.push_back(formatv("initializer{0} {1} {2} read as a fixed value (a "
                          "Clip bound, an exponent, a fill value): memfit "
                          "does not train {3}. If PyTorch does (an "
                          "nn.Parameter), the model differs; if {4} a "
                          "buffer, say so with --constants",
                          n > 1 ? "s" : "", names, n > 1 ? "are" : "is",
                          n > 1 ? "them" : "it", n > 1 ? "they are" : "it is")
                      .str());
  }
  if (notes.tracedBatch > 0)
    out.push_back(formatv("the graph computes with its symbolic batch as "
                          "a number (an arange over it, as transformers' "
                          "per-sample masks, or a constant laid out per "
                          "sample, as BLOOM's ALiBi), so memfit read it at "
                          "batch {0}, as its "
                          "fixed-batch export would be written; the plan "
                          "computes the same model",
                          notes.tracedBatch)
                      .str());
  if (size_t n = notes.inferenceBatchNorms.size(); n > 0)
    out.push_back(formatv("{0} BatchNormalization node{1} ({2}{3}) {4} in "
                          "inference form (exported in eval mode): memfit "
                          "trains {5} with batch statistics and updates the "
                          "running statistics, as model.train() does. To "
                          "say so in the file, export with "
                          "training=torch.onnx.TrainingMode.TRAINING; a "
                          "training run that keeps BatchNorm in eval mode "
                          "is not one memfit reproduces",
                          n, n > 1 ? "s" : "",
                          quoteName(notes.inferenceBatchNorms[0]),
                          n > 1 ? ", ..." : "", n > 1 ? "are" : "is",
                          n > 1 ? "them" : "it")
                      .str());
  return out;
}

int run() {
  int64_t hostBudget = 0;
  if (!StringRef(HostBudget).trim().empty()) {
    auto bytes = parseSize(StringRef(HostBudget).trim().str());
    if (!bytes)
      return reportError(makeErrorF("invalid --host-budget '{0}': {1}",
                                    std::string(HostBudget),
                                    toString(bytes.takeError())));
    if (*bytes <= 0)
      return reportError(makeErrorF("invalid --host-budget '{0}': the "
                                    "budget must be positive",
                                    std::string(HostBudget)));
    hostBudget = *bytes;
  }
  int64_t nvmeBudget = 0;
  if (!StringRef(NvmeBudget).trim().empty()) {
    auto bytes = parseSize(StringRef(NvmeBudget).trim().str());
    if (!bytes)
      return reportError(makeErrorF("invalid --nvme-budget '{0}': {1}",
                                    std::string(NvmeBudget),
                                    toString(bytes.takeError())));
    if (*bytes <= 0 || hostBudget <= 0)
      return reportError(makeErrorF(
          "invalid --nvme-budget '{0}': {1}", std::string(NvmeBudget),
          *bytes <= 0 ? "the budget must be positive"
                      : "it holds state of weights homed on the host: give "
                        "--host-budget too"));
    nvmeBudget = *bytes;
  }
  if (StringRef dir = StringRef(NvmeDir).trim(); !dir.empty()) {
    auto space = sys::fs::disk_space(dir);
    if (!sys::fs::is_directory(dir) || !space)
      return reportError(makeErrorF("--nvme {0}: not a directory", dir));
    if (hostBudget <= 0)
      return reportError(makeErrorF("--nvme {0}: it holds state of weights "
                                    "homed on the host: give --host-budget "
                                    "too",
                                    dir));
    const int64_t avail = static_cast<int64_t>(space->available);
    if (nvmeBudget > avail)
      return reportError(makeErrorF("--nvme-budget {0} is more than the {1} "
                                    "free in {2}",
                                    formatBytes(nvmeBudget), formatBytes(avail),
                                    dir));
    if (nvmeBudget == 0)
      nvmeBudget = avail;
  }
  auto dp = checkDataParallel(Ranks, Shard, DataParallel::Link::Auto, Batch);
  if (!dp)
    return reportError(dp.takeError());
  ImportOptions io;
  io.batch = Batch / dp->ranks;
  io.keepWeightData = false;
  io.fuseAttention = FuseAttention;
  io.constants = Constants;
  auto frozenRows = parseFrozenRows(FreezeRows);
  if (!frozenRows)
    return reportError(frozenRows.takeError());
  io.frozenRows = std::move(*frozenRows);
  ImportNotes notes;
  io.notes = &notes;
  auto graph = importOnnxFile(ModelPath, io);
  if (!graph)
    return reportError(graph.takeError());
  // The fused forms plan and compile start from (FormChoice.cpp).
  Graph fusedGraph = fuseEpilogues(*graph);
  const FusedActCounts counted = countFusedActs(fusedGraph);
  const int64_t fusedRelu = counted.relu, fusedClip = counted.clip;
  const int64_t epilogues = fusedRelu + fusedClip;
  if (Fuse == FuseMode::Auto)
    *graph = std::move(fusedGraph);
  const std::vector<std::string> warnings = importWarnings(notes);
  for (const std::string &w : warnings)
    errs() << "memfit: warning: " << w << "\n";
  TrainingConfig tc;
  tc.loss = Loss;
  tc.classAxis = ClassAxisOpt;
  tc.optimizer = Optimizer;
  tc.precision = PrecisionOpt;
  tc.dp = *dp;
  tc.freeze = {Freeze, TrainOnly};
  tc.fuseHead = FuseHead;
  auto tg = buildTaskGraph(*graph, tc);
  if (!tg)
    return reportError(withContext(
        tg.takeError(), ModelPath + ": cannot build the training graph: "));

  // A fused head's lower bound is at one row a chunk: the planner shrinks
  // the chunk where a budget needs it (FormChoice.cpp), so that is the
  // least memory it can train in. The task graph is the same but for the
  // scratch block's size.
  auto lowerBound = [&](const TaskGraph &t,
                        const TrainingConfig &c) -> Expected<LowerBound> {
    if (t.fusedHead == kNoId || t.headChunkRows <= 1)
      return computeLowerBound(t, 1);
    return lowerBoundAtChunk(*graph, c, 1);
  };
  int64_t b = graph->batch;
  Liveness lv = computeLiveness(*tg, builtOrder(*tg), b);
  auto lbOr = lowerBound(*tg, tc);
  if (!lbOr)
    return reportError(withContext(
        lbOr.takeError(), ModelPath + ": cannot build the training graph: "));
  LowerBound lb = *lbOr;
  // The head's other form, for what fusing it saves.
  HeadFusion head =
      fusableHead(*graph, tc.loss, lossClassAxis(*graph, tc.classAxis));
  std::optional<Liveness> otherLv;
  std::optional<LowerBound> otherLb;
  int64_t chunkRows = 0;
  if (head.op != kNoId) {
    TrainingConfig other = tc;
    other.fuseHead = !FuseHead;
    auto otg = buildTaskGraph(*graph, other);
    if (!otg)
      return reportError(withContext(
          otg.takeError(), ModelPath + ": cannot build the training graph: "));
    otherLv = computeLiveness(*otg, builtOrder(*otg), b);
    auto olb = lowerBound(*otg, other);
    if (!olb)
      return reportError(withContext(
          olb.takeError(), ModelPath + ": cannot build the training graph: "));
    otherLb = *olb;
    chunkRows = FuseHead ? tg->headChunkRows : otg->headChunkRows;
  }
  // (fused, as written) liveness peaks and lower bounds.
  auto fusedFirst = [&](int64_t mine, int64_t other) {
    return FuseHead ? std::pair{mine, other} : std::pair{other, mine};
  };
  int64_t params = 0;
  for (ValueId w : graph->weights())
    if (graph->values[w].trainable)
      params += graph->values[w].elementsPerSample();
  FrozenCount frozen = countFrozen(*tg);
  std::array<int, 5> byKind{};
  for (const Task &t : tg->tasks)
    ++byKind[static_cast<int>(t.kind)];
  std::string lbTask = lb.task >= 0 ? tg->tasks[lb.task].name : "";
  // An exact plan of a model with BatchNorm runs whole batches.
  bool coupled = statisticsOverBatch(*tg);
  LowerBound exactLb = coupled ? exactLowerBound(*tg, b) : lb;
  std::optional<HostedBound> hosted;
  if (hostBudget > 0)
    hosted = boundWithHomes(*tg, hostBudget, nvmeBudget);

  if (Json) {
    nlohmann::ordered_json j;
    j["model"] = graph->name;
    j["file"] = std::string(ModelPath);
    j["batch"] = b;
    j["precision"] = std::string(precisionName(tg->precision));
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const Op &op : graph->ops) {
      const Value &out = graph->values[op.outputs[0]];
      ops.push_back({{"name", op.name},
                     {"type", std::string(opKindName(op.kind))},
                     {"onnx_op", op.onnxOp},
                     {"output", out.name},
                     {"shape", out.dims}});
    }
    j["ops"] = ops;
    j["tasks"] = tg->tasks.size();
    j["task_counts"] = {{"forward", byKind[0]},
                        {"backward_data", byKind[1]},
                        {"backward_weight", byKind[2]},
                        {"loss", byKind[3]},
                        {"update", byKind[4]}};
    j["blocks"] = tg->blocks.size();
    j["parameters"] = params;
    j["warnings"] = warnings;
    if (frozen.frozen > 0)
      j["frozen"] = {{"weights", frozen.frozen},
                     {"bytes", frozen.frozenBytes},
                     {"trained_weights", frozen.trained},
                     {"trained_bytes", frozen.trainedBytes}};
    j["weight_bytes"] = graph->weightBytes();
    j["weight_side_bytes"] = tg->weightSideBytes();
    if (tg->dp.active()) {
      j["ranks"] = tg->dp.ranks;
      j["shard"] = tg->dp.shard;
      j["global_batch"] = b * tg->dp.ranks;
      j["replicated_weight_side_bytes"] = tg->replicatedWeightSideBytes;
    }
    j["keep_all_bytes"] = tg->keepAllBytes(b);
    j["liveness_peak_bytes"] = lv.peakBytes;
    j["liveness_peak_task"] = tg->tasks[lv.order[lv.peakStep]].name;
    j["lower_bound_bytes"] = lb.bytes;
    j["lower_bound_task"] = lbTask;
    if (coupled) {
      j["exact_lower_bound_bytes"] = exactLb.bytes;
      j["exact_lower_bound_task"] = tg->tasks[exactLb.task].name;
    }
    if (epilogues > 0)
      j["fused_forms"] = {{"batchnorm_relu", fusedRelu},
                          {"batchnorm_clip", fusedClip},
                          {"fused", Fuse == FuseMode::Auto}};
    if (head.op == kNoId) {
      j["head"] = {{"fusable", false}, {"why", head.why}};
    } else {
      auto [peakF, peakW] = fusedFirst(lv.peakBytes, otherLv->peakBytes);
      auto [lbF, lbW] = fusedFirst(lb.bytes, otherLb->bytes);
      j["head"] = {{"fusable", true},
                   {"fused", bool(FuseHead)},
                   {"node", graph->ops[head.op].name},
                   {"chunk_rows", chunkRows},
                   {"fused_liveness_peak_bytes", peakF},
                   {"written_liveness_peak_bytes", peakW},
                   {"fused_lower_bound_bytes", lbF},
                   {"written_lower_bound_bytes", lbW}};
    }
    if (hosted)
      j["host_budget"] = {{"bytes", hostBudget},
                          {"homed_weights", hosted->weights},
                          {"homed_bytes", hosted->bytes},
                          {"nvme_budget_bytes", nvmeBudget},
                          {"nvme_bytes", hosted->nvmeBytes},
                          {"grad_pool_bytes", hosted->poolBytes},
                          {"lower_bound_bytes", hosted->lb.bytes},
                          {"lower_bound_task", hosted->task}};
    // Names come from the model: invalid UTF-8 is replaced, never thrown on.
    outs() << j.dump(2, ' ', false,
                     nlohmann::ordered_json::error_handler_t::replace)
           << "\n";
    return ExitOk;
  }

  raw_ostream &os = outs();
  os << formatv("model {0} ({1}), batch {2}", quoteName(graph->name),
                std::string(ModelPath), b);
  if (tg->precision != Precision::FP32)
    os << ", precision " << precisionName(tg->precision);
  os << "\n";
  if (!Summary) {
    os << formatv("\n{0,5}  {1,-20} {2,-32} {3}\n", "#", "op", "node",
                  "output shape");
    for (OpId i = 0; i < (OpId)graph->ops.size(); ++i) {
      const Op &op = graph->ops[i];
      std::string node = quoteName(op.name);
      if (node.size() > 32)
        node = node.substr(0, 29) + "...";
      std::string kind(opKindName(op.kind));
      if (op.attrs.fusedAct.has_value())
        kind += "+" + std::string(opKindName(*op.attrs.fusedAct));
      os << formatv("{0,5}  {1,-20} {2,-32} {3}\n", i, kind, node,
                    shapeString(graph->values[op.outputs[0]]));
    }
    os << "\n";
  }
  os << formatv("ops                  {0}\n", graph->ops.size());
  os << formatv("tasks                {0} (FP {1}, BP-data {2}, BP-weight {3}, "
                "loss {4}, update {5})\n",
                tg->tasks.size(), byKind[0], byKind[1], byKind[2], byKind[3],
                byKind[4]);
  os << formatv("parameters           {0} (as sum(p.numel() for p in "
                "model.parameters()) counts them)\n",
                params);
  os << formatv("weight bytes         {0}\n",
                formatBytes(graph->weightBytes()));
  if (frozen.frozen > 0)
    os << formatv("frozen weights       {0} of {1} ({2}): no gradient, "
                  "optimizer state or update; {3} train ({4})\n",
                  frozen.frozen, frozen.frozen + frozen.trained,
                  formatBytes(frozen.frozenBytes), frozen.trained,
                  formatBytes(frozen.trainedBytes));
  if (tg->dp.active())
    os << formatv("data parallel        {0} ranks, global batch {1}, {2} per "
                  "rank; the figures below are one rank's\n",
                  tg->dp.ranks, b * tg->dp.ranks, b);
  os << formatv("weight-side bytes    {0}  (weights, gradients, optimizer "
                "state{1})\n",
                formatBytes(tg->weightSideBytes()),
                tg->dp.shard == 0
                    ? std::string()
                    : formatv("; {0} sharded over the ranks, "
                              "{1} replicated",
                              tg->dp.shard == 1 ? "optimizer state"
                                                : "optimizer state and "
                                                  "gradients",
                              formatBytes(tg->replicatedWeightSideBytes))
                          .str());
  os << formatv("keep-all bytes       {0}  (every forward intermediate at "
                "batch {1})\n",
                formatBytes(tg->keepAllBytes(b)), b);
  os << formatv("liveness peak        {0}  (no offload, at {1})\n",
                formatBytes(lv.peakBytes),
                quoteName(tg->tasks[lv.order[lv.peakStep]].name));
  os << formatv("lower bound Mmin     {0}  (set by {1}: {2} at sub-batch 1)\n",
                formatBytes(lb.bytes), quoteName(lbTask),
                formatBytes(lb.taskBytes));
  if (coupled)
    if (exactLb.subBatch < b)
      os << formatv("exact lower bound    {0}  (set by {1}: {2} with the "
                    "batch of {3} in chunks of {4}, BatchNorm's statistics "
                    "gathered over all of them; other policies than memfit "
                    "keep whole batches)\n",
                    formatBytes(exactLb.bytes),
                    quoteName(tg->tasks[exactLb.task].name),
                    formatBytes(exactLb.taskBytes), b, exactLb.subBatch);
    else
      os << formatv("exact lower bound    {0}  (set by {1}: {2} at the batch "
                    "of {3}; BatchNorm's statistics keep exact plans from "
                    "splitting it, Mmin needs --sub-batch-statistics)\n",
                    formatBytes(exactLb.bytes),
                    quoteName(tg->tasks[exactLb.task].name),
                    formatBytes(exactLb.taskBytes), b);
  if (epilogues > 0)
    os << formatv("fused forms          {0} {1}\n",
                  fusedFormsText(fusedRelu, fusedClip),
                  Fuse == FuseMode::Auto
                      ? "(each activation runs inside its BatchNorm, its mask "
                        "recomputed in the backward; --fuse none: as written)"
                      : "could run fused (--fuse none: shown as written)");
  if (head.op != kNoId) {
    auto [peakF, peakW] = fusedFirst(lv.peakBytes, otherLv->peakBytes);
    auto [lbF, lbW] = fusedFirst(lb.bytes, otherLb->bytes);
    os << formatv("fused head           {1} {0}: liveness peak {2} fused, "
                  "{3} as written (saves {4}); lower bound {5} fused, {6} as "
                  "written; chunks of {7} rows of logits\n",
                  FuseHead ? "fused with the loss above" : "as written above",
                  quoteName(graph->ops[head.op].name), formatBytes(peakF),
                  formatBytes(peakW), formatBytes(peakW - peakF),
                  formatBytes(lbF), formatBytes(lbW), chunkRows);
  }
  if (hosted)
    os << formatv(
        "with --host-budget {0}: {1} weights homed in host memory "
        "({2} with their gradients and optimizer state{5}), "
        "lower bound Mmin {3} (set by {4})\n",
        formatBytes(hostBudget), hosted->weights, formatBytes(hosted->bytes),
        formatBytes(hosted->lb.bytes), quoteName(hosted->task),
        (hosted->nvmeBytes > 0 ? ", and " + formatBytes(hosted->nvmeBytes) +
                                     " of optimizer state on NVMe"
                               : std::string()) +
            (hosted->poolBytes > 0
                 ? "; the " + formatBytes(hosted->gradBytes) +
                       " of gradients through a pool of the largest, " +
                       formatBytes(hosted->poolBytes)
                 : std::string()));
  return ExitOk;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
