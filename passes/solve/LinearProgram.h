//===- LinearProgram.h - A program for CBC, and its loading -----*- C++ -*-===//
//
// The linear and integral programs of the bound (Bound.cpp) and the optimal
// policy (Optimal.cpp), built row by row and loaded into CBC the one way
// both need: column-major, quiet, one thread, so that the same program
// gives the same answer on every machine.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_LINEARPROGRAM_H
#define MEMFIT_PASSES_LINEARPROGRAM_H

#include <coin/Cbc_C_Interface.h>

#include <memory>
#include <utility>
#include <vector>

namespace memfit {

struct LinearProgram {
  std::vector<double> lo, hi, obj;
  std::vector<bool> integral;
  struct Term {
    int row, col;
    double coef;
  };
  std::vector<Term> terms;
  std::vector<double> rowLo, rowHi;

  int col(double l, double h, double o = 0, bool isInt = false) {
    lo.push_back(l);
    hi.push_back(h);
    obj.push_back(o);
    integral.push_back(isInt);
    return static_cast<int>(lo.size()) - 1;
  }
  int binary() { return col(0, 1, 0, true); }
  void row(const std::vector<std::pair<int, double>> &ts, double l, double h) {
    int r = static_cast<int>(rowLo.size());
    for (auto [c, v] : ts)
      terms.push_back({r, c, v});
    rowLo.push_back(l);
    rowHi.push_back(h);
  }
};

struct CbcModelDeleter {
  void operator()(Cbc_Model *m) const { Cbc_deleteModel(m); }
};
using CbcModel = std::unique_ptr<Cbc_Model, CbcModelDeleter>;

/// A CBC model of `p` (minimizing), its integral columns marked, logging
/// off and one thread; the caller sets limits and solves.
CbcModel loadProgram(const LinearProgram &p);

} // namespace memfit

#endif
