//===- OpDef.h - One definition per operator --------------------*- C++ -*-===//
//
// Everything memfit knows about an operator kind, in one entry that every
// stage consults (as ONNX Runtime's kernel registry or PyTorch's
// derivatives table): its name, the ONNX op types imported as it, its
// autodiff rule (what BP-data and BP-weight read), its cost (the work of
// each task kind), the attributes a measured profile must tell apart, and
// its generated code (the runtime parameter struct and the call of each
// task). Each operator family defines its entries in one file of
// compiler/ops/; Registry.cpp collects them. The stages hold the
// mechanisms (autodiff builds blocks, the cost model applies device rates,
// codegen resolves operands to arena pointers) and never switch over
// OpKind themselves.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_OPS_OPDEF_H
#define MEMFIT_COMPILER_OPS_OPDEF_H

#include "compiler/ir/TaskGraph.h"
#include "compiler/ops/OnnxNode.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memfit {

/// The kind of kernel a task runs, for the device's efficiency at it.
enum class CostClass : uint8_t {
  Gemm,          // Gemm, MatMul (cuBLAS)
  Elementwise,   // activations, Dropout, Add/Sub/Mul/Sum
  Pooling,       // MaxPool, AveragePool, GlobalAveragePool
  Normalization, // BatchNorm, LRN
  Softmax,       // Softmax, LogSoftmax
  Copy,          // Concat, Pad, non-view Flatten/Reshape
  Loss,
  Update, // SGD with momentum
};
constexpr int kNumCostClasses = 8;

/// What autodiff knows of an op's operands when it lists what a backward
/// task reads (every backward task also reads dY, after these).
struct GradOperands {
  const Graph &graph;
  const Op &op;
  /// The Y block of each operand, weights included.
  std::vector<BlockId> inputs = {};
  BlockId output = -1; // Y
  /// The Y block of every output (Y first; attention's log-sum-exp).
  std::vector<BlockId> outputs = {};
  BlockId stats = -1; // saved statistics (savesStatistics)
  /// Operands whose gradient BP-data writes, in operand order.
  std::vector<size_t> gradInputs = {};
  /// Trainable weights BP-weight differentiates, in operand order, once,
  /// and their Y blocks.
  std::vector<ValueId> gradWeights = {};
  std::vector<BlockId> gradWeightBlocks = {};
  bool isWeight(size_t i) const {
    return graph.value(op.inputs[i]).kind == ValueKind::Weight;
  }
};

/// FLOPs and kernel launches of one task (bytes are the cost model's).
struct OpWork {
  double flops = 0;
  int launches = 1;
  /// Multiply-adds per output element of a GEMM-like kernel whose reduction
  /// does not run over the batch (the cost model slows short ones); 0 where
  /// that does not apply.
  double reduction = 0;
};

/// A runtime parameter struct: its type (runtime/Kernels.h) and the
/// initializer codegen writes as a constant; empty for ops without one.
struct OpParamsText {
  std::string type;
  std::string init;
};

/// What an op's generated code may ask of the task it emits: operand
/// expressions resolved by codegen to arena offsets or resident tensors.
class EmitContext {
public:
  EmitContext(const TaskGraph &tg, const Task &task, std::string params)
      : tg(tg), graph(*tg.graph), task(task), op(graph.op(task.op)),
        params(std::move(params)) {}
  virtual ~EmitContext() = default;

  const TaskGraph &tg;
  const Graph &graph;
  const Task &task;
  const Op &op;
  std::string params; // the name of the op's parameter constant
  int32_t algo = 0;
  std::string workspace; // "offset, bytes"
  bool recompute = false;

  /// A value the task reads or writes.
  virtual std::string value(ValueId v) = 0;
  /// A value the kernel may do without: its pointer when the task reads
  /// it, else nullptr.
  virtual std::string valueIfRead(ValueId v) = 0;
  /// The gradient of a value (nullptr when it has none).
  virtual std::string grad(ValueId v) = 0;
  /// Whether the task writes the gradient of `v`.
  virtual bool writesGrad(ValueId v) = 0;
  /// The gradient of `v` when the task writes it, else nullptr.
  std::string gradIfWritten(ValueId v) {
    return writesGrad(v) ? grad(v) : "nullptr";
  }
  /// Whether the write of v's gradient adds to what is there ("true",
  /// "false" or a runtime expression).
  virtual std::string accumulates(ValueId v) = 0;
  /// Any block of the task by id (saved statistics).
  virtual std::string block(BlockId b) = 0;
  /// Whether the task's write of block `b` adds to what is there (an
  /// earlier task of the round wrote it).
  virtual std::string accumulatesBlock(BlockId b) = 0;
};

/// The code of one task: statements without their final ';', or a comment
/// when the task needs no call (a view).
struct EmittedCall {
  std::string code;
  bool comment = false;
};

struct OpDef {
  OpKind kind;
  std::string_view name; // as ONNX spells the operator
  /// ONNX op types the importer turns into this kind.
  std::vector<std::string_view> onnxTypes = {};
  /// Translates one node of those types: attributes, operand roles, the
  /// output dims (its shape rule), errors naming the node.
  llvm::Error (*importOnnx)(OnnxNode &) = nullptr;
  /// Where the op lets the batch of its operands lie (Value::canonical):
  /// alone on axis 0, anywhere (it computes the same on any layout: element
  /// by element, along the last axes, or moving axes), or anywhere that
  /// keeps each sample's elements together (Dropout keys its mask by
  /// sample). The importer refuses any other operand, naming it.
  enum class BatchLayout : uint8_t { AxisZero, Any, SampleMajor };
  BatchLayout batchLayout = BatchLayout::AxisZero;
  /// Whether the op may read `v` (batchLayout).
  bool acceptsLayout(const Value &v) const {
    bool sampleMajor = v.batchAxis == 0 && v.batchOuter == 1;
    return v.canonical() || batchLayout == BatchLayout::Any ||
           (batchLayout == BatchLayout::SampleMajor && sampleMajor);
  }

  // --- autodiff ---
  /// The output shares its input's bytes (no copy, no memory).
  bool isView = false;
  /// Elementwise with a backward that needs only Y and dY: the forward may
  /// overwrite X, and BP-data dY, when nothing else reads them.
  bool mayRunInPlace = false;
  /// The forward saves per-channel statistics for its backward and updates
  /// running statistics (operands 3 and up) in place.
  bool savesStatistics = false;
  /// Appends what BP-data reads besides dY. Null: dY alone.
  void (*dataGradReads)(const GradOperands &, std::vector<BlockId> &) = nullptr;
  /// Appends what BP-weight reads besides dY. Null: dY alone (a bias).
  void (*weightGradReads)(const GradOperands &,
                          std::vector<BlockId> &) = nullptr;
  /// Convolutions, matrix products and fused attention: torch.autocast's
  /// lower-precision list. Under BF16 and FP16 they read the 16-bit working
  /// copies of their weights.
  bool lowerPrecision = false;

  // --- cost ---
  CostClass costClass = CostClass::Elementwise;
  /// The kernel memfit runs for the op computes on tensor cores under TF32,
  /// BF16 and FP16 (cuDNN's and cuBLAS's convolutions and products), so the
  /// cost model prices it at the tensor-core rate. Fused attention does not:
  /// memfit's own kernel reads 16-bit operands but multiplies in fp32.
  bool tensorCores = false;
  /// FLOPs and launches of a task at sub-batch b; `gradsWritten` counts the
  /// blocks it writes. Null for convolution, which the cost model prices
  /// per algorithm.
  OpWork (*work)(const Graph &, const Op &, TaskKind, int gradsWritten,
                 int64_t b) = nullptr;

  // --- profiles ---
  /// Appends the attributes that change the work to a signature.
  void (*signatureAttrs)(llvm::raw_ostream &, const Op &) = nullptr;

  // --- generated code ---
  /// The runtime parameter struct of the op. Null: none.
  llvm::Expected<OpParamsText> (*params)(const Graph &, const Op &) = nullptr;
  /// The call of a forward, BP-data or BP-weight task.
  llvm::Expected<EmittedCall> (*emit)(EmitContext &) = nullptr;

  // --- documentation (docs/operators.md, `memfit operators`) ---
  /// What the importer accepts of `onnxTypes` and what it refuses: the
  /// attribute forms, operand kinds (data, weight, constant), axes and
  /// element types, in sentences read beside the ONNX specification. Kept
  /// here, beside the code that decides it, so the table cannot drift from
  /// the importer unnoticed. Inline Markdown: no '|', no newline.
  std::string_view forms = {};
  /// Which operands its backward differentiates ("the input and both
  /// weights"), or "none" and why; same rules as `forms`.
  std::string_view gradient = {};
};

/// The definition of `kind`; every OpKind has exactly one.
const OpDef &opDef(OpKind kind);

/// Bytes of local memory a thread that the CUDA kernels of fused attention
/// op `op` need: heads wider than 128 keep their backward's dK and dV rows
/// there (runtime/kernels/HostDevice.h, forLanes), 2 KiB, which
/// tests/launch_resources.py holds ptxas to; narrower heads keep them in
/// registers (0). 0 for any other op.
int64_t attentionLocalBytes(const Graph &g, const Op &op);
/// The definition that imports ONNX op type `onnxType`, or null.
const OpDef *opDefForOnnx(llvm::StringRef onnxType);
/// Every definition, in OpKind order.
const std::vector<OpDef> &allOpDefs();

/// The name of a kind (OpDef::name).
std::string_view opKindName(OpKind k);

/// A C++ float literal that reads back to the same float (infinities and
/// NaN included), for generated code.
std::string f32(float v);

/// An error naming the node that the runtime cannot run as given.
llvm::Error unsupportedByRuntime(const Op &op, const llvm::Twine &why);

} // namespace memfit

#endif
