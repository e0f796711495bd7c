//===- TokenStream.h - A flat token file, memory-mapped ---------*- C++ -*-===//
//
// The trainer's --tokens: a language-model corpus as one flat array of
// token ids, as nanoGPT's prepare scripts write train.bin (raw
// little-endian uint16, or uint32 with --token-dtype) or a 1-D .npy of
// any integer type (MappedArray). The file is mapped, not read: a
// corpus far larger than host memory trains with the pages the windows
// touch. Each sample is a window of T tokens and its labels the next T.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_TOKENSTREAM_H
#define MEMFIT_RUNTIME_TOKENSTREAM_H

#include "runtime/MappedArray.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace memfit::rt {

class TokenStream {
public:
  /// Maps `path`; a raw file holds `rawDtype` ("uint16" or "uint32")
  /// values. Null with `err` naming the file when it cannot be used.
  static std::unique_ptr<TokenStream>
  open(const std::string &path, const std::string &rawDtype, std::string &err);
  TokenStream(const TokenStream &) = delete;
  TokenStream &operator=(const TokenStream &) = delete;

  int64_t size() const { return count; }
  int64_t at(int64_t i) const {
    if (array)
      return array->intAt(i);
    if (width == 2) {
      uint16_t v;
      std::memcpy(&v, raw.bytes() + i * 2, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, raw.bytes() + i * 4, 4);
    return v;
  }
  /// The first position whose id is outside [0, limit), or -1.
  int64_t firstOutside(int64_t limit) const;
  /// The file's values as numpy names them ("uint16").
  const char *dtypeName() const;

private:
  TokenStream() = default;
  /// A raw file's width-byte ids, mapped; a .npy file's are read through
  /// `array` (raw is then closed).
  MappedFile raw;
  std::unique_ptr<MappedArray> array;
  int64_t count = 0;
  int64_t width = 2;
};

/// A counter-based draw for sample `s` of epoch `epoch` under `seed`
/// (splitmix64 chained over the three): the same numbers in every run, so a
/// resumed run draws what an uninterrupted one does without saving state.
uint64_t sampleHash(uint64_t seed, uint64_t epoch, int64_t s);

/// Where sample window `s` of epoch `epoch` starts in a stream of n
/// tokens, windows of T (plus the last label): sequential windows are
/// tokens [s*T, (s+1)*T]; random ones start at a position drawn from a
/// counter-based hash of (seed, epoch, s) in [0, n - T), so a resumed run
/// draws the windows an uninterrupted one does without saving any state.
int64_t windowStart(int64_t s, uint64_t epoch, int64_t n, int64_t T,
                    bool random, uint64_t seed);

} // namespace memfit::rt

#endif
