//===- Calibrate.cpp - Fit the analytic model to measured kernels ---------===//
#include "compiler/cost/Calibrate.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace memfit {

KernelErrors kernelErrors(const DeviceSpec &spec,
                          const std::vector<KernelCsv> &files) {
  KernelErrors out;
  for (const KernelCsv &csv : files)
    for (const KernelRow &row : csv.rows)
      for (int k = 0; k < kNumKernelKinds; ++k) {
        if (!row.measured[k])
          continue;
        auto pred = predictKernel(spec, csv, row, static_cast<KernelKind>(k));
        if (pred)
          out[k].push_back(std::fabs(std::log(*pred / *row.measured[k])));
      }
  return out;
}

double medianOfSorted(const std::vector<double> &sorted) {
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

double nearestRank(const std::vector<double> &sorted, double p) {
  size_t rank =
      static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

ErrorSummary summarizeErrors(std::vector<double> e) {
  ErrorSummary s;
  s.count = e.size();
  if (e.empty())
    return s;
  std::sort(e.begin(), e.end());
  s.median = medianOfSorted(e);
  s.p90 = nearestRank(e, 0.9);
  return s;
}

namespace {

/// One algorithm a measured kernel may run: its work with the efficiency
/// left to the calibration being tried.
struct Candidate {
  TaskWork work;
  int slot;
};
struct Sample {
  size_t gpu;
  double seconds;
  std::vector<Candidate> candidates;
};

std::vector<Sample> samplesOf(const std::vector<GpuMeasurements> &gpus) {
  std::vector<Sample> out;
  for (size_t g = 0; g < gpus.size(); ++g)
    for (const KernelCsv &csv : gpus[g].files)
      for (const KernelRow &row : csv.rows)
        for (int k = 0; k < kNumKernelKinds; ++k) {
          if (!row.measured[k])
            continue;
          Sample s{g, *row.measured[k], {}};
          const DeviceSpec &spec = gpus[g].device;
          if (csv.kind == KernelCsvKind::Gemm) {
            if (k != static_cast<int>(KernelKind::Gemm))
              continue;
            s.candidates.push_back({gemmKernelWork(spec, row.gemm),
                                    efficiencySlot(CostClass::Gemm)});
          } else {
            if (k == static_cast<int>(KernelKind::Gemm))
              continue;
            auto dir = static_cast<ConvDirection>(k);
            for (int id : applicableConvAlgos(row.conv, dir))
              s.candidates.push_back({convKernelWork(spec, row.conv, dir, id),
                                      efficiencySlot(dir, id)});
          }
          out.push_back(std::move(s));
        }
  return out;
}

class Objective {
public:
  Objective(const std::vector<GpuMeasurements> &gpus)
      : gpus(gpus), samples(samplesOf(gpus)) {}

  /// The fastest measured kernel: no per-kernel floor can exceed it.
  double fastestMeasured() const {
    double t = 30e-6;
    for (const Sample &s : samples)
      t = std::min(t, s.seconds);
    return t;
  }

  /// Mean |ln(predicted / measured)|; `wins`, when given, counts the
  /// fastest candidate's slot of every sample.
  double operator()(const CostCalibration &c,
                    std::array<int, kNumEfficiencySlots> *wins = nullptr) {
    std::vector<DeviceSpec> specs;
    for (const GpuMeasurements &g : gpus) {
      specs.push_back(g.device);
      applyCalibration(specs.back(), c);
    }
    double sum = 0;
    for (Sample &s : samples) {
      const DeviceSpec &spec = specs[s.gpu];
      double best = 0;
      int bestSlot = -1;
      for (Candidate &cand : s.candidates) {
        cand.work.efficiency = spec.efficiency[cand.slot];
        double t = workSeconds(spec, cand.work);
        if (bestSlot < 0 || t < best) {
          best = t;
          bestSlot = cand.slot;
        }
      }
      sum += std::fabs(std::log(best / s.seconds));
      if (wins)
        ++(*wins)[bestSlot];
    }
    return samples.empty() ? 0 : sum / static_cast<double>(samples.size());
  }

private:
  const std::vector<GpuMeasurements> &gpus;
  std::vector<Sample> samples;
};

/// One fitted parameter: reads and writes a value in [lo, hi] of the
/// calibration.
struct Param {
  std::function<double(const CostCalibration &)> get;
  std::function<void(CostCalibration &, double)> set;
  double lo, hi;
};

/// Coordinate descent in log space: each parameter in turn moves by a
/// factor exp(+-step) when that lowers the objective; a sweep without a
/// move halves the step. Fixed order and steps: deterministic.
double descend(Objective &objective, CostCalibration &c,
               const std::vector<Param> &params) {
  double best = objective(c);
  for (double step = std::log(2.0); step > 0.004;) {
    bool moved = false;
    for (const Param &p : params)
      for (double dir : {1.0, -1.0}) {
        double v = p.get(c);
        double next = std::clamp(v * std::exp(dir * step), p.lo, p.hi);
        if (next == v)
          continue;
        CostCalibration trial = c;
        p.set(trial, next);
        double f = objective(trial);
        if (f < best - 1e-12) {
          best = f;
          c = trial;
          moved = true;
          break;
        }
      }
    if (!moved)
      step /= 2;
  }
  return best;
}

double round4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return std::strtod(buf, nullptr);
}

CostCalibration roundCalibration(CostCalibration c) {
  c.launchSeconds = round4(c.launchSeconds);
  c.halfRateItemsPerSm = round4(c.halfRateItemsPerSm);
  c.halfRateReduction = round4(c.halfRateReduction);
  c.halfRateFilterItemsPerSm = round4(c.halfRateFilterItemsPerSm);
  c.stridePenaltyExponent = round4(c.stridePenaltyExponent);
  for (Efficiency &e : c.efficiency)
    e = {round4(e.compute), round4(e.memory)};
  return c;
}

bool isBaselineSlot(int slot) {
  auto dir = static_cast<ConvDirection>(slot / kMaxConvAlgoId);
  return slot < kNumConvDirections * kMaxConvAlgoId &&
         slot % kMaxConvAlgoId == convBaselineAlgo(dir);
}

bool isConvSlot(int slot) {
  return slot < kNumConvDirections * kMaxConvAlgoId &&
         !efficiencySlotName(slot).empty();
}

} // namespace

CalibrationFit fitCalibration(const std::vector<GpuMeasurements> &gpus,
                              const CostCalibration &prior) {
  Objective objective(gpus);
  CostCalibration c = prior;
  if (c.halfRateReduction <= 0)
    c.halfRateReduction = 8; // a start the log-space steps can move from
  const int gemm = efficiencySlot(CostClass::Gemm);

  std::vector<Param> globals = {
      // The floor is bounded by the fastest measured kernel: a larger one
      // would contradict it, and would tax every small kernel the planner
      // prices (elementwise ones included) for what is per-call overhead
      // of the measured library calls.
      {[](const CostCalibration &c) { return c.launchSeconds; },
       [](CostCalibration &c, double v) { c.launchSeconds = v; }, 0.5e-6,
       objective.fastestMeasured()},
      {[](const CostCalibration &c) { return c.halfRateItemsPerSm; },
       [](CostCalibration &c, double v) { c.halfRateItemsPerSm = v; }, 1,
       1 << 20},
      {[](const CostCalibration &c) { return c.halfRateFilterItemsPerSm; },
       [](CostCalibration &c, double v) { c.halfRateFilterItemsPerSm = v; }, 1,
       1 << 20},
      {[](const CostCalibration &c) { return c.stridePenaltyExponent; },
       [](CostCalibration &c, double v) { c.stridePenaltyExponent = v; }, 0.01,
       2},
      {[](const CostCalibration &c) { return c.halfRateReduction; },
       [](CostCalibration &c, double v) { c.halfRateReduction = v; }, 0.5,
       1 << 14},
      {[gemm](const CostCalibration &c) { return c.efficiency[gemm].compute; },
       [gemm](CostCalibration &c, double v) { c.efficiency[gemm].compute = v; },
       0.01, 1},
      {[gemm](const CostCalibration &c) { return c.efficiency[gemm].memory; },
       [gemm](CostCalibration &c, double v) { c.efficiency[gemm].memory = v; },
       0.01, 1},
      // One memory efficiency for every convolution kernel.
      {[](const CostCalibration &c) { return c.efficiency[0].memory; },
       [](CostCalibration &c, double v) {
         for (int s = 0; s < kNumConvDirections * kMaxConvAlgoId; ++s)
           c.efficiency[s].memory = v;
       },
       0.01, 1},
  };

  // Stage 1: a scale per direction over the prior's algorithm ratios,
  // read back from the direction's baseline (capped at 1 like every
  // efficiency).
  std::vector<Param> stage1 = globals;
  for (int d = 0; d < kNumConvDirections; ++d) {
    auto dir = static_cast<ConvDirection>(d);
    int base = efficiencySlot(dir, convBaselineAlgo(dir));
    double baseline = prior.efficiency[base].compute;
    stage1.push_back({[base, baseline](const CostCalibration &c) {
                        return c.efficiency[base].compute / baseline;
                      },
                      [&prior, d](CostCalibration &c, double v) {
                        for (int a = 0; a < kMaxConvAlgoId; ++a) {
                          int s = d * kMaxConvAlgoId + a;
                          c.efficiency[s].compute =
                              std::min(1.0, prior.efficiency[s].compute * v);
                        }
                      },
                      0.01, 1.0 / baseline});
  }
  // The launch floor and the utilisation ramps trade against each other
  // (both slow small kernels down), so stage 1 starts from a grid of them
  // and keeps the best; ties go to the earlier start.
  CostCalibration start = c, best = c;
  double bestError = 0;
  bool first = true;
  for (double launch : {2e-6, 0.8 * objective.fastestMeasured()})
    for (double items : {64.0, 1024.0, 8192.0}) {
      CostCalibration trial = start;
      trial.launchSeconds = launch;
      trial.halfRateItemsPerSm = trial.halfRateFilterItemsPerSm = items;
      double e = descend(objective, trial, stage1);
      if (first || e < bestError - 1e-12) {
        best = trial;
        bestError = e;
        first = false;
      }
    }
  c = best;

  CalibrationFit fit;
  std::array<int, kNumEfficiencySlots> wins{};
  objective(c, &wins);

  // Stage 2: every algorithm the model now picks for at least three
  // kernels gets its own efficiency, refitted with the global parameters.
  // Baselines keep the prior's ratio to their direction: a baseline and
  // its precomputed-index or atomic sibling do the same arithmetic, so
  // times alone cannot tell them apart, and the prior orders them as
  // cuDNN's choices do (precomputed indices faster).
  std::vector<Param> stage2 = globals;
  for (int s = 0; s < kNumEfficiencySlots; ++s)
    if (isConvSlot(s) && wins[s] >= 3 && !isBaselineSlot(s)) {
      fit.fitted[s] = true;
      stage2.push_back(
          {[s](const CostCalibration &c) { return c.efficiency[s].compute; },
           [s](CostCalibration &c, double v) { c.efficiency[s].compute = v; },
           0.01, 1});
    }
  descend(objective, c, stage2);
  // The committed table holds 4 significant digits; the fit reports what
  // that table predicts.
  c = roundCalibration(c);
  fit.meanError = objective(c, &fit.wins);
  fit.calibration = c;
  return fit;
}

std::string calibrationInc(const CostCalibration &c,
                           const std::string &provenance) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "// The analytic cost model's calibration (DeviceSpec.h,\n"
     << "// CostCalibration). Generated by `memfit calibrate --emit-cpp`\n"
     << "// (tools/calibrate-cost-model); do not edit by hand.\n";
  for (llvm::StringRef rest = llvm::StringRef(provenance).rtrim();
       !rest.empty();) {
    auto [line, tail] = rest.split('\n');
    os << "// " << line << "\n";
    rest = tail;
  }
  auto num = [](double v) { return llvm::format("%.4g", v); };
  os << "MEMFIT_CALIBRATED_PARAM(launchSeconds, " << num(c.launchSeconds)
     << ")\n";
  os << "MEMFIT_CALIBRATED_PARAM(halfRateItemsPerSm, "
     << num(c.halfRateItemsPerSm) << ")\n";
  os << "MEMFIT_CALIBRATED_PARAM(halfRateFilterItemsPerSm, "
     << num(c.halfRateFilterItemsPerSm) << ")\n";
  os << "MEMFIT_CALIBRATED_PARAM(stridePenaltyExponent, "
     << num(c.stridePenaltyExponent) << ")\n";
  os << "MEMFIT_CALIBRATED_PARAM(halfRateReduction, "
     << num(c.halfRateReduction) << ")\n";
  for (int s = 0; s < kNumEfficiencySlots; ++s) {
    std::string name = efficiencySlotName(s);
    if (name.empty())
      continue;
    os << "MEMFIT_CALIBRATED_EFFICIENCY(\"" << name << "\", "
       << num(c.efficiency[s].compute) << ", " << num(c.efficiency[s].memory)
       << ")\n";
  }
  return os.str();
}

} // namespace memfit
