//===- BatchNorm.cpp - Batch normalization in training mode ---------------===//
//
// The forward normalizes with the statistics of the samples it sees,
// saves the mean and inverse deviation its backward needs (a Stats block)
// and updates the running statistics, operands 3 and 4, in place. A
// recomputed forward applies the saved statistics instead and leaves the
// running ones alone. In a batch split into chunks (passes/search/Chunk.h) the
// forward runs as statistics per chunk, one finalize and normalization per
// chunk, and BP-data reads the batch's sums from the weight gradients. In an
// evaluation graph the forward normalizes with the running statistics.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importBatchNorm(OnnxNode &node) {
  auto x = node.activation(0);
  auto scale = node.weight(1, WeightInit::Ones, true);
  auto bias = node.weight(2, WeightInit::Zeros, true);
  auto mean = node.weight(3, WeightInit::Zeros, false);
  auto var = node.weight(4, WeightInit::Ones, false);
  auto eps = node.attrFloat("epsilon", 1e-5f);
  auto momentum = node.attrFloat("momentum", 0.9f);
  auto spatial = node.attrInt("spatial", 1);
  if (llvm::Error e =
          firstError(x, scale, bias, mean, var, eps, momentum, spatial))
    return e;
  if (*spatial == 0)
    return node.fail("spatial=0 (per-activation statistics) is not "
                     "supported");
  for (int i = 1; i < node.numOutputs(); ++i)
    if (node.outputUsed(i))
      return node.fail(
          llvm::formatv("output {0} (running or saved statistics) is "
                        "used; memfit keeps the statistics inside the "
                        "BatchNorm op",
                        i));
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  if (xd.size() < 2)
    return node.fail("input of shape " + dimsStr(xd) + " has no channel axis");
  for (ValueId p : {*scale, *bias, *mean, *var})
    if (dimsOfValue(node, p) != std::vector<int64_t>{xd[1]})
      return node.fail("parameter " + quoteName(node.graph().values[p].name) +
                       " of shape " + dimsStr(dimsOfValue(node, p)) +
                       llvm::formatv(" must be [{0}]", xd[1]).str());
  OpAttrs a;
  a.epsilon = *eps;
  a.momentum = *momentum;
  return node
      .emit(OpKind::BatchNorm, {*x, *scale, *bias, *mean, *var},
            {{node.outputName(0), xd}}, a)
      .takeError();
}

// A fused ReLU's mask is the sign of the normalized value, recomputed from
// X with the scale and bias (runtime/kernels/Norm.h, bnMaskedDy), so its
// backward keeps no more than the plain BatchNorm's: the ReLU's output is
// not read. Those weights come after the plain operands, so the statistics
// keep their place among the reads.
void dataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
  reads.push_back(o.inputs[1]);
  reads.push_back(o.stats);
  if (o.op.attrs.fusedAct.has_value())
    reads.push_back(o.inputs[2]);
}

void weightReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
  reads.push_back(o.stats);
  if (o.op.attrs.fusedAct.has_value()) {
    reads.push_back(o.inputs[1]);
    reads.push_back(o.inputs[2]);
  }
}

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {((kind == TaskKind::Forward        ? 8
            : kind == TaskKind::BackwardData ? 10
                                             : 4) +
           (op.attrs.fusedAct.has_value() ? 1 : 0)) *
          out};
}

/// A measured profile tells the fused form from the plain one.
void signature(llvm::raw_ostream &os, const Op &op) {
  if (op.attrs.fusedAct == OpKind::Relu)
    os << " relu";
  if (op.attrs.fusedAct == OpKind::Clip) {
    printFloat(os, "clip_lo", op.attrs.minValue);
    printFloat(os, "clip_hi", op.attrs.maxValue);
  }
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  int64_t c = x.dims.size() > 1 ? x.dims[1] : 1;
  // Sample-major (the importer's batchLayout): batchOuter is 1.
  int64_t rows = x.batched ? x.batchInner : 1;
  std::string init =
      llvm::formatv("{{.c = {0}, .spatial = {1}, .epsilon = {2}, "
                    ".momentum = {3}",
                    c, x.elementsPerSample() / (c * rows),
                    f32(op.attrs.epsilon), f32(op.attrs.momentum))
          .str();
  // The default of 1 is left out, so models without merged rows generate
  // what they always have.
  if (rows != 1)
    init += llvm::formatv(", .rows = {0}", rows).str();
  if (op.attrs.fusedAct == OpKind::Relu)
    init += ", .relu = true";
  if (op.attrs.fusedAct == OpKind::Clip)
    init += llvm::formatv(", .clip = true, .lo = {0}, .hi = {1}",
                          f32(op.attrs.minValue), f32(op.attrs.maxValue))
                .str();
  return OpParamsText{"BatchNormParams", init + "}"};
}

/// The trailing operands of a fused ReLU's backward calls: the weights its
/// mask is recomputed with (the bias; the scale too for BP-weight, which
/// does not read it otherwise); nothing for the plain form, whose calls
/// stay as they were.
std::string reluMask(EmitContext &x, bool withScale) {
  if (!x.op.attrs.fusedAct)
    return "";
  return (withScale ? ", " + x.value(x.op.inputs[1]) : std::string()) + ", " +
         x.value(x.op.inputs[2]);
}

/// The tasks of a BatchNorm split over chunks of the batch.
llvm::Expected<EmittedCall> emitPart(EmitContext &x) {
  const Op &op = x.op;
  const Task &t = x.task;
  ValueId in = op.inputs[0], y = op.outputs[0];
  using llvm::formatv;
  BlockId stats = t.kind == TaskKind::Forward ? t.reads.back() : t.reads[2];
  switch (t.part) {
  case TaskPart::Statistics:
    stats = t.writes[0];
    return EmittedCall{formatv("x.bnStatistics({0}, {1}, {2}, {3})", x.params,
                               x.value(in), x.block(stats),
                               x.accumulatesBlock(stats))
                           .str()};
  case TaskPart::Finalize:
    return EmittedCall{formatv("x.bnFinalize({0}, {1}, {2}, {3})", x.params,
                               x.block(t.writes[0]), x.value(op.inputs[3]),
                               x.value(op.inputs[4]))
                           .str()};
  default:
    break;
  }
  if (t.kind == TaskKind::Forward)
    return EmittedCall{formatv("x.bnApply({0}, {1}, {2}, {3}, {4}, {5})",
                               x.params, x.value(in), x.value(op.inputs[1]),
                               x.value(op.inputs[2]), x.block(stats),
                               x.value(y))
                           .str()};
  return EmittedCall{
      formatv("x.bnBackwardDataBatch({0}, {1}, {2}, {3}, {4}, "
              "{5}, {6}, {7}, {8}{9})",
              x.params, x.value(in), x.value(op.inputs[1]), x.block(stats),
              x.grad(op.inputs[1]), x.grad(op.inputs[2]), x.grad(y),
              x.gradIfWritten(in), x.accumulates(in), reluMask(x, false))
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  const Task &t = x.task;
  ValueId in = op.inputs[0], y = op.outputs[0];
  using llvm::formatv;
  if (t.part != TaskPart::Whole)
    return emitPart(x);
  switch (t.kind) {
  case TaskKind::Forward:
    if (x.tg.evaluation)
      return EmittedCall{formatv("x.bnInference({0}, {1}, {2}, {3}, {4}, {5}, "
                                 "{6})",
                                 x.params, x.value(in), x.value(op.inputs[1]),
                                 x.value(op.inputs[2]), x.value(op.inputs[3]),
                                 x.value(op.inputs[4]), x.value(y))
                             .str()};
    if (x.recompute) // the saved statistics, running ones untouched
      return EmittedCall{formatv("x.bnApply({0}, {1}, {2}, {3}, {4}, {5})",
                                 x.params, x.value(in), x.value(op.inputs[1]),
                                 x.value(op.inputs[2]), x.block(t.writes[1]),
                                 x.value(y))
                             .str()};
    return EmittedCall{formatv("x.bnForward({0}, {1}, {2}, {3}, {4}, {5}, "
                               "{6}, {7}, true)",
                               x.params, x.value(in), x.value(op.inputs[1]),
                               x.value(op.inputs[2]), x.value(op.inputs[3]),
                               x.value(op.inputs[4]), x.value(y),
                               x.block(t.writes[1]))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.bnBackwardData({0}, {1}, {2}, {3}, {4}, "
                               "{5}, {6}{7})",
                               x.params, x.value(in), x.value(op.inputs[1]),
                               x.block(t.reads[2]), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in),
                               reluMask(x, false))
                           .str()};
  default:
    return EmittedCall{formatv("x.bnBackwardWeight({0}, {1}, {2}, {3}, {4}, "
                               "{5}, {6}{7})",
                               x.params, x.value(in), x.block(t.reads[1]),
                               x.grad(y), x.gradIfWritten(op.inputs[1]),
                               x.gradIfWritten(op.inputs[2]),
                               x.accumulates(op.inputs[1]), reluMask(x, true))
                           .str()};
  }
}

/// What importBatchNorm accepts and refuses (OpDef::forms).
constexpr std::string_view kForms =
    "X [N, C, ...] of rank 2 or more, channels on axis 1, the batch alone on "
    "axis 0 or merged into it with each sample's rows together ([N * T, C], "
    "BatchNorm1d over tokens: statistics over all N * T rows, in chunks "
    "too); scale, B, input_mean and input_var float32 weights of shape [C], "
    "the mean and var running statistics its forward updates. `epsilon`, "
    "`momentum`; `spatial=0` is refused. `training_mode` is not read: the "
    "inference form imports as training BatchNorm too. Outputs after Y must "
    "be unused. A Relu or Clip that alone reads Y may be fused into it "
    "(`--fuse`).";
/// What its backward differentiates (OpDef::gradient).
constexpr std::string_view kGradient =
    "X, scale and B (not the running statistics)";

} // namespace

void registerBatchNorm(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::BatchNorm,
                  .name = "BatchNormalization",
                  .onnxTypes = {"BatchNormalization"},
                  .importOnnx = importBatchNorm,
                  // [N * T, C] (BatchNorm1d over tokens): each sample's T
                  // rows are normalized with every other row.
                  .batchLayout = OpDef::BatchLayout::SampleMajor,
                  .savesStatistics = true,
                  .dataGradReads = dataReads,
                  .weightGradReads = weightReads,
                  .costClass = CostClass::Normalization,
                  .work = work,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit,
                  .forms = kForms,
                  .gradient = kGradient});
}

} // namespace memfit::ops
