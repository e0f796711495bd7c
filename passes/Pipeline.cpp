//===- Pipeline.cpp - From task graph and costs to a verified plan --------===//
#include "passes/Pipeline.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/Recompute.h"
#include "passes/Verify.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

namespace memfit {
namespace {

/// Beyond this many tasks memfit tries fewer sub-batch sizes.
constexpr size_t kManyTasks = 20000;
/// Schedules planned at once (one thread each).
constexpr size_t kWave = 2;

struct Candidate {
  Plan plan;
  Simulation sim;
};

/// One schedule and its simulation on tables the caller owns (so several
/// may run at once).
llvm::Expected<Candidate>
planWith(const TaskGraph &tg, const CostTable &full, const CostTable *last,
         const std::vector<TaskId> &order, const PlanRequest &req,
         std::vector<bool> drop, bool allowRecompute, double cutoffSeconds) {
  auto plan = schedule(tg, full, order,
                       {req.policy, req.budget, req.batch, std::move(drop),
                        allowRecompute, cutoffSeconds, req.inPlace});
  if (!plan)
    return plan.takeError();
  Candidate c{std::move(*plan), {}};
  c.sim = simulate(tg, c.plan, full, last);
  return c;
}

/// The cost tables for sub-batch b of `batch`: the full rounds' and, when
/// the last round is smaller, its own (copied: tableAt may reuse storage).
struct Tables {
  CostTable full;
  std::optional<CostTable> last;
};
Tables tablesFor(const CostTableFn &tableAt, int64_t batch, int64_t b) {
  Tables t{tableAt(b), std::nullopt};
  int64_t rest = batch % b;
  if (rest != 0 && batch > b)
    t.last = tableAt(rest);
  return t;
}

llvm::Expected<Candidate> planAt(const TaskGraph &tg,
                                 const CostTableFn &tableAt,
                                 const std::vector<TaskId> &order,
                                 const PlanRequest &req, int64_t b) {
  Tables t = tablesFor(tableAt, req.batch, b);
  return planWith(tg, t.full, t.last ? &*t.last : nullptr, order, req, {}, true,
                  0);
}

} // namespace

bool isVerifierFailure(const std::string &message) {
  return message.find("plan verification failed") != std::string::npos;
}

llvm::Expected<PlanOutcome> planTraining(const TaskGraph &tg,
                                         const CostTableFn &tableAt,
                                         const PlanRequest &req) {
  if (req.batch <= 0)
    return makeError("the batch size must be positive");
  auto t0 = std::chrono::steady_clock::now();
  std::vector<TaskId> order = taskOrder(tg, req.order);
  PlanOutcome out;
  out.lowerBound = computeLowerBound(tg, 1);
  const LowerBound &lb = out.lowerBound;

  PlanRequest idealReq = req;
  idealReq.policy = Policy::Ideal;
  auto ideal = planAt(tg, tableAt, order, idealReq, req.batch);
  if (!ideal)
    return ideal.takeError();
  out.idealSeconds = ideal->sim.iterationSeconds;
  out.idealPeakBytes = ideal->plan.totalBytes();

  PlanRequest r = req;
  if (r.budgetFraction > 0)
    r.budget = static_cast<int64_t>(r.budgetFraction *
                                    static_cast<double>(out.idealPeakBytes));
  if (r.budgetIsLowerBound)
    r.budget = lb.bytes;
  if (r.policy == Policy::Ideal)
    r.budget = out.idealPeakBytes;
  out.budget = r.budget;
  if (r.budget < lb.bytes) {
    // Say what would help: below b = 1 a smaller batch changes nothing, so
    // only the weight side or the largest task can give.
    std::string help =
        lb.weightSideBytes >= lb.taskBytes
            ? "the weights, their gradients and the optimizer state dominate: "
              "train without momentum (--momentum 0) or a smaller model"
            : "that task dominates; a smaller batch does not help below "
              "sub-batch 1: give more memory or a model with smaller "
              "activations";
    if (r.budget < lb.weightSideBytes)
      help = "the budget does not even hold the weights, their gradients "
             "and the optimizer state";
    return makeErrorF(
        "budget {0} is below the lower bound Mmin = {1} ({2} bytes): "
        "weights, gradients and optimizer state take {3}, and task {4} "
        "needs {5} at sub-batch 1 with no workspace; {6}",
        formatBytes(r.budget), formatBytes(lb.bytes), lb.bytes,
        formatBytes(lb.weightSideBytes),
        quoteName(lb.task >= 0 ? tg.tasks[lb.task].name : ""),
        formatBytes(lb.taskBytes), help);
  }

  // Each variant is a sub-batch and a drop set to schedule with.
  struct Variant {
    int64_t b;
    std::vector<bool> drop;
    bool allowRecompute = true;
    std::optional<Policy> as; // schedule with another policy's rules
    bool inPlace = true;      // and PlanRequest::inPlace
  };
  std::vector<Variant> variants;
  if (req.forcedSubBatch > 0 && req.forcedSubBatch > req.batch)
    return makeErrorF("--sub-batch {0} is larger than the batch {1}",
                      req.forcedSubBatch, req.batch);
  switch (req.policy) {
  case Policy::Ideal:
  case Policy::VdnnAll:
  case Policy::VdnnConv:
    // Neither the ideal case nor vDNN splits the batch.
    variants.push_back(
        {req.forcedSubBatch ? req.forcedSubBatch : req.batch, {}});
    break;
  case Policy::ChenSqrt: {
    int64_t b = req.forcedSubBatch ? req.forcedSubBatch : req.batch;
    for (auto &drop : chenCandidates(tg, order, b))
      variants.push_back({b, std::move(drop)});
    break;
  }
  case Policy::SuperNeurons:
    variants.push_back({req.forcedSubBatch ? req.forcedSubBatch : req.batch,
                        superNeuronsDropSet(tg)});
    break;
  case Policy::Modnn:
  case Policy::Memfit:
    out.eq3SubBatch = selectSubBatch(tg, tableAt, req.batch, r.budget);
    if (req.policy == Policy::Modnn) {
      variants.push_back(
          {req.forcedSubBatch ? req.forcedSubBatch : out.eq3SubBatch,
           {},
           false});
      break;
    }
    // Joint: every sub-batch size with offload alone, with evictions free to
    // drop what is cheaper to recompute, and with the cheap forward outputs
    // (everything but convolutions) recomputed as well.
    std::vector<int64_t> sizes =
        req.forcedSubBatch ? std::vector<int64_t>{req.forcedSubBatch}
                           : subBatchCandidates(out.eq3SubBatch, req.batch);
    // Eq. 3's sub-batch first and the rest by their distance from it, so
    // the likely winners set a tight cutoff early and the sub-batches far
    // from it are abandoned sooner (the winner does not depend on the
    // order: ties go to the larger sub-batch).
    std::stable_sort(sizes.begin(), sizes.end(), [&](int64_t x, int64_t y) {
      auto dist = [&](int64_t v) {
        return std::abs(std::log2(double(v) / double(out.eq3SubBatch)));
      };
      return dist(x) != dist(y) ? dist(x) < dist(y) : x > y;
    });
    // Very deep networks: the three nearest Eq. 3's only, to keep planning
    // in seconds (the far ones rarely win and each costs a full schedule).
    if (tg.tasks.size() > kManyTasks && sizes.size() > 3)
      sizes.resize(3);
    for (int64_t b : sizes) {
      // Running in place frees memory but moves blocks elsewhere, and a
      // different placement can leave less room for a workspace later:
      // try without it too.
      for (bool inPlace : {true, false}) {
        if (inPlace && !req.inPlace)
          continue;
        variants.push_back({b, {}, false, std::nullopt, inPlace});
        variants.push_back({b, {}, true, std::nullopt, inPlace});
        variants.push_back(
            {b, superNeuronsDropSet(tg), true, std::nullopt, inPlace});
      }
      // moDNN's rules at every sub-batch (its own choice, Eq. 3's, among
      // them), so memfit is never worse than moDNN: memfit's rules are
      // usually faster but not always (on GoogLeNet at batch 256 and half
      // the ideal peak on the H100 model, moDNN's at sub-batch 128 are).
      variants.push_back({b, {}, false, Policy::Modnn});
      // The cheapest blocks to recompute, as many bytes as the liveness
      // peak exceeds the budget (and twice that): on a fast GPU where
      // copies cannot hide, regenerating a BatchNorm or activation output
      // is much cheaper than moving it.
      const CostTable &costs = tableAt(b);
      int64_t excess = livenessArenaNeed(tg, order, costs, req.inPlace) -
                       (r.budget - tg.weightSideBytes());
      if (excess > 0)
        for (int64_t bytes : {excess, 2 * excess})
          variants.push_back(
              {b, cheapestDropSet(tg, costs, bytes), true, std::nullopt, true});
    }
    break;
  }

  std::optional<Candidate> best;
  bool bestAs = false; // the best was scheduled under another policy's rules
  llvm::Error firstErr = llvm::Error::success();
  // Variants run in waves of kWave, on as many threads, each against the
  // best time before its wave; results merge in variant order. The wave
  // size is fixed, not taken from the machine, so every machine tries (and
  // abandons) the same schedules and writes the same plan.
  auto runWave = [&](std::vector<Variant> &wave) {
    double cutoff = best ? best->sim.iterationSeconds : 0;
    struct Job {
      PlanRequest rv;
      Tables tables;
      std::optional<llvm::Expected<Candidate>> result;
    };
    std::vector<Job> jobs;
    for (Variant &v : wave) {
      PlanRequest rv = r;
      if (v.as)
        rv.policy = *v.as;
      rv.inPlace = r.inPlace && v.inPlace;
      jobs.push_back({rv, tablesFor(tableAt, req.batch, v.b), std::nullopt});
    }
    auto work = [&](size_t k) {
      Job &j = jobs[k];
      if (req.policy == Policy::Ideal && wave[k].b == req.batch && ideal)
        j.result.emplace(std::move(*ideal));
      else
        j.result.emplace(planWith(
            tg, j.tables.full, j.tables.last ? &*j.tables.last : nullptr, order,
            j.rv, std::move(wave[k].drop), wave[k].allowRecompute, cutoff));
    };
    if (jobs.size() > 1 && std::thread::hardware_concurrency() > 1 &&
        req.policy != Policy::Ideal) {
      std::vector<std::thread> helpers;
      for (size_t k = 1; k < jobs.size(); ++k)
        helpers.emplace_back(work, k);
      work(0);
      for (std::thread &h : helpers)
        h.join();
    } else {
      for (size_t k = 0; k < jobs.size(); ++k)
        work(k);
    }
    for (size_t k = 0; k < jobs.size(); ++k) {
      Variant &v = wave[k];
      llvm::Expected<Candidate> &c = *jobs[k].result;
      if (c && v.as)
        c->plan.policy = std::string(policyName(req.policy)) + " (as " +
                         std::string(policyName(*v.as)) + ")";
      if (!c) {
        // A schedule abandoned because it could not beat the best so far.
        llvm::Error rest = llvm::handleErrors(
            c.takeError(), [&](const CutoffError &) { ++out.abandoned; });
        if (!rest)
          continue;
        if (!firstErr)
          firstErr = std::move(rest);
        else
          llvm::consumeError(std::move(rest));
        continue;
      }
      out.tried.push_back({v.b, c->sim.iterationSeconds});
      // Faster wins; on a tie the larger sub-batch, then the policy's own
      // rules over another policy's, then the later variant.
      bool wins = !best;
      if (best) {
        double t = c->sim.iterationSeconds, bt = best->sim.iterationSeconds;
        if (t != bt)
          wins = t < bt;
        else if (c->plan.subBatch != best->plan.subBatch)
          wins = c->plan.subBatch > best->plan.subBatch;
        else
          wins = !v.as || bestAs;
      }
      if (wins) {
        best = std::move(*c);
        bestAs = v.as.has_value();
      }
    }
  };
  auto runAll = [&](std::vector<Variant> &all) {
    for (size_t i = 0; i < all.size(); i += kWave) {
      std::vector<Variant> wave;
      for (size_t k = i; k < all.size() && k < i + kWave; ++k)
        wave.push_back(std::move(all[k]));
      runWave(wave);
    }
  };
  runAll(variants);
  if (req.policy == Policy::Memfit && best) {
    // Second phase: at the best sub-batch so far and at the whole batch, the
    // recompute sets of Chen et al. (segments between cut values), with
    // memfit's rules and with theirs, so memfit is never worse than
    // chen-sqrt either.
    std::set<int64_t> sizes{best->plan.subBatch};
    if (!req.forcedSubBatch)
      sizes.insert(req.batch);
    std::vector<Variant> chen;
    for (int64_t b : sizes)
      for (auto &drop : chenCandidates(tg, order, b)) {
        chen.push_back({b, drop, true});
        chen.push_back({b, std::move(drop), true, Policy::ChenSqrt});
      }
    runAll(chen);
  }
  if (!best)
    return firstErr;
  llvm::consumeError(std::move(firstErr));

  if (auto err = verifyPlan(tg, best->plan))
    return err;
  out.plan = std::move(best->plan);
  out.sim = std::move(best->sim);
  summarize(out.plan, out.sim, out.idealSeconds);
  out.planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return out;
}

} // namespace memfit
