//===- RunLog.h - The trainer's --log: progress as JSON lines ---*- C++ -*-===//
//
// One JSON object a line for each step the progress line reports (step,
// loss, learning rate, gradient norm where clipped, samples and tokens per
// second, seconds since the start) and each validation (val_loss,
// val_accuracy, val_perplexity), flushed as written, for plotting. A
// resumed run first cuts the file back to the steps its checkpoint holds,
// so that its log reads as the uninterrupted run's.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_RUNLOG_H
#define MEMFIT_RUNTIME_RUNLOG_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace memfit::rt {

struct LogLine {
  uint64_t step = 0; // 1 for the first optimizer step
  double loss = 0, lr = 0;
  /// The gradients' global norm before clipping; NaN where not clipped.
  double gradNorm = 0;
  double samplesPerSecond = 0;
  /// Tokens per sample of a language model (its sequence length); 0 for
  /// other models, whose lines carry no tokens_per_s.
  int64_t tokensPerSample = 0;
  double elapsedSeconds = 0;
};

/// A validation (the trainer's --val-*): after optimizer step `step`.
struct ValLogLine {
  uint64_t step = 0;
  double loss = 0;
  double accuracy = 0, perplexity = 0; // NaN where the model has none
  int64_t samples = 0;
  double seconds = 0;
};

class RunLog {
public:
  RunLog() = default;
  ~RunLog();
  RunLog(const RunLog &) = delete;
  RunLog &operator=(const RunLog &) = delete;
  /// Opens `path` to append to. With `resumeAt` (the checkpoint's step
  /// count; 0 for a fresh run, which truncates the file) the lines of later
  /// steps are dropped first, the file replaced atomically. False with
  /// `err` naming the file when it cannot be written.
  bool open(const std::string &path, bool resume, uint64_t resumeAt,
            std::string &err);
  bool isOpen() const { return file != nullptr; }
  /// Appends one line; false with `err` when the write fails.
  bool write(const LogLine &l, std::string &err);
  bool write(const ValLogLine &l, std::string &err);
  /// The line `write` appends, without its newline.
  static std::string json(const LogLine &l);
  static std::string json(const ValLogLine &l);

private:
  bool append(const std::string &line, std::string &err);
  std::FILE *file = nullptr;
  std::string path;
};

} // namespace memfit::rt

#endif
