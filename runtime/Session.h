//===- Session.h - A trainer driven step by step, from Python ---*- C++ -*-===//
//
// The Python package's memfit.Trainer loads a generated trainer as a
// shared library and drives it through the C functions below: open with
// the trainer's flags, one step per batch the caller hands over, weights
// read and written by index, the trained model and checkpoints saved. The
// set-up, the step and the files are the CLI trainer's own
// (TrainerSteps.h, Checkpoint.h, OnnxWeights.h); only the loop and the
// data reader are the caller's. Errors come back as a message and a
// non-zero status, never as an exit of the caller's process: die() and
// the backends' fatal errors throw while a session call runs.
//
// The generated main.cpp exports memfit_trainer_open, which hands its
// program to openSession; every other function is here.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_SESSION_H
#define MEMFIT_RUNTIME_SESSION_H

#include <cstddef>
#include <cstdint>

namespace memfit::rt {

struct Program;
class Session;

/// A session of `program` with the trainer's flags argv[1..argc) (--lr,
/// --momentum, --seed, --resume with --checkpoint, ...; data flags are the
/// caller's business and refused); null with the message in `err` (of
/// `errBytes`) on failure.
Session *openSession(const Program &program, int argc, const char *const *argv,
                     char *err, size_t errBytes);

} // namespace memfit::rt

extern "C" {

/// What memfit_session_query answers.
enum MemfitSessionQuery {
  MEMFIT_Q_BATCH = 0,         // samples a step takes
  MEMFIT_Q_INPUT_PER_SAMPLE,  // input values of one sample
  MEMFIT_Q_LABELS_PER_SAMPLE, // labels (or mse targets) of one sample
  MEMFIT_Q_INT_INPUT,         // 1: inputs are int32 token ids
  MEMFIT_Q_MSE_LOSS,          // 1: labels are float targets
  MEMFIT_Q_INPUT_VOCAB,       // token ids are below this (int inputs)
  MEMFIT_Q_NUM_CLASSES,       // class ids are below this (cross-entropy)
  MEMFIT_Q_WEIGHTS,           // weights the program holds
  MEMFIT_Q_STEPS,             // updates applied so far
  MEMFIT_Q_IGNORE_INDEX,      // the label that adds no loss, or -1
};

int64_t memfit_session_query(memfit::rt::Session *s, int what);

/// One training step on `x` (batch x input values: float32, or int32 ids)
/// and `y` (batch x labels: int32 class ids, or float32 targets); the
/// loss in `loss`. 0 on success, else the message in `err` and the status
/// the trainer would have exited with (1: a user error, 2: a fault). Every
/// function returning int does the same.
int memfit_session_step(memfit::rt::Session *s, const void *x, const void *y,
                        float *loss, char *err, size_t errBytes);

/// The evaluation program on `n` samples in the step's layout, every
/// whole batch of them: the mean loss and (cross-entropy) accuracy.
int memfit_session_evaluate(memfit::rt::Session *s, const void *x,
                            const void *y, int64_t n, double *loss,
                            double *accuracy, char *err, size_t errBytes);

const char *memfit_session_weight_name(memfit::rt::Session *s, int32_t id);
int64_t memfit_session_weight_count(memfit::rt::Session *s, int32_t id);
int memfit_session_weight_trainable(memfit::rt::Session *s, int32_t id);
int memfit_session_read_weight(memfit::rt::Session *s, int32_t id, float *out,
                               char *err, size_t errBytes);
int memfit_session_write_weight(memfit::rt::Session *s, int32_t id,
                                const float *in, char *err, size_t errBytes);

/// The model with the trained weights, as the trainer's --save writes it.
int memfit_session_save(memfit::rt::Session *s, const char *path, char *err,
                        size_t errBytes);
/// A checkpoint into `dir`, as the trainer's --checkpoint writes it.
int memfit_session_checkpoint(memfit::rt::Session *s, const char *dir,
                              char *err, size_t errBytes);

void memfit_session_close(memfit::rt::Session *s);
}

#endif
