//===- SelfCheck.h - Shared pieces of the CUDA self-check -------*- C++ -*-===//
//
// Random data, uploads and the comparison every check of
// memfit_cuda_selfcheck uses (SelfCheck.cpp), the 16-bit programs'
// checks (SelfCheckNarrow.cpp) and those of the typed vector paths
// (SelfCheckVector.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CUDA_SELFCHECK_SELFCHECK_H
#define MEMFIT_RUNTIME_CUDA_SELFCHECK_SELFCHECK_H

#include "runtime/Exec.h"

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace memfit::rt::selfcheck {

using Vec = std::vector<float>;

extern int failures, checks;
extern std::mt19937 rng;

/// Uniform in [-1, 1), or integers in [-3, 3].
Vec random(int64_t count, bool integers = false);
/// Host to device, finished before anything runs on the backend's streams
/// (a copy from pageable memory may still be in flight when cudaMemcpy
/// returns, and the backend's streams do not wait for the legacy one).
void upload(void *dst, const void *src, int64_t bytes);
/// |got - want| <= tol * (1 + |want|) everywhere, NaN matching NaN and
/// infinities matching exactly; tol 0 asks for the same bits. A mismatch is
/// printed and counted in `failures`.
void expect(const std::string &what, const Vec &got, const Vec &want,
            double tol);

/// Settles the three directions of convolution `p` at the program's
/// sub-batch as the trainers' start-up check does, told to run the fastest
/// cuDNN graph-API plan of each that has one (ConvGraphUse::Always);
/// which directions got one, indexed by ConvDir. The check uses the arena's
/// start as scratch: call it before placing operands.
std::array<bool, 3> settleOnGraph(Exec &x, const ConvParams &p,
                                  int64_t workspaceBytes);

/// A bf16 or fp16 program's operations against the reference kernels run
/// as the CPU emulation runs them.
void checkNarrow(Precision p);

/// The typed vector paths of dropout, concatenation, padding, the layout
/// gathers and LayerNorm in storage p's format (SelfCheckVector.cpp).
void checkVectorPaths(Precision p);

} // namespace memfit::rt::selfcheck

#endif
