//===- TrainerOptions.h - The generated trainer's flags ---------*- C++ -*-===//
//
// The trainer's command line, parsed and checked before anything touches
// the device, and how the trainer stops on an error (every rank of a
// data-parallel run at once).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_TRAINEROPTIONS_H
#define MEMFIT_RUNTIME_TRAINEROPTIONS_H

#include "runtime/Comm.h"
#include "runtime/LrSchedule.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace memfit::rt {

struct Options {
  std::string data, labels, model, save, checkpoint, dumpGraph, convAlgos;
  /// --log: the progress as JSON lines (RunLog.h).
  std::string log;
  /// --normalize MEAN/STD: per-channel means and stds, comma-separated.
  std::string normalize;
  /// --random-crop PAD (-1: none) and --hflip: image augmentation.
  int64_t cropPad = -1;
  bool hflip = false;
  /// --random-resized-crop: torchvision's RandomResizedCrop to the model's
  /// input size (BatchFill.h's Dataset::resizedCrop).
  bool resizedCrop = false;
  /// Threads converting each batch beside the running iteration.
  int64_t readerThreads = 1;
  /// The NVMe tier's directory: the plan's (memfit --nvme) unless given.
  std::string nvme;
  bool synthetic = false, shuffle = false, resume = false, quiet = false;
  /// Convolutions run the fastest algorithm cuDNN measures within the
  /// planned workspace (off: the plan's, where cuDNN runs it).
  bool tuneConvs = true;
  /// The tuning also times cuDNN's graph-API plans and runs one where it is
  /// faster than the legacy API's best (off: the legacy API only).
  bool convGraph = true;
  int64_t iterations = 0, epochs = 0, logEvery = 10, checkpointEvery = 0;
  float lr = 0.01f, momentum = 0.9f, weightDecay = 0;
  /// Weights without weight decay: a regular expression over their ONNX
  /// names, or "auto" (every weight of rank below 2: biases, norms' scales,
  /// as nanoGPT groups them); empty: decay on all, as torch.optim.
  std::string noDecay;
  /// Clip the gradients to this global norm before every update (0: no
  /// clipping; below 0: the plan's --clip-grad-norm).
  float clipGradNorm = -1;
  /// A flat token file (nanoGPT's uint16 train.bin, or a 1-D .npy) cut
  /// into windows of seqLen tokens, the labels the next seqLen; random
  /// windows (seeded) or the file's consecutive ones.
  std::string tokens;
  int64_t seqLen = 0;
  bool tokenOrderRandom = true, tokenOrderSet = false;
  /// The ids' type in a raw (headerless) token file.
  std::string tokenDtype = "uint16";
  /// Validation: --val-data and --val-labels, or --val-tokens (windows of
  /// --seq-len in file order), evaluated every valEvery steps (0: at the
  /// end only) and at the end, over the first valBatches batches (0: the
  /// whole set).
  std::string valData, valLabels, valTokens;
  int64_t valEvery = 0, valBatches = 0;
  bool validates() const { return !valData.empty() || !valTokens.empty(); }
  /// --lr-schedule and its settings; its `lr` is --lr (as a double) and its
  /// `total` the run's steps (set once the data says how many an epoch has).
  LrSchedule schedule;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  bool momentumSet = false, weightDecaySet = false;
  uint64_t seed = 1;
  // fp16: GradScaler's init_scale and growth_interval.
  float lossScale = 65536.0f;
  int64_t growthInterval = 2000;
  bool lossScaleSet = false;
};

/// The flags; --help prints the usage and exits, a bad flag or value stops
/// the trainer naming it.
/// The trainer's flags; `readsData` false for a session (Session.h), whose
/// caller hands the batches over and which refuses the data flags.
Options parseArgs(int argc, char **argv, const char *defaultModel,
                  bool readsData = true);

struct ProgramInfo;
/// Refuses flags the compiled program cannot honour (momentum without its
/// buffers, a loss scale outside fp16) and applies the optimizer's own
/// defaults (AdamW's weight decay).
void checkAgainstProgram(Options &o, const ProgramInfo &p);

/// The ranks an error stops: all of them once set (data parallelism).
void setErrorRanks(Comm *comm);
void sayError(const std::string &msg);
[[noreturn]] void die(const std::string &msg);

/// What die() and the backends' fatal errors (Exec::fatal) throw on a
/// thread inside a ThrowFailures scope instead of ending the process: a
/// library session's calls (Session.h), whose caller is a Python process.
class TrainerFailure : public std::runtime_error {
public:
  TrainerFailure(const std::string &msg, int code)
      : std::runtime_error(msg), code(code) {}
  int code; // the exit status the trainer would have ended with
};
class ThrowFailures {
public:
  ThrowFailures();
  ~ThrowFailures();
  ThrowFailures(const ThrowFailures &) = delete;
  ThrowFailures &operator=(const ThrowFailures &) = delete;

private:
  bool was;
};
/// Throws TrainerFailure(msg, code) inside a ThrowFailures scope; else
/// returns, and the caller prints and exits as it always has.
void throwIfFailuresThrow(const std::string &msg, int code);

} // namespace memfit::rt

#endif
