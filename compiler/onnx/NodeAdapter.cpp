//===- NodeAdapter.cpp - One ONNX node as the operators see it ------------===//
//
// The operator definitions (compiler/ops) translate nodes through OnnxNode;
// this is its implementation over the Importer and one NodeProto, so that
// protobuf stays inside compiler/onnx. Cast is not an operator of its own:
// on an activation it is the identity to float32.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/ops/OpDef.h"
#include "compiler/ops/SliceArgs.h"

#include "llvm/Support/FormatVariadic.h"

namespace memfit::onnximport {
namespace {

class ImporterNode final : public OnnxNode {
public:
  ImporterNode(Importer &im, const pb::NodeProto &n) : im(im), n(n) {}

  llvm::StringRef opType() const override { return n.op_type(); }
  const std::string &name() const override { return n.name(); }
  int numInputs() const override { return n.input_size(); }
  int numOutputs() const override { return n.output_size(); }
  const std::string &inputName(int i) const override { return n.input(i); }
  const std::string &outputName(int i) const override { return n.output(i); }
  int64_t opset() const override { return im.opset; }
  int64_t modelBatch() const override { return im.modelBatch; }
  const Graph &graph() const override { return im.g; }
  llvm::Error fail(const llvm::Twine &msg) const override {
    return im.fail(n, msg);
  }

  bool hasInput(int i) const override { return im.hasInput(n, i); }
  bool isActivation(const std::string &name) const override {
    return im.isActivation(name);
  }
  bool isDeclaredInput(const std::string &name) const override {
    return im.isDeclaredInput(name);
  }
  llvm::Error extraDataInput(const std::string &name) const override {
    return im.extraDataInput(n, name);
  }
  llvm::Expected<ValueId> activation(int i) override {
    return im.activation(n, i);
  }
  llvm::Expected<ValueId> weight(int i, WeightInit declaredInit,
                                 bool trainable) override {
    return im.weight(n, i, declaredInit, trainable);
  }
  llvm::Expected<ValueId> weightValue(int i) override {
    return im.liftWeight(n, n.input(i));
  }
  bool isLiteral(int i) const override {
    return im.hasInput(n, i) && im.isConstant(n.input(i)) &&
           !im.isWeightSource(n.input(i));
  }
  llvm::Expected<std::vector<float>> floatVector(int i) override {
    auto t = im.constant(n, i);
    if (!t)
      return t.takeError();
    if (!(*t)->isFloat() || (*t)->dims.size() > 1)
      return im.fail(n, "operand " + std::to_string(i) +
                            " must be a 1-D float32 tensor");
    return (*t)->floats;
  }
  llvm::Expected<ValueId> constantWeight(int i) override {
    return im.constantWeight(n, i);
  }
  ValueId scalarConstant(float v) override { return im.scalarConstant(v); }
  std::optional<ValueId> oneSampleConstant(ValueId w,
                                           bool rowsPerSample) override {
    return im.oneSampleConstant(w, rowsPerSample);
  }
  ValueId expandedConstant(ValueId w,
                           const std::vector<int64_t> &dims) override {
    return im.expandedConstant(w, dims);
  }
  llvm::Expected<ValueId> indices(int i) override { return im.indices(n, i); }
  bool isTransposedWeight(int i) const override {
    return im.hasInput(n, i) && im.transposedWeights.count(n.input(i));
  }
  llvm::Expected<ValueId> transposedWeight(int i, WeightInit declaredInit,
                                           bool trainable) override {
    auto it = im.transposedWeights.find(n.input(i));
    if (it == im.transposedWeights.end())
      return im.fail(n, "operand " + std::to_string(i) +
                            " is not a transposed weight");
    return im.materializeWeight(n, it->second, declaredInit, trainable);
  }
  bool isIndices(int i) const override {
    return im.hasInput(n, i) && im.isActivation(n.input(i)) &&
           im.isIntActivation(n.input(i));
  }
  llvm::Expected<IntConstant> intConstant(int i) override {
    auto t = im.constant(n, i);
    if (!t)
      return t.takeError();
    const ConstTensor &c = **t;
    IntConstant out;
    out.isFloat = c.isFloat();
    out.dims = c.dims;
    out.ints = c.ints;
    if (!c.batch.empty())
      out.batch.assign(c.batch.begin(), c.batch.end());
    out.text = c.str();
    return out;
  }
  llvm::Expected<float> scalarFloat(int i) override {
    return im.scalarFloat(n, i);
  }
  llvm::Expected<std::vector<int64_t>> intVector(int i) override {
    return im.intVector(n, i);
  }
  bool outputUsed(int i) const override { return im.outputUsed(n, i); }

  llvm::Expected<int64_t> attrInt(llvm::StringRef name,
                                  int64_t dflt) const override {
    return im.attrInt(n, name, dflt);
  }
  llvm::Expected<float> attrFloat(llvm::StringRef name,
                                  float dflt) const override {
    return im.attrFloat(n, name, dflt);
  }
  llvm::Expected<std::string>
  attrString(llvm::StringRef name, const std::string &dflt) const override {
    return im.attrString(n, name, dflt);
  }
  llvm::Expected<std::optional<std::vector<int64_t>>>
  attrInts(llvm::StringRef name) const override {
    return im.attrInts(n, name);
  }

  llvm::Expected<OpId> emit(OpKind kind, std::vector<ValueId> inputs,
                            std::vector<OutSpec> outputs, OpAttrs attrs,
                            bool inferenceDiffers,
                            std::string opName) override {
    return im.emit(n, kind, std::move(inputs), std::move(outputs),
                   std::move(attrs), inferenceDiffers, std::move(opName));
  }
  void alias(const std::string &out, const std::string &in) override {
    im.alias(out, in);
  }
  void markEmpty(const std::string &out) override {
    im.emptyValues.insert(out);
  }
  bool isEmpty(int i) const override {
    return im.hasInput(n, i) && im.emptyValues.count(n.input(i)) > 0;
  }

private:
  Importer &im;
  const pb::NodeProto &n;
};

} // namespace

llvm::Error translateThroughRegistry(Importer &im, const pb::NodeProto &n,
                                     bool &found) {
  const OpDef *def = opDefForOnnx(n.op_type());
  found = def && def->importOnnx;
  if (!found)
    return llvm::Error::success();
  ImporterNode node(im, n);
  return def->importOnnx(node);
}

llvm::Expected<SliceArgs> sliceArgsOf(Importer &im, const pb::NodeProto &n) {
  ImporterNode node(im, n);
  return sliceArgs(node);
}

llvm::Expected<SplitArgs> splitArgsOf(Importer &im, const pb::NodeProto &n,
                                      const std::vector<int64_t> &dims) {
  ImporterNode node(im, n);
  return splitArgs(node, dims);
}

/// Activations are float32 throughout; casting one to float32 is the
/// identity, casting it to anything else is unsupported.
llvm::Error Importer::translateCast(const pb::NodeProto &n) {
  auto x = activation(n, 0);
  auto to = attrInt(n, "to", 0);
  if (!x || !to)
    return llvm::joinErrors(x.takeError(), to.takeError());
  if (*to != pb::TensorProto::FLOAT)
    return fail(n, "casts an activation to " +
                       dataTypeName(static_cast<int32_t>(*to)) +
                       "; memfit computes in float32");
  alias(n.output(0), n.input(0));
  return llvm::Error::success();
}

llvm::Error Importer::translateCastLike(const pb::NodeProto &n) {
  // torch.export casts a value like the tensor it meets (PoolFormer's norm
  // weight like the activation): float32 to float32 is the identity.
  int32_t to = pb::TensorProto::FLOAT;
  if (!hasInput(n, 1))
    return fail(n, "operand 1 is missing");
  if (auto v = values.find(n.input(1)); v != values.end()) {
    if (g.values[v->second].dtype != DType::F32)
      to = pb::TensorProto::INT64;
  } else if (isConstant(n.input(1))) {
    auto c = constant(n, 1);
    if (!c)
      return c.takeError();
    if (!(*c)->isFloat())
      to = (*c)->type;
  }
  if (to != pb::TensorProto::FLOAT)
    return fail(n, "casts a float value to " + dataTypeName(to) +
                       "; memfit computes in float32");
  auto x = activation(n, 0);
  if (!x)
    return x.takeError();
  alias(n.output(0), n.input(0));
  return llvm::Error::success();
}

} // namespace memfit::onnximport
