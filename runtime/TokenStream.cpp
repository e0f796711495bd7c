//===- TokenStream.cpp - A flat token file, memory-mapped -----------------===//
#include "runtime/TokenStream.h"

#include <cstring>

namespace memfit::rt {

std::unique_ptr<TokenStream> TokenStream::open(const std::string &path,
                                               const std::string &rawDtype,
                                               std::string &err) {
  std::unique_ptr<TokenStream> t(new TokenStream());
  if (!t->raw.open(path, err))
    return nullptr;
  const int64_t size = t->raw.size();
  if (size >= 6 && std::memcmp(t->raw.bytes(), "\x93NUMPY", 6) == 0) {
    t->raw.close(); // read through the array's own mapping
    t->array = MappedArray::open(path, err);
    if (!t->array)
      return nullptr;
    if (t->array->shape().size() != 1) {
      err = path + ": a token file must be one-dimensional, not of shape " +
            std::to_string(t->array->shape().size()) + "-D";
      return nullptr;
    }
    if (!t->array->isInteger()) {
      err = path + ": token ids of dtype " + t->array->typeName() +
            " (expected an integer type)";
      return nullptr;
    }
    t->count = t->array->count();
    return t;
  }
  // A raw file: nanoGPT's train.bin.
  if (rawDtype != "uint16" && rawDtype != "uint32") {
    err = "--token-dtype " + rawDtype + ": expected uint16 or uint32";
    return nullptr;
  }
  t->width = rawDtype == "uint16" ? 2 : 4;
  if (size % t->width) {
    err = path + ": " + std::to_string(size) + " bytes is no whole number of " +
          rawDtype + " tokens (truncated, or another dtype: see --token-dtype)";
    return nullptr;
  }
  t->count = size / t->width;
  return t;
}

int64_t TokenStream::firstOutside(int64_t limit) const {
  if (array)
    return array->firstOutside(limit);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = at(i);
    if (v < 0 || v >= limit)
      return i;
  }
  return -1;
}

const char *TokenStream::dtypeName() const {
  if (array)
    return array->typeName();
  return width == 4 ? "uint32" : "uint16";
}

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
} // namespace

uint64_t sampleHash(uint64_t seed, uint64_t epoch, int64_t s) {
  return splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^
                    static_cast<uint64_t>(s));
}

int64_t windowStart(int64_t s, uint64_t epoch, int64_t n, int64_t T,
                    bool random, uint64_t seed) {
  if (!random)
    return s * T;
  const uint64_t h = sampleHash(seed, epoch, s);
  return static_cast<int64_t>(h % static_cast<uint64_t>(n - T));
}

} // namespace memfit::rt
