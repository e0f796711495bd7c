//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
#include "runtime/Npy.h"

#include <cstring>
#include <fstream>
#include <istream>
#include <limits>

namespace memfit::rt {

int64_t NpyArray::count() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// An array with a zero dimension holds no bytes, and memcpy from the null
// data() of an empty vector is undefined even for zero bytes.
std::vector<float> NpyArray::asFloat() const {
  std::vector<float> out(count());
  if (!out.empty())
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<int32_t> NpyArray::asInt32() const {
  std::vector<int32_t> out(count());
  if (dtype == NpyDType::I32) {
    if (!out.empty())
      std::memcpy(out.data(), bytes.data(), out.size() * 4);
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v;
      std::memcpy(&v, bytes.data() + 8 * i, 8);
      out[i] = v < std::numeric_limits<int32_t>::min() ||
                       v > std::numeric_limits<int32_t>::max()
                   ? -1
                   : static_cast<int32_t>(v);
    }
  }
  return out;
}

static std::string field(const std::string &h, const std::string &key) {
  auto k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return "";
  auto colon = h.find(':', k);
  if (colon == std::string::npos)
    return "";
  size_t i = colon + 1;
  while (i < h.size() && h[i] == ' ')
    ++i;
  if (i >= h.size())
    return "";
  char open = h[i];
  char close = open == '(' ? ')' : open == '\'' ? '\'' : ',';
  size_t end = h.find(close, i + 1);
  if (end == std::string::npos)
    return "";
  return h.substr(i, end - i + 1);
}

std::optional<NpyArray> readNpy(const std::string &path, std::string &err) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    err = path + ": cannot open";
    return std::nullopt;
  }
  int64_t size = static_cast<int64_t>(f.tellg());
  f.seekg(0);
  if (!f || size < 0) {
    err = path + ": cannot read";
    return std::nullopt;
  }
  return readNpy(f, size, path, err);
}

bool readNpyHeader(std::istream &f, int64_t size, const std::string &path,
                   NpyHeader &out, std::string &err) {
  char magic[8];
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    err = path + ": not a .npy file";
    return false;
  }
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    f.read(reinterpret_cast<char *>(b), 2);
    headerLen = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    f.read(reinterpret_cast<char *>(b), 4);
    headerLen = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  } else {
    err = path + ": unsupported .npy version";
    return false;
  }
  if (!f || headerLen > (1u << 20)) {
    err = path + ": malformed .npy header";
    return false;
  }
  std::string h(headerLen, '\0');
  f.read(h.data(), headerLen);
  if (!f) {
    err = path + ": truncated .npy header";
    return false;
  }
  std::string descr = field(h, "descr");
  out.descr = descr.size() >= 2 && descr.front() == '\''
                  ? descr.substr(1, descr.size() - 2)
                  : descr;
  if (field(h, "fortran_order").rfind("True", 0) == 0) {
    err = path + ": Fortran-ordered arrays are not supported";
    return false;
  }
  std::string shape = field(h, "shape");
  if (shape.size() < 2 || shape.front() != '(') {
    err = path + ": malformed shape in .npy header";
    return false;
  }
  int64_t elems = 1;
  for (size_t i = 1; i + 1 < shape.size();) {
    while (i + 1 < shape.size() && (shape[i] == ' ' || shape[i] == ','))
      ++i;
    if (i + 1 >= shape.size())
      break;
    size_t j = i;
    int64_t d = 0;
    while (j < shape.size() && shape[j] >= '0' && shape[j] <= '9') {
      d = d * 10 + (shape[j] - '0');
      if (d > (int64_t(1) << 40)) {
        err = path + ": dimension too large";
        return false;
      }
      ++j;
    }
    if (j == i) {
      err = path + ": malformed shape in .npy header";
      return false;
    }
    out.shape.push_back(d);
    // Each dimension is at most 2^40, and so is the product so far: checked
    // before it can overflow (fuzz_npy found 2222222222 x 22222222222).
    if (__builtin_mul_overflow(elems, d, &elems) ||
        elems > (int64_t(1) << 40)) {
      err = path + ": array too large";
      return false;
    }
    i = j;
  }
  out.count = elems;
  out.dataOffset = static_cast<int64_t>(f.tellg());
  if (out.dataOffset < 0 || out.dataOffset > size) {
    err = path + ": truncated .npy header";
    return false;
  }
  return true;
}

std::optional<NpyArray> readNpy(std::istream &f, int64_t size,
                                const std::string &path, std::string &err) {
  NpyHeader h;
  if (!readNpyHeader(f, size, path, h, err))
    return std::nullopt;
  NpyArray a;
  if (h.descr == "<f4")
    a.dtype = NpyDType::F32;
  else if (h.descr == "<i4")
    a.dtype = NpyDType::I32;
  else if (h.descr == "<i8")
    a.dtype = NpyDType::I64;
  else {
    err = path + ": unsupported dtype " +
          (h.descr.empty() ? "?" : "'" + h.descr + "'") +
          " (expected <f4, <i4 or <i8)";
    return std::nullopt;
  }
  a.shape = std::move(h.shape);
  const int64_t elems = h.count;
  int64_t width = a.dtype == NpyDType::I64 ? 8 : 4;
  // The data must be there before memory is reserved for it: a header that
  // claims a terabyte is a truncated file, not an allocation to attempt.
  if (elems * width > size - h.dataOffset) {
    err = path + ": truncated data (expected " + std::to_string(elems) +
          " values)";
    return std::nullopt;
  }
  a.bytes.resize(static_cast<size_t>(elems * width));
  f.read(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
  if (!f) {
    err = path + ": truncated data (expected " + std::to_string(elems) +
          " values)";
    return std::nullopt;
  }
  return a;
}

bool writeNpy(const std::string &path, const NpyArray &a, std::string &err) {
  std::string descr = a.dtype == NpyDType::F32   ? "<f4"
                      : a.dtype == NpyDType::I32 ? "<i4"
                                                 : "<i8";
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i)
    shape += std::to_string(a.shape[i]) + (a.shape.size() == 1      ? ","
                                           : i + 1 < a.shape.size() ? ", "
                                                                    : "");
  shape += ")";
  std::string h = "{'descr': '" + descr +
                  "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    err = path + ": cannot write";
    return false;
  }
  f.write("\x93NUMPY\x01\x00", 8);
  unsigned char len[2] = {static_cast<unsigned char>(h.size() & 255),
                          static_cast<unsigned char>(h.size() >> 8)};
  f.write(reinterpret_cast<char *>(len), 2);
  f.write(h.data(), h.size());
  f.write(a.bytes.data(), a.bytes.size());
  if (!f) {
    err = path + ": write failed";
    return false;
  }
  return true;
}

} // namespace memfit::rt
