//===- Checkpoint.h - The trainer's checkpoints -----------------*- C++ -*-===//
//
// A checkpoint is a directory with one file, written to a temporary name
// and renamed (AtomicFile), so a kill at any moment leaves the previous
// checkpoint or the new one, and a write error (a full disk) leaves the
// previous one intact. It holds where the data loop is, every weight and
// the optimizer state; a program with a loss scale (fp16) also holds the
// scaler's state and the count of updates applied (skipped ones are not),
// so a resumed run continues exactly as an uninterrupted one.
//
// Frozen weights (WeightInfo::frozen) whose starting values the model
// holds are left out: they never change, the trainer reads them from the
// model at every start, and a LoRA fine-tuning's checkpoint then holds the
// adapters, not the base model. In their place the checkpoint holds an
// FNV-1a hash of their values, and a resume whose model gives them other
// values (another --model) is refused.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CHECKPOINT_H
#define MEMFIT_RUNTIME_CHECKPOINT_H

#include "runtime/Exec.h"

#include <cstdint>
#include <string>

namespace memfit::rt {

/// The training loop's state beside the weights.
struct LoopState {
  uint64_t iteration = 0, sampleCursor = 0, epoch = 0;
  uint64_t appliedSteps = 0; // updates not skipped by the loss scale
  LossScaler scaler;
};

/// Writes `dir`/checkpoint.bin; false and `err` on failure (the previous
/// checkpoint, if any, is intact).
bool saveCheckpoint(Exec &x, const std::string &dir, const LoopState &s,
                    std::string &err);

/// Reads `dir`/checkpoint.bin into the Exec and `s`. Returns false with an
/// empty `err` when there is none, false with `err` when it is not one of
/// this trainer's or is truncated.
bool loadCheckpoint(Exec &x, const std::string &dir, LoopState &s,
                    std::string &err);

} // namespace memfit::rt

#endif
