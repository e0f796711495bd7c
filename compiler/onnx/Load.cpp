//===- Load.cpp - Reading ONNX files and tensor data ----------------------===//
//
// Parses model files of any size protobuf can represent (the default 64 MiB
// limit is raised), turns every malformed input into an error naming the
// file, and confines external data to the model's directory: a location that
// is absolute, climbs with '..' or resolves (through symlinks) outside the
// directory is refused before any file is opened.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <climits>
#include <cstring>
#include <set>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

std::string escapeName(std::string_view s) {
  std::string q = quoteName(s);
  return q.substr(1, q.size() - 2);
}

std::string dataTypeName(int32_t type) {
  if (pb::TensorProto::DataType_IsValid(type))
    return pb::TensorProto::DataType_Name(
        static_cast<pb::TensorProto::DataType>(type));
  return "type " + std::to_string(type);
}

std::optional<int64_t> checkedProduct(const std::vector<int64_t> &dims) {
  // Element counts stay below 2^60 so that byte counts of any dtype fit.
  constexpr int64_t kLimit = int64_t(1) << 60;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kLimit)
      return std::nullopt;
  }
  return n;
}

int64_t ConstTensor::numel() const {
  return isFloat() ? static_cast<int64_t>(floats.size())
                   : static_cast<int64_t>(ints.size());
}

std::string ConstTensor::str() const {
  std::string s = "[";
  for (int64_t i = 0; i < numel() && i < 16; ++i) {
    s += i ? ", " : "";
    if (isFloat())
      s += llvm::formatv("{0}", floats[i]).str();
    else
      s += isBatch(i) ? "N" : std::to_string(ints[i]);
  }
  return s + (numel() > 16 ? ", ...]" : "]");
}

//===----------------------------------------------------------------------===//
// Model files
//===----------------------------------------------------------------------===//

static Error parseStream(google::protobuf::io::ZeroCopyInputStream &stream,
                         const std::string &file, pb::ModelProto &model) {
  // Parse failures are reported below; protobuf's own log lines would only
  // repeat them on stderr.
  google::protobuf::LogSilencer silence;
  google::protobuf::io::CodedInputStream in(&stream);
  in.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&in))
    return makeErrorF("'{0}': not a valid onnx model (the file is truncated "
                      "or is not an onnx protobuf)",
                      file);
  if (!model.has_graph())
    return makeErrorF("'{0}': not an onnx model (no graph in the file)", file);
  return Error::success();
}

Error parseModelFile(const std::string &path, pb::ModelProto &model) {
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st))
    return makeErrorF("cannot open '{0}': {1}", path, ec.message());
  if (llvm::sys::fs::is_directory(st))
    return makeErrorF("cannot read '{0}': it is a directory", path);
  if (!llvm::sys::fs::is_regular_file(st))
    return makeErrorF("cannot read '{0}': not a regular file", path);
  if (st.getSize() > static_cast<uint64_t>(INT_MAX))
    return makeErrorF("'{0}': {1} bytes is beyond what protobuf can parse "
                      "(2 GiB); store the weights as external data",
                      path, st.getSize());
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForRead(path, fd))
    return makeErrorF("cannot open '{0}': {1}", path, ec.message());
  google::protobuf::io::FileInputStream raw(fd);
  raw.SetCloseOnDelete(true);
  Error err = parseStream(raw, path, model);
  if (raw.GetErrno() != 0) {
    llvm::consumeError(std::move(err));
    return makeErrorF("cannot read '{0}': {1}", path,
                      std::strerror(raw.GetErrno()));
  }
  return err;
}

Error parseModelBytes(const std::string &bytes, const std::string &displayName,
                      pb::ModelProto &model) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return makeErrorF("'{0}': {1} bytes is beyond what protobuf can parse "
                      "(2 GiB)",
                      displayName, bytes.size());
  google::protobuf::io::ArrayInputStream raw(bytes.data(),
                                             static_cast<int>(bytes.size()));
  return parseStream(raw, displayName, model);
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

static bool isExternal(const pb::TensorProto &t) {
  return t.has_data_location() &&
         t.data_location() == pb::TensorProto::EXTERNAL;
}

/// Bytes per element of the fixed-size types, 0 for others.
static int64_t elementBytes(int32_t type) {
  switch (type) {
  case pb::TensorProto::FLOAT:
  case pb::TensorProto::INT32:
  case pb::TensorProto::UINT32:
    return 4;
  case pb::TensorProto::INT64:
  case pb::TensorProto::UINT64:
  case pb::TensorProto::DOUBLE:
  case pb::TensorProto::COMPLEX64:
    return 8;
  case pb::TensorProto::INT16:
  case pb::TensorProto::UINT16:
  case pb::TensorProto::FLOAT16:
  case pb::TensorProto::BFLOAT16:
    return 2;
  case pb::TensorProto::INT8:
  case pb::TensorProto::UINT8:
  case pb::TensorProto::BOOL:
    return 1;
  case pb::TensorProto::COMPLEX128:
    return 16;
  default:
    return 0;
  }
}

namespace {
struct ExternalRef {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
};
} // namespace

static Expected<ExternalRef> externalRef(const pb::TensorProto &t,
                                         const std::string &file) {
  ExternalRef ref;
  bool haveLocation = false;
  for (const auto &entry : t.external_data()) {
    uint64_t n = 0;
    if (entry.key() == "location") {
      ref.location = entry.value();
      haveLocation = true;
    } else if (entry.key() == "offset" || entry.key() == "length") {
      if (llvm::StringRef(entry.value()).getAsInteger(10, n))
        return makeErrorF("'{0}': tensor {1}: external data {2} {3} is not a "
                          "non-negative integer",
                          file, quoteName(t.name()), entry.key(),
                          quoteName(entry.value()));
      if (entry.key() == "offset")
        ref.offset = n;
      else
        ref.length = n;
    }
  }
  if (!haveLocation || ref.location.empty())
    return makeErrorF("'{0}': tensor {1} is marked as external data but "
                      "names no location",
                      file, quoteName(t.name()));
  return ref;
}

static Error resolveOne(pb::TensorProto &t, const std::string &file,
                        const std::string &modelDir, ExternalData &ext) {
  auto ref = externalRef(t, file);
  if (!ref)
    return ref.takeError();
  const std::string &loc = ref->location;
  std::string tname = quoteName(t.name());
  if (modelDir.empty())
    return makeErrorF("'{0}': tensor {1} keeps its data in external file {2}; "
                      "external data needs the model read from a file",
                      file, tname, quoteName(loc));
  if (loc.find('\0') != std::string::npos || loc.front() == '/' ||
      llvm::sys::path::is_absolute(loc))
    return makeErrorF("'{0}': external data location {1} of tensor {2} is an "
                      "absolute path; it must be relative to the model's "
                      "directory",
                      file, quoteName(loc), tname);
  for (auto it = llvm::sys::path::begin(loc), e = llvm::sys::path::end(loc);
       it != e; ++it)
    if (*it == "..")
      return makeErrorF("'{0}': external data location {1} of tensor {2} "
                        "escapes the model's directory with '..'",
                        file, quoteName(loc), tname);

  llvm::SmallString<256> joined(modelDir), realFile, realDir;
  llvm::sys::path::append(joined, loc);
  if (std::error_code ec = llvm::sys::fs::real_path(joined, realFile))
    return makeErrorF("'{0}': cannot open external data file '{1}' of tensor "
                      "{2}: {3}",
                      file, joined, tname, ec.message());
  if (std::error_code ec = llvm::sys::fs::real_path(modelDir, realDir))
    return makeErrorF("'{0}': cannot resolve the model's directory '{1}': {2}",
                      file, modelDir, ec.message());
  llvm::StringRef rf = realFile, rd = realDir;
  if (!rf.startswith(rd) || rf.size() <= rd.size() ||
      (rd != "/" && rf[rd.size()] != '/'))
    return makeErrorF("'{0}': external data location {1} of tensor {2} "
                      "resolves to '{3}', outside the model's directory",
                      file, quoteName(loc), tname, realFile);

  std::string key = std::string(realFile);
  auto found = ext.files.find(key);
  if (found == ext.files.end()) {
    // A FIFO or device would block or never end.
    if (!llvm::sys::fs::is_regular_file(key))
      return makeErrorF("'{0}': external data file '{1}' of tensor {2} is not "
                        "a regular file",
                        file, key, tname);
    auto buf = llvm::MemoryBuffer::getFile(key, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf)
      return makeErrorF("'{0}': cannot read external data file '{1}' of "
                        "tensor {2}: {3}",
                        file, key, tname, buf.getError().message());
    found = ext.files.emplace(key, std::move(*buf)).first;
  }
  uint64_t size = found->second->getBufferSize();
  uint64_t length = ref->length
                        ? *ref->length
                        : (ref->offset <= size ? size - ref->offset : 0);
  if (ref->offset > size || length > size - ref->offset)
    return makeErrorF("'{0}': external data of tensor {1} (offset {2}, length "
                      "{3}) lies beyond the end of '{4}' ({5} bytes)",
                      file, tname, ref->offset, length, key, size);
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  auto numel = checkedProduct(dims);
  int64_t eltBytes = elementBytes(t.data_type());
  if (!numel || eltBytes == 0)
    return makeErrorF("'{0}': tensor {1} has shape {2} and element type {3}; "
                      "its external data cannot be read",
                      file, tname, dimsStr(dims), dataTypeName(t.data_type()));
  if (length != static_cast<uint64_t>(*numel * eltBytes))
    return makeErrorF("'{0}': tensor {1} has {2} bytes of external data; its "
                      "shape {3} of {4} needs {5}",
                      file, tname, length, dimsStr(dims),
                      dataTypeName(t.data_type()), *numel * eltBytes);

  t.clear_external_data();
  if (t.data_type() != pb::TensorProto::FLOAT) {
    // Shape inference reads integer tensors (data propagation) and cannot
    // follow external references.
    t.set_raw_data(found->second->getBufferStart() + ref->offset, length);
    t.set_data_location(pb::TensorProto::DEFAULT);
    return Error::success();
  }
  auto add = [&](const char *k, const std::string &v) {
    auto *e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", key);
  add("offset", std::to_string(ref->offset));
  add("length", std::to_string(length));
  return Error::success();
}

Error resolveExternalData(pb::ModelProto &model, const std::string &file,
                          const std::string &modelDir, ExternalData &ext) {
  pb::GraphProto *graph = model.mutable_graph();
  for (pb::TensorProto &t : *graph->mutable_initializer())
    if (isExternal(t))
      if (Error e = resolveOne(t, file, modelDir, ext))
        return e;
  for (pb::NodeProto &n : *graph->mutable_node())
    for (pb::AttributeProto &a : *n.mutable_attribute())
      if (a.has_t() && isExternal(a.t()))
        if (Error e = resolveOne(*a.mutable_t(), file, modelDir, ext))
          return e;
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Tensor contents
//===----------------------------------------------------------------------===//

/// The raw little-endian bytes of a tensor stored in raw_data or externally;
/// nullopt when it uses a typed field instead.
static Expected<std::optional<llvm::StringRef>>
rawBytes(const pb::TensorProto &t, const ExternalData &ext,
         const std::string &file) {
  if (isExternal(t)) {
    auto ref = externalRef(t, file);
    if (!ref)
      return ref.takeError();
    auto it = ext.files.find(ref->location);
    // resolveExternalData rewrote every reference to a file it mapped.
    if (it == ext.files.end() || !ref->length)
      return makeErrorF("'{0}': external data of tensor {1} was not resolved",
                        file, quoteName(t.name()));
    return llvm::StringRef(it->second->getBufferStart() + ref->offset,
                           *ref->length);
  }
  if (t.has_raw_data())
    return llvm::StringRef(t.raw_data());
  return std::optional<llvm::StringRef>();
}

static Expected<int64_t> tensorNumel(const pb::TensorProto &t,
                                     const std::string &file) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  auto n = checkedProduct(dims);
  if (!n)
    return makeErrorF("'{0}': tensor {1} has an invalid shape {2}", file,
                      quoteName(t.name()), dimsStr(dims));
  return *n;
}

static Error sizeMismatch(const pb::TensorProto &t, const std::string &file,
                          uint64_t have, int64_t numel, const char *what) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  return makeErrorF("'{0}': tensor {1} has {2} {3} of data; its shape {4} "
                    "needs {5}",
                    file, quoteName(t.name()), have, what, dimsStr(dims),
                    numel);
}

Expected<std::vector<float>> readFloats(const pb::TensorProto &t,
                                        const ExternalData &ext,
                                        const std::string &file) {
  if (t.data_type() != pb::TensorProto::FLOAT)
    return makeErrorF("'{0}': tensor {1} has element type {2}; memfit "
                      "expects float32",
                      file, quoteName(t.name()), dataTypeName(t.data_type()));
  auto numel = tensorNumel(t, file);
  if (!numel)
    return numel.takeError();
  auto raw = rawBytes(t, ext, file);
  if (!raw)
    return raw.takeError();
  std::vector<float> out;
  if (*raw) {
    llvm::StringRef bytes = **raw;
    if (bytes.size() != static_cast<uint64_t>(*numel) * 4)
      return sizeMismatch(t, file, bytes.size(), *numel * 4, "bytes");
    out.resize(static_cast<size_t>(*numel));
    for (size_t i = 0; i < out.size(); ++i) {
      uint32_t bits = llvm::support::endian::read32le(bytes.data() + 4 * i);
      std::memcpy(&out[i], &bits, 4);
    }
    return out;
  }
  if (t.float_data_size() != *numel)
    return sizeMismatch(t, file, t.float_data_size(), *numel, "elements");
  out.assign(t.float_data().begin(), t.float_data().end());
  return out;
}

Expected<ConstTensor> readConstant(const pb::TensorProto &t,
                                   const ExternalData &ext,
                                   const std::string &file) {
  ConstTensor c;
  c.type = t.data_type();
  c.dims.assign(t.dims().begin(), t.dims().end());
  if (c.isFloat()) {
    auto f = readFloats(t, ext, file);
    if (!f)
      return f.takeError();
    c.floats = std::move(*f);
    return c;
  }
  if (c.type == pb::TensorProto::DOUBLE) {
    // Literals traced in double (a softmax scale) fold as float32, the
    // type everything they meet computes in.
    auto numel = tensorNumel(t, file);
    if (!numel)
      return numel.takeError();
    if (*numel > kMaxFoldElements)
      return makeErrorF("'{0}': constant {1} has {2} elements; memfit reads "
                        "double constants of at most {3}",
                        file, quoteName(t.name()), *numel, kMaxFoldElements);
    auto raw = rawBytes(t, ext, file);
    if (!raw)
      return raw.takeError();
    c.type = pb::TensorProto::FLOAT;
    if (*raw) {
      llvm::StringRef bytes = **raw;
      if (bytes.size() != static_cast<uint64_t>(*numel * 8))
        return sizeMismatch(t, file, bytes.size(), *numel * 8, "bytes");
      for (int64_t i = 0; i < *numel; ++i) {
        uint64_t bits = llvm::support::endian::read64le(bytes.data() + 8 * i);
        double d;
        std::memcpy(&d, &bits, 8);
        c.floats.push_back(static_cast<float>(d));
      }
      return c;
    }
    if (t.double_data_size() != *numel)
      return sizeMismatch(t, file, t.double_data_size(), *numel, "elements");
    for (double d : t.double_data())
      c.floats.push_back(static_cast<float>(d));
    return c;
  }
  int64_t width = 0;
  switch (c.type) {
  case pb::TensorProto::INT64:
    width = 8;
    break;
  case pb::TensorProto::INT32:
    width = 4;
    break;
  case pb::TensorProto::BOOL:
    width = 1;
    break;
  default:
    return makeErrorF("'{0}': constant {1} has element type {2}; memfit reads "
                      "constants of type FLOAT, INT64, INT32 and BOOL",
                      file, quoteName(t.name()), dataTypeName(c.type));
  }
  auto numel = tensorNumel(t, file);
  if (!numel)
    return numel.takeError();
  if (*numel > kMaxFoldElements)
    return makeErrorF("'{0}': constant {1} has {2} elements; memfit reads "
                      "integer constants of at most {3}",
                      file, quoteName(t.name()), *numel, kMaxFoldElements);
  auto raw = rawBytes(t, ext, file);
  if (!raw)
    return raw.takeError();
  c.ints.resize(static_cast<size_t>(*numel));
  if (*raw) {
    llvm::StringRef bytes = **raw;
    if (bytes.size() != static_cast<uint64_t>(*numel * width))
      return sizeMismatch(t, file, bytes.size(), *numel * width, "bytes");
    namespace endian = llvm::support::endian;
    for (size_t i = 0; i < c.ints.size(); ++i) {
      const char *p = bytes.data() + width * i;
      if (width == 8)
        c.ints[i] = static_cast<int64_t>(endian::read64le(p));
      else if (width == 4)
        c.ints[i] = static_cast<int32_t>(endian::read32le(p));
      else
        c.ints[i] = *p != 0;
    }
    return c;
  }
  if (c.type == pb::TensorProto::INT64) {
    if (t.int64_data_size() != *numel)
      return sizeMismatch(t, file, t.int64_data_size(), *numel, "elements");
    c.ints.assign(t.int64_data().begin(), t.int64_data().end());
  } else {
    if (t.int32_data_size() != *numel)
      return sizeMismatch(t, file, t.int32_data_size(), *numel, "elements");
    for (size_t i = 0; i < c.ints.size(); ++i)
      c.ints[i] = c.type == pb::TensorProto::BOOL ? t.int32_data(i) != 0
                                                  : t.int32_data(i);
  }
  return c;
}

} // namespace memfit::onnximport

namespace memfit {

llvm::Expected<std::vector<std::string>>
externalDataFiles(const std::string &path) {
  using namespace onnximport;
  using llvm::Error;
  pb::ModelProto model;
  if (Error err = parseModelFile(path, model))
    return err;
  std::set<std::string> out;
  for (const pb::TensorProto &t : model.graph().initializer()) {
    if (!isExternal(t))
      continue;
    auto ref = externalRef(t, path);
    if (!ref)
      return ref.takeError();
    const std::string &loc = ref->location;
    bool escapes = loc.find('\0') != std::string::npos || loc.front() == '/' ||
                   llvm::sys::path::is_absolute(loc);
    for (auto it = llvm::sys::path::begin(loc), e = llvm::sys::path::end(loc);
         it != e; ++it)
      escapes = escapes || *it == "..";
    if (escapes)
      return makeErrorF("'{0}': external data location {1} of tensor {2} "
                        "is outside the model's directory",
                        path, quoteName(loc), quoteName(t.name()));
    out.insert(loc);
  }
  return std::vector<std::string>(out.begin(), out.end());
}

} // namespace memfit
