//===- Evaluate.cpp - Validation with the evaluation program --------------===//
#include "runtime/Evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace memfit::rt {

Validation evaluate(Exec &x, const Program &program, const Dataset &val,
                    int64_t maxBatches, int threads) {
  const ProgramInfo &p = program.info;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t global = p.batch * p.ranks;
  const int64_t mine = x.comm->rank() * p.batch;
  int64_t batches = (val.count + global - 1) / global;
  if (maxBatches > 0)
    batches = std::min(batches, maxBatches);
  const SampleLayout layout{p.inputPerSample, p.labelPerSample, p.intInput,
                            p.mseLoss};
  std::vector<int64_t> idx(static_cast<size_t>(p.batch));
  // The training iteration issued last may still run in the arena.
  x.synchronize();
  x.resetEvalSums();
  int64_t samples = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t first = b * global + mine;
    const int64_t valid = std::clamp<int64_t>(val.count - first, 0, p.batch);
    if (valid == 0)
      continue; // this rank's slice of the last batch is empty
    for (int64_t i = 0; i < p.batch; ++i)
      idx[static_cast<size_t>(i)] = first + std::min(i, valid - 1);
    fillBatch(val, layout, idx.data(), p.batch, /*epoch=*/0,
              x.hostInput(kEvalBuffer),
              static_cast<char *>(x.hostLabels(kEvalBuffer)), threads);
    x.prepareBatch(kEvalBuffer);
    x.useBatch(kEvalBuffer);
    x.evalValidEnd = valid;
    // Sub-batches of padding alone are not run.
    for (int64_t k = 0; k < p.evalNumSubBatches; ++k) {
      x.subBatchIndex = k;
      x.firstSample = k * p.evalSubBatch;
      if (x.firstSample >= valid)
        break;
      x.n = std::min(p.evalSubBatch, p.batch - x.firstSample);
      program.evalRound(x);
      x.endRound();
    }
    // The buffer is filled again for the next batch.
    x.synchronize();
    samples += valid;
  }
  EvalSums s = x.readEvalSums();
  Validation v;
  if (p.ranks > 1) {
    s.loss = x.comm->sum(s.loss);
    s.correct = x.comm->sum(s.correct);
    s.count = x.comm->sum(s.count);
    samples = static_cast<int64_t>(x.comm->sum(double(samples)));
  }
  v.samples = samples;
  v.loss = s.count > 0 ? s.loss / s.count : NAN;
  v.accuracy = p.mseLoss || !(s.count > 0) ? NAN : s.correct / s.count;
  v.perplexity = p.intInput && !p.mseLoss ? std::exp(v.loss) : NAN;
  v.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return v;
}

std::string describeValidation(const Validation &v) {
  char line[256];
  int at = std::snprintf(line, sizeof line, "val loss %.9g", v.loss);
  if (!std::isnan(v.accuracy))
    at += std::snprintf(line + at, sizeof line - at, "  accuracy %.4f%%",
                        100.0 * v.accuracy);
  if (!std::isnan(v.perplexity))
    at += std::snprintf(line + at, sizeof line - at, "  perplexity %.6g",
                        v.perplexity);
  std::snprintf(line + at, sizeof line - at, "  (%lld samples, %.3g s)",
                (long long)v.samples, v.seconds);
  return line;
}

} // namespace memfit::rt
