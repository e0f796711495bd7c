//===- LinearProgram.cpp - A program for CBC, and its loading -------------===//
#include "passes/solve/LinearProgram.h"

namespace memfit {

CbcModel loadProgram(const LinearProgram &p) {
  int ncols = static_cast<int>(p.lo.size());
  int nrows = static_cast<int>(p.rowLo.size());
  // Column-major, as Cbc_loadProblem takes it.
  std::vector<CoinBigIndex> start(ncols + 1, 0);
  for (const auto &t : p.terms)
    ++start[t.col + 1];
  for (int c = 0; c < ncols; ++c)
    start[c + 1] += start[c];
  std::vector<int> index(p.terms.size());
  std::vector<double> value(p.terms.size());
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  for (const auto &t : p.terms) {
    index[fill[t.col]] = t.row;
    value[fill[t.col]++] = t.coef;
  }
  CbcModel m(Cbc_newModel());
  Cbc_loadProblem(m.get(), ncols, nrows, start.data(), index.data(),
                  value.data(), p.lo.data(), p.hi.data(), p.obj.data(),
                  p.rowLo.data(), p.rowHi.data());
  for (int c = 0; c < ncols; ++c)
    if (p.integral[c])
      Cbc_setInteger(m.get(), c);
  Cbc_setLogLevel(m.get(), 0);
  // One thread and no time limit: the search, and so the answer, is the
  // same on every machine.
  Cbc_setParameter(m.get(), "threads", "1");
  return m;
}

} // namespace memfit
