//===- Exec.h - What a generated trainer calls ------------------*- C++ -*-===//
//
// The generated schedule is straight-line calls on one Exec: copies, events
// and operations exactly as planned, every pointer an offset into the one
// arena or a resident weight. One Exec class exists per backend and the
// trainer links exactly one: the CPU emulation (runtime/emu/Exec.cpp) or the
// CUDA backend (runtime/cuda/). Nothing here allocates after construction.
//
// The CPU emulation is adversarial by design (design.md, "Testing without a
// GPU"): the arena is a host buffer of exactly the planned size; released
// bytes are poisoned with NaN; a copy-out reads its source only when an event
// covering it is waited on (or the round ends), and a copy-in's destination
// holds NaN until then. A plan missing a wait computes wrong numbers.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_EXEC_H
#define MEMFIT_RUNTIME_EXEC_H

#include "runtime/Comm.h"
#include "runtime/ConvCheck.h"
#include "runtime/IterationGraph.h"
#include "runtime/Kernels.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace memfit::rt {

enum StreamId : int { Compute = 0, CopyOut = 1, CopyIn = 2 };

/// torch.optim.SGD, Adam or AdamW; Adam's moments are the momentum buffer
/// (exp_avg) and the second-moment buffer (exp_avg_sq).
enum class Optimizer : uint8_t { SGD, Adam, AdamW };

/// The arithmetic the program was planned for (compiler/ir/TaskGraph.h's
/// Precision): FP32; TF32 (fp32 storage, convolutions and matrix products
/// on TF32 tensor cores); BF16 and FP16 (activations, their gradients and
/// what the backward pass saves stored in 16 bits, fp32 master weights and
/// optimizer state, 16-bit working copies of the weights tensor-core
/// operators read; FP16 adds dynamic loss scaling).
enum class Precision : uint8_t { FP32, TF32, BF16, FP16 };
inline bool stores16Bit(Precision p) {
  return p == Precision::BF16 || p == Precision::FP16;
}
/// Bytes of one element of a weight's working copy: 16-bit programs round
/// theirs; fp32 and tf32 programs have one only where a weight homed on the
/// host keeps its value on the device (ZeRO-Offload's layout), in f32, and
/// then the master at home is the copy there unless it is on NVMe.
inline int64_t workingCopyBytes(Precision p) { return stores16Bit(p) ? 2 : 4; }

/// What a trainer's program declares about itself; the generated code
/// fills it as a constant.
struct ProgramInfo {
  const char *modelName;
  int64_t batch, subBatch, numSubBatches;
  int64_t arenaBytes;
  int32_t numEvents;
  int64_t inputPerSample; // floats per sample of the data input
  int64_t labelPerSample; // int32 labels: 1; mse: floats per sample
  bool mseLoss;
  int64_t classes;      // cross-entropy: number of classes
  bool hasMomentum;     // momentum buffers were planned
  int32_t numWeights;   // resident tensors (weights and BN running stats)
  int32_t numHostSlots; // pinned host buffers, one per offloaded block
  // Cross-entropy over classes on an inner axis: [outer, classes, inner]
  // per sample, one label per outer x inner position.
  int64_t lossOuter = 1, lossInner = 1;
  /// The data input holds int32 token ids in [0, inputVocab) (int64 or
  /// int32 .npy files), not floats.
  bool intInput = false;
  int64_t inputVocab = 0;
  Optimizer optimizer = Optimizer::SGD;
  /// The round works on the batch in this many chunks of subBatch samples
  /// (Exec::setChunk), numSubBatches being 1.
  int32_t chunks = 1;
  /// Data parallelism: this many ranks each run the program on their
  /// slice of the global batch (batch is the rank's); shard as
  /// TaskGraph.h's DataParallel.
  int32_t ranks = 1;
  int32_t shard = 0;
  Precision precision = Precision::FP32;
  /// The plan clips gradients to this global norm before every update
  /// (memfit's --clip-grad-norm; 0: it does not, and no update waits for
  /// a norm). The trainer's --clip-grad-norm changes the value.
  float clipGradNorm = 0;
  /// Cross-entropy: labels equal to this count for nothing (torch's
  /// ignore_index; memfit's --ignore-index).
  int32_t ignoreIndex = -100;
  /// The device budget the plan was made for, and the part of it the
  /// libraries keep (cuDNN's and cuBLAS's handles, and cuBLAS's workspace
  /// of blasWorkspaceBytes, allocated once at start-up). The CUDA context
  /// is not in the budget (docs/memory.md).
  int64_t budgetBytes = 0;
  int64_t libraryReserveBytes = 0;
  int64_t blasWorkspaceBytes = 0;
  /// Where the plan keeps optimizer state on NVMe (memfit's --nvme DIR);
  /// the trainer's --nvme overrides it. Null when nothing lives there.
  const char *nvmeDir = nullptr;
  /// Pinned host bytes of the pool that homed gradients stream through
  /// (WeightInfo::gradPoolOffset); 0 when each has its own buffer.
  int64_t gradPoolBytes = 0;
  /// Device bytes a working copy rounded from its master
  /// (WeightInfo::copyFromMaster) is staged in, piece by piece, before it
  /// is rounded into the arena; 0 when none is.
  int64_t copyStagingBytes = 0;
  /// The evaluation program (Program::evalRound, memfit's forward-only
  /// plan of a batch of `batch` samples in the same arena): its sub-batch
  /// and sub-batches per batch; 0 when the trainer has none, evalWhy then
  /// saying why.
  int64_t evalSubBatch = 0, evalNumSubBatches = 0;
  const char *evalWhy = nullptr;
};

enum class Init : uint8_t { FromModel, HeNormal, GlorotUniform, Zeros, Ones };

/// Where a weight's tensors (master, working copy, gradient, optimizer
/// state) live between rounds: resident on the device, or in host memory
/// (pinned on CUDA), copied into the arena where the plan reads them and
/// updated by the host's cores (docs/passes/tiers.md).
enum class Home : uint8_t { Gpu, Host };

/// Which tensor of a weight homed on the host a copy moves between its
/// home and the arena. The optimizer state never enters the device.
enum class HomeTensor : uint8_t { Weight, WorkingCopy, Grad };

struct WeightInfo {
  const char *onnxName; // the weight's name in the model's graph
  const char *dataName; // initializer with its starting values (null: same)
  const float *data;    // starting values compiled in (constants), or null
  int64_t count;        // floats
  int64_t fanIn, fanOut;
  Init init;
  bool trainable; // false: BatchNorm running statistics, frozen weights
  /// A 16-bit working copy is read by tensor-core operators (weightCopy)
  /// and refreshed from the master by every update and weight write.
  bool workingCopy = false;
  /// A parameter the plan keeps fixed (memfit's --freeze, --train-only):
  /// not trainable, and never written after start-up.
  bool frozen = false;
  Home home = Home::Gpu;
  /// Homed on the host with its optimizer state (momentum, second moment)
  /// on NVMe: the host's update streams it from the file and back
  /// (runtime/host/NvmeState.h), and it takes no memory.
  bool stateOnNvme = false;
  /// Homed on the host with its fp32 master on NVMe (16-bit programs,
  /// where every other task reads the working copy): the host's update
  /// streams the master from the file and back and rounds the working copy
  /// at home from it; readWeight and writeWeight go through the file.
  bool masterOnNvme = false;
  /// Homed on the host with its 16-bit working copy kept on the device too
  /// (ZeRO-Offload's layout): the rounds read that copy in place; after the
  /// host's update has rounded the copy at home from the new master, the
  /// trainer uploads it, once per step.
  bool copyOnGpu = false;
  /// Homed on the host with no 16-bit working copy there (MegaTrain's
  /// layout): a copy in of the working copy sends the fp32 master, rounded
  /// on arrival (through ProgramInfo::copyStagingBytes on the device).
  bool copyFromMaster = false;
  /// Homed on the host with its gradient in the gradient pool at this byte
  /// offset (ProgramInfo::gradPoolBytes) instead of a buffer of its own:
  /// the bytes are its from the copy home until its update, started inside
  /// the last round, has finished (Exec::waitHost); -1: its own buffer.
  int64_t gradPoolOffset = -1;
  /// The weight's rank (its shape's length): --no-decay auto exempts those
  /// below 2; -1 where the program does not say.
  int32_t rank = -1;
};
/// Whether weight `w`'s working copy at home is its master itself: an f32
/// copy (fp32 and tf32 programs) whose master is in memory, with no bytes
/// of its own to allocate, count or round.
inline bool copyIsMaster(Precision p, const WeightInfo &w) {
  return !stores16Bit(p) && !w.masterOnNvme;
}

/// torch.cuda.amp.GradScaler's dynamic loss scale (fp16 programs): the
/// loss gradient is multiplied by `scale`; an update whose gradients hold
/// an infinity or NaN once unscaled is skipped and the scale halves;
/// `growthInterval` clean updates in a row double it.
struct LossScaler {
  float scale = 65536.0f;
  float growth = 2.0f, backoff = 0.5f;
  int64_t growthInterval = 2000;
  int64_t cleanSteps = 0; // GradScaler's growth tracker
  /// After an update's gradients were checked: the scale for the next.
  void update(bool foundInf) {
    if (foundInf) {
      scale *= backoff;
      cleanSteps = 0;
    } else if (++cleanSteps == growthInterval) {
      scale *= growth;
      cleanSteps = 0;
    }
  }
};

/// Pinned batch buffers: one filled on the host while the other is read.
constexpr int32_t kBatchBuffers = 2;
/// A third, for the evaluation batches of a program that has an evaluation
/// round (allocated only then): evaluation never waits for the feeder.
constexpr int32_t kEvalBuffer = kBatchBuffers;
constexpr int32_t kHostBatchBuffers = kBatchBuffers + 1;

/// What the evaluation round adds up over the batches it runs (Exec::
/// evalLoss): the loss summed over positions (cross-entropy: one per label;
/// mse: one per element), the positions whose largest logit is the label's
/// (cross-entropy), and the positions.
struct EvalSums {
  double loss = 0, correct = 0, count = 0;
};

struct HostSlot {
  int64_t perSample, fixed; // bytes: perSample * n + fixed
};

class Exec {
public:
  Exec(const ProgramInfo &info, const WeightInfo *weights,
       const HostSlot *slots);
  ~Exec();
  Exec(const Exec &) = delete;
  Exec &operator=(const Exec &) = delete;

  // --- per round state, set by the driver ---
  int64_t n = 0;           // samples in this sub-batch
  int64_t firstSample = 0; // its offset in the batch
  int64_t subBatchIndex = 0;
  uint64_t iteration = 0, seed = 0;
  bool firstIteration = true;
  float lr = 0.01f, momentum = 0.9f, weightDecay = 0;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  /// Adam's step count t of this iteration's update (1 for the first).
  uint64_t step = 1;
  /// Per weight, 1 where the trainer's --no-decay exempts it from weight
  /// decay; empty: every weight decays (torch.optim's default).
  std::vector<uint8_t> decayOff;
  /// The weight decay of weight `id`'s update.
  float weightDecayOf(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < decayOff.size() &&
                   decayOff[static_cast<size_t>(id)]
               ? 0.0f
               : weightDecay;
  }
  /// This update's Adam or AdamW parameters (every backend's one source),
  /// with weight `id`'s decay.
  AdamParams adamParams(int32_t id) const {
    return {lr,
            beta1,
            beta2,
            eps,
            weightDecayOf(id),
            step,
            prog.optimizer == Optimizer::AdamW};
  }
  /// fp16: the loss gradient is multiplied by this (LossScaler::scale).
  float lossScale = 1.0f;
  bool accumulateWeights() const { return subBatchIndex > 0; }
  /// The ranks' collectives (serialComm() for one rank).
  Comm *comm = &serialComm();

  // --- data parallelism (no-ops for one rank) ---
  /// The round's gradients of these weights are final: average them over
  /// the ranks (all-reduce; shard >= 1: reduce-scatter into this rank's
  /// slices, every sub-batch with shard 2).
  void gradientsReady(std::initializer_list<int32_t> weightIds);
  /// Before the update: the gradients' collectives are done.
  void waitCollectives();
  /// After the update, sharded: every rank's slice of the weights to all.
  void gatherWeights();
  /// Sharded: every rank's slice of the optimizer state to all (before a
  /// checkpoint is written from rank 0).
  void gatherOptimizerState();
  /// In a program whose batch is split into chunks inside the round: the
  /// calls that follow work on chunk c's samples.
  void setChunk(int32_t c) {
    firstSample = c * prog.subBatch;
    n = prog.subBatch;
  }

  // --- memory ---
  float *arena(int64_t offset);
  int32_t *arenaInt(int64_t offset);
  /// A 16-bit block of `bytes` bytes at `offset` (bf16 and fp16 programs).
  /// The CPU emulation hands out fp32 values and rounds the block to the
  /// program's 16-bit format once the operation that received it is done,
  /// which is where a GPU rounds as it stores.
  float *arena16(int64_t offset, int64_t bytes);
  /// The 16-bit working copy of weight `id` (WeightInfo::workingCopy).
  float *weightCopy(int32_t id);
  float *weight(int32_t id);
  float *grad(int32_t id);
  float *momentumBuf(int32_t id);
  float *secondMomentBuf(int32_t id);
  /// The batch's inputs and labels on the host (pinned on CUDA), in one
  /// of two buffers: the trainer fills one while an iteration reads the
  /// other (kBatchBuffers).
  float *hostInput(int32_t buffer = 0);
  void *hostLabels(int32_t buffer = 0);
  /// Host-side preparation of a filled buffer, on the thread that filled
  /// it (CUDA: a 16-bit program's inputs converted for the copy-in).
  void prepareBatch(int32_t buffer);
  /// The buffer the next iteration's loadInput and loadLabels read.
  void useBatch(int32_t buffer);
  /// After an iteration's last issue: the current buffer is free once
  /// the device has run what was issued so far.
  void batchIssued();
  /// Blocks the calling (filling) thread until no issued copy reads
  /// `buffer` any more.
  void waitBatchFree(int32_t buffer);
  /// Cross-entropy: the positions of this iteration's batch that count
  /// (labels other than ProgramInfo::ignoreIndex), over every rank's
  /// batch and divided by the ranks, which average the gradients; the
  /// loss is the sum over them by this. The trainer sets it before
  /// beginIteration (labelCount); 0 reads as every position counting.
  double lossCount = 0;
  /// lossCount, or every position of the batch where it is 0.
  double lossPositions() const {
    return lossCount > 0 ? lossCount
                         : double(prog.batch * prog.lossOuter * prog.lossInner);
  }
  float *lossValue(); // the resident loss, summed over the sub-batches
  float readLoss();   // its value once the iteration is done

  // --- streams ---
  void copyOut(int64_t offset, int32_t slot);
  void copyIn(int32_t slot, int64_t offset);
  /// A weight homed on the host (WeightInfo::home): tensor `what` of
  /// weight `weightId` between its host home and the arena at `offset`,
  /// on the copy streams like copyIn and copyOut. A gradient copied in
  /// holds the sum of the batch's earlier sub-batches.
  void copyInHome(HomeTensor what, int32_t weightId, int64_t offset);
  void copyOutHome(int64_t offset, HomeTensor what, int32_t weightId);
  void loadInput(int64_t offset);  // copy-in of this sub-batch's inputs
  void loadLabels(int64_t offset); // copy-in of this sub-batch's labels
  void record(StreamId s, int32_t event);
  void wait(StreamId s, int32_t event);
  /// The bytes' last use in this round was issued on stream s.
  void release(StreamId s, int64_t offset, int64_t bytes);
  void endRound(); // all streams joined (the plan ends every round so)
  void synchronize();

  // --- operations on the compute stream (task names for diagnostics) ---
  void setTask(const char *name);
  const char *taskName() const { return task; }
  void convForward(const ConvParams &p, int32_t algo, const float *x,
                   const float *w, const float *b, float *y, int64_t wsOffset,
                   int64_t wsBytes);
  void convBackwardData(const ConvParams &p, int32_t algo, const float *w,
                        const float *dy, float *dx, bool acc, int64_t wsOffset,
                        int64_t wsBytes);
  void convBackwardFilter(const ConvParams &p, int32_t algo, const float *x,
                          const float *dy, float *dw, float *db, bool acc,
                          int64_t wsOffset, int64_t wsBytes);
  /// A transposed convolution's backward-data: the forward pass of `p`,
  /// the convolution it transposes, added to dx when `acc`.
  void convTransposeBackwardData(const ConvParams &p, const float *dy,
                                 const float *w, float *dx, bool acc);
  void poolForward(const PoolParams &p, const float *x, float *y);
  void poolBackward(const PoolParams &p, const float *x, const float *y,
                    const float *dy, float *dx, bool acc);
  void gapForward(int64_t c, int64_t spatial, const float *x, float *y);
  void gapBackward(int64_t c, int64_t spatial, const float *dy, float *dx,
                   bool acc);
  void actForward(const ActParams &p, int64_t perSample, const float *x,
                  float *y);
  /// `src` is y or x, as activationGradReads(p.kind) says.
  void actBackward(const ActParams &p, int64_t perSample, const float *src,
                   const float *dy, float *dx, bool acc);
  void bnForward(const BatchNormParams &p, const float *x, const float *scale,
                 const float *bias, float *runMean, float *runVar, float *y,
                 float *saved, bool updateRunning);
  /// A recomputed BatchNorm forward: normalizes with the saved statistics
  /// and leaves the running statistics alone.
  void bnApply(const BatchNormParams &p, const float *x, const float *scale,
               const float *bias, const float *saved, float *y);
  /// Evaluation: normalizes with the running statistics, as PyTorch's
  /// BatchNorm in eval mode.
  void bnInference(const BatchNormParams &p, const float *x, const float *scale,
                   const float *bias, const float *runMean, const float *runVar,
                   float *y);
  /// With a fused ReLU (p.relu) the backward tasks also take the bias
  /// (and the weight task the scale): dy is masked where the normalized
  /// value, recomputed from x, is not positive.
  void bnBackwardData(const BatchNormParams &p, const float *x,
                      const float *scale, const float *saved, const float *dy,
                      float *dx, bool acc, const float *bias = nullptr);
  void bnBackwardWeight(const BatchNormParams &p, const float *x,
                        const float *saved, const float *dy, float *dscale,
                        float *dbias, bool acc, const float *scale = nullptr,
                        const float *bias = nullptr);
  /// A batch split into chunks (runtime/Kernels.h): statistics of this
  /// chunk combined into `stats`, the batch's finalized, and BP-data from
  /// the batch's sums (the weight gradients).
  void bnStatistics(const BatchNormParams &p, const float *x, float *stats,
                    bool acc);
  void bnFinalize(const BatchNormParams &p, float *stats, float *runMean,
                  float *runVar);
  void bnBackwardDataBatch(const BatchNormParams &p, const float *x,
                           const float *scale, const float *saved,
                           const float *dscale, const float *dbias,
                           const float *dy, float *dx, bool acc,
                           const float *bias = nullptr);
  void lrnForward(const LRNParams &p, const float *x, float *y);
  void lrnBackward(const LRNParams &p, const float *x, const float *y,
                   const float *dy, float *dx, bool acc);
  void dropoutForward(const DropoutParams &p, uint64_t taskKey, const float *x,
                      float *y);
  void dropoutBackward(const DropoutParams &p, uint64_t taskKey,
                       const float *dy, float *dx, bool acc);
  void gemmForward(const GemmParams &p, const float *x, const float *w,
                   const float *b, float *y);
  void gemmBackwardData(const GemmParams &p, const float *w, const float *dy,
                        float *dx, bool acc);
  void gemmBackwardWeight(const GemmParams &p, const float *x, const float *dy,
                          float *dw, float *db, bool acc);
  void binaryForward(const BinaryParams &p, const float *a, const float *b,
                     float *y);
  void binaryBackward(const BinaryParams &p, const float *a, const float *b,
                      const float *dy, float *da, float *db, bool accA,
                      bool accB);
  /// `parts` elements of each input per row, `rows` rows per sample (the
  /// axes before the concatenated one).
  void concatForward(int64_t numInputs, const int64_t *parts,
                     const float *const *inputs, float *y, int64_t rows = 1);
  void concatBackward(int64_t numInputs, const int64_t *parts, const float *dy,
                      float *const *dInputs, const bool *acc, int64_t rows = 1);
  void padForward(const PadParams &p, const float *x, float *y);
  void padBackward(const PadParams &p, const float *dy, float *dx, bool acc);
  /// Over the last axis of `rows` rows of `features` per sample.
  void softmaxForward(int64_t features, bool log, const float *x, float *y,
                      int64_t rows = 1);
  void softmaxBackward(int64_t features, bool log, const float *y,
                       const float *dy, float *dx, bool acc, int64_t rows = 1);
  void transposeForward(const TransposeParams &p, const float *x, float *y);
  void transposeBackward(const TransposeParams &p, const float *dy, float *dx,
                         bool acc);
  void sliceForward(const SliceParams &p, const float *x, float *y);
  void expandForward(const ExpandParams &p, const float *x, float *y);
  void expandBackward(const ExpandParams &p, const float *dy, float *dx,
                      bool acc);
  void sliceBackward(const SliceParams &p, const float *dy, float *dx,
                     bool acc);
  /// Fused attention; `lse` is the task's saved statistics block.
  void attentionForward(const AttentionParams &p, uint64_t taskKey,
                        const float *q, const float *k, const float *v,
                        const float *mask, float *o, float *lse);
  void attentionBackward(const AttentionParams &p, uint64_t taskKey,
                         const float *q, const float *k, const float *v,
                         const float *mask, const float *o, const float *lse,
                         const float *dO, float *dq, float *dk, float *dv,
                         bool accQ, bool accK, bool accV);
  void batchMatMulForward(const BatchMatMulParams &p, const float *a,
                          const float *b, float *y);
  void batchMatMulBackward(const BatchMatMulParams &p, const float *a,
                           const float *b, const float *dy, float *da,
                           float *db, bool accA, bool accB);
  void layerNormForward(const LayerNormParams &p, const float *x,
                        const float *scale, const float *bias, float *y);
  void layerNormBackwardData(const LayerNormParams &p, const float *x,
                             const float *scale, const float *dy, float *dx,
                             bool acc);
  void layerNormBackwardWeight(const LayerNormParams &p, const float *x,
                               const float *dy, float *dscale, float *dbias,
                               bool acc);
  void resizeForward(const ResizeParams &p, const float *x, float *y);
  void resizeBackward(const ResizeParams &p, const float *dy, float *dx,
                      bool acc);
  void whereForward(const WhereParams &p, const float *mask, const float *x,
                    float *y);
  void whereBackward(const WhereParams &p, const float *mask, const float *dy,
                     float *dx, bool acc);
  /// An integer program over the data input's token ids (index arithmetic
  /// such as position ids); exactly one of yInt and yFloat is non-null.
  void intProgram(const IntProgramParams &p, const int32_t *ids, int32_t *yInt,
                  float *yFloat);
  /// `ids` (int32, checked against the vocabulary) or `fixedIds` (the same
  /// for every sample), the other null.
  void embeddingForward(const EmbeddingParams &p, const int32_t *ids,
                        const float *fixedIds, const float *table, float *y);
  void embeddingBackward(const EmbeddingParams &p, const int32_t *ids,
                         const float *fixedIds, const float *dy, float *dtable,
                         bool acc);
  void copy(int64_t perSample, const float *x, float *y); // a view made real
  void accumulateInto(int64_t perSample, const float *x, float *y);
  void loss(const float *logits, const void *labels, float *loss,
            float *dlogits);
  /// The evaluation round's loss: adds the loss, correct predictions and
  /// positions of this sub-batch's samples before evalValidEnd (a last
  /// batch padded to the program's size counts its real samples only) to
  /// the evaluation sums, in double, in an order fixed per backend
  /// (deterministic).
  void evalLoss(const float *logits, const void *labels);
  /// The loss computed from the head's input `x` and weight `w` (the
  /// head's GemmParams), `chunkRows` rows at a time through `scratch`
  /// (chunkRows x p.m logits in the activations' type): each chunk's
  /// logits, their cross-entropy as `loss` computes it, and its gradient
  /// multiplied into dx (rows of the chunk; added when accX) and dw (added
  /// after the first chunk, or throughout when accW). The logits are never
  /// stored whole (docs/user-guide.md, "The fused head").
  void headLoss(const GemmParams &p, int64_t chunkRows, const float *x,
                const float *w, const void *labels, float *scratch, float *loss,
                float *dx, bool accX, float *dw, bool accW);
  /// evalLoss of the same head, chunk by chunk.
  void evalHeadLoss(const GemmParams &p, int64_t chunkRows, const float *x,
                    const float *w, const void *labels, float *scratch);
  int64_t evalValidEnd = 0;
  void resetEvalSums();
  /// The sums since resetEvalSums (waits for the device).
  EvalSums readEvalSums();
  void sgd(int32_t weightId);
  void adam(int32_t weightId); // Adam or AdamW, as the program says
  /// The updates of several weights that the plan runs back to back: the
  /// same per-element steps as sgd/adam of each id in turn, issued on
  /// CUDA as one multi-tensor launch per run of weights adjacent in the
  /// start-up chunk table (docs/cuda-backend.md, "Multi-tensor updates").
  void sgdGroup(std::initializer_list<int32_t> weightIds);
  void adamGroup(std::initializer_list<int32_t> weightIds);
  /// The update of weight `weightId`, homed on the host, by the host's
  /// cores on its host memory (runtime/host's HostOptimizer: the update
  /// sgd/adam compute, bit for bit), once this iteration's copy-outs of
  /// its gradient are complete; a working copy is refreshed on the host.
  /// It runs beside the device's updates (CUDA: after the update's issue,
  /// outside any graph) and is done when joinHost returns.
  void hostUpdate(int32_t weightId);
  /// In the round, after the copy of weight `weightId`'s final gradient
  /// home on stream s: in the iteration's last round, once that stream's
  /// work so far is done, its host update starts (as hostUpdate's), beside
  /// the rest of the round; joinHost waits for it. Earlier rounds pass.
  void hostReady(StreamId s, int32_t weightId);
  /// In the last round, on copy stream s after weight `weightId`'s
  /// hostReady: the stream's later work waits until that host update has
  /// finished, so a gradient copied home after it may take the bytes its
  /// gradient had in the gradient pool. Earlier rounds pass.
  void waitHost(StreamId s, int32_t weightId);
  /// The update section's end: the host updates are done before anything
  /// reads their weights again.
  void joinHost();
  /// Before the update of a program with a loss scale: divides every
  /// gradient by lossScale and says whether all of them are finite (on
  /// every rank); the update is skipped when not, as GradScaler.step does.
  bool unscaleGradients();
  /// Before the update of a program that clips (after unscaleGradients):
  /// the global L2 norm of every gradient, as torch.nn.utils.
  /// clip_grad_norm_ computes it (each tensor's norm, then the norm of
  /// those; over every rank's slice when sharded), and every gradient
  /// multiplied by min(1, maxNorm / (norm + 1e-6)) in fp32. Returns the
  /// norm before clipping.
  float clipGradients(float maxNorm);

  // --- iteration graphs (docs/cuda-backend.md, "Iteration graphs") ---
  /// Issues fn(*this): round `part` (the sub-batch index) or, part -1, the
  /// update, with n, firstSample and subBatchIndex already set. The CUDA
  /// backend runs a part's first issue eagerly (cuDNN's algorithm checks,
  /// descriptors, lazy module loading happen there), captures the next
  /// one into a CUDA graph per part and batch buffer, and replays that
  /// after; the emulation always runs it eagerly, which issues the same
  /// operations in the same order.
  void issue(int32_t part, void (*fn)(Exec &));
  /// Before an iteration's first issue: iteration, step, firstIteration
  /// and lossScale as they are now become what the iteration's operations
  /// read (on CUDA, a small block of device memory a replayed graph reads).
  void beginIteration();
  /// Records what is issued into this graph while set (the trainer's
  /// --dump-graph; parts are opened and closed by the trainer).
  IterationGraph *graph = nullptr;
  /// Why issue() runs eagerly on this backend ("" when it captures).
  std::string eagerReason() const;

  // --- driver ---
  const ProgramInfo &info() const { return prog; }
  const std::vector<WeightInfo> &weightInfo() const { return wInfo; }
  /// Host copies of weights (for init, save and checkpoints); a weight
  /// homed on the host is read and written in place there.
  void readWeight(int32_t id, float *out);
  void writeWeight(int32_t id, const float *in);
  void readMomentum(int32_t id, float *out);
  void writeMomentum(int32_t id, const float *in);
  void readSecondMoment(int32_t id, float *out);
  void writeSecondMoment(int32_t id, const float *in);
  /// Opens the NVMe tier's file in `dir` (every weight's state there
  /// zero) when the program keeps optimizer state on NVMe, before the
  /// weights are written; a clear error and exit where it cannot.
  void openNvme(const std::string &dir);
  /// Bytes the trainer holds on the device (arena + resident); weights
  /// homed on the host are not among them.
  int64_t deviceBytes() const;
  /// Host memory (pinned on CUDA) the weights homed there take: their
  /// masters, working copies, gradients and optimizer state.
  int64_t hostHomeBytes() const;
  /// The NVMe tier's file: the optimizer state homed there (0 when none,
  /// or before openNvme).
  int64_t nvmeHomeBytes() const;
  /// Device memory actually in use for this trainer, as the device reports
  /// it: on CUDA, total - free (cudaMemGetInfo) now, minus the same taken
  /// right after the CUDA context was created, so it counts the arena, the
  /// resident tensors, allocation rounding and the cuDNN/cuBLAS handles,
  /// but not the context itself. Nothing is freed before the trainer ends,
  /// so at the end it is the peak. The emulation reports deviceBytes().
  int64_t measuredDeviceBytes() const;
  /// Device bytes in use once the CUDA context existed, before anything
  /// of the trainer's (the context, and whatever other processes hold):
  /// not in the budget. 0 in the emulation.
  int64_t contextBytes() const;
  /// What cuDNN's and cuBLAS's handles and cuBLAS's workspace took,
  /// measured right after they were made (ProgramInfo::libraryReserveBytes
  /// is what the plan set aside for them). The emulation takes the reserve,
  /// or MEMFIT_EMU_LIBRARY_BYTES when set (to test the report).
  int64_t measuredLibraryBytes() const;
  /// measuredDeviceBytes() at the end of construction, once every
  /// allocation was made and before the first iteration: against the
  /// libraries and deviceBytes() it shows allocation rounding, and the
  /// peak against it what the first iterations added (kernel images the
  /// libraries load on first use, graphs). The emulation's is the peak.
  int64_t measuredSetupBytes() const;
  /// Records measuredDeviceBytes() when it is the highest so far; called
  /// where the trainer already waits for the device, never inside an
  /// iteration.
  void sampleDeviceMemory();
  /// The highest sample (at least the libraries' bytes): what the budget
  /// bounds. The emulation's is measuredLibraryBytes() + deviceBytes().
  int64_t peakDeviceBytes() const;
  /// Reports a failure with the current task's name and exits.
  [[noreturn]] void fatal(const std::string &what) const;
  /// Before the first iteration: settles the algorithm every planned
  /// convolution runs at every sub-batch size (runtime/ConvCheck.h); with
  /// `tune`, the fastest cuDNN measures within the planned workspace, and
  /// cuDNN's graph-API plans as `graph` says. The CPU emulation runs every
  /// algorithm and checks nothing.
  ConvCheckResult checkConvolutions(const ConvTask *tasks, int32_t count,
                                    bool tune, ConvGraphUse graph);
  /// Convolution calls since construction that ran another algorithm than
  /// the one they named (none settled by checkConvolutions).
  int64_t convAlgoChanges() const;

  struct Impl;

private:
  ProgramInfo prog;
  std::vector<WeightInfo> wInfo;
  std::vector<HostSlot> slotInfo;
  const char *task = "";
  std::unique_ptr<Impl> impl;
};

/// A generated program: one round over a sub-batch, and the update.
struct Program {
  ProgramInfo info;
  const char *modelPath; // default for --model: the copy beside the sources
  const WeightInfo *weights;
  const HostSlot *slots;
  void (*round)(Exec &);
  void (*update)(Exec &);
  /// One sub-batch of the evaluation program (ProgramInfo::evalSubBatch),
  /// or null: the forward pass and Exec::evalLoss.
  void (*evalRound)(Exec &) = nullptr;
  /// The ranks' collectives: mpiComm for a data-parallel program.
  Comm &(*comm)() = serialComm;
  /// Every convolution call of the plan, checked against cuDNN before the
  /// first iteration.
  const ConvTask *convs = nullptr;
  int32_t numConvs = 0;
};

/// The calls in its scope run on one sample: an op on values without a
/// batch (a computation on weights, compiler/ir/Graph.h) is the same at
/// every sub-batch size, and its kernels see one leading sample.
class OneSample {
public:
  explicit OneSample(Exec &x) : x(x), n(x.n), first(x.firstSample) {
    x.n = 1;
    // A value without a batch is sample 0 in every sub-batch: its dropout
    // mask is the same whichever sub-batch computes or recomputes it.
    x.firstSample = 0;
  }
  ~OneSample() {
    x.n = n;
    x.firstSample = first;
  }
  OneSample(const OneSample &) = delete;
  OneSample &operator=(const OneSample &) = delete;

private:
  Exec &x;
  int64_t n, first;
};

/// The trainer's main: flags, data, weights, the iteration loop, progress,
/// checkpoints and --save. Returns the process exit code.
int trainerMain(int argc, char **argv, const Program &program);

} // namespace memfit::rt

#endif
