//===- OnnxNode.h - What an operator's ONNX translation may ask -*- C++ -*-===//
//
// An operator definition translates an ONNX node into Graph ops through
// this interface, so that its ONNX mapping and shape rule live with the
// rest of its definition (compiler/ops) while only compiler/onnx touches
// protobuf: the ONNX frontend implements it over one node. The operand
// accessors enforce operand roles (an activation slot takes only values
// computed from the data input, a weight slot only initializers, declared
// weights or float constants, a constant slot only contents known at
// import time) and every error names the node.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_OPS_ONNXNODE_H
#define MEMFIT_COMPILER_OPS_ONNXNODE_H

#include "compiler/ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memfit {

/// An output a translation creates, with the dims it computed.
struct OutSpec {
  std::string name;
  std::vector<int64_t> dims;
  /// Where the batch lies (Value::batchAxis); -1: as in the first operand
  /// when that has the output's rank and extent there, else axis 0.
  int32_t batchAxis = -1;
  int64_t batchOuter = 1, batchInner = 1;
  /// A value without a batch, whatever the operands: a weight read as a
  /// value (Importer::liftWeight). An op whose operands include such a
  /// value and no batched one has unbatched outputs without saying so.
  bool unbatched = false;
};

/// A 1-D integer constant whose elements may be the symbolic batch (a
/// reshape target built from Shape of a batched value).
struct IntConstant {
  bool isFloat = false;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<bool> batch; // per element: it is the batch, not a number
  std::string text;        // for messages, the batch printed as N
  int64_t numel() const { return static_cast<int64_t>(ints.size()); }
  bool isBatch(int64_t i) const {
    return !batch.empty() && batch[static_cast<size_t>(i)];
  }
  const std::string &str() const { return text; }
};

class OnnxNode {
public:
  virtual ~OnnxNode() = default;

  // --- the node ---
  virtual llvm::StringRef opType() const = 0;
  /// The node's name in the file (untrusted; may be empty).
  virtual const std::string &name() const = 0;
  virtual int numInputs() const = 0;
  virtual int numOutputs() const = 0;
  virtual const std::string &inputName(int i) const = 0;
  virtual const std::string &outputName(int i) const = 0;
  /// The opset of the model's default domain.
  virtual int64_t opset() const = 0;
  /// The batch the model was written with, 0 when symbolic.
  virtual int64_t modelBatch() const = 0;
  /// The graph built so far (dims and names of operands).
  virtual const Graph &graph() const = 0;
  /// An error naming the node.
  virtual llvm::Error fail(const llvm::Twine &msg) const = 0;

  // --- operands ---
  /// Whether operand `i` is given (present and not the empty name).
  virtual bool hasInput(int i) const = 0;
  virtual bool isActivation(const std::string &name) const = 0;
  /// A graph input without data other than the data input.
  virtual bool isDeclaredInput(const std::string &name) const = 0;
  /// The error for a declared input used as data.
  virtual llvm::Error extraDataInput(const std::string &name) const = 0;
  virtual llvm::Expected<ValueId> activation(int i) = 0;
  /// A Weight value; `declaredInit` initializes it when the model declares
  /// it without data; `trainable` false marks state (running statistics).
  virtual llvm::Expected<ValueId> weight(int i, WeightInit declaredInit,
                                         bool trainable) = 0;
  /// Parameter operand `i` read as a value without a batch
  /// (Importer::liftWeight): what the op computes on it trains it, the
  /// gradient summed back into the parameter.
  virtual llvm::Expected<ValueId> weightValue(int i) = 0;
  /// A constant of any element type as a non-trainable float weight (a
  /// mask, fixed indices).
  virtual llvm::Expected<ValueId> constantWeight(int i) = 0;
  /// A non-trainable [1] weight holding `v` (a factor an import
  /// introduces: ReduceSum as a mean times the count), one per value.
  virtual ValueId scalarConstant(float v) = 0;
  /// Constant `w` (non-trainable, with data) repeated numpy style to
  /// `dims` (as many axes), reused when asked twice: a constant whose
  /// broadcast a kernel cannot express made one it can.
  virtual ValueId expandedConstant(ValueId w,
                                   const std::vector<int64_t> &dims) = 0;
  /// Constant `w` as one sample ([1, ...]) when it is written at the
  /// model's fixed batch (dims[0] == modelBatch()) and every sample holds
  /// the same values: the causal mask a fixed-batch torch.export writes
  /// expanded over its batch, or positions written for each sample alike,
  /// which then broadcast at any batch. With `rowsPerSample`, dims[0] may
  /// be any multiple of the batch, each sample's rows outermost (BLOOM's
  /// ALiBi, [N * heads, 1, T]): one sample is then [dims[0] / batch, ...].
  /// nullopt otherwise.
  virtual std::optional<ValueId>
  oneSampleConstant(ValueId w, bool rowsPerSample = false) = 0;
  /// Integer indices computed from the data input (token ids).
  virtual llvm::Expected<ValueId> indices(int i) = 0;
  virtual bool isIndices(int i) const = 0;
  /// Operand `i` is Transpose(W) of a 2-D weight W (PyTorch's Linear on
  /// 3-D inputs): W itself, which the op reads transposed.
  virtual bool isTransposedWeight(int i) const = 0;
  virtual llvm::Expected<ValueId>
  transposedWeight(int i, WeightInit declaredInit, bool trainable) = 0;
  /// An integer constant operand.
  virtual llvm::Expected<IntConstant> intConstant(int i) = 0;
  virtual llvm::Expected<float> scalarFloat(int i) = 0;
  /// Whether operand `i` is a constant that is no initializer (a Constant
  /// node, a fold): never a parameter.
  virtual bool isLiteral(int i) const = 0;
  /// A float32 vector constant (Resize's scales).
  virtual llvm::Expected<std::vector<float>> floatVector(int i) = 0;
  /// An integer vector constant that holds no batch symbol.
  virtual llvm::Expected<std::vector<int64_t>> intVector(int i) = 0;
  /// Whether output `i` feeds something that reaches the model output.
  virtual bool outputUsed(int i) const = 0;

  // --- attributes ---
  virtual llvm::Expected<int64_t> attrInt(llvm::StringRef name,
                                          int64_t dflt) const = 0;
  virtual llvm::Expected<float> attrFloat(llvm::StringRef name,
                                          float dflt) const = 0;
  virtual llvm::Expected<std::string>
  attrString(llvm::StringRef name, const std::string &dflt) const = 0;
  /// INTS attribute; nullopt when absent.
  virtual llvm::Expected<std::optional<std::vector<int64_t>>>
  attrInts(llvm::StringRef name) const = 0;

  // --- results ---
  /// Creates the outputs as activations and the op; `inferenceDiffers`
  /// skips the comparison of its dims with ONNX shape inference.
  virtual llvm::Expected<OpId> emit(OpKind kind, std::vector<ValueId> inputs,
                                    std::vector<OutSpec> outputs,
                                    OpAttrs attrs = {},
                                    bool inferenceDiffers = false,
                                    std::string opName = {}) = 0;
  /// Binds `out` to whatever `in` is bound to (a no-op node).
  virtual void alias(const std::string &out, const std::string &in) = 0;
  /// Records `out` as an empty tensor (a slice to nothing: a partial rotary
  /// embedding whose pass-through part is empty). Only Concat reads one,
  /// by leaving it out; any other reader is an error.
  virtual void markEmpty(const std::string &out) = 0;
  virtual bool isEmpty(int i) const = 0;
};

/// "[1, 2, N]"-style dims for messages.
std::string dimsStr(const std::vector<int64_t> &dims);

} // namespace memfit

#endif
