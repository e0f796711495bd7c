//===- ExecEmuTest.cpp - the CPU emulation's streams and poisoning --------===//
//
// The emulation must be exactly as adversarial as a GPU allows: bytes a
// plan still needs keep their values, bytes it may no longer use are NaN.
//
//===----------------------------------------------------------------------===//
#include "runtime/Exec.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace memfit::rt;

namespace {
// 16 floats of arena: A at byte 0, B at byte 32; one host slot of 32 bytes.
struct Fixture {
  ProgramInfo info{"exec-emu", 1, 1, 1, 64, 4, 1, 1, false, 1, false, 0, 1};
  HostSlot slot{0, 32};
  Exec x{info, nullptr, &slot};
  Fixture() { x.n = 1; }
  void fillA(float v) {
    for (int i = 0; i < 8; ++i)
      x.arena(0)[i] = v;
  }
};
} // namespace

TEST_CASE("a copy-out reads what compute released after issuing it",
          "[exec][emu]") {
  // A block copied out as soon as it is made, then read once more by
  // compute, which releases it: the copy still has to read the values, as
  // it would on a GPU, where nothing overwrites them before a later writer
  // waits for the copy.
  Fixture f;
  f.fillA(3.0f);
  f.x.copyOut(0, 0);
  f.x.record(CopyOut, 0);
  f.x.release(Compute, 0, 32); // compute's last read of A
  f.x.wait(Compute, 0);        // a later writer of A waits for the copy
  CHECK(std::isnan(f.x.arena(0)[0]));
  f.x.copyIn(0, 32);
  f.x.record(CopyIn, 1);
  f.x.wait(Compute, 1);
  for (int i = 0; i < 8; ++i)
    CHECK(f.x.arena(32)[i] == 3.0f);
  f.x.endRound();
}

TEST_CASE("released bytes without a pending copy are NaN at once",
          "[exec][emu]") {
  Fixture f;
  f.fillA(1.0f);
  f.x.release(Compute, 0, 32);
  CHECK(std::isnan(f.x.arena(0)[7]));
}

TEST_CASE("a copy-in's destination is NaN until its event is waited for",
          "[exec][emu]") {
  Fixture f;
  f.fillA(2.0f);
  f.x.copyOut(0, 0);
  f.x.record(CopyOut, 0);
  f.x.wait(Compute, 0);
  f.x.copyIn(0, 32);
  f.x.record(CopyIn, 1);
  CHECK(std::isnan(f.x.arena(32)[0])); // a plan missing this wait is caught
  f.x.wait(Compute, 1);
  CHECK(f.x.arena(32)[0] == 2.0f);
  f.x.endRound();
}
