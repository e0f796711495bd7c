//===- Graph.h - Forward graph IR -------------------------------*- C++ -*-===//
//
// The forward graph of a model as the importer leaves it: operators and values
// addressed by dense integer ids, operators in a topological order, and a
// batch dimension that is symbolic. Every batched value carries the batch on
// axis 0; `dims[0]` holds the batch size the graph was imported with, and
// sizes are expressed as `bytesPerSample() * b + fixedBytes()` bytes so
// passes can re-evaluate them at any sub-batch `b`.
//
// Nothing here knows about ONNX protobufs: the importer translates into this
// IR and later stages read only this IR.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_GRAPH_H
#define MEMFIT_COMPILER_IR_GRAPH_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memfit {

using ValueId = int32_t;
using OpId = int32_t;
constexpr int32_t kNoId = -1;

/// Element types. BF16 and F16 exist only as storage chosen by a plan's
/// precision (TaskGraph::precision); the importer reads F32 and integers.
enum class DType : uint8_t { F32, I64, I32, BF16, F16 };
int64_t dtypeBytes(DType t);
/// "f32", "i64", "i32", "bf16", "f16": signatures, plan.json, reports.
std::string_view dtypeName(DType t);

/// What a value is for. Weights are trainable parameters; Input is the data
/// input of the model; Activation is any value computed by an op.
enum class ValueKind : uint8_t { Input, Weight, Activation };

/// How the trainer initializes a weight that the model declares without data.
enum class WeightInit : uint8_t {
  FromData,
  HeNormal,
  GlorotUniform,
  Zeros,
  Ones
};

struct Value {
  std::string name; // as in the ONNX file (untrusted: escape before emitting)
  ValueKind kind = ValueKind::Activation;
  DType dtype = DType::F32;
  std::vector<int64_t> dims; // dims[batchAxis] holds the batch when batched
  bool batched = false;
  /// Where the batch lies: dims[batchAxis] = batchOuter * batch *
  /// batchInner. Almost every value has it on axis 0 alone (canonical); the
  /// inside of an attention layer written sequence-first (torch's
  /// nn.MultiheadAttention: [T, N, E], [T, N * heads, d], [T * N, E]) does
  /// not. Sizes are linear in the batch either way.
  int32_t batchAxis = 0;
  int64_t batchOuter = 1, batchInner = 1;
  bool canonical() const {
    return !batched || (batchAxis == 0 && batchOuter == 1 && batchInner == 1);
  }
  OpId producer = kNoId;
  std::vector<OpId> consumers; // in op order; an op appears once per use
  WeightInit init = WeightInit::FromData;
  /// False for weights that are state rather than parameters (BatchNorm
  /// running mean and variance): resident, updated by the forward op, no
  /// gradient.
  bool trainable = true;
  std::vector<float> data; // initializer contents, empty when declared only
  /// The initializer that holds this weight's starting values, when it is
  /// not the weight's own name (an Identity of a shared initializer, as
  /// PyTorch's eval-mode export writes); empty otherwise.
  std::string dataName;

  int64_t
  elementsPerSample() const; // product of dims[1..] (or all if !batched)
  /// Bytes of this value at batch b: bytesPerSample() * b + fixedBytes().
  int64_t bytesPerSample() const;
  int64_t fixedBytes() const;
  int64_t bytesAt(int64_t b) const {
    return bytesPerSample() * b + fixedBytes();
  }
};

enum class OpKind : uint8_t {
  Conv,
  Relu,
  LeakyRelu,
  Sigmoid,
  Tanh,
  Clip,
  MaxPool,
  AveragePool,
  GlobalAveragePool, // also ReduceMean over all spatial axes
  BatchNorm,
  LRN,
  Dropout,
  Gemm,
  MatMul,
  Add,
  Sub,
  Mul,
  Sum,
  Concat,
  Flatten,
  Reshape,
  Pad,
  Softmax,
  LogSoftmax,
  // Operators of today's models (transformers, modern CNNs).
  Sqrt,
  Erf,
  HardSigmoid,
  HardSwish,
  Pow,
  Gelu,
  Div,
  Transpose,
  Slice,
  BatchMatMul,
  LayerNorm,
  Where,
  Embedding,
  Resize,
  ConvTranspose,
  Neg,
  Expand,
  NanTo,
  Attention,
  Softplus,
  Mish,
  Celu,
  LogSigmoid,
  Exp,
  Abs,
  Log,
  /// Forward-only index arithmetic on the token ids (position ids from
  /// cumsum(ids != pad)); its steps are OpAttrs::program.
  IntProgram, // the last kind (OpRegistryTest counts them to it)
};
/// Names, rules and costs of each kind: compiler/ops/OpDef.h.

/// The convolution layers of the papers' policies (vDNN's conv-only
/// offload, SuperNeurons' keep-the-convolutions recomputation): costly
/// windowed products, transposed ones included.
inline bool isConvolution(OpKind k) {
  return k == OpKind::Conv || k == OpKind::ConvTranspose;
}

/// The longest integer program the runtime runs (runtime/Kernels.h's
/// kMaxIntInstrs: its registers live in one thread).
constexpr int kMaxIntSteps = 32;

/// One step of an integer program: `kind` is an entry of
/// runtime/kernels/IntOps.def (ops::RtIntOp), a, b and c earlier steps
/// (-1 unused), `imm` the step's constant.
struct IntStep {
  uint8_t kind = 0;
  int8_t a = -1, b = -1, c = -1;
  int64_t imm = 0;
  bool operator==(const IntStep &o) const {
    return kind == o.kind && a == o.a && b == o.b && c == o.c && imm == o.imm;
  }
};

/// Attributes of all supported ops in one plain struct; each op reads the
/// fields that concern it. Spatial vectors have one entry per spatial axis;
/// `pads` holds begin pads then end pads, as ONNX does.
struct OpAttrs {
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t group = 1;
  float alpha = 1.0f, beta = 1.0f; // Gemm; LeakyRelu alpha; LRN alpha/beta
  float bias = 1.0f;               // LRN bias
  int64_t size = 0;                // LRN size
  bool transA = false, transB = false;
  float epsilon = 1e-5f, momentum = 0.9f; // BatchNorm (ONNX momentum)
  float minValue = 0.0f, maxValue = 0.0f; // Clip
  bool countIncludePad = false;           // AveragePool
  bool ceilMode = false;                  // pools
  float ratio = 0.5f;                     // Dropout
  bool wholeSample = false;   // Dropout: one draw per sample (drop path)
  int64_t axis = 1;           // Concat, Flatten, Softmax
  float padValue = 0.0f;      // Pad (constant mode)
  std::vector<int64_t> shape; // Reshape target (batch at axis 0)
  std::vector<int64_t> perm;  // Transpose (axis 0 stays first)
  /// Slice: the window's start on each axis of the input (the batch's 0
  /// included) and its extents (an index selection keeps extent 1 there
  /// and drops the axis from the output's dims).
  std::vector<int64_t> starts, extents;
  /// Slice: every steps[i]-th element along axis i; empty when all are 1.
  std::vector<int64_t> steps;
  bool fillWhere = true;   // Where: fill where the mask is true (else false)
  bool tanhApprox = false; // Gelu
  /// Resize: linear (else nearest) interpolation, ONNX's coordinate
  /// transformation mode and nearest rounding, and the scales of the
  /// spatial axes (out / in unless the model gives them).
  bool linear = false;
  int64_t coordMode = 0, nearestMode = 0;
  std::vector<float> scales;
  /// Attention (fused by compiler/onnx/AttentionFusion.cpp): the score
  /// scale is `alpha`; the mask operand (the fourth, if any) adds
  /// (maskMode 1) or fills `padValue` where (mask != 0) == fillWhere (2);
  /// dropout `ratio` on the probabilities when `attnDropout`; K is read
  /// as [d, S] when `transB`; a row without a finite score gives 0 when
  /// `nanToZero` (else NaN).
  int32_t maskMode = 0;
  /// Attention: the mask is a band, no operand: score (t, s) is masked
  /// where s - t < bandLo or > bandHi, taking `padValue` added (maskMode 1)
  /// or in its place (2).
  bool maskBand = false;
  int64_t bandLo = 0, bandHi = 0;
  bool attnDropout = false;
  /// The id of the Dropout op the Attention absorbed, which keys its mask:
  /// fused and materialized plans drop the same probabilities.
  int64_t dropoutKey = -1;
  bool nanToZero = false;
  /// BatchNorm: the activation fused after it (compiler/onnx/
  /// EpilogueFusion.cpp): a ReLU, or a Clip to [minValue, maxValue]
  /// (ReLU6); the backward masks dY as that activation's backward would.
  std::optional<OpKind> fusedAct;
  /// Embedding: the table row whose lookups add no gradient (--freeze-rows,
  /// nn.Embedding's padding_idx); -1 for none.
  int64_t frozenRow = -1;
  /// IntProgram: its steps (the output is the last one's), the row its
  /// CumSums and ArgMaxes run along (the last axis' extent), whether the
  /// CumSums run from the row's end, and whether the output is one value
  /// per row (a reduction of it) rather than one per position.
  std::vector<IntStep> program;
  int64_t programRow = 0;
  bool programReverse = false, programPerRow = false;
};

struct Graph;

struct Op {
  OpKind kind;
  std::string name;   // ONNX node name (untrusted), or a generated one
  std::string onnxOp; // the ONNX op_type it came from
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  OpAttrs attrs;
  /// Whether the op works on the batch: some output is batched. Ops on
  /// weights and on values computed from them (a sliced position table,
  /// 1 + w) are not: they compute the same at every sub-batch size.
  bool batched(const Graph &g) const;
};

struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Op> ops; // topological order
  ValueId input = kNoId;
  ValueId output = kNoId;
  int64_t batch = 1; // the batch size the dims were resolved with

  ValueId addValue(Value v);
  OpId addOp(Op op); // links producer/consumers
  const Value &value(ValueId id) const { return values[id]; }
  const Op &op(OpId id) const { return ops[id]; }

  std::vector<ValueId> weights() const; // in first-use order
  int64_t weightBytes() const;
  /// Weight inputs of `op` (initializer operands), in operand order.
  std::vector<ValueId> weightInputs(OpId op) const;
  /// Non-weight inputs of `op`, in operand order.
  std::vector<ValueId> dataInputs(OpId op) const;
};

/// How many ops run a fused ReLU and a fused Clip (OpAttrs::fusedAct).
struct FusedActCounts {
  int64_t relu = 0, clip = 0;
};
FusedActCounts countFusedActs(const Graph &g);

/// Checks structural invariants (ids in range, topological order, producer
/// links, batch on axis 0). Returns a description of the first violation.
std::optional<std::string> verifyGraph(const Graph &g);

} // namespace memfit

#endif
