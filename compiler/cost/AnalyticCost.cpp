//===- AnalyticCost.cpp - Roofline cost of tasks from a device spec -------===//
#include "compiler/cost/AnalyticCost.h"

#include "compiler/ops/OpDef.h"
#include "compiler/ops/OpSignature.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace memfit {

//===----------------------------------------------------------------------===//
// Convolution formulas
//===----------------------------------------------------------------------===//

namespace {

constexpr double kF32 = 4;     // bytes per float
constexpr double kComplex = 8; // bytes per complex float
constexpr int64_t kFftTile = 32;
constexpr double kWinogradNonfusedSlack = 1.5;
/// The fraction of the FP32 rate memfit's fused attention kernels reach
/// (runtime/cuda/Attention.cu: one query row a thread, scalar FP32, K and V
/// read from memory for every row). Measured on an H100 SXM, GPT (12 heads
/// of 64, 256 positions, batch 16), fp32 and bf16 alike: 1.0-1.1 TFLOP/s
/// forward and backward against 67 FP32, where the Gemm class's pricing
/// had it 61-66 times faster and `--fuse-attention auto` chose it over
/// cuBLAS's products. Not scaled by occupancy: the figure is the whole
/// kernel's.
constexpr double kOwnAttentionFp32Fraction = 0.0157;

double d(int64_t x) { return static_cast<double>(x); }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

ConvMethod methodOf(ConvDirection dir, int algo) {
  const ConvAlgoInfo *info = findConvAlgo(dir, algo);
  assert(info && "unknown conv algorithm for this direction");
  return info ? info->method : ConvMethod::ImplicitGemm;
}

int64_t channelsPerGroup(const ConvShape &s) {
  return s.c / std::max<int64_t>(s.group, 1);
}

// Per spatial axis, the larger of input and output extent: the image a
// transform method tiles (input for FP, gradient of the input for BP-data;
// equal sizes at unit stride and "same" padding).
int64_t tileExtent(const ConvShape &s, int i) {
  return std::max(s.in[i], s.out[i]);
}

// Winograd F(m x m, r x r): fused cuDNN kernels use F(2x2,3x3); the
// non-fused ones F(4x4,3x3) for 3x3 and F(2x2,5x5) for 5x5 filters.
struct WinogradTile {
  int64_t m, alpha; // output tile side, transformed tile side m + r - 1
};
WinogradTile winogradTile(const ConvShape &s, ConvMethod m) {
  int64_t r = s.kernel.empty() ? 3 : s.kernel[0];
  int64_t out = m == ConvMethod::Winograd ? 2 : (r <= 3 ? 4 : 2);
  return {out, out + r - 1};
}
int64_t winogradTiles(const ConvShape &s, const WinogradTile &t) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i)
    n *= ceilDiv(tileExtent(s, i), t.m);
  return n;
}

// Whole-image FFT over the padded image; the last axis keeps n/2 + 1
// complex bins (real-to-complex transform).
int64_t fftPoints(const ConvShape &s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i)
    n *= s.in[i] + s.pads[i] + s.pads[i + s.rank()];
  return n;
}
int64_t fftBins(const ConvShape &s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i) {
    int64_t len = s.in[i] + s.pads[i] + s.pads[i + s.rank()];
    n *= i + 1 == s.rank() ? len / 2 + 1 : len;
  }
  return n;
}
// FFT tiling: 32-point tiles, each yielding 32 - r + 1 outputs per axis.
int64_t fftTileCount(const ConvShape &s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i)
    n *= ceilDiv(tileExtent(s, i),
                 std::max<int64_t>(kFftTile - s.kernel[i] + 1, 1));
  return n;
}
int64_t fftTilePoints(const ConvShape &s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i)
    n *= kFftTile;
  return n;
}
int64_t fftTileBins(const ConvShape &s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i)
    n *= i + 1 == s.rank() ? kFftTile / 2 + 1 : kFftTile;
  return n;
}

// 2.5 n log2 n real FLOPs per real-input FFT of n points.
double fftFlops(int64_t points) {
  return points > 1 ? 2.5 * d(points) * std::log2(d(points)) : 0;
}

} // namespace

double convFlops(const ConvShape &s, ConvDirection dir, int algo) {
  ConvMethod m = methodOf(dir, algo);
  double b = d(s.batch), c = d(channelsPerGroup(s)), k = d(s.k);
  switch (m) {
  case ConvMethod::ImplicitGemm:
  case ConvMethod::ImplicitPrecompGemm:
  case ConvMethod::Gemm:
  case ConvMethod::Direct:
    return s.directFlops();
  case ConvMethod::Winograd:
  case ConvMethod::WinogradNonfused: {
    // Multiplies shrink by alpha^2 / (m^2 r^2); each transform is two small
    // matrix products per tile (about 4 alpha^3 FLOPs).
    WinogradTile t = winogradTile(s, m);
    double ratio = d(t.alpha * t.alpha) / d(t.m * t.m * s.kernelSpatial());
    double tiles = d(winogradTiles(s, t));
    double transforms = 4.0 * d(t.alpha * t.alpha * t.alpha) *
                        (b * c * tiles + k * c + b * k * tiles);
    return s.directFlops() * ratio + transforms;
  }
  case ConvMethod::Fft: {
    double transforms = (b * c + k * c + b * k) * fftFlops(fftPoints(s));
    double pointwise = 8.0 * b * k * c * d(fftBins(s));
    return transforms + pointwise;
  }
  case ConvMethod::FftTiling: {
    double tiles = d(fftTileCount(s));
    double transforms =
        (b * c * tiles + k * c + b * k * tiles) * fftFlops(fftTilePoints(s));
    double pointwise = 8.0 * b * k * c * tiles * d(fftTileBins(s));
    return transforms + pointwise;
  }
  }
  return s.directFlops();
}

int64_t convLayoutCopyBytes(const ConvShape &s, ConvDirection dir, int algo,
                            int64_t dataBytes, bool tensorOps) {
  if (!tensorOps || dir != ConvDirection::BackwardFilter ||
      algo != (int)BwdFilterAlgo::Algo1)
    return 0;
  const int64_t c = channelsPerGroup(s);
  if (c % 8 == 0 && s.k % 8 == 0)
    return 0;
  auto round8 = [](int64_t x) { return (x + 7) / 8 * 8; };
  // Every group's channels padded: the copy holds group * round8(c / g).
  const int64_t g = std::max<int64_t>(s.group, 1);
  double x = d(s.batch) * d(g * round8(c)) * d(s.inSpatial());
  double dy = d(s.batch) * d(round8(s.k)) * d(s.outSpatial());
  return static_cast<int64_t>(d(dataBytes) * (x + dy));
}

/// What an sm_80+ backward-filter engine keeps beside its operand copies:
/// split-K partial sums of the filter gradient in fp32 (up to 13.5 fp32
/// filters measured) and up to 3.7 MiB more for a 1x1 filter of 8192
/// weights.
static int64_t splitKBytes(const ConvShape &s) {
  const double filter = d(s.k) * d(channelsPerGroup(s)) * d(s.kernelSpatial());
  return static_cast<int64_t>(std::ceil(16 * kF32 * filter)) + (4 << 20);
}

int64_t convEngineBytes(const ConvShape &s, ConvDirection dir, int algo,
                        int64_t dataBytes, bool tensorOps, int cc) {
  if (cc < 80 || algo != 1)
    return 0;
  const int64_t c = channelsPerGroup(s), rs = s.kernelSpatial();
  const double x = d(dataBytes) * d(s.batch) * d(s.c) * d(s.inSpatial());
  const double y = d(dataBytes) * d(s.batch) * d(s.k) * d(s.outSpatial());
  const double w = d(dataBytes) * d(s.k) * d(c) * d(rs);
  // A 1x1 filter is the same in KCRS and KRSC: no copy.
  const double wCopy = rs > 1 ? w : 0;
  auto bytes = [](double v) { return static_cast<int64_t>(std::ceil(v)); };
  switch (dir) {
  case ConvDirection::Forward:
    // Under FMA math only an index table, twice the precomputed one's
    // (measured 16 bytes per reduction index, at least 1 KiB).
    if (!tensorOps)
      return std::max<int64_t>(1024, 16 * c * rs);
    return bytes(x + y + wCopy) + 1024;
  case ConvDirection::BackwardData:
    return tensorOps ? bytes(x + y + wCopy) + 1024 : 0;
  case ConvDirection::BackwardFilter:
    return bytes(x + y + w) + splitKBytes(s);
  }
  return 0;
}

int64_t convWorkspaceBytes(const ConvShape &s, ConvDirection dir, int algo,
                           int64_t dataBytes, bool tensorOps, int cc) {
  int64_t engine = convEngineBytes(s, dir, algo, dataBytes, tensorOps, cc);
  if (int64_t copies =
          convLayoutCopyBytes(s, dir, algo, dataBytes, tensorOps)) {
    // On sm_80+ the padded copies come with the engine's split-K partials:
    // cuDNN 9.19 asked 464,680,080 bytes for VGG-16's first backward-filter
    // in bf16 at batch 64 on an H200, 2.26 MB above the copies alone (the
    // call then ran ALGO_3, 5.3 ms against about 1 ms).
    return engine > 0 ? std::max(engine, copies + splitKBytes(s)) : copies;
  }
  if (engine > 0)
    return engine;
  ConvMethod m = methodOf(dir, algo);
  int64_t b = s.batch, c = channelsPerGroup(s), k = s.k;
  auto bytes = [](double x) { return static_cast<int64_t>(std::ceil(x)); };
  switch (m) {
  case ConvMethod::ImplicitGemm:
  case ConvMethod::Direct:
    return 0;
  case ConvMethod::ImplicitPrecompGemm:
    // Two 32-bit offsets per reduction index (channel, filter tap).
    return 8 * c * s.kernelSpatial();
  case ConvMethod::Gemm:
    // The im2col matrix of the whole sub-batch: (C * R * S) x (b * P * Q).
    // Its elements are the activations' (2 bytes in 16-bit precisions).
    return bytes(d(dataBytes) * d(b) * d(s.c) * d(s.kernelSpatial()) *
                 d(s.outSpatial()));
  case ConvMethod::Winograd: {
    // Fused: tiles stay on chip; only the transformed filters are stored.
    WinogradTile t = winogradTile(s, m);
    return bytes(kF32 * d(t.alpha * t.alpha) * d(k) * d(c));
  }
  case ConvMethod::WinogradNonfused: {
    // Transformed inputs, filters and outputs, times 1.5: cuDNN 9.19 asked
    // 1.39-1.44 times these tensors for VGG-16's backward-data on an H200
    // (192-472 MB where 138-327 MB were planned; docs/cost-model.md).
    WinogradTile t = winogradTile(s, m);
    double tiles = d(winogradTiles(s, t));
    return bytes(kWinogradNonfusedSlack * kF32 * d(t.alpha * t.alpha) *
                 (d(b) * d(c) * tiles + d(k) * d(c) + d(b) * d(k) * tiles));
  }
  case ConvMethod::Fft:
    // Spectra of every input map, filter and output map.
    return bytes(kComplex * d(fftBins(s)) *
                 (d(b) * d(c) + d(k) * d(c) + d(b) * d(k)));
  case ConvMethod::FftTiling: {
    double tiles = d(fftTileCount(s));
    return bytes(kComplex * d(fftTileBins(s)) *
                 (d(b) * d(c) * tiles + d(k) * d(c) + d(b) * d(k) * tiles));
  }
  }
  return 0;
}

int convLaunches(ConvDirection dir, int algo) {
  switch (methodOf(dir, algo)) {
  case ConvMethod::ImplicitGemm:
  case ConvMethod::ImplicitPrecompGemm:
  case ConvMethod::Direct:
  case ConvMethod::Winograd:
    return 1;
  case ConvMethod::Gemm:
    return 2; // im2col, GEMM
  case ConvMethod::Fft:
  case ConvMethod::FftTiling:
    return 4; // input and filter transforms, pointwise product, inverse
  case ConvMethod::WinogradNonfused:
    return 4; // input and filter transforms, batched GEMM, output transform
  }
  return 1;
}

// Workspace traffic on top of the operands: buffers written by one kernel
// and read by the next cross DRAM twice; index tables and transformed
// filters are read once.
double convWorkspaceTraffic(const ConvShape &s, ConvDirection dir, int algo,
                            int64_t dataBytes, bool tensorOps, int cc) {
  ConvMethod m = methodOf(dir, algo);
  int64_t ws = convWorkspaceBytes(s, dir, algo, dataBytes, tensorOps, cc);
  // Operand copies are written once and read once; the FMA forward's index
  // table is read.
  if (int64_t engine = convEngineBytes(s, dir, algo, dataBytes, tensorOps, cc))
    return dir == ConvDirection::Forward && !tensorOps ? d(engine)
                                                       : 2.0 * d(engine);
  // The non-fused Winograd's slack is room cuDNN asks for, not bytes its
  // kernels move.
  if (m == ConvMethod::WinogradNonfused)
    ws = static_cast<int64_t>(std::ceil(d(ws) / kWinogradNonfusedSlack));
  // Layout copies are written once and read once.
  if (convLayoutCopyBytes(s, dir, algo, dataBytes, tensorOps) > 0)
    return 2.0 * d(ws);
  switch (m) {
  case ConvMethod::Gemm:
  case ConvMethod::Fft:
  case ConvMethod::FftTiling:
  case ConvMethod::WinogradNonfused:
    return 2.0 * d(ws);
  case ConvMethod::ImplicitPrecompGemm:
  case ConvMethod::Winograd:
    return d(ws);
  case ConvMethod::ImplicitGemm:
  case ConvMethod::Direct:
    return 0;
  }
  return 0;
}

double convStridePenalty(const ConvShape &s, ConvDirection dir, int algo) {
  if (dir != ConvDirection::BackwardData ||
      methodOf(dir, algo) != ConvMethod::ImplicitGemm)
    return 1;
  double p = 1;
  for (int64_t x : s.strides)
    p *= d(std::max<int64_t>(x, 1));
  return p;
}

double convParallelItems(const ConvShape &s, ConvDirection dir) {
  switch (dir) {
  case ConvDirection::Forward:
    return d(s.batch) * d(s.k) * d(s.outSpatial());
  case ConvDirection::BackwardData:
    return d(s.batch) * d(s.c) * d(s.inSpatial());
  case ConvDirection::BackwardFilter:
    return d(s.k) * d(channelsPerGroup(s)) * d(s.kernelSpatial());
  }
  return 0;
}

double convReductionDepth(const ConvShape &s, ConvDirection dir) {
  int64_t g = std::max<int64_t>(s.group, 1);
  switch (dir) {
  case ConvDirection::Forward:
    return d(s.c / g) * d(s.kernelSpatial());
  case ConvDirection::BackwardData:
    return d(s.k / g) * d(s.kernelSpatial());
  case ConvDirection::BackwardFilter:
    return 0;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Task work
//===----------------------------------------------------------------------===//

std::optional<ConvDirection> convDirectionOf(const TaskGraph &tg, TaskId t) {
  const Task &task = tg.task(t);
  if (task.op < 0 || tg.graph->op(task.op).kind != OpKind::Conv)
    return std::nullopt;
  switch (task.kind) {
  case TaskKind::Forward:
    return ConvDirection::Forward;
  case TaskKind::BackwardData:
    return ConvDirection::BackwardData;
  case TaskKind::BackwardWeight:
    return ConvDirection::BackwardFilter;
  default:
    return std::nullopt;
  }
}

int64_t convGradStagingBytes(const TaskGraph &tg, TaskId t) {
  if (dtypeBytes(activationType(tg.precision)) != 2 ||
      convDirectionOf(tg, t) != ConvDirection::BackwardFilter)
    return 0;
  // Only a task that writes the weight's gradient stages it (a frozen
  // weight's task computes the bias gradient alone).
  const Task &task = tg.task(t);
  const ValueId weight = tg.graph->op(task.op).inputs.size() > 1
                             ? tg.graph->op(task.op).inputs[1]
                             : kNoId;
  bool writesWeightGrad = false;
  for (BlockId b : task.writes)
    writesWeightGrad |= tg.blocks[b].kind == BlockKind::WeightGrad &&
                        tg.blocks[b].value == weight;
  if (!writesWeightGrad)
    return 0;
  ConvShape s = convShape(*tg.graph, task.op, 1);
  return convGradStagingBytes(s.k * (s.c / s.group) * s.kernelSpatial());
}

namespace {

double elementBytes(const TaskGraph &, const Block &blk) {
  return d(dtypeBytes(blk.dtype));
}

double valueElems(const Value &v, int64_t b) {
  return d(v.elementsPerSample()) * (v.batched ? d(b) : 1.0);
}

// Bytes the task's kernels read and write: every block it reads and writes
// once, plus a read of each gradient it may have to accumulate into.
double blockTraffic(const TaskGraph &tg, const Task &task, int64_t b) {
  double bytes = 0;
  for (BlockId id : task.reads)
    bytes += d(tg.block(id).bytesAt(b));
  for (size_t i = 0; i < task.writes.size(); ++i) {
    double w = d(tg.block(task.writes[i]).bytesAt(b));
    bool acc = i < task.accumulates.size() && task.accumulates[i];
    bytes += acc ? 2 * w : w;
  }
  return bytes;
}

// Parallel work items of the batched part: elements of the largest block
// that scales with the sub-batch (what the kernel's threads are spread
// over). Zero when the task touches none (updates).
double batchedItems(const TaskGraph &tg, const Task &task, int64_t b) {
  double items = 0;
  auto visit = [&](BlockId id) {
    const Block &blk = tg.block(id);
    if (blk.perSampleBytes > 0)
      items =
          std::max(items, d(blk.perSampleBytes) * d(b) / elementBytes(tg, blk));
  };
  for (BlockId id : task.reads)
    visit(id);
  for (BlockId id : task.writes)
    visit(id);
  return items;
}

} // namespace

bool producesOnlyViews(const TaskGraph &tg, const Task &task) {
  if ((task.kind != TaskKind::Forward && task.kind != TaskKind::BackwardData) ||
      task.writes.empty())
    return false;
  // A written block shares storage with a read one when either is a view of
  // the other (FP: Y views X; BP-data: dY views dX).
  auto aliasesRead = [&](BlockId w) {
    for (BlockId r : task.reads)
      if (tg.block(w).viewOf == r || tg.block(r).viewOf == w)
        return true;
    return false;
  };
  for (size_t i = 0; i < task.writes.size(); ++i) {
    bool acc = i < task.accumulates.size() && task.accumulates[i];
    if (acc || !aliasesRead(task.writes[i]))
      return false;
  }
  return true;
}

namespace {

/// The loss that computes the head's product (TaskGraph::fusedHead): per
/// chunk of rows the product into the scratch block, the cross-entropy
/// over it in place and, training, the two products of the gradients; the
/// logits cross memory as the unfused head's do, a chunk at a time, but
/// are never stored whole.
TaskWork fusedHeadWork(const DeviceSpec &spec, const TaskGraph &tg,
                       const Task &task, int64_t b, TaskWork w) {
  const Graph &g = *tg.graph;
  const Op &op = g.op(tg.fusedHead);
  const Value &x = g.value(op.inputs[0]);
  double k = d(x.dims.back());
  double classes = d(g.value(op.outputs[0]).dims.back());
  double rows = valueElems(x, b) / k;
  bool training = !tg.evaluation;
  double products = training ? 3 : 1;
  double chunks = std::ceil(rows / d(std::max<int64_t>(tg.headChunkRows, 1)));
  double logitBytes =
      rows * classes * d(dtypeBytes(activationType(tg.precision)));
  // The product writes the logits; the loss reads them and writes the
  // gradient over them; the two products read it.
  w.flops = products * 2 * rows * k * classes + 8 * rows * classes;
  w.bytes += logitBytes * (training ? 4 : 2);
  w.launches = static_cast<int>(chunks * (products + 2));
  w.reduction = k;
  w.efficiency = spec.classEfficiency(CostClass::Gemm);
  return w;
}

/// FLOPs, bytes, launches and efficiency at sub-batch b (0 gives the part
/// that does not scale with the sub-batch).
TaskWork workAt(const DeviceSpec &spec, const TaskGraph &tg, TaskId t, int algo,
                int64_t b) {
  const Task &task = tg.task(t);
  const Graph &g = *tg.graph;
  TaskWork w;
  w.bytes = blockTraffic(tg, task, b);

  if (auto dir = convDirectionOf(tg, t)) {
    ConvShape s = convShape(g, task.op, b);
    w.flops = convFlops(s, *dir, algo);
    w.bytes += convWorkspaceTraffic(
        s, *dir, algo, dtypeBytes(activationType(tg.precision)),
        usesTensorCores(tg.precision), spec.computeCapability);
    w.launches = convLaunches(*dir, algo);
    w.efficiency = spec.convEfficiency(*dir, algo);
    w.reduction = convReductionDepth(s, *dir);
    w.stridePenalty = convStridePenalty(s, *dir, algo);
    if (s.hasBias && *dir != ConvDirection::BackwardData) {
      // Bias added to Y after the convolution, or reduced from dY.
      w.flops += d(s.batch) * d(s.k) * d(s.outSpatial());
      w.launches += 1;
    }
    return w;
  }

  assert(algo == 0 && "non-conv tasks have the single algorithm 0");
  switch (task.kind) {
  case TaskKind::Loss: {
    if (tg.fusedHead != kNoId)
      return fusedHeadWork(spec, tg, task, b, w);
    ValueId in = lossInput(g, tg.loss);
    double out = in >= 0 ? valueElems(g.value(in), b) : 0;
    // Softmax cross-entropy: log-softmax, loss, gradient (two kernels);
    // MSE: difference and its square in one, the reduction in another.
    w.flops = (tg.loss == LossKind::SoftmaxCrossEntropy ? 8 : 4) * out;
    w.launches = 2;
    w.efficiency = spec.classEfficiency(CostClass::Loss);
    return w;
  }
  case TaskKind::Update: {
    // SGD: w -= lr * (dW + wd * w), with momentum v = mu * v + ...
    double elems = 0;
    for (BlockId id : task.reads)
      if (tg.block(id).kind == BlockKind::Weight)
        elems += d(tg.block(id).bytesAt(b)) / elementBytes(tg, tg.block(id));
    // Adam: two moment updates, a square root and a division per element.
    w.flops = (tg.optimizer != OptimizerKind::SGD ? 12
               : tg.useMomentum                   ? 5
                                                  : 3) *
              elems;
    w.launches = 1;
    w.efficiency = spec.classEfficiency(CostClass::Update);
    return w;
  }
  default:
    break;
  }
  const Op &op = g.op(task.op);
  const OpDef &def = opDef(op.kind);
  assert(def.work && "only convolutions are priced per algorithm");
  OpWork work =
      def.work(g, op, task.kind,
               std::max<int>(static_cast<int>(task.writes.size()), 1), b);
  w.flops = work.flops;
  w.launches = work.launches;
  w.reduction = work.reduction;
  w.efficiency = spec.classEfficiency(def.costClass);
  if (op.kind == OpKind::Attention)
    w.efficiency.compute = kOwnAttentionFp32Fraction;
  return w;
}

} // namespace

namespace {

/// Tensor cores run the GEMM-shaped arithmetic of convolutions and matrix
/// products (OpDef::tensorCores) under TF32, BF16 and FP16, convolutions
/// only by ALGO_1 of each direction (below). Everything else (fused attention,
/// whose kernel is memfit's own and multiplies in FP32; normalization, softmax,
/// reductions, elementwise, the loss and the update) computes in FP32 under
/// every precision: only its memory traffic follows the 16-bit blocks.
double productPeak(const DeviceSpec &spec, const TaskGraph &tg, TaskId t,
                   int algo) {
  const Task &task = tg.task(t);
  if (!usesTensorCores(tg.precision) || task.op < 0 ||
      (task.kind != TaskKind::Forward && task.kind != TaskKind::BackwardData &&
       task.kind != TaskKind::BackwardWeight &&
       !(task.kind == TaskKind::Loss && task.op == tg.fusedHead)) ||
      !opDef(tg.graph->op(task.op).kind).tensorCores)
    return 0;
  // cuDNN runs tensor-core math in the implicit-precomputed-GEMM forward
  // and ALGO_1 of the backward directions only (its developer guide's
  // tensor-core list; the non-fused Winograd keeps FP32 transforms): the
  // other algorithms compute at the FP32 rate whatever the math type. On an
  // H200 ResNet-50's bf16 convolutions ran by ALGO_0 took 465-923 us a
  // call, ten times their tensor-core pricing.
  if (convDirectionOf(tg, t) && algo != 1)
    return 0;
  return spec.productFlops(tg.precision);
}

} // namespace

TaskWork analyticWork(const DeviceSpec &spec, const TaskGraph &tg, TaskId t,
                      int algo, int64_t b) {
  TaskWork w;
  if (producesOnlyViews(tg, tg.task(t))) {
    w.free = true;
    return w;
  }
  // Every formula is affine in b; its value at 0 is the fixed part
  // (weights, filter transforms), which the utilisation does not scale.
  w = workAt(spec, tg, t, algo, b);
  TaskWork fixed = workAt(spec, tg, t, algo, 0);
  w.fixedFlops = std::min(fixed.flops, w.flops);
  w.fixedBytes = std::min(fixed.bytes, w.bytes);
  w.parallelItems = batchedItems(tg, tg.task(t), b);
  if (auto dir = convDirectionOf(tg, t)) {
    // A convolution's threads are spread over its output elements.
    w.parallelItems =
        convParallelItems(convShape(*tg.graph, tg.task(t).op, b), *dir);
    w.batchReduction = *dir == ConvDirection::BackwardFilter;
  }
  // The depth at b (it does not scale with b where it applies).
  w.reduction = std::max(w.reduction, fixed.reduction);
  w.peakFlops = productPeak(spec, tg, t, algo);
  if (tg.task(t).op >= 0 &&
      tg.graph->op(tg.task(t).op).kind == OpKind::Attention) {
    // kOwnAttentionFp32Fraction is the measured whole-kernel rate.
    w.parallelItems = 0;
    w.reduction = 0;
  }
  return w;
}

double workSeconds(const DeviceSpec &spec, const TaskWork &w) {
  if (w.free)
    return 0;
  // A reduction over the batch (backward-filter) keeps every item busy
  // with the whole batch, so its utilisation stays what its output allows
  // at any sub-batch; other kernels' rise with the sub-batch.
  // A short reduction leaves the multiply units waiting on loads: the rate
  // falls to half at spec.halfRateReduction multiply-adds per output.
  double depth = w.reduction > 0 && spec.halfRateReduction > 0
                     ? w.reduction / (w.reduction + spec.halfRateReduction)
                     : 1.0;
  double peak = w.peakFlops > 0 ? w.peakFlops : spec.fp32Flops;
  double rate = peak * w.efficiency.compute * depth /
                std::pow(w.stridePenalty, spec.stridePenaltyExponent);
  double bandwidth = spec.memoryBandwidth * w.efficiency.memory;
  double half =
      w.batchReduction ? spec.halfRateFilterItems() : spec.halfRateItems();
  double utilisation = w.parallelItems > 0 && half > 0
                           ? w.parallelItems / (w.parallelItems + half)
                           : 1.0;
  double compute =
      (w.flops - w.fixedFlops) / rate / utilisation + w.fixedFlops / rate;
  double memory = (w.bytes - w.fixedBytes) / bandwidth / utilisation +
                  w.fixedBytes / bandwidth;
  return d(w.launches) * spec.launchSeconds + std::max(compute, memory);
}

//===----------------------------------------------------------------------===//
// The analytic model
//===----------------------------------------------------------------------===//

AlgoChoice convAlgoChoice(ConvDirection dir, int id) {
  const ConvAlgoInfo *info = findConvAlgo(dir, id);
  assert(info && "unknown conv algorithm");
  return {id, info->name, info->baseline, info->deterministic};
}

AlgoChoice defaultAlgoChoice() { return {0, "default", true, true}; }

std::vector<AlgoChoice> AnalyticCostModel::algorithms(const TaskGraph &tg,
                                                      TaskId t) const {
  auto dir = convDirectionOf(tg, t);
  if (!dir)
    return {defaultAlgoChoice()};
  ConvShape s = convShape(*tg.graph, tg.task(t).op, tg.graph->batch);
  std::vector<AlgoChoice> out;
  for (int id : applicableConvAlgos(s, *dir, spec.computeCapability))
    out.push_back(convAlgoChoice(*dir, id));
  // The baseline must need no workspace. Where the direction's own one
  // needs some here (ALGO_1's layout copies under tensor-core math), the
  // zero-workspace algorithm of lowest id takes its place.
  auto ws = [&](const AlgoChoice &a) {
    return workspaceBytes(tg, t, a.id, tg.graph->batch);
  };
  auto base = std::find_if(out.begin(), out.end(),
                           [](const AlgoChoice &a) { return a.baseline; });
  assert(base != out.end() && "the baseline is always offered");
  if (ws(*base) > 0) {
    auto free = std::find_if(out.begin(), out.end(),
                             [&](const AlgoChoice &a) { return ws(a) == 0; });
    if (free != out.end()) {
      base->baseline = false;
      free->baseline = true;
    }
  }
  return out;
}

double AnalyticCostModel::taskSeconds(const TaskGraph &tg, TaskId t, int algo,
                                      int64_t b) const {
  assert(b >= 1 && "sub-batch must be positive");
  return workSeconds(spec, analyticWork(spec, tg, t, algo, b));
}

int64_t AnalyticCostModel::workspaceBytes(const TaskGraph &tg, TaskId t,
                                          int algo, int64_t b) const {
  auto dir = convDirectionOf(tg, t);
  if (!dir) {
    assert(algo == 0 && "non-conv tasks have the single algorithm 0");
    return 0;
  }
  return convWorkspaceBytes(convShape(*tg.graph, tg.task(t).op, b), *dir, algo,
                            dtypeBytes(activationType(tg.precision)),
                            usesTensorCores(tg.precision),
                            spec.computeCapability);
}

CopyRates AnalyticCostModel::copyRates() const {
  return {spec.h2dBandwidth * spec.linkEfficiency,
          spec.d2hBandwidth * spec.linkEfficiency, spec.transferLatency};
}

bool AnalyticCostModel::isFree(const TaskGraph &tg, TaskId t) const {
  return producesOnlyViews(tg, tg.task(t));
}

} // namespace memfit
