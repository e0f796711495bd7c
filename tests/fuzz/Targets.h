//===- Targets.h - Input readers as fuzz targets ----------------*- C++ -*-===//
//
// One function per reader of files a user hands memfit or a trainer: ONNX
// models (loader and importer), device files, measured profiles, plan.json
// and .npy data. Each takes arbitrary bytes and must return normally: a
// malformed input is an error naming the file, never a crash, a hang or an
// out-of-memory. Where a reader has a writer, what it accepts must survive a
// round trip. A broken property traps, which libFuzzer and the replay tool
// both report as a crash.
//
// libFuzzer drives them through LibFuzzerMain.cpp (the clang build of
// tests/fuzz/CMakeLists.txt); the plain suite replays the committed corpora
// and regression inputs through Replay.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_FUZZ_TARGETS_H
#define MEMFIT_TESTS_FUZZ_TARGETS_H

#include <cstddef>
#include <cstdint>

namespace memfit::fuzz {

using Target = void (*)(const uint8_t *data, size_t size);

void onnxModel(const uint8_t *data, size_t size);
void deviceFile(const uint8_t *data, size_t size);
void profile(const uint8_t *data, size_t size);
void planJson(const uint8_t *data, size_t size);
void npy(const uint8_t *data, size_t size);

struct NamedTarget {
  const char
      *name; // the directory name under tests/fuzz/corpus and regressions
  Target run;
};
/// Every target, by name.
extern const NamedTarget kTargets[5];

} // namespace memfit::fuzz

#endif
