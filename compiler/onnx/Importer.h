//===- Importer.h - Shared state of the ONNX importer -----------*- C++ -*-===//
//
// Not a public interface: the parts of the importer (Load.cpp reads files
// and tensor data, FoldShapes.cpp folds constant shape arithmetic,
// Operands.cpp gives operands their roles, NodeAdapter.cpp lets each
// operator's definition in compiler/ops translate its nodes, Import.cpp
// drives them) share the state declared here.
//
// Every ONNX tensor name the importer has seen is bound to exactly one of:
// a graph value (the data input or an activation), a weight source (an
// initializer or a graph input declared without data, materialized as a
// Weight value on its first use as a weight operand), or a constant whose
// contents are known at import time (Constant nodes, folded shape arithmetic,
// integer initializers). Integer initializers are both weight sources and
// constants; which view applies depends on the operand slot that reads them.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_ONNX_IMPORTER_H
#define MEMFIT_COMPILER_ONNX_IMPORTER_H

#include "compiler/ir/Graph.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OnnxNode.h"
#include "compiler/ops/RuntimeKinds.h"
#include "compiler/ops/SliceArgs.h"
#include "compiler/support/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include "onnx/onnx_pb.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace memfit::onnximport {

namespace pb = ::ONNX_NAMESPACE;

/// The opsets of the default domain the importer reads.
constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 23;
/// The newest opset (and IR version) the ONNX library's checker and shape
/// inference know (ONNX 1.12); newer models are checked by memfit alone.
constexpr int64_t kMaxCheckedOpset = 17;
constexpr int64_t kMaxCheckedIrVersion = 8;

/// Largest constant the folder builds (elements): a causal mask at
/// T = 8192 (Llama 3's context; up to T = 11585), 1 GiB as the folder's
/// 64-bit integers; shape tensors are tiny. A mask the folder kept as a
/// formula of (t, s) rather than its elements would lift the bound.
constexpr int64_t kMaxFoldElements = int64_t(1) << 27;
/// Folded constants of at least this many elements are dropped once their
/// last reader is translated (Importer::run); smaller ones stay.
constexpr int64_t kReleasedConstElements = int64_t(1) << 20;

/// Escapes an untrusted string for a message, without quotes.
std::string escapeName(std::string_view s);
/// "node 'name' (OpType)", or "node #index (OpType)" for an unnamed node.
std::string nodeLabel(const pb::NodeProto &n, int64_t index);
/// "operand I ('name')", for errors about one operand of a node.
std::string operandLabel(const pb::NodeProto &n, int i);
/// Name of an ONNX TensorProto data type ("FLOAT", "INT64", ...).
std::string dataTypeName(int32_t type);
/// Product of `dims`, or nullopt on overflow or a negative entry. The limit
/// keeps byte counts (x8) representable.
std::optional<int64_t> checkedProduct(const std::vector<int64_t> &dims);

/// A tensor whose contents are known at import time. Integer types (INT64,
/// INT32, BOOL) live in `ints`, FLOAT in `floats`. An integer element may be
/// the symbolic batch size (from Shape of a batched value) rather than a
/// number; `batch` marks those.
struct ConstTensor {
  int32_t type = pb::TensorProto::INT64;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<uint8_t> batch; // parallel to ints; empty when none is the batch
  /// An axis stored with extent 1 that stands for the batch: a constant
  /// filled over a shape that holds the batch (ConstantOfShape of [N, T],
  /// an attention mask of ones), the same along it. -1 when none.
  int32_t batchAxis = -1;

  bool isFloat() const { return type == pb::TensorProto::FLOAT; }
  int64_t numel() const;
  bool isBatch(int64_t i) const {
    return !batch.empty() && batch[static_cast<size_t>(i)];
  }
  /// Elements for a message, the batch printed as N.
  std::string str() const;
};

/// An operator found spelled out in several nodes (Fusions.cpp): its kind,
/// operands by name and attributes.
struct Fusion {
  OpKind kind;
  std::string x;
  std::string scale = {}, bias = {};
  float epsilon = 0;       // LayerNorm; NanTo: the fill
  bool tanhApprox = false; // Gelu
  float ratio = 0;         // Dropout
  /// Dropout: the tensor whose shape the random numbers take, one element
  /// per sample (drop path) or x's own (dropout).
  std::string like = {};
};

/// An integer program on the token ids (IntPrograms.cpp): the steps from
/// the ids to a value, its dims (batch on axis 0), and what its CumSums
/// share.
struct IntProgramExpr {
  std::vector<IntStep> steps;
  std::vector<int64_t> dims;
  /// The model cast it to a float type: a float op reads it as floats.
  bool isFloat = false;
  /// The row CumSums and ArgMaxes run along (the last axis' extent of the
  /// ids it walks); 0 without either.
  int64_t row = 0;
  bool reverse = false;
  /// One value per row (an ArgMax, or each sample's index), its dims the
  /// ids' without the row's axis (or with it as 1).
  bool perRow = false;
};
/// Pushes `s` onto `e` unless an equal step is there; its index.
int pushIntStep(IntProgramExpr &e, IntStep s);
/// How many of `steps` are of `kind`.
int countSteps(const std::vector<IntStep> &steps, ops::RtIntOp kind);

/// Data files that external tensors point into, opened once. After
/// resolveExternalData() every external location is the validated absolute
/// path of a file held here.
struct ExternalData {
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> files;
};

//===-- Load.cpp ----------------------------------------------------------===//

/// Parses a serialized ModelProto from a file with a raised size limit.
llvm::Error parseModelFile(const std::string &path, pb::ModelProto &model);
llvm::Error parseModelBytes(const std::string &bytes,
                            const std::string &displayName,
                            pb::ModelProto &model);
/// Validates every external data reference of the top-level graph
/// (initializers and Constant values) against `modelDir` (empty: the model
/// came from memory and may have none), maps the files, and rewrites each
/// location to the file's absolute path so the ONNX checker finds it.
/// Integer tensors are copied into raw_data, since ONNX shape inference
/// reads them for data propagation.
llvm::Error resolveExternalData(pb::ModelProto &model, const std::string &file,
                                const std::string &modelDir, ExternalData &ext);
/// The float32 contents of a tensor (raw_data little-endian, float_data or
/// external data).
llvm::Expected<std::vector<float>> readFloats(const pb::TensorProto &t,
                                              const ExternalData &ext,
                                              const std::string &file);
/// A tensor's contents as a constant (FLOAT, INT64, INT32, BOOL).
llvm::Expected<ConstTensor> readConstant(const pb::TensorProto &t,
                                         const ExternalData &ext,
                                         const std::string &file);

//===-- Sequences.cpp -----------------------------------------------------===//

/// Rewrites each SequenceAt of a constant position in a SplitToSequence
/// with constant split sizes into the Slice it is.
void rewriteSplitSequences(pb::GraphProto &graph);

//===-- Structure.cpp -----------------------------------------------------===//

/// For a model newer than the ONNX library (opset past kMaxCheckedOpset),
/// what its checker would otherwise guarantee: every name defined once,
/// every live node's operands defined before the node, and no attribute
/// unknown to memfit (the opset-17 schema's, and the newer ones memfit
/// reads).
llvm::Error checkNewerModel(const pb::GraphProto &graph,
                            const std::vector<bool> &live,
                            const std::string &file, int64_t opset);

/// Names of the initializers PyTorch's dynamo exporter marks as buffers or
/// lifted constants rather than parameters (value_info metadata
/// pkg.torch.export.graph_signature.InputSpec.kind = BUFFER or
/// CONSTANT_TENSOR, an IR 10 field this ONNX library does not know, read
/// from the unknown fields): constant tables such as a rotary embedding's
/// inv_freq, a literal torch.export lifted (BERT's 1.0 in its mask), which
/// may fold.
std::unordered_set<std::string> torchBuffers(const pb::GraphProto &graph);

//===-- Importer state ----------------------------------------------------===//

/// Where the contents of a weight come from.
struct WeightSource {
  const pb::TensorProto *init = nullptr;        // initializer with data
  const pb::ValueInfoProto *declared = nullptr; // graph input without data
};

class Importer {
public:
  /// `live` marks the nodes whose outputs reach the model output, `needed`
  /// the names they read (see findLive in Import.cpp).
  Importer(pb::ModelProto &model, const std::string &file,
           const ExternalData &ext, const ImportOptions &opts,
           std::vector<bool> live, std::unordered_set<std::string> needed);

  /// Import.cpp: translates the live nodes of the checked model.
  llvm::Expected<Graph> run();
  /// Import.cpp: compares the dims of `g` (from run()) with ONNX shape
  /// inference run on `model` afterwards.
  llvm::Error compareWithInference(const Graph &g);

  //===-- Diagnostics (Operands.cpp) --------------------------------------===//
  /// "node 'name' (OpType)", or "node #k (OpType)" for an unnamed node.
  std::string label(const pb::NodeProto &n) const;
  llvm::Error fail(const pb::NodeProto &n, const llvm::Twine &msg) const;
  llvm::Error failFile(const llvm::Twine &msg) const;
  /// Adds the names --constants matches to `buffers` (ImportOptions).
  llvm::Error markConstants();

  //===-- Operands (Operands.cpp) -----------------------------------------===//
  /// Whether operand `i` is given (present and not the empty name).
  bool hasInput(const pb::NodeProto &n, int i) const;
  bool isActivation(const std::string &name) const;
  /// Whether the activation `name` holds integers (token ids).
  bool isIntegerActivation(const std::string &name) const;
  bool isWeightSource(const std::string &name) const;
  /// A graph input without data other than the data input.
  bool isDeclaredInput(const std::string &name) const;
  /// The error for a graph input without data that is used as data: memfit
  /// takes one data input, and labels are not part of the model.
  llvm::Error extraDataInput(const pb::NodeProto &n,
                             const std::string &name) const;
  /// Known contents: Constant nodes, folds, and initializers.
  bool isConstant(const std::string &name) const;
  /// Operand `i` as an activation (the data input or an op's output).
  llvm::Expected<ValueId> activation(const pb::NodeProto &n, int i);
  /// Operand `i` as a Weight value, created on first use. `declaredInit` is
  /// how the trainer initializes it when the model declares it without
  /// data; `trainable` false marks state such as BatchNorm running
  /// statistics. Float constants become non-trainable weights.
  llvm::Expected<ValueId> weight(const pb::NodeProto &n, int i,
                                 WeightInit declaredInit, bool trainable);
  /// Weight `name` read as a value, created on first use: an op (an
  /// Embedding of the whole weight, without a batch) that copies it into an
  /// unbatched activation, whose gradient it adds into the weight's. Ops on
  /// weights (computesOnWeights) then compute on that value.
  llvm::Expected<ValueId> liftWeight(const pb::NodeProto &n,
                                     const std::string &name);
  /// Operand `i`, a float constant filled over the batch (batchAxis 0),
  /// read as data: EdgeNeXt's Fourier position encoding, built on a mask
  /// per sample and convolved. A non-trainable weight broadcast
  /// over the batch, once per constant.
  llvm::Expected<ValueId> constantOverBatch(const pb::NodeProto &n, int i);
  /// The error for operand `i`, a value computed from weights, read by an
  /// op that does not compute on them: which weights, what memfit supports.
  llvm::Error weightValueError(const pb::NodeProto &n, int i) const;
  /// ConstTensor::batchAxis of constant `name`, -1 for anything else.
  int32_t constBatchAxis(const std::string &name) const {
    auto it = consts.find(name);
    return it == consts.end() ? -1 : it->second->batchAxis;
  }
  /// Operand `i` as a constant known at import time.
  llvm::Expected<const ConstTensor *> constant(const pb::NodeProto &n, int i);
  /// Operand `i` as a float scalar constant (Clip bounds, Dropout ratio, Pad
  /// value).
  llvm::Expected<float> scalarFloat(const pb::NodeProto &n, int i);
  /// Operand `i` as an integer vector constant (pads, axes, shapes) that
  /// holds no batch symbol.
  llvm::Expected<std::vector<int64_t>> intVector(const pb::NodeProto &n, int i);
  /// Dims of any tensor name (activation, weight source or constant);
  /// `batched` tells whether dims[0] is the batch.
  llvm::Expected<std::vector<int64_t>>
  dimsOf(const pb::NodeProto &n, const std::string &name, bool &batched);
  /// Whether output `i` of `n` feeds something that reaches the model
  /// output.
  bool outputUsed(const pb::NodeProto &n, int i) const;

  //===-- Results (Operands.cpp) ------------------------------------------===//
  /// Creates the outputs as activations and the op. compareWithInference()
  /// later checks each output's dims against ONNX shape inference, unless
  /// inference is known to differ (`inferenceDiffers`, or an input whose
  /// inferred shape already differed).
  llvm::Expected<OpId> emit(const pb::NodeProto &n, OpKind kind,
                            std::vector<ValueId> inputs,
                            std::vector<OutSpec> outputs, OpAttrs attrs = {},
                            bool inferenceDiffers = false,
                            std::string opName = {});
  /// Binds `out` to whatever `in` is bound to (Identity and no-op nodes).
  /// A weight source stays a source: its alias becomes a weight of its own.
  void alias(const std::string &out, const std::string &in);
  /// Values that are empty tensors (OnnxNode::markEmpty).
  std::unordered_set<std::string> emptyValues;
  void bindConstant(const std::string &name, ConstTensor t);

  //===-- Attributes (Operands.cpp) ---------------------------------------===//
  const pb::AttributeProto *attr(const pb::NodeProto &n,
                                 llvm::StringRef name) const;
  llvm::Expected<int64_t> attrInt(const pb::NodeProto &n, llvm::StringRef name,
                                  int64_t dflt) const;
  llvm::Expected<float> attrFloat(const pb::NodeProto &n, llvm::StringRef name,
                                  float dflt) const;
  llvm::Expected<std::string> attrString(const pb::NodeProto &n,
                                         llvm::StringRef name,
                                         const std::string &dflt) const;
  /// INTS attribute; nullopt when absent.
  llvm::Expected<std::optional<std::vector<int64_t>>>
  attrInts(const pb::NodeProto &n, llvm::StringRef name) const;

  //===-- Shared state ----------------------------------------------------===//
  pb::ModelProto &model;
  const std::string &file;
  const ExternalData &ext;
  ImportOptions opts;
  int64_t opset = 0;
  /// The batch size the model itself was written with (its fixed first
  /// input dimension), or 0 when that dimension is symbolic.
  int64_t modelBatch = 0;
  /// Read a symbolic batch as the number being planned, as a fixed-batch
  /// export spells it: Shape gives that number, not the batch's symbol.
  /// Set for a second import of a graph that counts up to its batch
  /// (transformers' per-sample masks), which the symbolic folder refuses.
  bool traceBatch = false;
  /// A Range counted up to the symbolic batch (the refusal traceBatch
  /// answers).
  bool countedBatch = false;
  Graph g;

private:
  llvm::Error translate(const pb::NodeProto &n);
  /// Cast of an activation to float32, the identity (NodeAdapter.cpp).
  llvm::Error translateCast(const pb::NodeProto &n);
  /// CastLike of a float value to float32, the identity (NodeAdapter.cpp).
  llvm::Error translateCastLike(const pb::NodeProto &n);
  llvm::Error setUpInputs();
  llvm::Expected<ValueId> materialize(const pb::NodeProto &n,
                                      const std::string &name,
                                      WeightInit declaredInit, bool trainable,
                                      bool intsAsFloats = false);
  /// Whether what node `k` computes ends, through ops that fold, in
  /// booleans or integers only (a causal mask sliced from a float buffer
  /// and compared): its float initializers are then constants, not
  /// parameters.
  bool feedsOnlyMasks(int k, int depth = 0) const;
  /// Fusions.cpp: marks the nodes of patterns that are one operator.
  void findFusions();
  llvm::Error translateFusion(const pb::NodeProto &n, const Fusion &f);
  /// Per node: it is part of a fusion whose last node computes it all.
  std::vector<bool> fusedAway;
  /// By the index of its last node.
  std::unordered_map<int, Fusion> fusions;

public:
  /// Operand `i` as a non-trainable float weight holding a constant of any
  /// element type (a mask, fixed indices).
  llvm::Expected<ValueId> constantWeight(const pb::NodeProto &n, int i);
  /// See OnnxNode::scalarConstant.
  ValueId scalarConstant(float v);
  /// Registers a non-trainable constant value under `name` (not yet
  /// registered), shared by every later lookup of the name.
  ValueId addConstant(const std::string &name, std::vector<int64_t> dims,
                      std::vector<float> data);
  /// See OnnxNode::oneSampleConstant.
  std::optional<ValueId> oneSampleConstant(ValueId w, bool rowsPerSample);
  /// See OnnxNode::expandedConstant.
  ValueId expandedConstant(ValueId w, const std::vector<int64_t> &dims);
  /// Operand `i` as an integer activation (the token ids).
  llvm::Expected<ValueId> indices(const pb::NodeProto &n, int i);
  /// A weight by its own name (the source of a transposed weight).
  llvm::Expected<ValueId> materializeWeight(const pb::NodeProto &n,
                                            const std::string &name,
                                            WeightInit declaredInit,
                                            bool trainable) {
    return materialize(n, name, declaredInit, trainable);
  }
  /// The axis holding the batch of an activation (0 for anything else).
  int64_t batchAxisOf(const std::string &name) const {
    auto it = values.find(name);
    return it == values.end() ? 0 : g.values[it->second].batchAxis;
  }
  bool isIntActivation(const std::string &name) const {
    auto it = values.find(name);
    return it != values.end() && g.values[it->second].dtype != DType::F32;
  }
  //===-- Integer programs on the token ids (IntPrograms.cpp) ------------===//
  /// Whether `name` is the integer data input or a program on it.
  bool isIdsOperand(const std::string &name) const;
  /// Whether `n` is index arithmetic on the token ids: an integer step (or
  /// Cast, or a reshape) whose operands are ids, programs on them and
  /// constants.
  bool computesOnIds(const pb::NodeProto &n) const;
  llvm::Error translateOnIds(const pb::NodeProto &n);
  /// Shape of a program, and Expand of one to its own shape: true when
  /// translated so.
  llvm::Expected<bool> translateProgramShape(const pb::NodeProto &n);
  /// ArgMax along the row of a program: one value per row.
  llvm::Error translateArgMaxOnIds(const pb::NodeProto &n, IntProgramExpr e);
  /// Translates a node that reads programs through their ops' values;
  /// false when the node reads them by their own names (translate goes on).
  llvm::Expected<bool> translateReadingIds(const pb::NodeProto &n);
  /// Programs by the name they define.
  std::unordered_map<std::string, IntProgramExpr> intExprs;
  //===-- One row per sample (RowPick.cpp) ------------------------------===//
  /// Range(0, N, 1) over the batch of token ids [N, T]: each sample's index,
  /// a program read only by a row pick.
  bool countsSamples(const pb::NodeProto &n) const;
  llvm::Error bindSampleIndex(const pb::NodeProto &n);
  /// Gather along axis 0 at a program computed from each sample's index
  /// (arange(N) * T + q): one row per sample of a [N * T, ...] value.
  bool picksRowPerSample(const pb::NodeProto &n) const;
  /// arange(N) as a constant of the fixed-batch reading: each sample's
  /// index, as a program; nullopt for any other constant.
  std::optional<IntProgramExpr>
  sampleIndexConstant(const std::string &name) const;
  llvm::Error translateRowPick(const pb::NodeProto &n);
  /// Row q[n] of each sample's [T, ...] in `rows` ([N, T, ...]): a one-hot
  /// of step `q` of `p` times `rows`, summed over T, as n's output.
  llvm::Error pickRows(const pb::NodeProto &n, const std::string &rows,
                       const IntProgramExpr &p, int q);
  /// Concat of [N, 1] programs along the last axis: GatherND's index
  /// tuples (torch.export's x[arange(N), q]), by name.
  bool pairsSampleIndex(const pb::NodeProto &n) const;
  llvm::Error bindIndexTuple(const pb::NodeProto &n);
  std::unordered_map<std::string, std::vector<IntProgramExpr>> indexTuples;
  bool gathersTuples(const pb::NodeProto &n) const;
  llvm::Error translateTupleGather(const pb::NodeProto &n);

  /// Transpose nodes of a 2-D weight: their output names and the weight's.
  std::unordered_map<std::string, std::string> transposedWeights;

private:
  IntProgramExpr idsExpr(const std::string &name) const;
  llvm::Error bindIntExpr(const pb::NodeProto &n, IntProgramExpr e);
  /// The name of the value holding program `name` (its op emitted on first
  /// use): int32 indices, or floats for a float op.
  llvm::Expected<std::string> idsValue(const pb::NodeProto &n,
                                       const std::string &name, bool asInt);
  /// Nodes that compute on weights, rewritten to read the lifted values
  /// (stable addresses: nodeIndex keys them).
  std::deque<pb::NodeProto> liftedNodes;
  llvm::Error translateOnWeights(const pb::NodeProto &n);
  /// A float initializer that trains (not a buffer torch marks, not one
  /// --constants names).
  bool isParameter(const std::string &name) const {
    auto src = sources.find(name);
    return !buffers.count(name) && src != sources.end() && src->second.init &&
           src->second.init->data_type() == pb::TensorProto::FLOAT;
  }
  /// GatherElements of a constant of one repeated value at indices
  /// computed from the data: that value, filled over the batch.
  llvm::Error translateUniformLookup(const pb::NodeProto &n);
  /// GatherND.cpp: GatherND of a computed value at constant indices,
  /// rewritten as a Gather (after a Reshape merging the indexed axes).
  bool rewritesGatherND(const pb::NodeProto &n) const;
  llvm::Error translateGatherND(const pb::NodeProto &n);
  /// GatherElements of a value computed from weights (or constants) at
  /// constant indices (Funnel's position table), as a lookup of its
  /// flattened elements: Reshape to one column, Gather, Reshape.
  bool rewritesGatherElements(const pb::NodeProto &n) const;
  llvm::Error translateGatherElements(const pb::NodeProto &n);
  /// A node of type `op` from `ins` to `out`, named after `n` with
  /// `suffix`, that translate() may read as part of `n`.
  pb::NodeProto &liftedNode(const pb::NodeProto &n, const std::string &op,
                            std::initializer_list<std::string> ins,
                            const std::string &out, const std::string &suffix);
  bool readsDeclaredWeightAsValue(const pb::NodeProto &n) const;
  /// The forms of weights a node may take (a Linear's W^T, a computation
  /// on parameters, a constant table through a layer, a value expanded over
  /// the batch): true when it translated `n` so.
  llvm::Expected<bool> translateWeightForms(const pb::NodeProto &n);
  /// Expand of a value without a batch over the batch alone: bound to the
  /// value itself (true), which its readers broadcast.
  bool expandsOverBatch(const pb::NodeProto &n);
  /// Per value name, the live nodes that read it.
  std::unordered_map<std::string, std::vector<int>> readers;

  std::unordered_map<const pb::NodeProto *, int> nodeIndex;
  std::unordered_map<std::string, ValueId> values; // activations, data input
  std::unordered_map<std::string, WeightSource> sources;
  std::unordered_map<std::string, ValueId> weights; // materialized
  std::unordered_map<std::string, std::shared_ptr<const ConstTensor>> consts;
  std::unordered_set<std::string> floatConstWeights; // from Constant nodes
  /// Constant weights by a hash of their dims and contents: equal constants
  /// (each layer's copy of one causal mask) are one value, held once.
  std::unordered_map<uint64_t, std::vector<ValueId>> constantsByContent;
  /// Initializers torch marks as buffers (torchBuffers): constants.
  std::unordered_set<std::string> buffers;
  /// Trainable float initializers by a hash of their shape and bytes, in
  /// the order read (ImportNotes::identicalWeights).
  std::map<uint64_t, std::vector<std::string>> weightsByContent;
  std::vector<uint64_t> contentOrder;
  /// Graph inputs without data that some weight operand uses (directly or
  /// through Identity).
  std::unordered_set<const pb::ValueInfoProto *> usedDeclared;
  std::vector<bool> live;                 // per node
  std::unordered_set<std::string> needed; // names live nodes read
  /// Per value: its shape may legitimately differ from ONNX inference.
  std::vector<bool> inferenceDiverged;
  bool batchComparable = false; // inference's axis 0 is our batch
  std::string dataInputName;
};

//===-- Operands.cpp ------------------------------------------------------===//

/// Op types that compute on weights (Importer::liftWeight) and on values
/// computed from them, and the list of them for messages.
bool computesOnWeights(llvm::StringRef opType);
std::string weightValueOps();

//===-- FoldTable.cpp -----------------------------------------------------===//

/// Op types that only ever fold (their operands must be constants).
bool isFoldOnlyOp(llvm::StringRef opType);
/// Op types that fold when their operands are constants (the fold-only
/// ones among them).
bool isFoldableOp(llvm::StringRef opType);
/// Folds `n` into constants bound to its outputs (Split's several). All
/// inputs must be constants, except Shape's, whose dims are known for any
/// input.
llvm::Error foldNode(Importer &im, const pb::NodeProto &n);
/// The op types foldNode handles.
const std::vector<std::string> &foldOpTypes();

//===-- NodeAdapter.cpp ---------------------------------------------------===//

/// Translates `n` through its operator definition (compiler/ops), which
/// sees the node through OnnxNode; false in `found` when no definition
/// takes its op type.
llvm::Error translateThroughRegistry(Importer &im, const pb::NodeProto &n,
                                     bool &found);
/// Slice's operands through the definition the operator reads them with,
/// for the constant folder.
llvm::Expected<SliceArgs> sliceArgsOf(Importer &im, const pb::NodeProto &n);
/// Split's axis and sizes for an input of `dims`, the same way.
llvm::Expected<SplitArgs> splitArgsOf(Importer &im, const pb::NodeProto &n,
                                      const std::vector<int64_t> &dims);

} // namespace memfit::onnximport

#endif
