//===- IntProgram.h - Integer programs of both backends ---------*- C++ -*-===//
//
// The arithmetic of OpKind::IntProgram, compiled by the host compiler into
// the CPU emulation and by nvcc into the CUDA backend, as Elementwise.h.
// One call evaluates one row: its positions in order (reversed when the
// program's CumSums run from the end), every instruction at each position,
// a CumSum keeping its running sum across the row. Registers are 64-bit, so
// no id arithmetic a model writes overflows; a division by zero gives 0
// rather than trapping the host or returning whatever the GPU computes.
//
// The switch names every kind (-Werror=switch): an instruction added to
// IntOps.def without its arithmetic does not compile.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_INTPROGRAM_H
#define MEMFIT_RUNTIME_KERNELS_INTPROGRAM_H

#include "runtime/Kernels.h"
#include "runtime/kernels/HostDevice.h"

#include <cstdint>

namespace memfit::rt::kernels {

MEMFIT_HD int64_t intOp(IntOpKind k, int64_t a, int64_t b, int64_t c,
                        int64_t imm, int64_t id, int64_t &acc) {
  switch (k) {
  case IntOpKind::Ids:
    return id;
  case IntOpKind::Imm:
    return imm;
  case IntOpKind::Add:
    return a + b;
  case IntOpKind::Sub:
    return a - b;
  case IntOpKind::Mul:
    return a * b;
  case IntOpKind::Div:
    return b == 0 ? 0 : a / b;
  case IntOpKind::Mod: {
    if (b == 0)
      return 0;
    int64_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
  }
  case IntOpKind::Min:
    return a < b ? a : b;
  case IntOpKind::Max:
    return a > b ? a : b;
  case IntOpKind::Equal:
    return a == b;
  case IntOpKind::Less:
    return a < b;
  case IntOpKind::Greater:
    return a > b;
  case IntOpKind::LessOrEqual:
    return a <= b;
  case IntOpKind::GreaterOrEqual:
    return a >= b;
  case IntOpKind::And:
    return a != 0 && b != 0;
  case IntOpKind::Or:
    return a != 0 || b != 0;
  case IntOpKind::Xor:
    return (a != 0) != (b != 0);
  case IntOpKind::Not:
    return a == 0;
  case IntOpKind::Neg:
    return -a;
  case IntOpKind::Abs:
    return a < 0 ? -a : a;
  case IntOpKind::Bool:
    return a != 0;
  case IntOpKind::Where:
    return a != 0 ? b : c;
  case IntOpKind::CumSum:
    acc += a;
    return acc;
  case IntOpKind::CumSumExclusive: {
    int64_t before = acc;
    acc += a;
    return before;
  }
  }
  return 0; // not reached: the switch names every kind
}

/// Row `row` of the program over n samples' ids; `store(at, value)` writes
/// output element `at`.
template <class Store>
MEMFIT_HD void intProgramRow(const IntProgramParams &p, const int32_t *ids,
                             int64_t row, Store store) {
  int64_t reg[kMaxIntInstrs], acc[kMaxIntInstrs];
  for (int k = 0; k < p.count; ++k)
    acc[k] = 0;
  for (int64_t s = 0; s < p.inner; ++s) {
    int64_t at = row * p.inner + (p.reverse ? p.inner - 1 - s : s);
    for (int k = 0; k < p.count; ++k) {
      const IntInstr &in = p.code[k];
      reg[k] =
          intOp(in.kind, in.a >= 0 ? reg[in.a] : 0, in.b >= 0 ? reg[in.b] : 0,
                in.c >= 0 ? reg[in.c] : 0, in.imm, ids[at], acc[k]);
    }
    store(at, reg[p.count - 1]);
  }
}

} // namespace memfit::rt::kernels

#endif
