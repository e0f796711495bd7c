//===- CbcSolver.cpp - Solver.h on CBC's C interface ----------------------===//
//
// The one file that includes CBC (Debian's coinor-libcbc-dev); the build
// links it into memfit_passes privately (passes/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "passes/solve/Solver.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <cassert>
#include <memory>

namespace memfit {
namespace {

constexpr double kInf = 1e30;

struct CbcModelDeleter {
  void operator()(Cbc_Model *m) const { Cbc_deleteModel(m); }
};
using CbcModel = std::unique_ptr<Cbc_Model, CbcModelDeleter>;

/// A CBC model of `p` (minimizing), its integral columns marked, logging
/// off and one thread; the caller sets limits and solves.
CbcModel loadProgram(const LinearProgram &p) {
  const std::vector<LinearProgram::Term> &terms = p.terms();
  int ncols = p.numColumns();
  int nrows = p.numRows();
  // Column-major, as Cbc_loadProblem takes it.
  std::vector<CoinBigIndex> start(ncols + 1, 0);
  for (const auto &t : terms)
    ++start[t.col + 1];
  for (int c = 0; c < ncols; ++c)
    start[c + 1] += start[c];
  std::vector<int> index(terms.size());
  std::vector<double> value(terms.size());
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  for (const auto &t : terms) {
    index[fill[t.col]] = t.row;
    value[fill[t.col]++] = t.coef;
  }
  CbcModel m(Cbc_newModel());
  Cbc_loadProblem(m.get(), ncols, nrows, start.data(), index.data(),
                  value.data(), p.columnLower().data(), p.columnUpper().data(),
                  p.objective().data(), p.rowLower().data(),
                  p.rowUpper().data());
  for (int c = 0; c < ncols; ++c)
    if (p.integral()[c])
      Cbc_setInteger(m.get(), c);
  Cbc_setLogLevel(m.get(), 0);
  // One thread and no time limit: the search, and so the answer, is the
  // same on every machine.
  Cbc_setParameter(m.get(), "threads", "1");
  return m;
}

} // namespace

std::optional<Solution> solveLinear(const LinearProgram &p) {
  assert(std::none_of(p.integral().begin(), p.integral().end(),
                      [](bool i) { return i; }) &&
         "an integral program goes to solveIntegral");
  CbcModel m = loadProgram(p);
  Cbc_solve(m.get());
  if (Cbc_isProvenInfeasible(m.get()) || Cbc_isAbandoned(m.get()) ||
      !Cbc_isProvenOptimal(m.get()))
    return std::nullopt;
  Solution s;
  s.objective = Cbc_getObjValue(m.get());
  if (!(s.objective > -kInf && s.objective < kInf))
    return std::nullopt;
  const double *x = Cbc_getColSolution(m.get());
  s.x.assign(x, x + p.numColumns());
  s.proven = true;
  s.nodes = Cbc_getNodeCount(m.get());
  return s;
}

std::optional<Solution> solveIntegral(const LinearProgram &p,
                                      const std::vector<double> &start,
                                      int maxNodes) {
  int ncols = p.numColumns();
  assert(start.size() == size_t(ncols) && "a start value per column");
  CbcModel m = loadProgram(p);
  Cbc_setMaximumNodes(m.get(), maxNodes);
  std::vector<int> idx(ncols);
  for (int c = 0; c < ncols; ++c)
    idx[c] = c;
  Cbc_setMIPStartI(m.get(), ncols, idx.data(), start.data());
  Cbc_solve(m.get());
  if (Cbc_isProvenInfeasible(m.get()) || !Cbc_bestSolution(m.get()))
    return std::nullopt;
  Solution s;
  const double *x = Cbc_bestSolution(m.get());
  s.x.assign(x, x + ncols);
  s.objective = Cbc_getObjValue(m.get());
  s.proven = Cbc_isProvenOptimal(m.get()) != 0;
  s.nodes = Cbc_getNodeCount(m.get());
  return s;
}

} // namespace memfit
