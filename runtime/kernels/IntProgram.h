//===- IntProgram.h - Integer programs of both backends ---------*- C++ -*-===//
//
// The arithmetic of OpKind::IntProgram, compiled by the host compiler into
// the CPU emulation and by nvcc into the CUDA backend, as Elementwise.h.
// One call evaluates one row: its positions in order (reversed when the
// program's CumSums run from the end), every instruction at each position,
// a CumSum keeping its running sum across the row. A program with an
// ArgMax (a reduction of the row: the last token that is not padding)
// first runs once over the row to find it, then again with it known;
// ArgMax of a value that itself needs a reduction, or a second ArgMax in
// one program, is refused at import.
// A row's reduction alone (perRow) is stored once per row. Registers are
// 64-bit, so no id arithmetic a model writes overflows; a division by zero
// gives 0 rather than trapping the host or returning whatever the GPU computes.
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

/// Where an instruction is evaluated: the sample's token id there, the
/// position within its row, and the sample's index in the sub-batch.
struct IntAt {
  int64_t id, pos, sample;
};

MEMFIT_HD int64_t intOp(IntOpKind k, int64_t a, int64_t b, int64_t c,
                        int64_t imm, IntAt at, int64_t &acc) {
  switch (k) {
  case IntOpKind::Ids:
    return at.id;
  case IntOpKind::Pos:
    return at.pos;
  case IntOpKind::Sample:
    return at.sample;
  case IntOpKind::ArgMax: // found by the pass before: held in acc
    return acc;
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
  // A program has at most one ArgMax (the importer's rule): its best so
  // far in two scalars, so the thread's state stays two arrays.
  int64_t bestValue = INT64_MIN, bestPos = 0;
  const int64_t sample = row / (p.perSample / p.inner);
  bool reduces = false;
  for (int k = 0; k < p.count; ++k) {
    reduces = reduces || p.code[k].kind == IntOpKind::ArgMax;
    acc[k] = 0;
  }
  // Pass 0 (with a reduction only) finds the ArgMax; pass 1 stores.
  for (int pass = reduces ? 0 : 1; pass < 2; ++pass) {
    if (pass == 1 && reduces) // the CumSums start again
      for (int k = 0; k < p.count; ++k)
        acc[k] = p.code[k].kind == IntOpKind::ArgMax ? bestPos : 0;
    for (int64_t s = 0; s < p.inner; ++s) {
      int64_t pos = p.reverse ? p.inner - 1 - s : s;
      int64_t at = row * p.inner + pos;
      for (int k = 0; k < p.count; ++k) {
        const IntInstr &in = p.code[k];
        int64_t a = in.a >= 0 ? reg[in.a] : 0;
        reg[k] = intOp(in.kind, a, in.b >= 0 ? reg[in.b] : 0,
                       in.c >= 0 ? reg[in.c] : 0, in.imm,
                       IntAt{ids[at], pos, sample}, acc[k]);
        // First (imm 0) or last (imm 1) of the largest, whatever the order
        // the row is walked in.
        if (pass == 0 && in.kind == IntOpKind::ArgMax &&
            (a > bestValue ||
             (a == bestValue &&
              (in.imm != 0 ? pos > bestPos : pos < bestPos)))) {
          bestValue = a;
          bestPos = pos;
        }
      }
      if (pass == 1 && !p.perRow)
        store(at, reg[p.count - 1]);
    }
  }
  if (p.perRow) // the same at every position of the row
    store(row, reg[p.count - 1]);
}

} // namespace memfit::rt::kernels

#endif
