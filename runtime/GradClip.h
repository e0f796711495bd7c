//===- GradClip.h - Gradient clipping by global norm ------------*- C++ -*-===//
//
// torch.nn.utils.clip_grad_norm_'s arithmetic, shared by every backend's
// Exec::clipGradients: each gradient's L2 norm as a float, the norm of
// those norms, and the coefficient every gradient is multiplied by. The
// sums run in double, so the norm is the exact one rounded to float where
// torch's fp32 reductions may differ in the last bits.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_GRADCLIP_H
#define MEMFIT_RUNTIME_GRADCLIP_H

#include "runtime/Comm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace memfit::rt {

/// The L2 norm of n floats.
inline float l2Norm(const float *g, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += double(g[i]) * double(g[i]);
  return static_cast<float>(std::sqrt(sum));
}

/// The norm of the per-tensor norms; with the gradients sharded over the
/// ranks (shard >= 1) each holds its slices' norms, and the squares are
/// summed over the ranks.
inline float globalNorm(const float *norms, size_t n, Comm &comm, int shard) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += double(norms[i]) * double(norms[i]);
  if (shard >= 1 && comm.size() > 1) {
    float mine = static_cast<float>(sum);
    comm.allReduceSum(&mine, 1);
    sum = mine;
  }
  return static_cast<float>(std::sqrt(sum));
}

/// min(1, maxNorm / (norm + 1e-6)) in fp32, as torch computes it; a
/// non-finite norm gives a non-finite coefficient, as in torch.
inline float clipCoefficient(float maxNorm, float norm) {
  const float c = maxNorm / (norm + 1e-6f);
  return std::isnan(c) ? c : std::min(c, 1.0f);
}

} // namespace memfit::rt

#endif
