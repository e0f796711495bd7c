//===- IntProgram.cpp - Integer programs on the CPU -----------------------===//
#include "runtime/kernels/IntProgram.h"
#include "runtime/Kernels.h"

namespace memfit::rt {

void intProgram(const IntProgramParams &p, int64_t n, const int32_t *ids,
                int32_t *yInt, float *yFloat) {
  int64_t rows = n * p.perSample / p.inner;
  for (int64_t r = 0; r < rows; ++r) {
    if (yInt)
      kernels::intProgramRow(p, ids, r, [&](int64_t at, int64_t v) {
        yInt[at] = static_cast<int32_t>(v);
      });
    else
      kernels::intProgramRow(p, ids, r, [&](int64_t at, int64_t v) {
        yFloat[at] = static_cast<float>(v);
      });
  }
}

} // namespace memfit::rt
