//===- Common.h - Helpers shared by the CPU reference kernels ---*- C++ -*-===//
//
// Internal to runtime/cpu: the one place that implements the `accumulate`
// convention of Kernels.h (add into the output, or overwrite it).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CPU_COMMON_H
#define MEMFIT_RUNTIME_CPU_COMMON_H

#include <algorithm>
#include <cstdint>

namespace memfit::rt::cpu {

/// Writes a gradient value under the accumulate convention.
inline void put(float &dst, float v, bool accumulate) {
  dst = accumulate ? dst + v : v;
}

/// Prepares an output that the caller then only adds into: when not
/// accumulating its previous contents (possibly NaN poison) are discarded.
inline void clearUnlessAccumulating(float *dst, int64_t count,
                                    bool accumulate) {
  if (!accumulate)
    std::fill(dst, dst + count, 0.0f);
}

} // namespace memfit::rt::cpu

#endif
