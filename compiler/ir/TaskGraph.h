//===- TaskGraph.h - Task and data flow graph of one iteration --*- C++ -*-===//
//
// The TDFG of moDNN (Fig. 1): the tasks of one training iteration and the
// data blocks they read and write. Tasks are FP(l), BP-data(l) (gradient of
// l's inputs), BP-weight(l) (gradient of l's weights), the loss and one
// update per weight. Blocks are sized perSampleBytes * b + fixedBytes for
// sub-batch b.
//
// Each task lists exactly the blocks it reads (the minimal backward
// dependencies of Chen et al. section 3), so liveness and the planner can
// free a block as soon as its last real reader ran. A gradient block written
// by several tasks (fan-out of its value) is accumulated: the first writer in
// execution order initializes it, later writers add to it.
//
// Tasks are stored in one valid execution order (forward, loss, backward in
// reverse, updates); passes may choose another topological order.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_TASKGRAPH_H
#define MEMFIT_COMPILER_IR_TASKGRAPH_H

#include "compiler/ir/Graph.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memfit {

using TaskId = int32_t;
using BlockId = int32_t;

enum class TaskKind : uint8_t {
  Forward,
  BackwardData,
  BackwardWeight,
  Loss,
  Update,
};
std::string_view taskKindName(TaskKind k);

enum class BlockKind : uint8_t {
  Input,        // the data batch
  Label,        // labels (int32 class ids, or float targets for mse)
  Activation,   // Y: an op's forward output
  Gradient,     // dY: gradient of an activation
  Weight,       // W
  WeightGrad,   // dW
  Momentum,     // SGD momentum buffer, or Adam's first moment (exp_avg)
  SecondMoment, // Adam's second moment (exp_avg_sq)
  Stats,        // BatchNorm saved mean and inverse std of the sub-batch
  LossValue,    // the scalar loss (resident, summed over sub-batches)
  /// The 16-bit working copy of a weight that 16-bit products read (bf16
  /// and fp16 plans; the fp32 Weight block stays the master copy the
  /// update writes). Resident; the update refreshes it after each step.
  WeightCopy,
};
std::string_view blockKindName(BlockKind k);

/// Where a weight-side block lives between the tasks that use it
/// (docs/memory.md, "Memory tiers"): on the GPU for the whole run, outside
/// the arena (the default), or in pinned host memory, copied into the arena
/// for the tasks of a round that read or write it, like a prefetched
/// activation, and updated there by the host's cores. Nvme holds only what
/// the host's update alone touches (TaskGraph::nvmeHomeable: optimizer
/// state, 16-bit plans' fp32 masters), which it streams from files and
/// back; no round copies it, but a working copy rounded from a master there
/// (TaskGraph::copiesFromNvmeMaster) is read from it on its way in
/// (docs/memory.md, "NVMe").
enum class Tier : uint8_t { Gpu, Host, Nvme };
std::string_view tierName(Tier t); // "gpu", "host", "nvme"

/// The most device bytes a working copy rounded from its master
/// (TaskGraph::roundsFromMaster) lands in before it is rounded: larger
/// masters go through in pieces, one after another on the copy-in stream.
/// At PCIe 4/5 rates a piece takes about a millisecond to arrive and some
/// ten microseconds to round.
constexpr int64_t kCopyStagingBytes = int64_t(32) << 20;

/// Weights, their gradients and optimizer state do not scale with the
/// sub-batch and stay resident for the whole run (moDNN does the same). The
/// scalar loss is resident too: it accumulates over the sub-batches like a
/// weight gradient and is read once per iteration.
bool isWeightSide(BlockKind k);

/// The arithmetic of a training plan, as torch.autocast and PyTorch's TF32
/// switches set it:
/// - FP32: fp32 storage, fp32 FMA everywhere;
/// - TF32: fp32 storage, convolutions and matrix products on tensor cores
///   in TF32 (cuDNN's and cuBLAS's default math on Ampere and later);
/// - BF16, FP16: activations, their gradients, the input batch and
///   everything saved for the backward pass in 16 bits; weights kept in
///   fp32 (master copies, gradients, optimizer state) with 16-bit working
///   copies for the operators that compute from 16-bit operands
///   (OpDef::lowerPrecision);
///   reductions, softmax, normalization statistics and the loss computed in
///   fp32. FP16 adds dynamic loss scaling (torch.cuda.amp.GradScaler).
enum class Precision : uint8_t { FP32, TF32, BF16, FP16 };
/// "fp32", "tf32", "bf16", "fp16".
std::string_view precisionName(Precision p);
/// The storage type of activations and gradients under `p`.
DType activationType(Precision p);
/// Whether convolutions and matrix products run on tensor cores.
inline bool usesTensorCores(Precision p) { return p != Precision::FP32; }

struct Block {
  std::string name;
  BlockKind kind;
  ValueId value = kNoId;      // the graph value it holds (or the gradient of)
  OpId op = kNoId;            // for Stats: the BatchNorm op
  int64_t perSampleBytes = 0; // scales with the sub-batch
  int64_t fixedBytes = 0;     // does not
  /// The element type it is stored in (its bytes follow it).
  DType dtype = DType::F32;
  std::vector<TaskId> writers; // in task order
  std::vector<TaskId> readers; // in task order
  /// A view shares storage with `viewOf` (Flatten/Reshape outputs and their
  /// gradients): same bytes, no copy needed.
  BlockId viewOf = -1;
  /// In a graph split along the batch (TaskGraph::chunks > 1): which chunk
  /// of samples the block holds; -1 for blocks every chunk shares.
  int32_t chunk = -1;

  int64_t bytesAt(int64_t subBatch) const {
    return perSampleBytes * subBatch + fixedBytes;
  }
};

/// Which part of an operator's work a task does. Whole everywhere but in a
/// graph split along the batch, where a BatchNorm forward becomes
/// Statistics per chunk (accumulated over the chunks), one Finalize (mean,
/// inverse deviation and running statistics of the whole batch) and
/// Normalize per chunk; its BP-data is then Normalize too: it reads the
/// batch's sums from the weight gradients instead of summing its chunk.
enum class TaskPart : uint8_t { Whole, Statistics, Finalize, Normalize };

struct Task {
  TaskKind kind;
  OpId op = kNoId;  // the forward op this task belongs to (none for Loss)
  std::string name; // e.g. "FP(conv1)"; from untrusted ONNX names
  std::vector<BlockId> reads;
  std::vector<BlockId> writes;
  /// The task may write its first output over one of its reads (index
  /// inPlaceRead): an elementwise forward over its input, whose backward
  /// needs only the output; an elementwise BP-data over dY. Whether it
  /// actually does is the planner's decision (other readers may still need
  /// the input).
  bool mayRunInPlace = false;
  int32_t inPlaceRead = 0;
  /// Which gradient blocks in `writes` other tasks also write, so the writer
  /// must accumulate unless it runs first.
  std::vector<bool> accumulates;
  /// In a graph split along the batch: the chunk of samples the task works
  /// on (-1: a task every chunk shares, such as an update).
  int32_t chunk = -1;
  TaskPart part = TaskPart::Whole;
};

enum class LossKind : uint8_t { SoftmaxCrossEntropy, MSE };

/// torch.optim.SGD (with momentum unless it is 0), torch.optim.Adam (L2
/// weight decay added to the gradient) or torch.optim.AdamW (decoupled
/// weight decay). Adam's two moment buffers are planned resident memory.
enum class OptimizerKind : uint8_t { SGD, Adam, AdamW };
std::string_view optimizerName(OptimizerKind k);

/// Which axis of the logits holds the classes for cross-entropy: axis 1
/// (images, segmentation: torch.nn.functional.cross_entropy), the last one
/// (sequence models' N x T x V), or chosen: the last axis when the model
/// reads token ids, else axis 1 (the same for [N, classes] logits).
enum class ClassAxis : uint8_t { Auto, Channel, Last };

/// Cross-entropy's logits per sample as [outer, classes, inner], one label
/// per (outer, inner) position.
struct LossGeometry {
  int64_t outer = 1, classes = 0, inner = 1;
  int64_t positions() const { return outer * inner; }
};

struct OptimizerConfig {
  float lr = 0.01f, momentum = 0.9f, weightDecay = 0.0f;
};

/// What passes know of a forward op: its kind and where its data comes
/// from, so that no pass reaches back into the forward Graph.
struct Layer {
  OpKind kind;
  /// The Y blocks of its non-weight inputs, in operand order.
  std::vector<BlockId> dataInputs = {};
  /// Per operand, the layer producing it (kNoId for the model input and
  /// weights).
  std::vector<OpId> producers = {};
  /// Bytes per sample of its first output.
  int64_t outputBytesPerSample = 0;
};

/// Data-parallel training (docs/data-parallel.md): `ranks` GPUs each run
/// this graph on their slice of the global batch and average the weight
/// gradients by collectives, in buckets that overlap the backward pass.
/// With `shard` 1 each rank keeps the optimizer state of its slice of every
/// weight only (ZeRO stage 1), with 2 its slice of the gradients too (stage
/// 2); the weights stay whole on every rank.
struct DataParallel {
  enum class Link : uint8_t { Auto, NVLink, PCIe, InfiniBand };
  int32_t ranks = 1;
  int32_t shard = 0;
  Link link = Link::Auto;
  /// Gradient bytes per bucket: PyTorch DDP's bucket_cap_mb default.
  int64_t bucketBytes = int64_t(25) << 20;
  bool active() const { return ranks > 1; }
};
std::string_view linkName(DataParallel::Link l);

struct TaskGraph {
  /// The forward graph, for codegen and reports (names, attributes);
  /// passes read `layers` instead.
  const Graph *graph = nullptr;
  /// Per forward op (indexed by OpId).
  std::vector<Layer> layers;
  OpId outputLayer = kNoId; // the op that computes the model's output
  /// The head's product when the loss computes it (--fuse-head,
  /// compiler/autodiff/FusedHead.h): the op has no task of its own; the
  /// Loss task (whose `op` it is) reads its input and weight, writes their
  /// gradients and a scratch block of `headChunkRows` rows of logits, and
  /// no block holds the logits. kNoId otherwise.
  OpId fusedHead = kNoId;
  int64_t headChunkRows = 0;
  BlockId headScratchBlock = -1;
  LossKind loss = LossKind::SoftmaxCrossEntropy;
  LossGeometry lossGeometry; // cross-entropy only
  OptimizerKind optimizer = OptimizerKind::SGD;
  bool useMomentum = true; // a first-moment buffer per weight
  Precision precision = Precision::FP32;
  /// Gradient clipping by global norm (torch's clip_grad_norm_) at this
  /// maximum norm; 0 when the plan does not clip. Every update then waits
  /// for the norm over every gradient, so none starts inside the rounds.
  double clipGradNorm = 0;
  /// Cross-entropy positions whose label is this add no loss and no
  /// gradient, and the mean runs over the others (torch's ignore_index;
  /// the trainer's ProgramInfo::ignoreIndex). The plan does not depend on
  /// it: each position's work is the same.
  int32_t ignoreIndex = -100;
  /// The graph of one evaluation batch, not of a training iteration: the
  /// forward tasks and a loss that measures (no gradient), as PyTorch's
  /// model.eval() under no_grad computes them: BatchNorm normalizes with
  /// its running statistics, dropout passes its input through.
  bool evaluation = false;
  std::vector<Block> blocks;
  std::vector<Task> tasks;
  BlockId inputBlock = -1, labelBlock = -1, lossBlock = -1;
  /// Per graph value: its Y block and its gradient block (-1 when none);
  /// in a graph split along the batch, chunk 0's.
  std::vector<BlockId> valueBlock, gradBlock;
  /// Per graph value: the 16-bit working copy of a weight (-1 when none).
  std::vector<BlockId> weightCopyBlock;
  /// Per graph value: a trainable weight kept fixed (--freeze,
  /// --train-only). It has its Weight block (and working copy) but no
  /// gradient, optimizer state or update. Empty when nothing is frozen.
  std::vector<bool> frozen;
  bool isFrozen(ValueId v) const { return !frozen.empty() && frozen[v]; }
  /// The batch runs as `chunks` chunks of samples in one round, every task
  /// of a per-sample operator once per chunk, so that operators computing
  /// statistics over the batch (BatchNorm) still see the whole batch
  /// (passes/search/Chunk.h). Blocks are then sized at the chunk.
  int32_t chunks = 1;
  /// Data parallelism: the graph is one rank's, at its slice of the batch.
  DataParallel dp;
  /// Resident bytes beyond the blocks: with gradients sharded, the buckets
  /// the backward pass writes whole gradients into before their
  /// reduce-scatter.
  int64_t collectiveBufferBytes = 0;
  /// weightSideBytes() were nothing sharded (for reports).
  int64_t replicatedWeightSideBytes = 0;
  /// When chunks > 1: per chunk c and value v, at [c * values + v], its Y
  /// and gradient blocks (shared blocks appear under every chunk).
  std::vector<BlockId> chunkValueBlock, chunkGradBlock;
  /// Per block, its home (Tier); empty when every block's is the GPU. Only
  /// the blocks of a trained or frozen weight (Weight, WeightCopy,
  /// WeightGrad, Momentum, SecondMoment) may live off the GPU, and all of
  /// one weight's together (passes/schedule/Tiers.h), its optimizer state
  /// possibly on NVMe, except that a 16-bit working copy may stay on the
  /// GPU while the rest is homed off it (copyStaysOnGpu).
  std::vector<Tier> homes;
  /// Pinned host bytes that the gradients of weights homed on the host
  /// stream through when the host budget cannot give each its own buffer
  /// (passes/schedule/GradPool.h); 0: every homed gradient has its own.
  int64_t gradPoolBytes = 0;
  /// Where the host budget cannot hold 16-bit working copies beside their
  /// fp32 masters (MegaTrain's layout): a working copy homed on the host
  /// with its master keeps no bytes there; each copy in sends the master
  /// and the device rounds it on arrival (roundsFromMaster).
  bool copiesFromMaster = false;
  /// With copiesFromMaster, where the host budget cannot hold even the
  /// working copies of masters on NVMe (LoHan's 175B on 256 GB): those are
  /// not kept at home either, and each copy in reads the master from the
  /// drive into pinned staging before it crosses the link.
  bool copiesFromNvmeMaster = false;

  const Block &block(BlockId id) const { return blocks[id]; }
  /// The Y (gradient) block of value `v` that a task of chunk `chunk`
  /// uses; valueBlock (gradBlock) when the graph is not split.
  BlockId valueBlockIn(ValueId v, int32_t chunk) const {
    return chunks > 1 && chunk >= 0
               ? chunkValueBlock[chunk * valueBlock.size() + v]
               : valueBlock[v];
  }
  BlockId gradBlockIn(ValueId v, int32_t chunk) const {
    return chunks > 1 && chunk >= 0
               ? chunkGradBlock[chunk * gradBlock.size() + v]
               : gradBlock[v];
  }
  const Task &task(TaskId id) const { return tasks[id]; }
  Tier homeOf(BlockId b) const { return homes.empty() ? Tier::Gpu : homes[b]; }
  /// A weight-side block on the device for the whole run, outside the
  /// arena: every weight-side block whose home is the GPU.
  bool isResident(BlockId b) const {
    return isWeightSide(blocks[b].kind) && homeOf(b) == Tier::Gpu;
  }

  /// The fp32 master (Weight block) of WeightCopy block `copy`.
  BlockId masterOf(BlockId copy) const {
    return valueBlock[blocks[copy].value];
  }
  /// Whether block `b` is a 16-bit working copy resident on the GPU while
  /// its master and the rest of its weight are homed off it (ZeRO-Offload's
  /// layout): the rounds read it where it is, with no copy; the host keeps
  /// a copy of it too, which the host's update rounds from the master and
  /// the trainer then uploads (hostUploadBytes), once per step.
  bool copyStaysOnGpu(BlockId b) const {
    return !homes.empty() && blocks[b].kind == BlockKind::WeightCopy &&
           homes[b] == Tier::Gpu && homes[masterOf(b)] != Tier::Gpu;
  }
  /// Whether block `b` is a 16-bit working copy that the host does not
  /// keep (copiesFromMaster): homed there with its master (or with its
  /// master on NVMe, copiesFromNvmeMaster), which every copy in sends over
  /// the link for the device to round.
  bool roundsFromMaster(BlockId b) const {
    if (!copiesFromMaster || homes.empty() ||
        blocks[b].kind != BlockKind::WeightCopy || homes[b] != Tier::Host)
      return false;
    const Tier master = homes[masterOf(b)];
    return master == Tier::Host ||
           (master == Tier::Nvme && copiesFromNvmeMaster);
  }
  /// Bytes a copy in of block `b` reads from NVMe before it crosses the
  /// link: the master's, for a copy rounded from a master homed there; 0
  /// for any other block.
  int64_t nvmeCopyReadBytes(BlockId b) const {
    return roundsFromMaster(b) && homes[masterOf(b)] == Tier::Nvme
               ? blocks[masterOf(b)].bytesAt(1)
               : 0;
  }
  /// Bytes that a copy of `bytes` of block `b` between the arena and its
  /// home moves over the link: the fp32 master's for a copy rounded from
  /// it, else `bytes`.
  int64_t linkBytes(BlockId b, int64_t bytes) const {
    return roundsFromMaster(b) ? blocks[masterOf(b)].bytesAt(1) : bytes;
  }
  /// Device bytes a copy rounded from its master lands in before it is
  /// rounded (resident, outside the arena): a copy in goes through them
  /// piece by piece; 0 when no copy is rounded from its master.
  int64_t copyStagingBytes() const;
  /// Pinned host bytes a master on NVMe is read into on its way to the
  /// device staging (copyStagingBytes rounded up to the drive's 4 KiB
  /// transfers, as the runtime's NvmeStore::regionBytes does); 0 when no
  /// copy is rounded from a master on NVMe.
  int64_t copyStagingHostBytes() const;
  /// Pinned host bytes the homes take: every block homed on the host but
  /// working copies rounded from their masters, the host's copy of each
  /// working copy that stays on the GPU (none for an f32 copy, whose
  /// master at home is that copy, unless the master is on NVMe), and
  /// copyStagingHostBytes.
  int64_t hostBytes() const;

  /// The update of a weight homed off the GPU, which the host's cores run
  /// (a weight's blocks share a home, or live on NVMe behind it, so its
  /// first read says which).
  bool runsOnHost(const Task &t) const {
    return t.kind == TaskKind::Update && !t.reads.empty() &&
           homeOf(t.reads.front()) != Tier::Gpu;
  }
  /// Whether block `b` may live on NVMe once its weight is homed on the
  /// host: what only the host's update touches, which is the optimizer
  /// state (momentum, second moment) and the fp32 master of a trained
  /// weight that every other task reads as its 16-bit working copy.
  bool nvmeHomeable(BlockId b) const;

  /// Bytes of the resident blocks (weights, weight gradients and optimizer
  /// state homed on the GPU; this rank's share when sharded), the
  /// collective buffers and the staging of copies rounded from masters.
  int64_t weightSideBytes() const;
  /// Bytes of the weight-side blocks homed in tier `t` (off the GPU).
  int64_t homedBytes(Tier t) const;
  /// Sum of every forward intermediate (non-view activation) at batch b.
  int64_t keepAllBytes(int64_t b) const;
  /// Bytes of the blocks a task touches in the arena at batch b: all but
  /// the resident ones (views counted once with their base).
  int64_t taskFootprint(TaskId t, int64_t b) const;
};

// --- Queries every stage asks of the TDFG ---

/// Trained and frozen weights (trainable ones: BatchNorm's running
/// statistics are neither), counted and in bytes of their Weight blocks.
struct FrozenCount {
  int64_t frozen = 0, frozenBytes = 0, trained = 0, trainedBytes = 0;
};
/// Reads `tg.graph`: for reports, not for passes.
FrozenCount countFrozen(const TaskGraph &tg);

/// The parameters an update task updates (the elements of the weights it
/// reads).
int64_t updatedParams(const TaskGraph &tg, const Task &update);

/// The blocks an update reads or writes where its weight is homed: the
/// weight, its 16-bit working copy (which the update refreshes), gradient
/// and moments; sorted.
std::vector<BlockId> hostUpdateBlocks(const TaskGraph &tg, const Task &update);

/// Bytes of the optimizer state a host update reads from NVMe and writes
/// back (its blocks homed on Tier::Nvme); 0 for any other task.
int64_t nvmeUpdateBytes(const TaskGraph &tg, const Task &update);

/// Bytes a host update uploads to the GPU once it is done: its weight's
/// 16-bit working copy where that stays on the GPU (copyStaysOnGpu); 0 for
/// any other task.
int64_t hostUploadBytes(const TaskGraph &tg, const Task &update);

/// The order the task graph was built in (forward, loss, backward, update).
std::vector<TaskId> builtOrder(const TaskGraph &tg);

/// Data that arrives from the host each round: inputs and labels.
inline bool isBatchData(BlockKind k) {
  return k == BlockKind::Input || k == BlockKind::Label;
}

/// The block a view aliases, transitively; `b` itself when it is no view.
BlockId storageOf(const TaskGraph &tg, BlockId b);

/// The input a task may overwrite with its first output, and that output,
/// when the task allows it (Task::mayRunInPlace), the output does not
/// accumulate, both are activation-side storage blocks of the same size at
/// every sub-batch. Whether the input is still needed later is the caller's
/// question (it depends on the order).
struct InPlacePair {
  BlockId input = -1, output = -1;
};
std::optional<InPlacePair> inPlacePair(const TaskGraph &tg, const Task &t);

/// Sets every task's `accumulates`: a write to a non-weight block that
/// other tasks also write adds to it unless it runs first.
void setAccumulateFlags(TaskGraph &tg);

/// Blocks a recompute can regenerate: forward outputs written by exactly
/// one forward task (not the data input, gradients or saved statistics).
/// A normalization's recompute reads the statistics its forward saved (or,
/// split along the batch, the batch's), so its outputs are recomputable
/// only when a backward task keeps those statistics alive (not in a frozen
/// part of the network, which runs no backward).
std::vector<bool> recomputableBlocks(const TaskGraph &tg);

/// Checks the TDFG's invariants: ids in range, every read block written by an
/// earlier task (or an external input), writers/readers consistent with the
/// task lists. Returns the first violation.
std::optional<std::string> verifyTaskGraph(const TaskGraph &tg);

} // namespace memfit

#endif
