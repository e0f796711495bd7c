//===- LinearProgram.cpp - Columns and rows by family ---------------------===//
#include "passes/solve/LinearProgram.h"

#include <cassert>

namespace memfit {

const char *familyName(ColumnFamily f) {
  switch (f) {
  case ColumnFamily::RoundEnd:
    return "round end";
  case ColumnFamily::Start:
    return "start";
  case ColumnFamily::Offload:
    return "offload";
  case ColumnFamily::Recompute:
    return "recompute";
  case ColumnFamily::Rerun:
    return "re-run";
  case ColumnFamily::KeptInput:
    return "kept input";
  case ColumnFamily::CopiedBack:
    return "copied-back input";
  case ColumnFamily::Algorithm:
    return "algorithm";
  case ColumnFamily::SlowAlgorithm:
    return "slow algorithm";
  }
  return "?";
}

const char *familyName(RowFamily f) {
  switch (f) {
  case RowFamily::OneWay:
    return "one way";
  case RowFamily::RerunForBlock:
    return "re-run for block";
  case RowFamily::RerunInput:
    return "re-run input";
  case RowFamily::AlgorithmPick:
    return "algorithm pick";
  case RowFamily::Memory:
    return "memory";
  case RowFamily::CopyOut:
    return "copy out";
  case RowFamily::CopyIn:
    return "copy in";
  case RowFamily::ComputeStream:
    return "compute stream";
  }
  return "?";
}

int LinearProgram::column(ColumnFamily f, double lo, double hi,
                          double objective, bool integral) {
  lo_.push_back(lo);
  hi_.push_back(hi);
  obj_.push_back(objective);
  integral_.push_back(integral);
  columnFamily_.push_back(f);
  ++columnCount_[size_t(f)];
  return numColumns() - 1;
}

void LinearProgram::row(RowFamily f, const Terms &terms, double lo, double hi) {
  int r = numRows();
  for (auto [c, v] : terms) {
    assert(c >= 0 && c < numColumns() && "a term of a column not added");
    terms_.push_back({r, c, v});
  }
  rowLo_.push_back(lo);
  rowHi_.push_back(hi);
  rowFamily_.push_back(f);
  ++rowCount_[size_t(f)];
}

void LinearProgram::rollback(Mark m) {
  assert(m.columns <= lo_.size() && m.rows <= rowLo_.size() &&
         m.terms <= terms_.size() && "a mark from a larger program");
  for (size_t c = m.columns; c < lo_.size(); ++c)
    --columnCount_[size_t(columnFamily_[c])];
  for (size_t r = m.rows; r < rowLo_.size(); ++r)
    --rowCount_[size_t(rowFamily_[r])];
  lo_.resize(m.columns);
  hi_.resize(m.columns);
  obj_.resize(m.columns);
  integral_.resize(m.columns);
  columnFamily_.resize(m.columns);
  rowLo_.resize(m.rows);
  rowHi_.resize(m.rows);
  rowFamily_.resize(m.rows);
  terms_.resize(m.terms);
}

} // namespace memfit
