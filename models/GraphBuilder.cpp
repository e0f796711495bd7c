//===- GraphBuilder.cpp - ONNX graph construction for the zoo -------------===//
#include "models/GraphBuilder.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <climits>

namespace memfit::zoo {

using llvm::ArrayRef;
using llvm::StringRef;

namespace {

// A serialized ModelProto cannot exceed 2 GiB (protobuf's limit); weights
// beyond this are refused before any value is generated.
constexpr int64_t kMaxModelBytes = INT_MAX;

void setInts(onnx::NodeProto &node, StringRef name, ArrayRef<int64_t> vals) {
  auto *a = node.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : vals)
    a->add_ints(v);
}

void setInt(onnx::NodeProto &node, StringRef name, int64_t val) {
  auto *a = node.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(val);
}

void setFloat(onnx::NodeProto &node, StringRef name, float val) {
  auto *a = node.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(val);
}

} // namespace

GraphBuilder::GraphBuilder(std::string modelName, int64_t batch,
                           int64_t numClasses, int64_t imageSize,
                           int64_t seqLen)
    : modelName_(std::move(modelName)), batch_(batch), numClasses_(numClasses),
      imageSize_(imageSize), seqLen_(seqLen) {
  graph_.set_name(modelName_);
}

void GraphBuilder::fail(std::string msg) {
  if (error_.empty())
    error_ = std::move(msg);
}

const std::vector<int64_t> &GraphBuilder::shape(Val v) const {
  assert(v.id >= 0 && v.id < static_cast<int32_t>(values_.size()));
  return values_[v.id].shape;
}

void GraphBuilder::setTensorType(onnx::ValueInfoProto &info,
                                 ArrayRef<int64_t> dims, bool batched,
                                 int32_t elemType) const {
  auto *tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elemType);
  auto *shape = tensor->mutable_shape();
  if (batched) {
    auto *d = shape->add_dim();
    if (batch_ == 0)
      d->set_dim_param("N");
    else
      d->set_dim_value(batch_);
  }
  for (int64_t v : dims)
    shape->add_dim()->set_dim_value(v);
}

Val GraphBuilder::addValue(StringRef name, std::vector<int64_t> shape,
                           int32_t producer) {
  bool inserted = valueNames_.insert(name).second;
  assert(inserted && "duplicate value name in a zoo model");
  (void)inserted;
  values_.push_back({name.str(), std::move(shape), producer});
  return Val{static_cast<int32_t>(values_.size() - 1)};
}

onnx::NodeProto &GraphBuilder::addNode(StringRef opType, StringRef name,
                                       ArrayRef<Val> inputs) {
  bool inserted = nodeNames_.insert(name).second;
  assert(inserted && "duplicate node name in a zoo model");
  (void)inserted;
  onnx::NodeProto &node = *graph_.add_node();
  node.set_op_type(opType.str());
  node.set_name(name.str());
  for (Val v : inputs)
    node.add_input(values_[v.id].name);
  // The node's output is its own name (values and nodes are separate
  // namespaces in ONNX); finish() renames the model output.
  node.add_output(name.str());
  return node;
}

std::string GraphBuilder::addWeight(StringRef node, StringRef suffix,
                                    std::vector<int64_t> dims, WeightFill fill,
                                    int64_t fanIn, int64_t fanOut) {
  std::string name = (node + "." + suffix).str();
  bool inserted = valueNames_.insert(name).second;
  assert(inserted && "duplicate weight name in a zoo model");
  (void)inserted;
  weights_.push_back({name, std::move(dims), fill, fanIn, fanOut});
  return name;
}

int64_t GraphBuilder::windowOut(StringRef node, int64_t in, int64_t kernel,
                                int64_t stride, int64_t pad) {
  if (in + 2 * pad < kernel) {
    fail(llvm::formatv("image size {0} is too small for model '{1}': node "
                       "'{2}' (kernel {3}, padding {4}) gets a {5}x{5} input",
                       imageSize_, modelName_, node, kernel, pad, in)
             .str());
    return 1;
  }
  return (in + 2 * pad - kernel) / stride + 1;
}

Val GraphBuilder::imageInput(int64_t channels) {
  assert(values_.empty() && "the input comes first");
  Val v = addValue("input", {channels, imageSize_, imageSize_}, -1);
  setTensorType(*graph_.add_input(), shape(v), true);
  graph_.mutable_input(0)->set_name("input");
  return v;
}

Val GraphBuilder::vectorInput(int64_t features) {
  assert(values_.empty() && "the input comes first");
  Val v = addValue("input", {features}, -1);
  setTensorType(*graph_.add_input(), shape(v), true);
  graph_.mutable_input(0)->set_name("input");
  return v;
}

Val GraphBuilder::tokenInput() {
  assert(values_.empty() && "the input comes first");
  assert(seqLen_ > 0 && "a token model needs a sequence length");
  Val v = addValue("input", {seqLen_}, -1);
  setTensorType(*graph_.add_input(), shape(v), true, onnx::TensorProto::INT64);
  graph_.mutable_input(0)->set_name("input");
  return v;
}

Val GraphBuilder::param(StringRef name, std::vector<int64_t> dims,
                        WeightFill fill, int64_t fanIn, int64_t fanOut) {
  Val v = addValue(name, dims, -2);
  weights_.push_back({name.str(), std::move(dims), fill, fanIn, fanOut});
  return v;
}

onnx::TensorProto &GraphBuilder::addConstantNode(StringRef name,
                                                 ArrayRef<int64_t> dims) {
  auto &node = addNode("Constant", name, {});
  auto *a = node.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto &t = *a->mutable_t();
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

Val GraphBuilder::constFloats(StringRef name, std::vector<int64_t> dims,
                              std::vector<float> values) {
  onnx::TensorProto &t = addConstantNode(name, dims);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (float v : values)
    t.add_float_data(v);
  return addValue(name, std::move(dims), graph_.node_size() - 1);
}

Val GraphBuilder::constInts(StringRef name, std::vector<int64_t> dims,
                            std::vector<int64_t> values) {
  onnx::TensorProto &t = addConstantNode(name, dims);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t v : values)
    t.add_int64_data(v);
  return addValue(name, std::move(dims), graph_.node_size() - 1);
}

Val GraphBuilder::node(StringRef opType, StringRef name, ArrayRef<Val> inputs,
                       std::vector<int64_t> outShape,
                       ArrayRef<NodeAttr> attrs) {
  auto &n = addNode(opType, name, inputs);
  for (const NodeAttr &a : attrs) {
    switch (a.kind) {
    case NodeAttr::Int:
      setInt(n, a.name, a.ints[0]);
      break;
    case NodeAttr::Ints:
      setInts(n, a.name, a.ints);
      break;
    case NodeAttr::Float:
      setFloat(n, a.name, a.f);
      break;
    }
  }
  return addValue(name, std::move(outShape), graph_.node_size() - 1);
}

Val GraphBuilder::conv(StringRef name, Val x, const ConvSpec &s) {
  const auto &in = shape(x);
  assert(in.size() == 3 && "Conv takes a [C, H, W] value");
  assert(in[0] % s.group == 0 && s.outChannels % s.group == 0);
  int64_t inPerGroup = in[0] / s.group;
  int64_t h = windowOut(name, in[1], s.kernel, s.stride, s.pad);
  int64_t w = windowOut(name, in[2], s.kernel, s.stride, s.pad);
  int64_t fanIn = inPerGroup * s.kernel * s.kernel;
  std::string weight = addWeight(
      name, "weight", {s.outChannels, inPerGroup, s.kernel, s.kernel},
      WeightFill::HeUniform, fanIn, s.outChannels * s.kernel * s.kernel);
  std::string bias;
  if (s.bias)
    bias = addWeight(name, "bias", {s.outChannels}, WeightFill::Zeros);
  auto &node = addNode("Conv", name, {x});
  node.add_input(weight);
  if (s.bias)
    node.add_input(bias);
  setInts(node, "kernel_shape", {s.kernel, s.kernel});
  setInts(node, "strides", {s.stride, s.stride});
  setInts(node, "pads", {s.pad, s.pad, s.pad, s.pad});
  if (s.group != 1)
    setInt(node, "group", s.group);
  return addValue(name, {s.outChannels, h, w}, graph_.node_size() - 1);
}

Val GraphBuilder::relu(StringRef name, Val x) {
  addNode("Relu", name, {x});
  return addValue(name, shape(x), graph_.node_size() - 1);
}

Val GraphBuilder::pool(StringRef opType, StringRef name, Val x,
                       const PoolSpec &s) {
  const auto &in = shape(x);
  assert(in.size() == 3 && "pooling takes a [C, H, W] value");
  std::vector<int64_t> out = {
      in[0], windowOut(name, in[1], s.kernel, s.stride, s.pad),
      windowOut(name, in[2], s.kernel, s.stride, s.pad)};
  auto &node = addNode(opType, name, {x});
  setInts(node, "kernel_shape", {s.kernel, s.kernel});
  setInts(node, "strides", {s.stride, s.stride});
  if (s.pad != 0)
    setInts(node, "pads", {s.pad, s.pad, s.pad, s.pad});
  return addValue(name, std::move(out), graph_.node_size() - 1);
}

Val GraphBuilder::maxPool(StringRef name, Val x, const PoolSpec &spec) {
  return pool("MaxPool", name, x, spec);
}

Val GraphBuilder::avgPool(StringRef name, Val x, const PoolSpec &spec) {
  return pool("AveragePool", name, x, spec);
}

Val GraphBuilder::globalAvgPool(StringRef name, Val x) {
  const auto &in = shape(x);
  assert(in.size() == 3 && "GlobalAveragePool takes a [C, H, W] value");
  std::vector<int64_t> out = {in[0], 1, 1};
  addNode("GlobalAveragePool", name, {x});
  return addValue(name, std::move(out), graph_.node_size() - 1);
}

Val GraphBuilder::lrn(StringRef name, Val x, int64_t size, float alpha,
                      float beta, float bias) {
  assert(shape(x).size() == 3 && "LRN takes a [C, H, W] value");
  auto &node = addNode("LRN", name, {x});
  setInt(node, "size", size);
  setFloat(node, "alpha", alpha);
  setFloat(node, "beta", beta);
  setFloat(node, "bias", bias);
  return addValue(name, shape(x), graph_.node_size() - 1);
}

Val GraphBuilder::batchNorm(StringRef name, Val x, float epsilon) {
  assert(shape(x).size() >= 2 && "BatchNormalization takes a [C, ...] value");
  int64_t c = shape(x)[0];
  std::string scale = addWeight(name, "weight", {c}, WeightFill::Ones);
  std::string bias = addWeight(name, "bias", {c}, WeightFill::Zeros);
  std::string mean = addWeight(name, "running_mean", {c}, WeightFill::Zeros);
  std::string var = addWeight(name, "running_var", {c}, WeightFill::Ones);
  auto &node = addNode("BatchNormalization", name, {x});
  for (const std::string *w : {&scale, &bias, &mean, &var})
    node.add_input(*w);
  setFloat(node, "epsilon", epsilon);
  // ONNX's momentum weighs the old statistic (PyTorch's 0.1 is ONNX's 0.9).
  setFloat(node, "momentum", 0.9f);
  return addValue(name, shape(x), graph_.node_size() - 1);
}

Val GraphBuilder::flatten(StringRef name, Val x) {
  int64_t n = 1;
  for (int64_t d : shape(x))
    n *= d;
  auto &node = addNode("Flatten", name, {x});
  setInt(node, "axis", 1);
  return addValue(name, {n}, graph_.node_size() - 1);
}

Val GraphBuilder::gemm(StringRef name, Val x, int64_t outFeatures) {
  assert(shape(x).size() == 1 && "Gemm takes a flat [F] value");
  int64_t in = shape(x)[0];
  std::string weight = addWeight(name, "weight", {outFeatures, in},
                                 WeightFill::GlorotUniform, in, outFeatures);
  std::string bias = addWeight(name, "bias", {outFeatures}, WeightFill::Zeros);
  auto &node = addNode("Gemm", name, {x});
  node.add_input(weight);
  node.add_input(bias);
  setInt(node, "transB", 1);
  return addValue(name, {outFeatures}, graph_.node_size() - 1);
}

Val GraphBuilder::dropout(StringRef name, Val x, float ratio) {
  // Opset 13 takes ratio and training_mode as inputs; they are constants of
  // the model, so they are initializers even when weights are declared only.
  std::string ratioName = (name + ".ratio").str();
  std::string modeName = (name + ".training_mode").str();
  for (const std::string *n : {&ratioName, &modeName}) {
    bool inserted = valueNames_.insert(*n).second;
    assert(inserted && "duplicate constant name in a zoo model");
    (void)inserted;
  }
  auto *r = graph_.add_initializer();
  r->set_name(ratioName);
  r->set_data_type(onnx::TensorProto::FLOAT);
  r->add_float_data(ratio);
  auto *m = graph_.add_initializer();
  m->set_name(modeName);
  m->set_data_type(onnx::TensorProto::BOOL);
  m->add_int32_data(1);
  auto &node = addNode("Dropout", name, {x});
  node.add_input(ratioName);
  node.add_input(modeName);
  return addValue(name, shape(x), graph_.node_size() - 1);
}

Val GraphBuilder::add(StringRef name, Val a, Val b) {
  assert(shape(a) == shape(b) && "Add of different shapes in a zoo model");
  addNode("Add", name, {a, b});
  return addValue(name, shape(a), graph_.node_size() - 1);
}

Val GraphBuilder::concat(StringRef name, ArrayRef<Val> xs) {
  assert(!xs.empty());
  std::vector<int64_t> out = shape(xs[0]);
  for (size_t i = 1; i < xs.size(); ++i) {
    const auto &s = shape(xs[i]);
    assert(s.size() == out.size() &&
           std::equal(s.begin() + 1, s.end(), out.begin() + 1) &&
           "Concat of mismatched spatial shapes in a zoo model");
    out[0] += s[0];
  }
  auto &node = addNode("Concat", name, xs);
  setInt(node, "axis", 1);
  return addValue(name, std::move(out), graph_.node_size() - 1);
}

llvm::Expected<std::string> GraphBuilder::finish(Val output, bool withWeights,
                                                 StringRef docString) {
  if (!error_.empty())
    return makeError(error_);
  ValueRec &out = values_[output.id];
  assert(out.producer >= 0 && "the model output must be computed");
  onnx::NodeProto *producer = graph_.mutable_node(out.producer);
  assert(out.producer == graph_.node_size() - 1 &&
         "the output is produced by the last node, so nothing consumes it");
  producer->set_output(0, "output");
  out.name = "output";

  int64_t weightBytes = 0;
  for (const WeightSpec &w : weights_)
    weightBytes += 4 * w.numElements();
  if (withWeights && weightBytes >= kMaxModelBytes)
    return makeErrorF("model '{0}' has {1} bytes of weights, more than one "
                      "ONNX file can hold (2 GiB); build it without weights",
                      modelName_, weightBytes);

  for (const WeightSpec &w : weights_) {
    if (withWeights) {
      auto *t = graph_.add_initializer();
      t->set_name(w.name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : w.dims)
        t->add_dims(d);
      t->set_raw_data(weightRawData(w));
    } else {
      auto *in = graph_.add_input();
      in->set_name(w.name);
      setTensorType(*in, w.dims, false);
    }
  }
  auto *outInfo = graph_.add_output();
  outInfo->set_name("output");
  setTensorType(*outInfo, out.shape, true);

  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("memfit");
  model.set_producer_version("0.1.0");
  model.set_doc_string(docString.str());
  auto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(opset_);
  model.mutable_graph()->Swap(&graph_);

  if (model.ByteSizeLong() >= static_cast<size_t>(kMaxModelBytes))
    return makeErrorF("model '{0}' is larger than one ONNX file can hold "
                      "(2 GiB); build it without weights",
                      modelName_);
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return makeErrorF("cannot serialize model '{0}'", modelName_);
  return bytes;
}

} // namespace memfit::zoo
