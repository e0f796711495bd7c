//===- MappedArray.cpp - A .npy file mapped, not read ---------------------===//
#include "runtime/MappedArray.h"

#include "runtime/Npy.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memfit::rt {

float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13); // infinity, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign; // zero
  } else {
    // Subnormal: shift the mantissa up to a leading one.
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while (!(man & 0x400));
    bits = sign | (uint32_t(112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16ToFloat(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

struct TypeName {
  const char *descr;
  ElemType type;
  int64_t width;
  const char *name;
};
constexpr TypeName kTypes[] = {
    {"|u1", ElemType::U8, 1, "uint8"},
    {"<u1", ElemType::U8, 1, "uint8"},
    {"|i1", ElemType::I8, 1, "int8"},
    {"<i1", ElemType::I8, 1, "int8"},
    {"<u2", ElemType::U16, 2, "uint16"},
    {"<i2", ElemType::I16, 2, "int16"},
    {"<u4", ElemType::U32, 4, "uint32"},
    {"<i4", ElemType::I32, 4, "int32"},
    {"<i8", ElemType::I64, 8, "int64"},
    {"<f2", ElemType::F16, 2, "float16"},
    {"<V2", ElemType::BF16, 2, "bfloat16"},
    {"|V2", ElemType::BF16, 2, "bfloat16"},
    {"bfloat16", ElemType::BF16, 2, "bfloat16"},
    {"<f4", ElemType::F32, 4, "float32"},
};

} // namespace

std::unique_ptr<MappedArray> MappedArray::open(const std::string &path,
                                               std::string &err) {
  std::unique_ptr<MappedArray> a(new MappedArray());
  if (!a->file.open(path, err))
    return nullptr;
  // The header is parsed from the file, its data read through the mapping:
  // both within the mapped size.
  const int64_t size = a->file.size();
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    err = path + ": cannot open";
    return nullptr;
  }
  NpyHeader h;
  if (!readNpyHeader(f, size, path, h, err))
    return nullptr;
  const TypeName *t = nullptr;
  for (const TypeName &c : kTypes)
    if (h.descr == c.descr)
      t = &c;
  if (!t) {
    err = path + ": unsupported dtype '" + h.descr +
          "' (expected uint8, int8, uint16, int16, uint32, int32, int64, "
          "float16, bfloat16 or float32)";
    return nullptr;
  }
  a->kind = t->type;
  a->width = t->width;
  a->dims = h.shape;
  a->elems = h.count;
  if (a->elems * a->width > size - h.dataOffset) {
    err = path + ": truncated data (its header says " +
          std::to_string(a->elems) + " values of " + t->name + ")";
    return nullptr;
  }
  a->data = a->file.bytes() + h.dataOffset;
  return a;
}

MappedFile::~MappedFile() { close(); }

void MappedFile::close() {
  if (map)
    munmap(map, mapBytes);
  map = nullptr;
  mapBytes = 0;
}

bool MappedFile::open(const std::string &path, std::string &err) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = path + ": cannot open";
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    err = path + ": not a regular file";
    return false;
  }
  if (st.st_size > 0) {
    void *m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                   MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      err = path + ": cannot map the file";
      return false;
    }
    map = m;
    mapBytes = static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  return true;
}

int64_t MappedArray::firstOutside(int64_t limit,
                                  std::optional<int64_t> skip) const {
  for (int64_t i = 0; i < elems; ++i)
    if (const int64_t v = intAt(i); v != skip && (v < 0 || v >= limit))
      return i;
  return -1;
}

const char *MappedArray::typeName() const {
  for (const TypeName &c : kTypes)
    if (c.type == kind)
      return c.name;
  return "?";
}

int64_t MappedArray::intAt(int64_t i) const {
  const unsigned char *p = data + i * width;
  switch (kind) {
  case ElemType::U8:
    return p[0];
  case ElemType::I8:
    return static_cast<int8_t>(p[0]);
  case ElemType::U16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case ElemType::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case ElemType::U32: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case ElemType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case ElemType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  default:
    return static_cast<int64_t>(floatAt(i));
  }
}

float MappedArray::floatAt(int64_t i) const {
  const unsigned char *p = data + i * width;
  switch (kind) {
  case ElemType::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case ElemType::F16:
  case ElemType::BF16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return kind == ElemType::F16 ? halfToFloat(v) : bf16ToFloat(v);
  }
  default:
    return static_cast<float>(intAt(i));
  }
}

namespace {

std::string shapeText(const std::vector<int64_t> &s, size_t from) {
  std::string t = "[";
  for (size_t i = from; i < s.size(); ++i)
    t += (i > from ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

} // namespace

void ShardedArray::add(std::shared_ptr<const MappedArray> a) {
  if (first.empty())
    first.push_back(0);
  const int64_t rows = a->shape().empty() ? 0 : a->shape()[0];
  first.push_back(first.back() + rows);
  names.emplace_back();
  parts.push_back(std::move(a));
}

bool ShardedArray::open(const std::vector<std::string> &paths,
                        std::string &err) {
  for (const std::string &p : paths) {
    std::shared_ptr<const MappedArray> a = MappedArray::open(p, err);
    if (!a)
      return false;
    if (a->shape().empty()) {
      err = p + ": a 0-D array holds no samples";
      return false;
    }
    if (!parts.empty()) {
      const MappedArray &f = front();
      if (a->type() != f.type()) {
        err = p + ": a shard of " + a->typeName() + ", not " + f.typeName() +
              " as " + names.front();
        return false;
      }
      if (std::vector<int64_t>(a->shape().begin() + 1, a->shape().end()) !=
          std::vector<int64_t>(f.shape().begin() + 1, f.shape().end())) {
        err = p + ": samples of shape " + shapeText(a->shape(), 1) + ", not " +
              shapeText(f.shape(), 1) + " as " + names.front();
        return false;
      }
    }
    add(std::move(a));
    names.back() = p;
  }
  return true;
}

std::pair<const MappedArray *, int64_t> ShardedArray::at(int64_t s) const {
  // The last shard whose first sample is at or before s.
  const auto it = std::upper_bound(first.begin(), first.end() - 1, s) - 1;
  const auto i = static_cast<size_t>(it - first.begin());
  return {parts[i].get(), s - *it};
}

} // namespace memfit::rt
