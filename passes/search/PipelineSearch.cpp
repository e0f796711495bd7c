//===- PipelineSearch.cpp - The fastest of the candidate schedules --------===//
#include "passes/search/PipelineSteps.h"

#include "compiler/support/Diagnostics.h"
#include "passes/schedule/PolicyRules.h"

#include <thread>

namespace memfit::pipeline {
namespace {

/// Schedules planned at once (one thread each).
constexpr size_t kWave = 2;

} // namespace

void forEachSideBySide(size_t n, const std::function<void(size_t)> &work) {
  if (n < 2 || std::thread::hardware_concurrency() < 2) {
    for (size_t k = 0; k < n; ++k)
      work(k);
    return;
  }
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < n; ++k)
    helpers.emplace_back(work, k);
  work(0);
  for (std::thread &h : helpers)
    h.join();
}

void CandidateSearch::runAll(std::vector<Variant> &all) {
  for (size_t i = 0; i < all.size(); i += kWave) {
    std::vector<Variant> wave;
    for (size_t k = i; k < all.size() && k < i + kWave; ++k)
      wave.push_back(std::move(all[k]));
    runWave(wave);
  }
}

// Variants run in waves of kWave, on as many threads, each against the
// best time before its wave; results merge in variant order. The wave
// size is fixed, not taken from the machine, so every machine tries (and
// abandons) the same schedules and writes the same plan.json.
void CandidateSearch::runWave(std::vector<Variant> &wave) {
  double cutoff = bestSoFar ? bestSoFar->sim.iterationSeconds : 0;
  struct Job {
    PlanRequest rv;
    Tables tables;
    std::optional<llvm::Expected<Candidate>> result;
  };
  std::vector<Job> jobs;
  for (Variant &v : wave) {
    PlanRequest rv = sp.r;
    if (v.as)
      rv.policy = *v.as;
    rv.inPlace = sp.r.inPlace && v.inPlace;
    jobs.push_back(
        {rv, tablesFor(sp.tableAt, sp.req.batch, v.subBatch), std::nullopt});
  }
  const PolicyDef &policy = policyDef(sp.req.policy);
  auto work = [&](size_t k) {
    Job &j = jobs[k];
    if (policy.rules.unbounded && wave[k].subBatch == sp.req.batch && ideal)
      j.result.emplace(std::move(*ideal));
    else
      j.result.emplace(planWith(
          sp.g, *j.tables.full, j.tables.last, sp.order,
          {.policy = j.rv.policy,
           .budget = j.rv.budget,
           .batch = j.rv.batch,
           .dropAfterForward = std::move(wave[k].drop),
           .allowRecompute = wave[k].allowRecompute,
           .cutoffSeconds = cutoff,
           .inPlace = j.rv.inPlace,
           .offloadAfterForward = std::move(wave[k].offload),
           .lookPastIdle = wave[k].lookPastIdle && policy.looksPastIdle}));
  };
  if (policy.rules.unbounded)
    for (size_t k = 0; k < jobs.size(); ++k)
      work(k);
  else
    forEachSideBySide(jobs.size(), work);
  for (size_t k = 0; k < jobs.size(); ++k)
    merge(wave[k], *jobs[k].result);
}

void CandidateSearch::merge(const Variant &v, llvm::Expected<Candidate> &c) {
  if (c && v.as)
    c->plan.policy = std::string(policyName(sp.req.policy)) + " (as " +
                     std::string(policyName(*v.as)) + ")";
  if (c && v.chain)
    c->plan.policy = std::string(policyName(sp.req.policy)) +
                     (v.guided ? " (as bound-guided)" : " (as chain-dp)");
  if (!c) {
    // A schedule abandoned because it could not beat the best so far; a
    // variant with no plan, the reason kept for when none has one; any
    // other error ends the search.
    llvm::Error rest = llvm::handleErrors(
        c.takeError(), [&](const CutoffError &) { ++rec.abandoned; },
        [&](std::unique_ptr<Infeasible> e) {
          if (!firstErr)
            firstErr = llvm::Error(std::move(e));
        });
    if (rest)
      fatalErr = llvm::joinErrors(std::move(fatalErr), std::move(rest));
    return;
  }
  rec.tried.push_back({v.subBatch, c->sim.iterationSeconds});
  // Faster wins; on a tie the larger sub-batch, then the policy's own
  // rules over another policy's, then the later variant.
  bool wins = !bestSoFar;
  if (bestSoFar) {
    double t = c->sim.iterationSeconds, bt = bestSoFar->sim.iterationSeconds;
    if (t != bt || v.chain)
      wins = t < bt;
    else if (c->plan.subBatch != bestSoFar->plan.subBatch)
      wins = c->plan.subBatch > bestSoFar->plan.subBatch;
    else
      wins = !v.as || bestAs;
  }
  if (wins) {
    bestSoFar = std::move(*c);
    bestAs = v.as.has_value();
  }
}

llvm::Expected<Candidate> CandidateSearch::takeBest() {
  // A candidate memfit broke is a bug even when another one won.
  if (fatalErr) {
    llvm::consumeError(std::move(firstErr));
    return std::move(fatalErr);
  }
  if (!bestSoFar) {
    if (firstErr)
      return std::move(firstErr);
    // Nothing was scheduled, or every variant was cut off: the caller
    // asked for a best where there is none.
    return makeInternalError("the candidate search has no candidate");
  }
  llvm::consumeError(std::move(firstErr));
  return std::move(*bestSoFar);
}

} // namespace memfit::pipeline
