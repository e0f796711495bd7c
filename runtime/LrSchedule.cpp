//===- LrSchedule.cpp - The learning rate of each optimizer step ----------===//
#include "runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace memfit::rt {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// OneCycleLR's cosine from `start` to `end` as pct goes from 0 to 1, in
/// its own order of operations.
double annealCos(double start, double end, double pct) {
  const double cosOut = std::cos(kPi * pct) + 1;
  return end + (start - end) / 2.0 * cosOut;
}

/// OneCycleLR's last step of its first phase: float(pct_start * S) - 1.
double oneCycleWarmupEnd(const LrSchedule &s) {
  const double pctStart =
      s.warmup > 0 ? double(s.warmup) / double(s.total) : 0.3;
  return pctStart * double(s.total) - 1;
}

double oneCycle(const LrSchedule &s, int64_t step) {
  const double initial = s.lr / 25.0;
  const double floor = s.minLr >= 0 ? s.minLr : initial / 1e4;
  const double end1 = oneCycleWarmupEnd(s);
  const double end2 = double(s.total - 1);
  const double n = double(std::min<int64_t>(step, s.total - 1));
  if (n <= end1)
    return annealCos(initial, s.lr, n / end1);
  return annealCos(s.lr, floor, (n - end1) / (end2 - end1));
}

} // namespace

std::optional<LrKind> parseLrKind(const std::string &name) {
  for (LrKind k : {LrKind::Constant, LrKind::Step, LrKind::Cosine,
                   LrKind::Linear, LrKind::OneCycle})
    if (name == lrKindName(k))
      return k;
  return std::nullopt;
}

const char *lrKindName(LrKind k) {
  switch (k) {
  case LrKind::Constant:
    return "constant";
  case LrKind::Step:
    return "step";
  case LrKind::Cosine:
    return "cosine";
  case LrKind::Linear:
    return "linear";
  case LrKind::OneCycle:
    return "onecycle";
  }
  return "?";
}

std::string checkLrSchedule(const LrSchedule &s) {
  const std::string steps = std::to_string(s.total);
  if (s.warmup >= s.total && s.kind != LrKind::Constant)
    return "--warmup-steps " + std::to_string(s.warmup) +
           " leaves none of the run's " + steps + " steps to --lr-schedule " +
           lrKindName(s.kind);
  if (s.kind == LrKind::Step && s.stepSize < 1)
    return "--lr-schedule step needs --lr-step-size N (decay every N steps)";
  if (s.minLr > s.lr)
    return "--min-lr is above --lr";
  // OneCycleLR divides by its warm-up's last step.
  if (s.kind == LrKind::OneCycle && oneCycleWarmupEnd(s) <= 0)
    return "--lr-schedule onecycle needs a warm-up of at least 2 steps "
           "(--warmup-steps, else 30% of the run's " +
           steps + ")";
  return "";
}

float lrAt(const LrSchedule &s, int64_t step) {
  if (s.kind == LrKind::OneCycle)
    return static_cast<float>(oneCycle(s, step));
  if (step < s.warmup)
    return static_cast<float>(s.lr * double(step + 1) / double(s.warmup));
  const double floor = std::max(0.0, s.minLr);
  const double span = double(std::max<int64_t>(1, s.total - s.warmup));
  const double into = double(std::min(step, s.total) - s.warmup);
  double lr = s.lr;
  switch (s.kind) {
  case LrKind::Constant:
  case LrKind::OneCycle:
    break;
  case LrKind::Step:
    lr = s.lr * std::pow(s.gamma, double((step - s.warmup) / s.stepSize));
    break;
  case LrKind::Cosine:
    lr = floor + (s.lr - floor) * (1 + std::cos(kPi * into / span)) / 2;
    break;
  case LrKind::Linear:
    lr = s.lr - (s.lr - floor) * into / span;
    break;
  }
  return static_cast<float>(lr);
}

} // namespace memfit::rt
