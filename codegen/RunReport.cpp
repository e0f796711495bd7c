//===- RunReport.cpp - A trainer's --log beside its plan ------------------===//
#include "codegen/RunReport.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace memfit {

using nlohmann::json;

llvm::Expected<RunLogData> readRunLog(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return makeErrorF("{0}: cannot read the run's log: {1}", path,
                      buf.getError().message());
  RunLogData out;
  out.file = path;
  llvm::StringRef text = (*buf)->getBuffer();
  int64_t lineNo = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++lineNo;
    if (line.trim().empty())
      continue;
    auto bad = [&](const std::string &why) {
      return makeErrorF("{0}:{1}: {2} (expected a line the trainer's --log "
                        "writes)",
                        path, lineNo, why);
    };
    json j = json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return bad("not a JSON object");
    // null (a NaN the trainer wrote) or absent reads as absent.
    auto number = [&](const char *key) -> std::optional<double> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number())
        return std::nullopt;
      return it->get<double>();
    };
    auto step = number("step"), loss = number("loss");
    if (!step || !(*step >= 1))
      return bad("no step >= 1");
    if (auto val = number("val_loss")) {
      out.validations.push_back({static_cast<int64_t>(*step), *val,
                                 number("val_accuracy"),
                                 number("val_perplexity")});
      continue;
    }
    if (!loss)
      return bad("no loss");
    RunPoint p;
    p.step = static_cast<int64_t>(*step);
    p.loss = *loss;
    p.lr = number("lr").value_or(0);
    p.gradNorm = number("grad_norm");
    p.samplesPerSecond = number("samples_per_s").value_or(0);
    p.elapsedSeconds = number("elapsed_s").value_or(0);
    out.points.push_back(p);
  }
  if (out.points.empty())
    return makeErrorF("{0}: no step logged", path);
  std::stable_sort(
      out.points.begin(), out.points.end(),
      [](const RunPoint &a, const RunPoint &b) { return a.step < b.step; });
  std::stable_sort(
      out.validations.begin(), out.validations.end(),
      [](const ValPoint &a, const ValPoint &b) { return a.step < b.step; });
  return out;
}

double predictedSamplesPerSecond(const PlanReport &r) {
  const double seconds = r.summary.plannedSeconds;
  const int64_t ranks = std::max<int64_t>(1, r.dataParallel.ranks);
  return seconds > 0 ? double(r.batch * ranks) / seconds : 0;
}

std::string describeRun(const PlanReport &r, const RunLogData &run) {
  const RunPoint &first = run.points.front(), &last = run.points.back();
  const RunPoint &low = *std::min_element(
      run.points.begin(), run.points.end(),
      [](const RunPoint &a, const RunPoint &b) { return a.loss < b.loss; });
  // The rate over the second half of the logged points: the first
  // iterations include start-up (cuDNN's tuning, first allocations).
  double sum = 0;
  int64_t n = 0;
  for (size_t i = run.points.size() / 2; i < run.points.size(); ++i)
    if (run.points[i].samplesPerSecond > 0) {
      sum += run.points[i].samplesPerSecond;
      ++n;
    }
  std::string text = llvm::formatv(
      "{0} steps logged in {1}: loss {2:F4} at step {3} to {4:F4} at step "
      "{5} (lowest {6:F4} at step {7})",
      run.points.size(), run.file, first.loss, first.step, last.loss, last.step,
      low.loss, low.step);
  if (!run.validations.empty()) {
    const ValPoint &v = run.validations.back();
    text +=
        llvm::formatv("; {0} validation{1}, the last at step {2}: loss "
                      "{3:F4}",
                      run.validations.size(),
                      run.validations.size() == 1 ? "" : "s", v.step, v.loss);
    if (v.accuracy)
      text += llvm::formatv(", accuracy {0:F2}%", *v.accuracy * 100);
    if (v.perplexity)
      text += llvm::formatv(", perplexity {0:F3}", *v.perplexity);
  }
  const double predicted = predictedSamplesPerSecond(r);
  if (n > 0 && predicted > 0) {
    const double measured = sum / double(n);
    text += llvm::formatv("; measured {0:F1} samples/s over the last half, "
                          "the plan predicts {1:F1} on {2} ({3:F2}x; "
                          "meaningful where the run was on that device)",
                          measured, predicted, r.device, measured / predicted);
  }
  return text;
}

} // namespace memfit
