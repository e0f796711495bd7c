//===- RunLog.cpp - The trainer's --log: progress as JSON lines -----------===//
#include "runtime/RunLog.h"

#include "runtime/AtomicFile.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace memfit::rt {

namespace {

/// A number as JSON has them: NaN and infinities as null.
std::string number(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// The step of a line the trainer wrote, or 0 when it is not one.
uint64_t stepOf(const std::string &line) {
  const std::string key = "{\"step\": ";
  if (line.compare(0, key.size(), key) != 0)
    return 0;
  return std::strtoull(line.c_str() + key.size(), nullptr, 10);
}

} // namespace

RunLog::~RunLog() {
  if (file)
    std::fclose(file);
}

std::string RunLog::json(const LogLine &l) {
  std::string s = "{\"step\": " + std::to_string(l.step) +
                  ", \"loss\": " + number(l.loss) + ", \"lr\": " + number(l.lr);
  if (!std::isnan(l.gradNorm))
    s += ", \"grad_norm\": " + number(l.gradNorm);
  s += ", \"samples_per_s\": " + number(l.samplesPerSecond);
  if (l.tokensPerSample > 0)
    s += ", \"tokens_per_s\": " +
         number(l.samplesPerSecond * double(l.tokensPerSample));
  s += ", \"elapsed_s\": " + number(l.elapsedSeconds) + "}";
  return s;
}

std::string RunLog::json(const ValLogLine &l) {
  std::string s = "{\"step\": " + std::to_string(l.step) +
                  ", \"val_loss\": " + number(l.loss);
  if (!std::isnan(l.accuracy))
    s += ", \"val_accuracy\": " + number(l.accuracy);
  if (!std::isnan(l.perplexity))
    s += ", \"val_perplexity\": " + number(l.perplexity);
  s += ", \"val_samples\": " + std::to_string(l.samples) +
       ", \"val_s\": " + number(l.seconds) + "}";
  return s;
}

bool RunLog::open(const std::string &p, bool resume, uint64_t resumeAt,
                  std::string &err) {
  path = p;
  if (resume) {
    // What the checkpoint's steps logged stays; a killed run's later lines
    // go, so the steps it repeats are logged once.
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      const uint64_t step = stepOf(line);
      if (step > 0 && step <= resumeAt)
        kept += line + "\n";
    }
    AtomicFile out(path);
    out.write(kept.data(), kept.size());
    if (!out.commit()) {
      err = out.error();
      return false;
    }
  }
  file = std::fopen(path.c_str(), resume ? "a" : "w");
  if (!file) {
    err = path + ": cannot write the log";
    return false;
  }
  return true;
}

bool RunLog::write(const LogLine &l, std::string &err) {
  return append(json(l) + "\n", err);
}

bool RunLog::write(const ValLogLine &l, std::string &err) {
  return append(json(l) + "\n", err);
}

bool RunLog::append(const std::string &s, std::string &err) {
  if (std::fwrite(s.data(), 1, s.size(), file) != s.size() ||
      std::fflush(file) != 0) {
    err = path + ": cannot write the log (disk full?)";
    return false;
  }
  return true;
}

} // namespace memfit::rt
