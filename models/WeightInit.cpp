//===- WeightInit.cpp - Deterministic weight values for the zoo -----------===//
#include "models/WeightInit.h"

#include "llvm/Support/Endian.h"

#include <cassert>
#include <cmath>
#include <cstring>

namespace memfit::zoo {

namespace {

// Fixed so that a model file can be regenerated bit for bit.
constexpr uint64_t kZooSeed = 0x6d656d666974ULL; // "memfit"

uint64_t splitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void putFloat(char *out, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  llvm::support::endian::write32le(out, bits);
}

} // namespace

int64_t WeightSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

uint64_t hashName(llvm::StringRef name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name.bytes()) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string weightRawData(const WeightSpec &spec) {
  int64_t n = spec.numElements();
  std::string bytes(static_cast<size_t>(n) * 4, '\0');
  char *out = bytes.data();
  switch (spec.fill) {
  case WeightFill::Zeros:
    return bytes; // +0.0f is all zero bits
  case WeightFill::Ones:
    for (int64_t i = 0; i < n; ++i)
      putFloat(out + 4 * i, 1.0f);
    return bytes;
  case WeightFill::HeUniform:
  case WeightFill::GlorotUniform:
    break;
  }
  int64_t fanSum = spec.fill == WeightFill::HeUniform
                       ? spec.fanIn
                       : spec.fanIn + spec.fanOut;
  assert(fanSum > 0 && "random fill needs a fan");
  double bound = std::sqrt(6.0 / static_cast<double>(fanSum));
  uint64_t state = kZooSeed ^ hashName(spec.name);
  for (int64_t i = 0; i < n; ++i) {
    // 24 random bits give a uniform float in [-1, 1) exactly representable.
    double u =
        static_cast<double>(splitMix64(state) >> 40) * (1.0 / 8388608.0) - 1.0;
    putFloat(out + 4 * i, static_cast<float>(bound * u));
  }
  return bytes;
}

} // namespace memfit::zoo
