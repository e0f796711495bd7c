//===- OnnxWeights.cpp - A trainer's weights in the ONNX model ------------===//
#include "runtime/OnnxWeights.h"

#include "runtime/AtomicFile.h"

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace memfit::rt {
namespace {

bool parseModel(const std::string &path, onnx::ModelProto &m,
                std::string &err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    err = path + ": cannot open the model";
    return false;
  }
  google::protobuf::io::IstreamInputStream zin(&f);
  google::protobuf::io::CodedInputStream in(&zin);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!m.ParseFromCodedStream(&in)) {
    err = path + ": not a valid ONNX model";
    return false;
  }
  return true;
}

bool tensorFloats(const onnx::TensorProto &t, const std::string &dir,
                  std::vector<float> &out, std::string &err) {
  if (t.data_type() != onnx::TensorProto::FLOAT)
    return false;
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  out.resize(n);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0;
    for (const auto &e : t.external_data()) {
      if (e.key() == "location")
        location = e.value();
      else if (e.key() == "offset")
        offset = std::stoll(e.value());
    }
    std::filesystem::path p(location);
    if (location.empty() || p.is_absolute() ||
        p.lexically_normal().string().rfind("..", 0) == 0) {
      err = "initializer '" + t.name() +
            "': external data location outside "
            "the model's directory";
      return false;
    }
    std::ifstream f(std::filesystem::path(dir) / p, std::ios::binary);
    f.seekg(offset);
    f.read(reinterpret_cast<char *>(out.data()), n * 4);
    if (!f) {
      err = "initializer '" + t.name() + "': cannot read external data";
      return false;
    }
    return true;
  }
  if (!t.raw_data().empty()) {
    if ((int64_t)t.raw_data().size() != n * 4) {
      err = "initializer '" + t.name() + "': raw data has the wrong size";
      return false;
    }
    std::memcpy(out.data(), t.raw_data().data(), n * 4);
  } else {
    if (t.float_data_size() != n) {
      err = "initializer '" + t.name() + "': float data has the wrong size";
      return false;
    }
    std::copy(t.float_data().begin(), t.float_data().end(), out.begin());
  }
  return true;
}

} // namespace

std::optional<OnnxWeights> readOnnxWeights(const std::string &path,
                                           std::string &err) {
  onnx::ModelProto m;
  if (!parseModel(path, m, err))
    return std::nullopt;
  std::string dir = std::filesystem::path(path).parent_path().string();
  OnnxWeights w;
  for (const auto &t : m.graph().initializer()) {
    std::vector<float> v;
    if (tensorFloats(t, dir, v, err))
      w.byName[t.name()] = std::move(v);
    else if (!err.empty())
      return std::nullopt;
  }
  return w;
}

bool writeTrainedModel(const std::string &modelPath, const std::string &outPath,
                       const std::vector<WeightInfo> &weights,
                       const std::vector<std::vector<float>> &values,
                       std::string &err) {
  onnx::ModelProto m;
  if (!parseModel(modelPath, m, err))
    return false;
  onnx::GraphProto *g = m.mutable_graph();
  for (size_t i = 0; i < weights.size(); ++i) {
    // Constants the model computes itself (a folded mask, fixed positions)
    // never change: the model keeps its own definition of them.
    if (weights[i].data && !weights[i].trainable)
      continue;
    std::string name = weights[i].onnxName;
    onnx::TensorProto *t = nullptr;
    for (auto &init : *g->mutable_initializer())
      if (init.name() == name)
        t = &init;
    if (!t) {
      // Declared as a graph input without data, computed by an Identity of
      // a shared initializer, or a constant: it becomes its own initializer
      // (its trained values are its own now), and what defined it before
      // goes.
      std::vector<int64_t> dims;
      for (int k = 0; k < g->input_size(); ++k)
        if (g->input(k).name() == name) {
          for (const auto &d : g->input(k).type().tensor_type().shape().dim())
            dims.push_back(d.dim_value());
          g->mutable_input()->DeleteSubrange(k, 1);
          break;
        }
      for (int k = 0; k < g->node_size(); ++k) {
        const auto &node = g->node(k);
        if (node.output_size() != 1 || node.output(0) != name)
          continue;
        if (node.op_type() == "Identity")
          for (const auto &init : g->initializer())
            if (init.name() == node.input(0))
              dims.assign(init.dims().begin(), init.dims().end());
        if (node.op_type() == "Constant")
          for (const auto &a : node.attribute())
            if (a.name() == "value")
              dims.assign(a.t().dims().begin(), a.t().dims().end());
        g->mutable_node()->DeleteSubrange(k, 1);
        break;
      }
      t = g->add_initializer();
      t->set_name(name);
      for (int64_t d : dims)
        t->add_dims(d);
    }
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->clear_float_data();
    t->clear_external_data();
    t->set_data_location(onnx::TensorProto::DEFAULT);
    t->set_raw_data(
        std::string(reinterpret_cast<const char *>(values[i].data()),
                    values[i].size() * 4));
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) {
    err = outPath + ": cannot serialize the trained model";
    return false;
  }
  AtomicFile f(outPath);
  f.write(bytes.data(), bytes.size());
  if (!f.commit()) {
    err = f.error() + " (the trained model was not saved)";
    return false;
  }
  return true;
}

} // namespace memfit::rt
