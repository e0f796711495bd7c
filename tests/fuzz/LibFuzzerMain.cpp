//===- LibFuzzerMain.cpp - One fuzz target as a libFuzzer entry point -----===//
//
// Compiled once per target with MEMFIT_FUZZ_TARGET naming its function in
// Targets.h.
//
//===----------------------------------------------------------------------===//
#include "tests/fuzz/Targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  memfit::fuzz::MEMFIT_FUZZ_TARGET(data, size);
  return 0;
}
