//===- Sum.h - Compensated float sums of both backends ----------*- C++ -*-===//
//
// The float sum memfit's reductions use instead of double (double runs at
// 1/64 of float on GeForce, L4 and L40S cards): Neumaier's compensated sum,
// which keeps the rounding error of every add, so a sum of millions of terms
// stays within a few float ulps of the exact one. Host and device compile
// the same code; the CUDA backend combines per-thread sums in a tree fixed
// by the launch shape (runtime/cuda/Device.cuh), the tests combine them in
// order on the CPU.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_SUM_H
#define MEMFIT_RUNTIME_KERNELS_SUM_H

#include "runtime/kernels/Rounding.h"

#include <cmath>

namespace memfit::rt::kernels {

/// s + c is the sum; c collects what each add of s rounded away. An
/// infinite or NaN term makes `s` non-finite, and value() returns it
/// unchanged (the compensation would turn inf into NaN).
struct CompensatedSum {
  float s = 0, c = 0;
  MEMFIT_HD void add(float v) {
    const float t = s + v;
    c += fabsf(s) >= fabsf(v) ? (s - t) + v : (v - t) + s;
    s = t;
  }
  MEMFIT_HD void add(CompensatedSum o) {
    add(o.s);
    c += o.c;
  }
  MEMFIT_HD float value() const {
    return (floatBits(s) & 0x7f800000u) == 0x7f800000u ? s : s + c;
  }
};

} // namespace memfit::rt::kernels

#endif
