//===- Session.cpp - A trainer driven step by step, from Python -----------===//
//
// trainerMain's set-up and loop body (Trainer.cpp) without its data reader
// and loop: the caller hands each batch over. The order of what a step
// sets on the Exec is the loop's, so a session step is the CLI trainer's
// step on the same batch, bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/Session.h"

#include "runtime/BatchFill.h"
#include "runtime/Checkpoint.h"
#include "runtime/Evaluate.h"
#include "runtime/Exec.h"
#include "runtime/LrSchedule.h"
#include "runtime/OnnxWeights.h"
#include "runtime/TrainerOptions.h"
#include "runtime/TrainerSteps.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace memfit::rt {

class Session {
public:
  Session(const Program &program, Options o)
      : program(program), o(std::move(o)),
        x(program.info, program.weights, program.slots) {}

  const Program &program;
  Options o;
  Exec x;
  LoopState st;
  bool scaled = false, scheduled = false;
  int32_t nextBuffer = 0;
  /// A failure inside a step leaves the device's state unknown: the
  /// session refuses every later step.
  std::string broken;
};

namespace {

/// Runs `body` with die() and the backends' fatal errors thrown; returns 0,
/// or the exit status the trainer would have ended with (1: die, 2: a
/// backend's fatal error) with the message in `err`.
template <typename Body>
int guarded(Session *s, char *err, size_t errBytes, bool breaks, Body body) {
  auto fail = [&](const std::string &msg, int code) {
    if (err && errBytes > 0)
      std::snprintf(err, errBytes, "%s", msg.c_str());
    if (s && breaks)
      s->broken = msg;
    return code;
  };
  if (s && !s->broken.empty())
    return fail("the session stopped at an earlier error: " + s->broken, 1);
  ThrowFailures scope;
  try {
    body();
    return 0;
  } catch (const TrainerFailure &f) {
    return fail(f.what(), f.code);
  } catch (const std::exception &e) {
    return fail(e.what(), 2);
  }
}

void checkSessionFlags(const Options &o) {
  if (o.validates())
    die("a session evaluates with evaluate(), not --val-*");
  if (!o.save.empty())
    die("a session saves with save(path), not --save");
}

} // namespace

Session *openSession(const Program &program, int argc, const char *const *argv,
                     char *err, size_t errBytes) {
  Session *made = nullptr;
  int rc = guarded(nullptr, err, errBytes, false, [&] {
    const ProgramInfo &p = program.info;
    if (p.ranks != 1)
      die("this trainer was compiled for " + std::to_string(p.ranks) +
          " data-parallel ranks; a session runs one");
    std::vector<char *> args;
    for (int i = 0; i < argc; ++i)
      args.push_back(const_cast<char *>(argv[i]));
    Options o = parseArgs(argc, args.data(), program.modelPath,
                          /*readsData=*/false);
    checkSessionFlags(o);
    checkAgainstProgram(o, p);
    std::string e;
    auto model = readOnnxWeights(o.model, e);
    if (!model)
      die(e);
    auto s = std::make_unique<Session>(program, std::move(o));
    Exec &x = s->x;
    setUpRun(x, program.comm(), s->o, *model);
    ConvCheckResult convs = x.checkConvolutions(
        program.convs, program.numConvs, s->o.tuneConvs,
        s->o.convGraph ? ConvGraphUse::WhereFaster : ConvGraphUse::Off);
    (void)convs;
    s->scaled = p.precision == Precision::FP16;
    s->st.scaler.scale = s->o.lossScale;
    s->st.scaler.growthInterval = s->o.growthInterval;
    if (s->o.resume && !loadCheckpoint(x, s->o.checkpoint, s->st, e) &&
        !e.empty())
      die(e);
    s->o.schedule.total = s->o.iterations;
    s->scheduled =
        s->o.schedule.kind != LrKind::Constant || s->o.schedule.warmup > 0;
    if (s->scheduled) {
      if (s->o.schedule.total <= 0)
        die("a learning-rate schedule needs --iterations, the steps it "
            "spans");
      if (std::string why = checkLrSchedule(s->o.schedule); !why.empty())
        die(why);
    }
    made = s.release();
  });
  return rc == 0 ? made : nullptr;
}

} // namespace memfit::rt

using memfit::rt::Session;
namespace rt = memfit::rt;

extern "C" {

int64_t memfit_session_query(Session *s, int what) {
  const rt::ProgramInfo &p = s->program.info;
  switch (what) {
  case MEMFIT_Q_BATCH:
    return p.batch;
  case MEMFIT_Q_INPUT_PER_SAMPLE:
    return p.inputPerSample;
  case MEMFIT_Q_LABELS_PER_SAMPLE:
    return p.labelPerSample;
  case MEMFIT_Q_INT_INPUT:
    return p.intInput;
  case MEMFIT_Q_MSE_LOSS:
    return p.mseLoss;
  case MEMFIT_Q_INPUT_VOCAB:
    return p.inputVocab;
  case MEMFIT_Q_NUM_CLASSES:
    return p.classes;
  case MEMFIT_Q_WEIGHTS:
    return static_cast<int64_t>(s->x.weightInfo().size());
  case MEMFIT_Q_STEPS:
    return static_cast<int64_t>(s->st.appliedSteps);
  case MEMFIT_Q_IGNORE_INDEX:
    return p.ignoreIndex;
  }
  return -1;
}

int memfit_session_step(Session *s, const void *xs, const void *ys, float *loss,
                        char *err, size_t errBytes) {
  return rt::guarded(s, err, errBytes, true, [&] {
    const rt::ProgramInfo &p = s->program.info;
    rt::Exec &x = s->x;
    rt::LoopState &st = s->st;
    const int32_t buffer = s->nextBuffer;
    s->nextBuffer = (s->nextBuffer + 1) % rt::kBatchBuffers;
    x.waitBatchFree(buffer);
    std::memcpy(x.hostInput(buffer), xs,
                static_cast<size_t>(p.batch * p.inputPerSample) * 4);
    std::memcpy(x.hostLabels(buffer), ys,
                static_cast<size_t>(p.batch * p.labelPerSample) * 4);
    rt::prepareIteration(x, *x.comm, buffer, st, s->scaled,
                         s->scheduled ? &s->o.schedule : nullptr);
    float norm = NAN;
    const bool apply = rt::issueIteration(x, s->program, s->scaled,
                                          s->o.clipGradNorm, norm, nullptr);
    if (apply)
      ++st.appliedSteps;
    x.batchIssued();
    if (s->scaled)
      st.scaler.update(!apply);
    const float l = x.readLoss();
    if (!std::isfinite(l) && apply)
      rt::die("the loss is not finite at step " + std::to_string(st.iteration));
    ++st.iteration;
    *loss = l;
  });
}

int memfit_session_evaluate(Session *s, const void *xs, const void *ys,
                            int64_t n, double *loss, double *accuracy,
                            char *err, size_t errBytes) {
  return rt::guarded(s, err, errBytes, true, [&] {
    const rt::ProgramInfo &p = s->program.info;
    if (!s->program.evalRound)
      rt::die("this trainer has no evaluation program; recompile it with "
              "this memfit");
    rt::Dataset d;
    d.count = n;
    d.x.resize(static_cast<size_t>(n * p.inputPerSample));
    std::memcpy(d.x.data(), xs, d.x.size() * 4);
    if (p.mseLoss) {
      d.yf.resize(static_cast<size_t>(n * p.labelPerSample));
      std::memcpy(d.yf.data(), ys, d.yf.size() * 4);
    } else {
      d.y.resize(static_cast<size_t>(n * p.labelPerSample));
      std::memcpy(d.y.data(), ys, d.y.size() * 4);
    }
    const rt::Validation v = rt::evaluate(s->x, s->program, d, 0, 1);
    *loss = v.loss;
    *accuracy = v.accuracy;
  });
}

const char *memfit_session_weight_name(Session *s, int32_t id) {
  return s->x.weightInfo()[static_cast<size_t>(id)].onnxName;
}

int64_t memfit_session_weight_count(Session *s, int32_t id) {
  return s->x.weightInfo()[static_cast<size_t>(id)].count;
}

int memfit_session_weight_trainable(Session *s, int32_t id) {
  return s->x.weightInfo()[static_cast<size_t>(id)].trainable ? 1 : 0;
}

int memfit_session_read_weight(Session *s, int32_t id, float *out, char *err,
                               size_t errBytes) {
  return rt::guarded(s, err, errBytes, false, [&] {
    s->x.synchronize();
    s->x.readWeight(id, out);
  });
}

int memfit_session_write_weight(Session *s, int32_t id, const float *in,
                                char *err, size_t errBytes) {
  return rt::guarded(s, err, errBytes, false, [&] {
    s->x.synchronize();
    s->x.writeWeight(id, in);
  });
}

int memfit_session_save(Session *s, const char *path, char *err,
                        size_t errBytes) {
  return rt::guarded(s, err, errBytes, false, [&] {
    s->x.synchronize();
    const auto &ws = s->x.weightInfo();
    std::vector<std::vector<float>> trained(ws.size());
    for (int32_t id = 0; id < (int32_t)trained.size(); ++id) {
      trained[id].resize(static_cast<size_t>(ws[id].count));
      s->x.readWeight(id, trained[id].data());
    }
    std::string e;
    if (!rt::writeTrainedModel(s->o.model, path, ws, trained, e))
      rt::die(e);
  });
}

int memfit_session_checkpoint(Session *s, const char *dir, char *err,
                              size_t errBytes) {
  return rt::guarded(s, err, errBytes, false, [&] {
    s->x.synchronize();
    s->x.gatherOptimizerState();
    std::string e;
    if (!rt::saveCheckpoint(s->x, dir, s->st, e))
      rt::die(e);
  });
}

void memfit_session_close(Session *s) {
  if (!s)
    return;
  rt::ThrowFailures scope;
  try {
    s->x.synchronize();
  } catch (...) {
  }
  delete s;
}
}
