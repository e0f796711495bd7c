//===- KernelsIntProgramTest.cpp - Integer programs on the CPU ------------===//
//
// RoBERTa's position ids on two padded rows, stated; the edges of integer
// arithmetic (division by zero, Mod's sign, exclusive and reversed sums)
// and a float output.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace memfit::rt;

namespace {

IntInstr in(IntOpKind k, int a = -1, int b = -1, int64_t imm = 0) {
  return IntInstr{k, static_cast<int8_t>(a), static_cast<int8_t>(b), -1, imm};
}

IntProgramParams program(std::vector<IntInstr> code, int64_t perSample,
                         int64_t inner, bool reverse = false) {
  IntProgramParams p{.perSample = perSample,
                     .inner = inner,
                     .reverse = reverse,
                     .count = static_cast<int32_t>(code.size())};
  for (size_t k = 0; k < code.size(); ++k)
    p.code[k] = code[k];
  return p;
}

} // namespace

TEST_CASE("position ids skip the padding, per row", "[kernels][ids]") {
  // cumsum(x != 1) * (x != 1) + 1, pad 1.
  auto p = program({in(IntOpKind::Ids), in(IntOpKind::Imm, -1, -1, 1),
                    in(IntOpKind::Equal, 0, 1), in(IntOpKind::Not, 2),
                    in(IntOpKind::CumSum, 3), in(IntOpKind::Mul, 4, 3),
                    in(IntOpKind::Add, 5, 1)},
                   4, 4);
  std::vector<int32_t> ids{5, 7, 1, 1, 1, 9, 9, 1}, y(8, -7);
  intProgram(p, 2, ids.data(), y.data(), nullptr);
  CHECK(y == std::vector<int32_t>{2, 3, 1, 1, 1, 2, 3, 1});
}

TEST_CASE("integer steps at their edges", "[kernels][ids]") {
  std::vector<int32_t> ids{7, -7, 0, 3};
  auto run = [&](std::vector<IntInstr> code, bool reverse = false) {
    std::vector<int32_t> y(4, -99);
    intProgram(program(code, 4, 4, reverse), 1, ids.data(), y.data(), nullptr);
    return y;
  };
  auto by = [](IntOpKind k, int64_t imm) {
    return std::vector<IntInstr>{in(IntOpKind::Ids),
                                 in(IntOpKind::Imm, -1, -1, imm), in(k, 0, 1)};
  };
  // Toward zero; nothing traps on a zero divisor.
  CHECK(run(by(IntOpKind::Div, 2)) == std::vector<int32_t>{3, -3, 0, 1});
  CHECK(run(by(IntOpKind::Div, 0)) == std::vector<int32_t>{0, 0, 0, 0});
  // The sign of the divisor, as ONNX's Mod (fmod 0) and Python.
  CHECK(run(by(IntOpKind::Mod, 3)) == std::vector<int32_t>{1, 2, 0, 0});
  CHECK(run(by(IntOpKind::Mod, -3)) == std::vector<int32_t>{-2, -1, 0, 0});
  std::vector<IntInstr> sum{in(IntOpKind::Ids), in(IntOpKind::CumSum, 0)};
  CHECK(run(sum) == std::vector<int32_t>{7, 0, 0, 3});
  CHECK(run(sum, true) == std::vector<int32_t>{3, -4, 3, 3});
  std::vector<IntInstr> before{in(IntOpKind::Ids),
                               in(IntOpKind::CumSumExclusive, 0)};
  CHECK(run(before) == std::vector<int32_t>{0, 7, 0, 0});
  std::vector<float> f(4);
  intProgram(program({in(IntOpKind::Ids), in(IntOpKind::Neg, 0)}, 4, 4), 1,
             ids.data(), nullptr, f.data());
  CHECK(f == std::vector<float>{-7, 7, 0, -3});
}

TEST_CASE("a masked fill by a mask per sample", "[kernels][ids]") {
  // Two samples of two elements; each sample's own mask (padding computed
  // from its ids), not one mask for all.
  WhereParams p{.perSample = 2,
                .maskSize = 2,
                .inner = 1,
                .value = 9.0f,
                .fillWhere = true,
                .maskBatched = true};
  std::vector<float> mask{1, 0, 0, 1}, x{1, 2, 3, 4}, y(4);
  whereForward(p, 2, mask.data(), x.data(), y.data());
  CHECK(y == std::vector<float>{9, 2, 3, 9});
  std::vector<float> dy{1, 1, 1, 1}, dx(4);
  whereBackward(p, 2, mask.data(), dy.data(), dx.data(), false);
  CHECK(dx == std::vector<float>{0, 1, 1, 0});
}

TEST_CASE("a reduction of the row: the last token before the padding",
          "[kernels][ids]") {
  // (argmax(ids == 0) - 1) mod 4, one per row; rows with padding at the
  // end, none (argmax 0: the last position) and twice (the first).
  std::vector<int32_t> ids{5, 7, 0, 0, 3, 3, 3, 3, 0, 9, 0, 2};
  std::vector<IntInstr> last{in(IntOpKind::Ids),
                             in(IntOpKind::Imm, -1, -1, 0),
                             in(IntOpKind::Equal, 0, 1),
                             in(IntOpKind::ArgMax, 2),
                             in(IntOpKind::Imm, -1, -1, 1),
                             in(IntOpKind::Sub, 3, 4),
                             in(IntOpKind::Imm, -1, -1, 4),
                             in(IntOpKind::Mod, 5, 6)};
  auto p = program(last, 4, 4);
  p.perRow = true;
  std::vector<int32_t> y(3, -9);
  intProgram(p, 3, ids.data(), y.data(), nullptr);
  CHECK(y == std::vector<int32_t>{1, 3, 3});
  // The same walked from the row's end finds the same first maximum;
  // imm 1 asks for the last.
  p.reverse = true;
  intProgram(p, 3, ids.data(), y.data(), nullptr);
  CHECK(y == std::vector<int32_t>{1, 3, 3});
  p.code[3].imm = 1;
  intProgram(p, 3, ids.data(), y.data(), nullptr);
  CHECK(y == std::vector<int32_t>{2, 2, 1});
}

TEST_CASE("a one-hot of a row's reduction, and each sample's index",
          "[kernels][ids]") {
  // Position == argmax(ids): a float per position, after a CumSum that
  // must start again for the pass that stores.
  std::vector<int32_t> ids{1, 8, 2, 3, 9, 9};
  auto p =
      program({in(IntOpKind::Ids), in(IntOpKind::ArgMax, 0), in(IntOpKind::Pos),
               in(IntOpKind::Equal, 2, 1), in(IntOpKind::CumSum, 3)},
              3, 3);
  std::vector<float> f(6, -1);
  intProgram(p, 2, ids.data(), nullptr, f.data());
  CHECK(f == std::vector<float>{0, 1, 1, 0, 1, 1});
  // Two rows a sample: the sample's index per row. The kernel reads every
  // id it walks, so two samples of four need eight.
  auto s = program({in(IntOpKind::Sample)}, 4, 2);
  s.perRow = true;
  std::vector<int32_t> twoSamples(8, 0), y(4, -1);
  intProgram(s, 2, twoSamples.data(), y.data(), nullptr);
  CHECK(y == std::vector<int32_t>{0, 0, 1, 1});
}
