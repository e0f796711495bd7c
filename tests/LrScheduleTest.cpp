// The trainer's learning-rate schedules (runtime/LrSchedule.h). The
// expected rates are PyTorch 1.13's (OneCycleLR, StepLR and
// CosineAnnealingLR stepped once per optimizer step, the rate each step
// used, as float32), printed by torch and written here.
#include "runtime/LrSchedule.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace memfit::rt;

namespace {

std::vector<float> rates(const LrSchedule &s, int64_t steps) {
  std::vector<float> out;
  for (int64_t i = 0; i < steps; ++i)
    out.push_back(lrAt(s, i));
  return out;
}

LrSchedule make(LrKind k, int64_t total, int64_t warmup = 0,
                double minLr = -1) {
  LrSchedule s;
  s.kind = k;
  s.lr = 0.1;
  s.total = total;
  s.warmup = warmup;
  s.minLr = minLr;
  return s;
}

} // namespace

TEST_CASE("schedules give PyTorch's rates, as the float each step uses",
          "[lr]") {
  // OneCycleLR(max_lr=0.1, total_steps=10, pct_start=0.3, cos,
  // div_factor=25, final_div_factor=1e4, cycle_momentum=False).
  CHECK(rates(make(LrKind::OneCycle, 10), 10) ==
        std::vector<float>{0.004000000189989805f, 0.052000001072883606f,
                           0.10000000149011612f, 0.0950484648346901f,
                           0.0811745673418045f, 0.06112620234489441f,
                           0.038874197751283646f, 0.0188258346170187f,
                           0.004951936658471823f, 4.0000000467443897e-07f});
  // StepLR(step_size=3, gamma=0.5).
  LrSchedule step = make(LrKind::Step, 8);
  step.stepSize = 3;
  step.gamma = 0.5;
  CHECK(rates(step, 8) == std::vector<float>{0.1f, 0.1f, 0.1f, 0.05f, 0.05f,
                                             0.05f, 0.025f, 0.025f});
  // CosineAnnealingLR(T_max=8, eta_min=0.001).
  CHECK(rates(make(LrKind::Cosine, 8, 0, 0.001), 8) ==
        std::vector<float>{0.10000000149011612f, 0.09623203426599503f,
                           0.0855017825961113f, 0.06944283097982407f,
                           0.05050000175833702f, 0.03155716881155968f,
                           0.015498214401304722f, 0.004767963197082281f});
}

TEST_CASE("warm-up rises linearly to the rate, then the schedule runs over "
          "what is left",
          "[lr]") {
  // LR * (s + 1) / W for s < W: 0.025, 0.05, 0.075, then 0.1.
  LrSchedule c = make(LrKind::Cosine, 8, 4);
  CHECK(lrAt(c, 0) == 0.025f);
  CHECK(lrAt(c, 2) == 0.075f);
  CHECK(lrAt(c, 3) == 0.1f);
  // Cosine over the 4 steps after the warm-up: half-way at step 6.
  CHECK(lrAt(c, 4) == 0.1f);
  CHECK(lrAt(c, 6) == 0.05f);
  // Linear to MIN at S, and stays there past it.
  LrSchedule l = make(LrKind::Linear, 6, 2, 0.02);
  CHECK(lrAt(l, 2) == 0.1f);
  CHECK(lrAt(l, 4) == Approx(0.06f).epsilon(1e-6));
  CHECK(lrAt(l, 6) == Approx(0.02f).epsilon(1e-6));
  CHECK(lrAt(l, 9) == lrAt(l, 6));
  // Constant with a warm-up.
  LrSchedule k = make(LrKind::Constant, 5, 2);
  CHECK(rates(k, 4) == std::vector<float>{0.05f, 0.1f, 0.1f, 0.1f});
}

TEST_CASE("schedules the run cannot follow are refused, naming the flag",
          "[lr]") {
  CHECK(checkLrSchedule(make(LrKind::Cosine, 8, 2)).empty());
  CHECK_THAT(checkLrSchedule(make(LrKind::Cosine, 4, 4)),
             Catch::Contains("--warmup-steps 4 leaves none"));
  CHECK_THAT(checkLrSchedule(make(LrKind::Step, 8)),
             Catch::Contains("--lr-step-size"));
  CHECK_THAT(checkLrSchedule(make(LrKind::Linear, 8, 0, 0.5)),
             Catch::Contains("--min-lr is above --lr"));
  // OneCycleLR divides by its warm-up's last step: 3 steps have none.
  CHECK_THAT(checkLrSchedule(make(LrKind::OneCycle, 3)),
             Catch::Contains("onecycle needs a warm-up of at least 2 steps"));
  CHECK(parseLrKind("cosine") == LrKind::Cosine);
  CHECK_FALSE(parseLrKind("Cosine").has_value());
}
