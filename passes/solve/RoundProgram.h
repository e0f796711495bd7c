//===- RoundProgram.h - Keep, offload or recompute: one round ---*- C++ -*-===//
//
// The formulation the time bound (TimeBound.h) and the optimal policy
// (Optimal.h) share, over the steps of one round's order: per block and
// span where it is live but unused, whether it is absent and comes back by
// copy (offload) or by running its forward task again (recompute); the
// re-runs and the inputs they need; which algorithm a step runs; per step
// its start, and the round's end, which is minimized. The bound relaxes it
// (decisions are shares in [0, 1]) and keeps the steps most over the
// budget; the policy solves it integral over the whole round. Each column
// family and each constraint family is one method here, so the two build
// their programs from the same pieces and name what they add
// (LinearProgram.h). Times are in milliseconds, so the solver's tolerances
// are well above them.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_ROUNDPROGRAM_H
#define MEMFIT_PASSES_ROUNDPROGRAM_H

#include "compiler/ir/CostTable.h"
#include "passes/solve/LinearProgram.h"

#include <vector>

namespace memfit {

/// Per step of `order`, and one past the last: when it can start, in ms,
/// with every task before it at its fastest algorithm and the first from
/// `originMs`.
std::vector<double> stepStartsMs(const std::vector<TaskId> &order,
                                 const CostTable &costs, double originMs);

class RoundProgram {
public:
  using Terms = LinearProgram::Terms;
  static constexpr double kInf = 1e30;

  /// `integral`: decisions are 0 or 1 (the policy), else shares in [0, 1]
  /// (the bound's relaxation).
  RoundProgram(const CostTable &costs, bool integral);

  LinearProgram &program() { return p_; }
  const LinearProgram &program() const { return p_; }

  double copyOutMs(double bytes) const { return bytes * msOut_; }
  double copyInMs(double bytes) const { return bytes * msIn_; }
  double rerunMs(TaskId f) const { return costs_.fastest(f).seconds * 1e3; }

  // Columns.
  /// T: the round's end, the objective, at least `atLeastMs`.
  int roundEnd(double atLeastMs);
  /// S[t]: when a step starts, at least `earliestMs`.
  int start(double earliestMs);
  /// A block absent over a span, back by copy.
  int offload();
  /// The same block absent over the same span, back by a re-run of its
  /// producer: one way or the other (offload + recompute <= 1).
  int recompute(int offloadCol);
  /// A forward task run again.
  int rerun();
  /// A re-run's input past its last use: kept on the device, or copied
  /// back (the bound's; the policy tracks inputs by liveness instead).
  int keptInput();
  int copiedBack();
  /// The share of a step run with one of its algorithms (a relaxation in
  /// both programs: the policy picks between two with slowAlgorithm).
  int algorithm();
  /// A step run at its zero-workspace algorithm instead of its fastest.
  int slowAlgorithm();

  // Rows, one method per constraint family.
  /// A recomputed block's producer runs again: run >= recompute.
  void rerunFor(int run, int recompute);
  /// A re-run finds its input: kept + copied back + the producers' re-runs
  /// >= run.
  void rerunInput(int kept, int back, int run, const Terms &producers);
  /// A re-run's input dead by then is made again: producer >= run.
  void rerunInputRemade(int producerRun, int run);
  /// An input absent then and recomputed is made again first:
  /// producer >= run + recompute - 1.
  void rerunInputRecomputed(int producerRun, int run, int recompute);
  /// An input nothing brings back: the task may not run again.
  void forbidRerun(int run);
  /// A step's algorithm shares sum to one.
  void algorithmPick(const Terms &shares);
  /// At a step, what leaves (bytes per column, a workspace negative)
  /// covers `excess` bytes.
  void memory(const Terms &freed, double excess);
  /// The copies out (terms of -ms) are done before `start`.
  void copiedOutBefore(Terms out, int start);
  /// The copies back (terms of -ms), on one stream, fit between `earlier`
  /// and `later`.
  void copiedBackBetween(Terms in, int later, int earlier);
  /// The compute stream: `terms` (starts, the end, re-runs and slower
  /// algorithms) at least `atLeastMs`.
  void computeStream(const Terms &terms, double atLeastMs);

private:
  int decision(ColumnFamily f);

  const CostTable &costs_;
  const bool integral_;
  const double msOut_, msIn_;
  LinearProgram p_;
};

} // namespace memfit

#endif
