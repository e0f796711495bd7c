//===- Solver.h - The solver behind solve/'s programs -----------*- C++ -*-===//
//
// Two calls, for the two ways solve/ uses a program: a linear optimum (the
// time bound's relaxation) and branch and bound from a start within a node
// limit (the optimal policy). Both minimize, run quiet on one thread and
// have no time limit, so the same program gives the same answer on every
// machine. The backend (CbcSolver.cpp, CBC's C interface) is the one file
// that includes or links the solver.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SOLVER_H
#define MEMFIT_PASSES_SOLVER_H

#include "passes/solve/LinearProgram.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace memfit {

struct Solution {
  std::vector<double> x; // per column
  double objective = 0;
  bool proven = false; // proven optimal
  int64_t nodes = 0;   // branch-and-bound nodes explored
};

/// The optimum of `p`, which has no integral columns; none unless the
/// solver proved it optimal with a finite objective.
std::optional<Solution> solveLinear(const LinearProgram &p);

/// Branch and bound on `p` from `start` (one value per column; a start that
/// is not feasible is ignored), exploring at most `maxNodes` nodes: the
/// best integral solution found, none when there is none.
std::optional<Solution> solveIntegral(const LinearProgram &p,
                                      const std::vector<double> &start,
                                      int maxNodes);

} // namespace memfit

#endif
