//===- TrainerSteps.h - The steps of a run, shared by its two drivers -*- C++
//-*-===//
//
// What the trainer's main loop (Trainer.cpp) and the Python package's
// session (Session.cpp) both do: initial weights, weight decay's
// exemptions, the loss's label count, and issuing one iteration. One
// definition, so a step from Python is the CLI trainer's step bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_TRAINERSTEPS_H
#define MEMFIT_RUNTIME_TRAINERSTEPS_H

#include "runtime/Checkpoint.h"
#include "runtime/Exec.h"
#include "runtime/OnnxWeights.h"
#include "runtime/TrainerOptions.h"

#include <cstdint>

namespace memfit::rt {

class IterationGraph;

/// A run's Exec before its first step: the collectives, the optimizer's
/// settings and seed from the flags, weight decay's exemptions, the NVMe
/// file, and the initial weights.
void setUpRun(Exec &x, Comm &comm, const Options &o, const OnnxWeights &model);

/// Every weight from the model's initializers, or initialized as the
/// program says (He, Glorot, ones) from --seed.
void initWeights(Exec &x, const Options &o, const OnnxWeights &model);

/// --no-decay: the trained weights whose updates take no weight decay, by
/// name (POSIX extended, searched as memfit's --freeze) or, with auto, by
/// rank below 2 (biases, norms' scales), as nanoGPT's parameter groups.
void selectNoDecay(Exec &x, const Options &o);

/// Exec::lossCount for the batch in `buffer`: its labels that count (not
/// the ignored index), summed over the ranks and shared by them, which
/// average their gradients. Without an ignored label it is the batch's
/// positions, as every loss divided by before.
double labelCount(Exec &x, Comm &comm, int32_t buffer);

/// What an iteration on the batch in `buffer` reads beside it: the batch,
/// the loss's label count, the step counters of `st`, the loss scale (fp16:
/// `scaled`) and, where `schedule` is given, the step's learning rate.
void prepareIteration(Exec &x, Comm &comm, int32_t buffer, const LoopState &st,
                      bool scaled, const LrSchedule *schedule);

/// Issues one iteration: the rounds over the sub-batches, then the update
/// unless fp16's unscale found a non-finite gradient (returns whether it
/// ran), the gradients clipped first to `clip` (> 0), their norm before
/// clipping in `norm`. With `dump`, what is issued is recorded part by part.
bool issueIteration(Exec &x, const Program &program, bool scaled, float clip,
                    float &norm, IterationGraph *dump);

} // namespace memfit::rt

#endif
