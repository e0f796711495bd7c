//===- OnnxBuilder.h - Small ONNX models for importer tests -----*- C++ -*-===//
//
// Test-only helpers that write ONNX models with the protobuf API, one node
// per line, so a test states its whole model next to what it expects the
// importer to make of it; and small accessors for the imported Graph.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_ONNXBUILDER_H
#define MEMFIT_TESTS_ONNXBUILDER_H

#include "compiler/onnx/OnnxImport.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include "onnx/onnx_pb.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace memfit::test {

namespace pb = ::ONNX_NAMESPACE;

inline pb::AttributeProto attrInt(const std::string &name, int64_t v) {
  pb::AttributeProto a;
  a.set_name(name);
  a.set_type(pb::AttributeProto::INT);
  a.set_i(v);
  return a;
}

inline pb::AttributeProto attrInts(const std::string &name,
                                   const std::vector<int64_t> &v) {
  pb::AttributeProto a;
  a.set_name(name);
  a.set_type(pb::AttributeProto::INTS);
  for (int64_t x : v)
    a.add_ints(x);
  return a;
}

inline pb::AttributeProto attrFloat(const std::string &name, float v) {
  pb::AttributeProto a;
  a.set_name(name);
  a.set_type(pb::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

inline pb::AttributeProto attrStr(const std::string &name,
                                  const std::string &v) {
  pb::AttributeProto a;
  a.set_name(name);
  a.set_type(pb::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

/// A tensor of int64 values (raw_data, little-endian).
inline pb::TensorProto int64Tensor(const std::vector<int64_t> &dims,
                                   const std::vector<int64_t> &values) {
  pb::TensorProto t;
  t.set_data_type(pb::TensorProto::INT64);
  for (int64_t d : dims)
    t.add_dims(d);
  for (int64_t v : values)
    t.add_int64_data(v);
  return t;
}

inline pb::TensorProto floatTensor(const std::vector<int64_t> &dims,
                                   const std::vector<float> &values) {
  pb::TensorProto t;
  t.set_data_type(pb::TensorProto::FLOAT);
  for (int64_t d : dims)
    t.add_dims(d);
  std::string raw(values.size() * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b)
      raw[4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  t.set_raw_data(raw);
  return t;
}

/// A float tensor attribute named "value" (Constant, ConstantOfShape).
inline pb::AttributeProto floatValue(const std::vector<int64_t> &dims,
                                     const std::vector<float> &values) {
  pb::AttributeProto a;
  a.set_name("value");
  a.set_type(pb::AttributeProto::TENSOR);
  *a.mutable_t() = floatTensor(dims, values);
  return a;
}

/// Deterministic distinct values 0.5, 0.51, 0.52, ... for `dims`.
inline std::vector<float> ramp(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 0.5f + 0.01f * static_cast<float>(i);
  return v;
}

class OnnxBuilder {
public:
  explicit OnnxBuilder(int64_t opset = 13) {
    model.set_ir_version(opset >= 15 ? 8 : 7);
    model.set_producer_name("memfit-tests");
    auto *imp = model.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    model.mutable_graph()->set_name("test");
  }

  /// A graph input; a negative dim is the symbolic "N".
  OnnxBuilder &input(const std::string &name, const std::vector<int64_t> &dims,
                     int32_t elemType = pb::TensorProto::FLOAT) {
    valueInfo(model.mutable_graph()->add_input(), name, dims, elemType);
    return *this;
  }

  /// A float initializer; without values it holds ramp(dims).
  OnnxBuilder &init(const std::string &name, const std::vector<int64_t> &dims,
                    std::vector<float> values = {}) {
    if (values.empty())
      values = ramp(dims);
    pb::TensorProto t = floatTensor(dims, values);
    t.set_name(name);
    *model.mutable_graph()->add_initializer() = t;
    return *this;
  }

  OnnxBuilder &initInt64(const std::string &name,
                         const std::vector<int64_t> &dims,
                         const std::vector<int64_t> &values) {
    pb::TensorProto t = int64Tensor(dims, values);
    t.set_name(name);
    *model.mutable_graph()->add_initializer() = t;
    return *this;
  }

  OnnxBuilder &node(const std::string &op, const std::vector<std::string> &ins,
                    const std::vector<std::string> &outs,
                    const std::vector<pb::AttributeProto> &attrs = {},
                    const std::string &name = "") {
    pb::NodeProto *n = model.mutable_graph()->add_node();
    n->set_op_type(op);
    if (!name.empty())
      n->set_name(name);
    for (const auto &i : ins)
      n->add_input(i);
    for (const auto &o : outs)
      n->add_output(o);
    for (const auto &a : attrs)
      *n->add_attribute() = a;
    return *this;
  }

  /// A Constant node holding an int64 tensor.
  OnnxBuilder &constInt64(const std::string &out,
                          const std::vector<int64_t> &dims,
                          const std::vector<int64_t> &values) {
    pb::AttributeProto a;
    a.set_name("value");
    a.set_type(pb::AttributeProto::TENSOR);
    *a.mutable_t() = int64Tensor(dims, values);
    return node("Constant", {}, {out}, {a});
  }

  /// A Constant node holding a float scalar.
  OnnxBuilder &constFloat(const std::string &out, float v) {
    pb::AttributeProto a;
    a.set_name("value");
    a.set_type(pb::AttributeProto::TENSOR);
    *a.mutable_t() = floatTensor({}, {v});
    return node("Constant", {}, {out}, {a});
  }

  /// A Constant node holding a bool scalar.
  OnnxBuilder &constBool(const std::string &out, bool v) {
    pb::AttributeProto a;
    a.set_name("value");
    a.set_type(pb::AttributeProto::TENSOR);
    pb::TensorProto *t = a.mutable_t();
    t->set_data_type(pb::TensorProto::BOOL);
    t->add_int32_data(v ? 1 : 0);
    return node("Constant", {}, {out}, {a});
  }

  /// A graph output of rank `rank` whose dims are left to shape inference
  /// (the checker requires a shape on graph outputs).
  OnnxBuilder &output(const std::string &name, int rank) {
    pb::ValueInfoProto *vi = model.mutable_graph()->add_output();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(pb::TensorProto::FLOAT);
    auto *shape = tt->mutable_shape();
    for (int i = 0; i < rank; ++i)
      shape->add_dim();
    return *this;
  }

  /// Marks initializer `name` as torch.export does: value_info metadata
  /// pkg.torch.export.graph_signature.InputSpec.kind (BUFFER,
  /// CONSTANT_TENSOR), an IR 10 field this ONNX library keeps as unknown.
  OnnxBuilder &torchInputKind(const std::string &name,
                              const std::string &kind) {
    pb::ValueInfoProto *vi = model.mutable_graph()->add_value_info();
    vi->set_name(name);
    pb::StringStringEntryProto e;
    e.set_key("pkg.torch.export.graph_signature.InputSpec.kind");
    e.set_value(kind);
    vi->GetReflection()->MutableUnknownFields(vi)->AddLengthDelimited(
        4, e.SerializeAsString());
    return *this;
  }

  std::string bytes() const { return model.SerializeAsString(); }

  llvm::Expected<Graph> import(const ImportOptions &opts = {}) const {
    return importOnnxBytes(bytes(), "test.onnx", opts);
  }

  pb::ModelProto model;

private:
  static void valueInfo(pb::ValueInfoProto *vi, const std::string &name,
                        const std::vector<int64_t> &dims, int32_t elemType) {
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto *dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
};

/// The message of a failed import ("" when it succeeded).
inline std::string errorText(llvm::Expected<Graph> &&g) {
  if (g)
    return "";
  return llvm::toString(g.takeError());
}

/// A fresh directory for files a test writes, removed on destruction.
struct TempDir {
  std::string path;
  TempDir() {
    llvm::SmallString<128> p;
    if (!llvm::sys::fs::createUniqueDirectory("memfit-onnx-test", p))
      path = std::string(p);
  }
  ~TempDir() {
    if (!path.empty())
      llvm::sys::fs::remove_directories(path);
  }
  std::string file(const std::string &name) const { return path + "/" + name; }
  void write(const std::string &name, const std::string &bytes) const {
    std::ofstream(file(name), std::ios::binary) << bytes;
  }
};

/// Import options with a batch size.
inline ImportOptions batchOf(int64_t b) {
  ImportOptions o;
  o.batch = b;
  return o;
}

inline const Value &valueNamed(const Graph &g, const std::string &name) {
  for (const Value &v : g.values)
    if (v.name == name)
      return v;
  FAIL("no value named " << name);
  return g.values.front();
}

inline std::vector<OpKind> opKinds(const Graph &g) {
  std::vector<OpKind> kinds;
  for (const Op &op : g.ops)
    kinds.push_back(op.kind);
  return kinds;
}

/// Imports `b`, failing the test with the import's message on error.
inline Graph importOk(const OnnxBuilder &b, const ImportOptions &opts = {}) {
  auto g = b.import(opts);
  if (!g)
    FAIL(llvm::toString(g.takeError()));
  return std::move(*g);
}

} // namespace memfit::test

#endif
