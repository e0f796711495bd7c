//===- TokenStream.cpp - A flat token file, memory-mapped -----------------===//
#include "runtime/TokenStream.h"

#include "runtime/Npy.h"

#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memfit::rt {

std::unique_ptr<TokenStream> TokenStream::open(const std::string &path,
                                               const std::string &rawDtype,
                                               std::string &err) {
  std::unique_ptr<TokenStream> t(new TokenStream());
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = path + ": cannot open";
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    err = path + ": not a regular file";
    return nullptr;
  }
  const auto size = static_cast<int64_t>(st.st_size);
  int64_t offset = 0;
  char magic[6] = {};
  if (size >= 6 && ::pread(fd, magic, 6, 0) == 6 &&
      std::memcmp(magic, "\x93NUMPY", 6) == 0) {
    std::ifstream f(path, std::ios::binary);
    NpyHeader h;
    if (!readNpyHeader(f, size, path, h, err)) {
      ::close(fd);
      return nullptr;
    }
    if (h.shape.size() != 1) {
      ::close(fd);
      err = path + ": a token file must be one-dimensional, not of shape " +
            std::to_string(h.shape.size()) + "-D";
      return nullptr;
    }
    const std::string &d = h.descr;
    if (d == "|u1" || d == "<u1")
      t->kind = Kind::U8, t->width = 1;
    else if (d == "<u2")
      t->kind = Kind::U16, t->width = 2;
    else if (d == "<u4")
      t->kind = Kind::U32, t->width = 4;
    else if (d == "<i4")
      t->kind = Kind::I32, t->width = 4;
    else if (d == "<i8")
      t->kind = Kind::I64, t->width = 8;
    else {
      ::close(fd);
      err = path + ": token ids of dtype '" + d +
            "' (expected uint8, uint16, uint32, int32 or int64)";
      return nullptr;
    }
    offset = h.dataOffset;
    t->count = h.count;
    if (t->count * t->width > size - offset) {
      ::close(fd);
      err = path + ": truncated data (its header says " +
            std::to_string(t->count) + " tokens)";
      return nullptr;
    }
  } else {
    if (rawDtype == "uint16")
      t->kind = Kind::U16, t->width = 2;
    else if (rawDtype == "uint32")
      t->kind = Kind::U32, t->width = 4;
    else {
      ::close(fd);
      err = "--token-dtype " + rawDtype + ": expected uint16 or uint32";
      return nullptr;
    }
    if (size % t->width) {
      ::close(fd);
      err = path + ": " + std::to_string(size) +
            " bytes is no whole number "
            "of " +
            rawDtype +
            " tokens (truncated, or another dtype: see "
            "--token-dtype)";
      return nullptr;
    }
    t->count = size / t->width;
  }
  if (size > 0) {
    t->map =
        mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (t->map == MAP_FAILED) {
      t->map = nullptr;
      ::close(fd);
      err = path + ": cannot map the file";
      return nullptr;
    }
    t->mapBytes = static_cast<size_t>(size);
    t->data = static_cast<const unsigned char *>(t->map) + offset;
    // Windows are read in order within each: the kernel reads ahead.
    madvise(t->map, t->mapBytes, MADV_NORMAL);
  }
  ::close(fd);
  return t;
}

TokenStream::~TokenStream() {
  if (map)
    munmap(map, mapBytes);
}

int64_t TokenStream::firstOutside(int64_t limit) const {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = at(i);
    if (v < 0 || v >= limit)
      return i;
  }
  return -1;
}

const char *TokenStream::dtypeName() const {
  switch (kind) {
  case Kind::U8:
    return "uint8";
  case Kind::U16:
    return "uint16";
  case Kind::U32:
    return "uint32";
  case Kind::I32:
    return "int32";
  case Kind::I64:
    break;
  }
  return "int64";
}

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
} // namespace

int64_t windowStart(int64_t s, uint64_t epoch, int64_t n, int64_t T,
                    bool random, uint64_t seed) {
  if (!random)
    return s * T;
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^
                                static_cast<uint64_t>(s));
  return static_cast<int64_t>(h % static_cast<uint64_t>(n - T));
}

} // namespace memfit::rt
