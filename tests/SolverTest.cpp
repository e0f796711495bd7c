//===- SolverTest.cpp - The program builder and the solver interface ------===//
#include "passes/solve/Solver.h"
#include "passes/solve/LinearProgram.h"

#include <catch2/catch.hpp>

using namespace memfit;

namespace {
constexpr double kInf = 1e30;
} // namespace

TEST_CASE("a program counts its columns and rows by family", "[solver]") {
  LinearProgram p;
  int t = p.column(ColumnFamily::RoundEnd, 0, kInf, 1.0);
  int off = p.column(ColumnFamily::Offload, 0, 1);
  int rec = p.column(ColumnFamily::Recompute, 0, 1);
  p.row(RowFamily::OneWay, {{off, 1}, {rec, 1}}, -kInf, 1);
  LinearProgram::Mark m = p.mark();
  int rerun = p.column(ColumnFamily::Rerun, 0, 1, 0, true);
  p.row(RowFamily::RerunForBlock, {{rerun, 1}, {rec, -1}}, 0, kInf);
  p.row(RowFamily::ComputeStream, {{t, 1}, {rerun, -2}}, 3, kInf);
  CHECK(p.numColumns() == 4);
  CHECK(p.numRows() == 3);
  CHECK(p.count(ColumnFamily::Rerun) == 1);
  CHECK(p.count(RowFamily::ComputeStream) == 1);
  CHECK(p.terms().size() == 6);
  // Back to the mark: the step that did not fit leaves nothing behind.
  p.rollback(m);
  CHECK(p.numColumns() == 3);
  CHECK(p.numRows() == 1);
  CHECK(p.terms().size() == 2);
  CHECK(p.count(ColumnFamily::Rerun) == 0);
  CHECK(p.count(RowFamily::RerunForBlock) == 0);
  CHECK(p.count(RowFamily::ComputeStream) == 0);
  CHECK(p.count(ColumnFamily::Offload) == 1);
  CHECK(p.integral() == std::vector<bool>{false, false, false});
}

TEST_CASE("the linear optimum is the relaxation's", "[solver]") {
  // min x + y, x + 2y >= 3, x - y >= -1.5 (y <= x + 1.5), in [0, 10]:
  // the optimum is at x = 0, y = 1.5, fractional.
  LinearProgram p;
  int x = p.column(ColumnFamily::Offload, 0, 10, 1.0);
  int y = p.column(ColumnFamily::Recompute, 0, 10, 1.0);
  p.row(RowFamily::Memory, {{x, 1}, {y, 2}}, 3, kInf);
  p.row(RowFamily::OneWay, {{x, 1}, {y, -1}}, -1.5, kInf);
  std::optional<Solution> s = solveLinear(p);
  REQUIRE(s);
  CHECK(s->proven);
  CHECK(s->objective == Approx(1.5));
  REQUIRE(s->x.size() == 2);
  CHECK(s->x[x] == Approx(0).margin(1e-9));
  CHECK(s->x[y] == Approx(1.5));
  // Infeasible: x + 2y >= 3 with both at most 1.
  LinearProgram q;
  int a = q.column(ColumnFamily::Offload, 0, 1, 1.0);
  int b = q.column(ColumnFamily::Recompute, 0, 1, 1.0);
  q.row(RowFamily::Memory, {{a, 1}, {b, 1}}, 3, kInf);
  CHECK_FALSE(solveLinear(q));
}

TEST_CASE("branch and bound keeps to integers from its start", "[solver]") {
  // The same program with integral columns: x + 2y >= 3 and y <= x + 1.5
  // give x + y = 2 at best (x = 1, y = 1); the start (3, 0) is feasible
  // but worse.
  LinearProgram p;
  int x = p.column(ColumnFamily::Offload, 0, 10, 1.0, true);
  int y = p.column(ColumnFamily::Recompute, 0, 10, 1.0, true);
  p.row(RowFamily::Memory, {{x, 1}, {y, 2}}, 3, kInf);
  p.row(RowFamily::OneWay, {{x, 1}, {y, -1}}, -1.5, kInf);
  std::optional<Solution> s = solveIntegral(p, {3, 0}, 100);
  REQUIRE(s);
  CHECK(s->proven);
  CHECK(s->objective == Approx(2));
  CHECK(s->x[x] == Approx(1));
  CHECK(s->x[y] == Approx(1));
  // No integral point: 2x = 1.
  LinearProgram q;
  int z = q.column(ColumnFamily::SlowAlgorithm, 0, 1, 1.0, true);
  q.row(RowFamily::AlgorithmPick, {{z, 2}}, 1, 1);
  CHECK_FALSE(solveIntegral(q, {0}, 100));
}
