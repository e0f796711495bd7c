//===- LrSchedule.h - The learning rate of each optimizer step --*- C++ -*-===//
//
// The trainer's --lr-schedule: the learning rate of optimizer step s (0 for
// the first) as a pure function of s, so that a resumed run recomputes the
// uninterrupted run's rates from its step count alone. Each rate is
// computed in double and rounded once to float, as PyTorch's schedulers
// compute in Python floats and its optimizers round the scalar to the
// parameter's type. The formulas (docs/user-guide.md, "Learning-rate
// schedules"), with LR the base rate, MIN the floor, W the warm-up steps
// and S the total steps:
//
//   warm-up (every schedule but onecycle), s < W:  LR * (s + 1) / W
//   constant:  LR
//   step:      LR * gamma ^ floor((s - W) / stepSize)         (StepLR)
//   cosine:    MIN + (LR - MIN) * (1 + cos(pi * (s - W) / (S - W))) / 2
//   linear:    LR - (LR - MIN) * (s - W) / (S - W)
//   onecycle:  torch.optim.lr_scheduler.OneCycleLR(max_lr=LR, total_steps=S,
//              pct_start=W/S (0.3 without W), anneal_strategy='cos',
//              div_factor=25, final_div_factor=LR/25/MIN (1e4 without
//              MIN), three_phase=False, cycle_momentum=False)
//
// Past S (more steps than planned) cosine, linear and onecycle stay at
// their last value.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_LRSCHEDULE_H
#define MEMFIT_RUNTIME_LRSCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>

namespace memfit::rt {

enum class LrKind { Constant, Step, Cosine, Linear, OneCycle };

struct LrSchedule {
  LrKind kind = LrKind::Constant;
  double lr = 0.01;
  /// The floor of cosine and linear, onecycle's final rate; < 0: unset
  /// (0 for cosine and linear, onecycle's own default).
  double minLr = -1;
  int64_t warmup = 0;
  /// Steps in all (the trainer's --iterations or its epochs' steps).
  int64_t total = 1;
  int64_t stepSize = 0; // step: decay every stepSize steps
  double gamma = 0.1;   // step: by this factor
};

/// The schedule named by --lr-schedule; nullopt for an unknown name.
std::optional<LrKind> parseLrKind(const std::string &name);
const char *lrKindName(LrKind k);

/// What is wrong with `s` for a run of `s.total` steps ("" when nothing):
/// a warm-up as long as the run, a step schedule without its step size, a
/// floor above the rate.
std::string checkLrSchedule(const LrSchedule &s);

/// The rate of optimizer step `step` (0-based), rounded to float.
float lrAt(const LrSchedule &s, int64_t step);

} // namespace memfit::rt

#endif
