//===- FormChoice.cpp - The model's forms planned and the faster kept
//------===//
//
// --fuse-attention=auto and --fuse-head=auto: the model planned as written
// and with its attention or head fused, under the same bytes, the faster
// feasible plan kept and the choice said in a note.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/Planning.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/FusedHead.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/search/GraphVariants.h"
#include "passes/search/Tiers.h"

#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace llvm;

namespace memfit::tool {

namespace {

std::string attentionChoiceNote(VariantChoice &c, int64_t n) {
  auto ms = [](double sec) { return formatv("{0:F2} ms", sec * 1e3).str(); };
  VariantOutcome &chosen = c.tried[c.chosen];
  std::string what =
      chosen.fused == n   ? formatv("attention fused (all {0})", n).str()
      : chosen.fused == 0 ? formatv("attention as the model writes it ({0} "
                                    "subgraph{1}, scores stored)",
                                    n, n == 1 ? "" : "s")
                                .str()
                          : formatv("attention fused in the first {0} of {1} "
                                    "(the rest store their scores)",
                                    chosen.fused, n)
                                .str();
  std::string others;
  for (size_t i = 0; i < c.tried.size(); ++i) {
    VariantOutcome &t = c.tried[i];
    if (i == c.chosen || (t.fused != 0 && t.fused != n))
      continue;
    others += t.fused == 0 ? "; as written " : "; all fused ";
    others += t.outcome ? ms(t.outcome->plan.summary.plannedSeconds)
                        : std::string("does not fit");
  }
  return formatv("{0}: predicted {1} per iteration{2}", what,
                 ms(chosen.outcome->plan.summary.plannedSeconds), others);
}

} // namespace

namespace {
Expected<PlanOutcome> planAttentionChosen(std::unique_ptr<PlanningSession> &s,
                                          bool keepWeightData,
                                          Progress &progress);

/// The device bytes `req`'s percentage budget resolves to against the
/// ideal peak of `s`'s model (built); 0 for a budget in bytes or the lower
/// bound, which each form takes as its own.
Expected<int64_t> percentBudgetBytes(PlanningSession &s,
                                     const PlanRequest &req) {
  if (req.budgetFraction <= 0 || req.budgetIsLowerBound)
    return 0;
  auto yard = planTraining(s.tg, s.tableFn(), idealYardstick(req));
  if (!yard)
    return yard.takeError();
  return resolveBudget(req, yard->idealPeakBytes, yard->lowerBound.bytes)
      .device;
}

/// The chunk rows of the head's rungs (the default, then an eighth at a
/// time down to one row).
std::vector<int64_t> chunkRungs(int64_t rows) {
  std::vector<int64_t> out{rows};
  while (rows > 1) {
    rows = std::max<int64_t>(1, rows / 8);
    out.push_back(rows);
  }
  return out;
}

/// The largest rung whose lower bound is one row's: the least memory the
/// head trains in, with as few launches as that allows.
Expected<int64_t> lowerBoundChunk(const PlanningSession &s) {
  const std::vector<int64_t> rungs = chunkRungs(s.tg.headChunkRows);
  std::vector<int64_t> bounds;
  for (int64_t rows : rungs) {
    auto lb = lowerBoundAtChunk(s.graph, s.config, rows);
    if (!lb)
      return lb.takeError();
    bounds.push_back(lb->bytes);
  }
  for (size_t i = 0; i < rungs.size(); ++i)
    if (bounds[i] == bounds.back())
      return rungs[i];
  return rungs.back();
}

/// The fused head planned with its default chunk and, where that does not
/// fit and --head-chunk-rows was not given, with an eighth of the rows at
/// a time down to one row: a smaller scratch for more launches. Every try
/// is held to the first's budget in bytes (a percentage resolved once).
/// The lower bound (--budget lb) is one row's: the least memory the head
/// can train in, as inspect reports it.
Expected<PlanOutcome> planFusedHead(std::unique_ptr<PlanningSession> &s,
                                    bool keepWeightData, Progress &progress) {
  auto out = planAttentionChosen(s, keepWeightData, progress);
  if (out && headChunkRowsFlag() == 0 && budgetIsLowerBoundFlag() &&
      s->tg.fusedHead != kNoId) {
    auto rows = lowerBoundChunk(*s);
    if (!rows) {
      consumeError(out.takeError());
      return rows.takeError();
    }
    if (*rows == s->tg.headChunkRows)
      return out;
    auto next = std::make_unique<PlanningSession>();
    next->fuseEpilogues = s->fuseEpilogues;
    next->fuseHead = true;
    next->headChunkRows = *rows;
    auto o = planAttentionChosen(next, keepWeightData, progress);
    if (!o)
      return o;
    consumeError(out.takeError());
    s = std::move(next);
    return o;
  }
  if (out || !out.errorIsA<Infeasible>() || headChunkRowsFlag() > 0 ||
      s->tg.fusedHead == kNoId || s->tg.headChunkRows <= 1)
    return out;
  int64_t bytes = s->budgetBytes;
  if (bytes == 0) {
    auto req = planRequest(*s);
    if (!req) {
      consumeError(out.takeError());
      return req.takeError();
    }
    auto resolved = percentBudgetBytes(*s, *req);
    if (!resolved) {
      consumeError(out.takeError());
      return resolved.takeError();
    }
    bytes = *resolved;
  }
  const std::vector<int64_t> rungs = chunkRungs(s->tg.headChunkRows);
  for (size_t i = 1; i < rungs.size(); ++i) {
    const int64_t rows = rungs[i];
    auto next = std::make_unique<PlanningSession>();
    next->fuseEpilogues = s->fuseEpilogues;
    next->fuseHead = true;
    next->headChunkRows = rows;
    next->budgetBytes = bytes;
    progress.info(formatv("the head's chunk of {0} rows does not fit; trying "
                          "{1}",
                          s->tg.headChunkRows, rows));
    auto o = planAttentionChosen(next, keepWeightData, progress);
    if (o || !o.errorIsA<Infeasible>()) {
      consumeError(out.takeError());
      s = std::move(next);
      return o;
    }
    // The smaller chunk's reason: its lower bound is the lower.
    consumeError(out.takeError());
    out = std::move(o);
    s = std::move(next);
  }
  return out;
}

/// What the summary says of the head: its form, chunk and scratch, and
/// both forms' ideal peaks and predicted times where both were planned.
std::string headNote(const TaskGraph &fusedTg, const PlanOutcome *fused,
                     const PlanOutcome *written, bool chosenFused) {
  auto ms = [](const PlanOutcome *o) {
    return o ? formatv("{0:F2} ms", o->plan.summary.plannedSeconds * 1e3).str()
             : std::string("does not fit");
  };
  std::string out =
      chosenFused
          ? formatv("head fused with the loss (chunks of {0} rows, {1} of "
                    "logits at a time; the logits are never stored whole)",
                    fusedTg.headChunkRows,
                    formatBytes(
                        fusedTg.blocks[fusedTg.headScratchBlock].fixedBytes))
                .str()
          : std::string("head as the model writes it (the logits stored)");
  if (fused && written)
    out += formatv(": ideal peak {0} fused, {1} as written",
                   formatBytes(fused->idealPeakBytes),
                   formatBytes(written->idealPeakBytes))
               .str();
  if (written || !chosenFused)
    out +=
        formatv("; predicted {0} fused, {1} as written", ms(fused), ms(written))
            .str();
  return out;
}
} // namespace

Expected<LowerBound> lowerBoundAtChunk(const Graph &g, TrainingConfig config,
                                       int64_t rows) {
  config.headChunkRows = rows;
  auto tg = buildTaskGraph(g, config);
  if (!tg)
    return tg.takeError();
  return computeLowerBound(*tg, 1);
}

namespace {

/// Of the fused head's plan `out` (session `fused`) and the head as written
/// (`written`, session `s`), the faster feasible one, the fused on a tie
/// (less memory), with the head note in the session it leaves in `s`;
/// neither feasible: the fused form's reason (its lower bound is lower).
/// Errors other than Infeasible are returned by the callers before.
Expected<PlanOutcome> pickHeadForm(std::unique_ptr<PlanningSession> &s,
                                   std::unique_ptr<PlanningSession> fused,
                                   Expected<PlanOutcome> out,
                                   Expected<PlanOutcome> written) {
  if (!out && !written) {
    consumeError(written.takeError());
    return out.takeError();
  }
  bool takeFused =
      out && (!written || out->plan.summary.plannedSeconds <=
                              written->plan.summary.plannedSeconds);
  std::string note = headNote(fused->tg, out ? &*out : nullptr,
                              written ? &*written : nullptr, takeFused);
  if (takeFused) {
    consumeError(written.takeError());
    s = std::move(fused);
    s->headNote = note;
    return out;
  }
  consumeError(out.takeError());
  s->headNote = note;
  return written;
}

/// --fuse-head=auto with the host tier and a budget in bytes: every homing
/// is a whole search, so the fused head (the form with the lower peak)
/// goes first and chooses the homing, and the head as written starts from
/// its bytes and homes more only where it needs to (as the attention
/// variants do, passes/search/GraphVariants.h). The faster plan wins, the
/// fused one on a tie.
Expected<PlanOutcome> planFusedFirst(std::unique_ptr<PlanningSession> &s,
                                     bool keepWeightData, Progress &progress) {
  auto fused = std::make_unique<PlanningSession>();
  fused->fuseEpilogues = s->fuseEpilogues;
  fused->fuseHead = true;
  auto out = planFusedHead(fused, keepWeightData, progress);
  if (!out && !out.errorIsA<Infeasible>())
    return out;
  if (fused->tg.fusedHead == kNoId) {
    // Nothing to fuse: that was the model as written.
    s = std::move(fused);
    s->fuseHead = false;
    return out;
  }
  if (out) {
    s->homeBytesAtLeast = out->homed ? out->homed->homedBytes(Tier::Host) +
                                           out->homed->homedBytes(Tier::Nvme)
                                     : 0;
    s->homeKeepsCopies = out->homed && keepsCopiesOnGpu(*out->homed);
  }
  auto written = planAttentionChosen(s, keepWeightData, progress);
  if (!written && !written.errorIsA<Infeasible>()) {
    consumeError(out.takeError());
    return written;
  }
  return pickHeadForm(s, std::move(fused), std::move(out), std::move(written));
}

} // namespace

namespace {
Expected<PlanOutcome> planHeadChosen(std::unique_ptr<PlanningSession> &s,
                                     bool keepWeightData, Progress &progress) {
  if (fuseHeadFlag() == AttentionMode::Materialized)
    return planAttentionChosen(s, keepWeightData, progress);
  if (fuseHeadFlag() == AttentionMode::Fused) {
    s->fuseHead = true;
    auto out = planFusedHead(s, keepWeightData, progress);
    if (out && s->tg.fusedHead == kNoId) {
      HeadFusion hf = fusableHead(s->graph, s->config.loss,
                                  lossClassAxis(s->graph, s->config.classAxis));
      return makeErrorF("{0}: --fuse-head=true: the model's head cannot be "
                        "fused: {1}",
                        s->modelPath, hf.why);
    }
    if (out)
      s->headNote = headNote(s->tg, &*out, nullptr, true);
    return out;
  }
  if (hostTierInBytesFlag())
    return planFusedFirst(s, keepWeightData, progress);
  // Auto: the head as written, then fused under the same bytes.
  auto written = planAttentionChosen(s, keepWeightData, progress);
  if (!written && !written.errorIsA<Infeasible>())
    return written;
  if (fusableHead(s->graph, s->config.loss,
                  lossClassAxis(s->graph, s->config.classAxis))
          .op == kNoId)
    return written;
  auto req = planRequest(*s);
  if (!req) {
    consumeError(written.takeError());
    return req.takeError();
  }
  auto fused = std::make_unique<PlanningSession>();
  fused->fuseEpilogues = s->fuseEpilogues;
  fused->fuseHead = true;
  fused->budgetBytes = s->budgetBytes;
  if (req->budgetFraction > 0 && !req->budgetIsLowerBound) {
    if (written) {
      fused->budgetBytes = written->budget;
    } else {
      auto resolved = percentBudgetBytes(*s, *req);
      if (!resolved) {
        consumeError(written.takeError());
        return resolved.takeError();
      }
      fused->budgetBytes = *resolved;
    }
  }
  auto out = planFusedHead(fused, keepWeightData, progress);
  if (!out && !out.errorIsA<Infeasible>()) {
    consumeError(written.takeError());
    return out.takeError();
  }
  return pickHeadForm(s, std::move(fused), std::move(out), std::move(written));
}

Expected<PlanOutcome> planAttentionChosen(std::unique_ptr<PlanningSession> &s,
                                          bool keepWeightData,
                                          Progress &progress) {
  if (fuseAttentionFlag() != AttentionMode::Auto) {
    if (auto err = openSession(*s, keepWeightData, &progress))
      return err;
    auto req = planRequest(*s);
    if (!req)
      return req.takeError();
    return runPlanner(*s, *req, progress);
  }
  // Auto: the graph-variant search (passes/search/GraphVariants.h) over the
  // model as written and graphs with more and more of its attention fused;
  // each graph is built here when the search first asks for it.
  if (auto err = importInto(*s, keepWeightData, false, progress))
    return err;
  int64_t n = countAttention(s->graph);
  if (auto err = buildSession(*s, progress))
    return err;
  auto req = planRequest(*s);
  if (!req)
    return req.takeError();
  if (n == 0)
    return runPlanner(*s, *req, progress);
  // Sessions by fused count; the one as written is `s`'s.
  std::map<int64_t, std::unique_ptr<PlanningSession>> sessions;
  sessions[0] = std::move(s);
  const PlanningSession &written = *sessions[0];
  AttentionVariants variants{
      .subgraphs = n,
      .plan = [&](int64_t k, const PlanRequest &r) -> Expected<PlanOutcome> {
        std::unique_ptr<PlanningSession> &session = sessions[k];
        if (!session) {
          session = std::make_unique<PlanningSession>();
          session->modelPath = written.modelPath;
          session->fuseHead = written.fuseHead;
          session->fuseEpilogues = written.fuseEpilogues;
          session->epilogues = written.epilogues;
          session->headChunkRows = written.headChunkRows;
          session->budgetBytes = written.budgetBytes;
          session->graph = fuseAttention(written.graph, k);
          if (auto err = buildSession(*session, progress))
            return err;
        }
        return runPlanner(*session, r, progress);
      }};
  auto choice = chooseAttention(variants, *req);
  // Moved into `sessions`, the session as written goes back to `s` unless
  // another is chosen.
  if (!choice) {
    s = std::move(sessions[0]);
    return choice.takeError();
  }
  std::string note = attentionChoiceNote(*choice, n);
  VariantOutcome &chosen = choice->tried[choice->chosen];
  s = std::move(sessions[chosen.fused]);
  s->attentionNote = note;
  Expected<PlanOutcome> out = std::move(chosen.outcome);
  for (VariantOutcome &t : choice->tried)
    if (&t != &chosen && !t.outcome)
      consumeError(t.outcome.takeError());
  return out;
}

} // namespace

namespace {

/// "9 BatchNorm+ReLU" and the like, from the fused graph.
std::string fusedText(const Graph &fused) {
  const FusedActCounts c = countFusedActs(fused);
  return fusedFormsText(c.relu, c.clip);
}

/// The device bytes a percentage budget resolves to against the model as
/// written in `s` (imported, built here), which every form is then held
/// to, as for attention and the head; 0 for a budget in bytes or the lower
/// bound (each form's own).
Expected<int64_t> writtenBudgetBytes(PlanningSession &s, Progress &progress) {
  if (auto err = buildSession(s, progress))
    return err;
  auto req = planRequest(s);
  if (!req)
    return req.takeError();
  return percentBudgetBytes(s, *req);
}

} // namespace

Expected<PlanOutcome> planChosen(std::unique_ptr<PlanningSession> &s,
                                 bool keepWeightData, Progress &progress) {
  if (fuseFlag() == FuseMode::None)
    return planHeadChosen(s, keepWeightData, progress);
  // Auto. The model as written, imported once: whether it has anything to
  // fuse, and its ideal peak is what a percentage budget is of.
  if (auto err =
          importInto(*s, keepWeightData,
                     fuseAttentionFlag() == AttentionMode::Fused, progress))
    return err;
  s->imported = true;
  const int64_t n = countEpilogues(s->graph);
  if (n == 0)
    return planHeadChosen(s, keepWeightData, progress);
  auto bytes = writtenBudgetBytes(*s, progress);
  if (!bytes)
    return bytes.takeError();
  s->budgetBytes = *bytes;
  // The fused forms first. They move fewer bytes and keep nothing the
  // model as written does not, so it can only win where the search
  // happens to find it a better plan under the same bytes.
  auto fused = std::make_unique<PlanningSession>();
  fused->modelPath = s->modelPath;
  fused->fuseEpilogues = true;
  fused->epilogues = n;
  fused->budgetBytes = *bytes;
  fused->graph = fuseEpilogues(s->graph);
  fused->imported = true;
  auto out = planHeadChosen(fused, keepWeightData, progress);
  if (!out && !out.errorIsA<Infeasible>())
    return out;
  auto ms = [](Expected<PlanOutcome> &o) {
    return o ? formatv("{0:F2} ms", o->plan.summary.plannedSeconds * 1e3).str()
             : std::string("does not fit");
  };
  // Every fused task moves fewer bytes than the tasks it replaces, so the
  // ideal time of the model as written is no less than the fused one's: a
  // fused plan at its ideal time cannot be beaten.
  if (out && out->plan.summary.plannedSeconds <=
                 out->plan.summary.idealSeconds * (1 + 1e-9)) {
    s = std::move(fused);
    s->fuseNote = formatv("{0} fused: predicted {1} per iteration, the fused "
                          "model's unconstrained time (the model as written "
                          "can be no faster)",
                          fusedText(s->graph), ms(out))
                      .str();
    return out;
  }
  progress.info("planning the model as written too (without its fused "
                "forms), under the same bytes");
  auto written = planHeadChosen(s, keepWeightData, progress);
  if (!written && !written.errorIsA<Infeasible>()) {
    consumeError(out.takeError());
    return written;
  }
  if (!out && !written) {
    // The fused form's reason: its lower bound is no higher.
    consumeError(written.takeError());
    s = std::move(fused);
    return out;
  }
  const bool takeFused =
      out && (!written || out->plan.summary.plannedSeconds <=
                              written->plan.summary.plannedSeconds);
  std::string note =
      formatv("{0}; predicted {1} fused, {2} as written",
              takeFused ? fusedText(fused->graph) + " fused"
                        : formatv("as written ({0} not fused: the model "
                                  "as written planned faster under these "
                                  "bytes)",
                                  fusedText(fused->graph))
                              .str(),
              ms(out), ms(written))
          .str();
  if (takeFused) {
    consumeError(written.takeError());
    s = std::move(fused);
    s->fuseNote = note;
    return out;
  }
  consumeError(out.takeError());
  s->fuseNote = note;
  return written;
}

} // namespace memfit::tool
