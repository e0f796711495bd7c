//===- ExecEmuPrecisionTest.cpp - the emulation's 16-bit storage ----------===//
//
// bf16 and fp16 programs on the CPU emulation: 16-bit blocks are rounded as
// soon as the operation that received them is done, fill exactly the bytes
// the plan gives them, travel whole through copies; working copies of
// weights are the rounded master, refreshed after it changes; the loss
// scale unscales gradients and finds infinities; GradScaler's schedule.
//
//===----------------------------------------------------------------------===//
#include "runtime/Exec.h"
#include "runtime/kernels/Rounding.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace memfit::rt;
using memfit::rt::kernels::roundToBf16;
using memfit::rt::kernels::roundToFp16;

namespace {
// 64 arena bytes: two 16-bit blocks of 8 elements at 0 and 16, one at 32;
// one host slot of 16 bytes; one weight of 4 values with a working copy.
struct Fixture {
  ProgramInfo info = make(Precision::BF16);
  HostSlot slot{0, 16};
  WeightInfo w{"w", nullptr, nullptr, 4, 1, 1, Init::Zeros, true, true};
  Exec x;
  explicit Fixture(Precision p = Precision::BF16)
      : info(make(p)), x(info, &w, &slot) {
    x.n = 1;
  }
  static ProgramInfo make(Precision p) {
    ProgramInfo i{"exec-emu-16", 1, 1, 1, 64, 4, 1, 1, false, 1, true, 1, 1};
    i.precision = p;
    return i;
  }
};
const float kOdd = 1.0f + 1.0f / 256 + 1.0f / 65536; // not a bf16 value
} // namespace

TEST_CASE("a 16-bit block is rounded once its operation is done",
          "[exec][emu][precision]") {
  Fixture f;
  f.x.setTask("writer");
  float *a = f.x.arena16(0, 16);
  for (int i = 0; i < 8; ++i)
    a[i] = kOdd * float(i + 1);
  CHECK(a[0] == kOdd); // the operation itself computes in fp32
  f.x.setTask("reader");
  for (int i = 0; i < 8; ++i)
    CHECK(a[i] == roundToBf16(kOdd * float(i + 1)));
  // Adjacent 16-bit blocks are adjacent elements: 8 elements per 16 bytes.
  CHECK(f.x.arena16(16, 16) - a == 8);
  CHECK(f.x.arena16(32, 16) - a == 16);
}

TEST_CASE("fp16 rounds to fp16 and overflows to infinity",
          "[exec][emu][precision]") {
  Fixture g(Precision::FP16);
  float *b = g.x.arena16(0, 16);
  b[0] = kOdd;
  b[1] = 70000.0f;
  g.x.record(Compute, 0);
  CHECK(b[0] == roundToFp16(kOdd));
  CHECK(std::isinf(b[1]));
}

TEST_CASE("a 16-bit block travels whole through a copy-out and back",
          "[exec][emu][precision]") {
  Fixture f;
  float *a = f.x.arena16(0, 16);
  for (int i = 0; i < 8; ++i)
    a[i] = float(i);
  f.x.copyOut(0, 0);
  f.x.record(CopyOut, 0);
  f.x.wait(Compute, 0);
  f.x.release(Compute, 0, 16);
  CHECK(std::isnan(a[7]));
  f.x.copyIn(0, 32);
  f.x.record(CopyIn, 1);
  float *b = f.x.arena16(32, 16);
  CHECK(std::isnan(b[0])); // NaN until waited for
  f.x.wait(Compute, 1);
  for (int i = 0; i < 8; ++i)
    CHECK(b[i] == float(i));
}

TEST_CASE("a working copy is the rounded master, refreshed after updates",
          "[exec][emu][precision]") {
  Fixture f;
  float w[4] = {kOdd, -kOdd, 3.0f, 0.0f};
  f.x.writeWeight(0, w);
  CHECK(f.x.weightCopy(0)[0] == roundToBf16(kOdd));
  CHECK(f.x.weightCopy(0)[1] == roundToBf16(-kOdd));
  CHECK(f.x.weight(0)[0] == kOdd); // the master keeps fp32
  f.x.grad(0)[2] = 1.0f;
  f.x.lr = 0.5f;
  f.x.momentum = 0;
  f.x.sgd(0);
  CHECK(f.x.weight(0)[2] == 2.5f);
  CHECK(f.x.weightCopy(0)[2] == 2.5f);
}

TEST_CASE("unscaling divides the gradients and finds non-finite ones",
          "[exec][emu][precision]") {
  Fixture f(Precision::FP16);
  f.x.lossScale = 1024.0f;
  for (int i = 0; i < 4; ++i)
    f.x.grad(0)[i] = 2048.0f * float(i);
  CHECK(f.x.unscaleGradients());
  CHECK(f.x.grad(0)[3] == 6.0f);
  f.x.grad(0)[1] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(f.x.unscaleGradients());
  f.x.grad(0)[1] = std::nanf("");
  CHECK_FALSE(f.x.unscaleGradients());
}

TEST_CASE("the loss scale backs off on overflow and grows when clean",
          "[precision]") {
  LossScaler s; // GradScaler's defaults
  CHECK(s.scale == 65536.0f);
  s.update(true);
  CHECK(s.scale == 32768.0f);
  for (int i = 0; i < 1999; ++i)
    s.update(false);
  CHECK(s.scale == 32768.0f);
  s.update(false); // the 2000th clean step in a row
  CHECK(s.scale == 65536.0f);
  CHECK(s.cleanSteps == 0);
  for (int i = 0; i < 1000; ++i)
    s.update(false);
  s.update(true); // an overflow restarts the count
  for (int i = 0; i < 1999; ++i)
    s.update(false);
  CHECK(s.scale == 32768.0f);
}
