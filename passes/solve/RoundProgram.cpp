//===- RoundProgram.cpp - Keep, offload or recompute: one round -----------===//
#include "passes/solve/RoundProgram.h"

namespace memfit {

std::vector<double> stepStartsMs(const std::vector<TaskId> &order,
                                 const CostTable &costs, double originMs) {
  std::vector<double> before(order.size() + 1, originMs);
  for (size_t t = 0; t < order.size(); ++t)
    before[t + 1] = before[t] + costs.fastest(order[t]).seconds * 1e3;
  return before;
}

RoundProgram::RoundProgram(const CostTable &costs, bool integral)
    : costs_(costs), integral_(integral), msOut_(1e3 / costs.d2hBytesPerSecond),
      msIn_(1e3 / costs.h2dBytesPerSecond) {}

int RoundProgram::decision(ColumnFamily f) {
  return p_.column(f, 0, 1, 0, integral_);
}

int RoundProgram::roundEnd(double atLeastMs) {
  return p_.column(ColumnFamily::RoundEnd, atLeastMs, kInf, 1.0);
}

int RoundProgram::start(double earliestMs) {
  return p_.column(ColumnFamily::Start, earliestMs, kInf);
}

int RoundProgram::offload() { return decision(ColumnFamily::Offload); }

int RoundProgram::recompute(int offloadCol) {
  int rec = decision(ColumnFamily::Recompute);
  p_.row(RowFamily::OneWay, {{offloadCol, 1}, {rec, 1}}, -kInf, 1);
  return rec;
}

int RoundProgram::rerun() { return decision(ColumnFamily::Rerun); }

int RoundProgram::keptInput() { return decision(ColumnFamily::KeptInput); }

int RoundProgram::copiedBack() { return decision(ColumnFamily::CopiedBack); }

int RoundProgram::algorithm() {
  return p_.column(ColumnFamily::Algorithm, 0, 1);
}

int RoundProgram::slowAlgorithm() {
  return decision(ColumnFamily::SlowAlgorithm);
}

void RoundProgram::rerunFor(int run, int recompute) {
  p_.row(RowFamily::RerunForBlock, {{run, 1}, {recompute, -1}}, 0, kInf);
}

void RoundProgram::rerunInput(int kept, int back, int run,
                              const Terms &producers) {
  Terms ways = {{kept, 1}, {back, 1}, {run, -1}};
  ways.insert(ways.end(), producers.begin(), producers.end());
  p_.row(RowFamily::RerunInput, ways, 0, kInf);
}

void RoundProgram::rerunInputRemade(int producerRun, int run) {
  p_.row(RowFamily::RerunInput, {{producerRun, 1}, {run, -1}}, 0, kInf);
}

void RoundProgram::rerunInputRecomputed(int producerRun, int run,
                                        int recompute) {
  p_.row(RowFamily::RerunInput, {{producerRun, 1}, {run, -1}, {recompute, -1}},
         -1, kInf);
}

void RoundProgram::forbidRerun(int run) {
  p_.row(RowFamily::RerunInput, {{run, 1}}, -kInf, 0);
}

void RoundProgram::algorithmPick(const Terms &shares) {
  p_.row(RowFamily::AlgorithmPick, shares, 1, 1);
}

void RoundProgram::memory(const Terms &freed, double excess) {
  p_.row(RowFamily::Memory, freed, excess, kInf);
}

void RoundProgram::copiedOutBefore(Terms out, int start) {
  out.push_back({start, 1});
  p_.row(RowFamily::CopyOut, out, 0, kInf);
}

void RoundProgram::copiedBackBetween(Terms in, int later, int earlier) {
  in.push_back({later, 1});
  in.push_back({earlier, -1});
  p_.row(RowFamily::CopyIn, in, 0, kInf);
}

void RoundProgram::computeStream(const Terms &terms, double atLeastMs) {
  p_.row(RowFamily::ComputeStream, terms, atLeastMs, kInf);
}

} // namespace memfit
