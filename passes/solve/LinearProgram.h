//===- LinearProgram.h - Columns and rows by family -------------*- C++ -*-===//
//
// The one builder of solve/'s programs: columns with bounds, an objective
// coefficient and integrality; rows of (column, coefficient) terms between
// two bounds, both in the order they are added (the solver's indices, so
// the same calls give the same program). Each column and row belongs to a
// named family of the keep / offload / recompute formulation
// (RoundProgram.h), so a program says what it is made of. Nothing here
// knows the solver (Solver.h).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_LINEARPROGRAM_H
#define MEMFIT_PASSES_LINEARPROGRAM_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memfit {

/// What a column stands for (RoundProgram.h has each one's meaning).
enum class ColumnFamily : uint8_t {
  RoundEnd,      // T, the objective
  Start,         // S[t], when a step starts
  Offload,       // absent, back by copy
  Recompute,     // absent, back by re-running its producer
  Rerun,         // a forward task run again
  KeptInput,     // a re-run's input kept past its last use
  CopiedBack,    // a re-run's input copied back
  Algorithm,     // the share of a step run with one algorithm
  SlowAlgorithm, // a step run at its zero-workspace algorithm
};
constexpr size_t kColumnFamilies = 9;

/// Which constraint a row is.
enum class RowFamily : uint8_t {
  OneWay,        // offload + recompute <= 1
  RerunForBlock, // a recomputed block's producer runs again
  RerunInput,    // a re-run finds its inputs
  AlgorithmPick, // a step's algorithm shares sum to one
  Memory,        // what leaves covers the step's excess
  CopyOut,       // a step starts after its blocks are out
  CopyIn,        // copies back run on one stream
  ComputeStream, // the tasks run one after another
};
constexpr size_t kRowFamilies = 8;

const char *familyName(ColumnFamily f);
const char *familyName(RowFamily f);

class LinearProgram {
public:
  using Terms = std::vector<std::pair<int, double>>;
  struct Term {
    int row, col;
    double coef;
  };

  /// A new column in [lo, hi]; its index.
  int column(ColumnFamily f, double lo, double hi, double objective = 0,
             bool integral = false);
  /// lo <= sum(coef * column) <= hi.
  void row(RowFamily f, const Terms &terms, double lo, double hi);

  /// The program's size at one moment; rollback() returns to it.
  struct Mark {
    size_t columns, rows, terms;
  };
  Mark mark() const { return {lo_.size(), rowLo_.size(), terms_.size()}; }
  void rollback(Mark m);

  int numColumns() const { return static_cast<int>(lo_.size()); }
  int numRows() const { return static_cast<int>(rowLo_.size()); }
  int count(ColumnFamily f) const { return columnCount_[size_t(f)]; }
  int count(RowFamily f) const { return rowCount_[size_t(f)]; }

  // Read by the solver backend.
  const std::vector<double> &columnLower() const { return lo_; }
  const std::vector<double> &columnUpper() const { return hi_; }
  const std::vector<double> &objective() const { return obj_; }
  const std::vector<bool> &integral() const { return integral_; }
  const std::vector<Term> &terms() const { return terms_; }
  const std::vector<double> &rowLower() const { return rowLo_; }
  const std::vector<double> &rowUpper() const { return rowHi_; }

private:
  std::vector<double> lo_, hi_, obj_;
  std::vector<bool> integral_;
  std::vector<ColumnFamily> columnFamily_;
  std::vector<Term> terms_;
  std::vector<double> rowLo_, rowHi_;
  std::vector<RowFamily> rowFamily_;
  std::array<int, kColumnFamilies> columnCount_{};
  std::array<int, kRowFamilies> rowCount_{};
};

} // namespace memfit

#endif
