//===- Trainer.cpp - The generated trainer's main -------------------------===//
//
// Everything around the generated schedule: flags, initial weights (the
// model's initializers, or He/Glorot initialisation), the data (NumPy .npy
// files or synthetic), the iteration loop over sub-batches, progress lines,
// atomic checkpoints with exact resume, and --save into a copy of the ONNX
// model, validation between steps (Evaluate.h). Backend-independent: it
// talks to the device only through Exec.
//
// The host never waits for an iteration to finish: a feeder thread fills
// the next batch into the other of two pinned buffers while the device
// runs the current one (BatchFeeder), the rounds and the update are issued
// through Exec::issue (a CUDA graph each, once captured), and the loss is
// read back only where it is logged, checkpointed, or at the end.
//
//===----------------------------------------------------------------------===//
#include "runtime/BatchFeeder.h"
#include "runtime/Checkpoint.h"
#include "runtime/DataLoad.h"
#include "runtime/Evaluate.h"
#include "runtime/Exec.h"
#include "runtime/OnnxWeights.h"
#include "runtime/RunLog.h"
#include "runtime/TrainerOptions.h"
#include "runtime/TrainerSteps.h"
#include "runtime/kernels/Softmax.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace memfit::rt {
namespace {

/// FNV-1a over what every rank of a data-parallel run must hold alike: the
/// trainable weights bit for bit, the updates applied and the loss scaler
/// (BatchNorm's running statistics follow each rank's own samples).
uint64_t replicaFingerprint(Exec &x, const LoopState &st) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const void *data, size_t bytes) {
    const auto *c = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < bytes; ++i)
      h = (h ^ c[i]) * 1099511628211ull;
  };
  std::vector<float> w;
  for (int32_t id = 0; id < (int32_t)x.weightInfo().size(); ++id) {
    const WeightInfo &info = x.weightInfo()[id];
    if (!info.trainable)
      continue;
    w.resize(static_cast<size_t>(info.count));
    x.readWeight(id, w.data());
    mix(w.data(), w.size() * sizeof(float));
  }
  mix(&st.appliedSteps, sizeof st.appliedSteps);
  mix(&st.scaler.scale, sizeof st.scaler.scale);
  mix(&st.scaler.cleanSteps, sizeof st.scaler.cleanSteps);
  return h;
}

/// The ranks must end as replicas: a rank that skipped another step than
/// its peers, or summed its gradients otherwise, would train on silently
/// while rank 0 alone saves. Returns how many ranks differ from rank 0.
int64_t divergedRanks(Comm &comm, Exec &x, const LoopState &st) {
  uint64_t mine = replicaFingerprint(x, st), first = mine;
  comm.broadcastBytes(&first, sizeof first, 0);
  return static_cast<int64_t>(comm.sum(mine == first ? 0.0 : 1.0));
}

/// --dump-graph: what the first iteration issued, as the plan's graph.
void writeGraph(const Exec &x, const std::string &file,
                const IterationGraph &g) {
  std::string text = g.json();
  // One more field at the top: whether the backend replays the parts as
  // CUDA graphs, and why not.
  const std::string why = x.eagerReason();
  std::string head = "{\"graphs\": \"" +
                     std::string(why.empty() ? "captured" : "eager") + "\", ";
  text.replace(0, 1, head);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush())
    die("cannot write the iteration graph to '" + file + "'");
}

/// Exit status of a run that finished but whose measured device memory
/// went over the budget (docs/memory.md): everything asked for was saved.
constexpr int kOverBudgetExit = 3;

double mibOf(int64_t bytes) { return double(bytes) / 1048576.0; }

/// After the run: the measured peak (the CUDA context left out) against
/// the budget. Says so loudly and returns false when over.
bool reportMemory(Exec &x, bool quiet) {
  const ProgramInfo &p = x.info();
  x.sampleDeviceMemory();
  int64_t peak = x.peakDeviceBytes(), lib = x.measuredLibraryBytes();
  bool within = peak <= p.budgetBytes;
  char line[512];
  std::snprintf(line, sizeof line,
                "memory: measured peak %.2f MiB (libraries %.2f MiB of a "
                "%.2f MiB reserve, trainer %.2f MiB) against the budget "
                "%.2f MiB: %s; the CUDA context (%.2f MiB) is not in the "
                "budget",
                mibOf(peak), mibOf(lib), mibOf(p.libraryReserveBytes),
                mibOf(peak - lib), mibOf(p.budgetBytes),
                within ? "within" : "OVER", mibOf(x.contextBytes()));
  // Where the bytes went: what allocation added over the plan, and what
  // the iterations added after it (the libraries' kernel images loaded on
  // first use, graphs), which a reserve must cover.
  const int64_t setup = x.measuredSetupBytes();
  char where[256];
  std::snprintf(where, sizeof where,
                "memory at start-up: libraries %.2f MiB, the plan's %.2f MiB "
                "allocated as %.2f MiB; the iterations added %.2f MiB",
                mibOf(lib), mibOf(x.deviceBytes()), mibOf(setup - lib),
                mibOf(peak - setup));
  if (within) {
    if (!quiet)
      std::printf("%s\n%s\n", line, where);
    if (!quiet && x.hostHomeBytes() > 0)
      std::printf("host memory: %.2f MiB for the weights homed there "
                  "(pinned), not in the device budget\n",
                  mibOf(x.hostHomeBytes()));
    if (!quiet && x.nvmeHomeBytes() > 0) {
      const auto &ws = x.weightInfo();
      const bool masters =
          std::any_of(ws.begin(), ws.end(),
                      [](const WeightInfo &w) { return w.masterOnNvme; });
      std::printf("NVMe: %.2f MiB of optimizer state%s, in an unnamed file "
                  "of the --nvme directory\n",
                  mibOf(x.nvmeHomeBytes()), masters ? " and fp32 masters" : "");
    }
    return true;
  }
  if (!quiet)
    std::printf("%s\n", where);
  std::fflush(stdout);
  std::fprintf(stderr,
               "trainer: error: %s by %.2f MiB; recompile with a larger "
               "--library-reserve (the libraries took %.2f MiB) or a smaller "
               "budget\n",
               line, mibOf(peak - p.budgetBytes), mibOf(lib));
  return false;
}

/// After the last iteration: data-parallel ranks must still agree bit for
/// bit; then the checkpoint and the trained model are written (rank 0).
void finishRun(Exec &x, Comm &comm, const Options &o, const LoopState &st,
               uint64_t done) {
  std::string err;
  if (x.info().ranks > 1) {
    if (int64_t bad = divergedRanks(comm, x, st)) {
      // Every rank knows the count: rank 0 says it, and all of them end
      // with the same status (no abort, nothing saved after this).
      if ((comm.rank() == 0))
        sayError(std::to_string(bad) + " of " + std::to_string(x.info().ranks) +
                 " ranks hold other weights or another loss scale than rank "
                 "0 after " +
                 std::to_string(done) + " iterations; the replicas diverged");
      comm.finalize();
      std::exit(1);
    }
    if (!o.quiet)
      std::printf("ranks: all %d hold the same weights bit for bit after %llu "
                  "updates\n",
                  x.info().ranks, (unsigned long long)st.appliedSteps);
  }
  if (!o.checkpoint.empty()) {
    x.gatherOptimizerState();
    if ((comm.rank() == 0) && !saveCheckpoint(x, o.checkpoint, st, err))
      die(err);
  }
  if (!o.save.empty() && (comm.rank() == 0)) {
    std::vector<std::vector<float>> trained(x.weightInfo().size());
    for (int32_t id = 0; id < (int32_t)trained.size(); ++id) {
      trained[id].resize(x.weightInfo()[id].count);
      x.readWeight(id, trained[id].data());
    }
    if (!writeTrainedModel(o.model, o.save, x.weightInfo(), trained, err))
      die(err);
  }
}

} // namespace

int trainerMain(int argc, char **argv, const Program &program) {
  Comm &comm = program.comm();
  comm.init(&argc, &argv);
  setErrorRanks(&comm);
  const ProgramInfo &p = program.info;
  if (comm.size() != p.ranks)
    die("this trainer was compiled for " + std::to_string(p.ranks) +
        " data-parallel rank" + (p.ranks == 1 ? "" : "s") + " and runs on " +
        std::to_string(comm.size()) +
        (p.ranks > 1 ? "; start it with mpirun -np " + std::to_string(p.ranks)
                     : std::string()));
  const bool root = comm.rank() == 0;
  // Each rank's slice of every global batch of p.batch * p.ranks samples.
  const int64_t global = p.batch * p.ranks, mine = comm.rank() * p.batch;
  Options o = parseArgs(argc, argv, program.modelPath);
  if (!root)
    o.quiet = true;
  checkAgainstProgram(o, p);
  std::string err;
  auto model = readOnnxWeights(o.model, err);
  if (!model)
    die(err);
  Dataset data = loadData(o, p);
  std::optional<Dataset> val;
  if (o.validates())
    val = loadValidation(o, p);
  Exec x(p, program.weights, program.slots);
  setUpRun(x, comm, o, *model);
  // Once, before the first iteration (nothing lives in the arena yet, which
  // timing uses as scratch): the convolutions run what cuDNN runs, the
  // fastest it measures unless --no-tune-convs, on cuDNN's graph API where
  // that measures faster unless --no-conv-graph.
  ConvCheckResult convs = x.checkConvolutions(
      program.convs, program.numConvs, o.tuneConvs,
      o.convGraph ? ConvGraphUse::WhereFaster : ConvGraphUse::Off);
  if (o.convAlgos.empty())
    o.convAlgos = convAlgosPathBeside(program.modelPath);
  if (convs.checked && root && !writeConvSubstitutions(convs, o.convAlgos, err))
    std::fprintf(stderr, "trainer: warning: %s\n", err.c_str());
  if (!o.quiet && convs.checked)
    std::printf("%s\n", convCheckSummary(convs, o.convAlgos).c_str());

  const bool scaled = p.precision == Precision::FP16;
  LoopState st;
  st.scaler.scale = o.lossScale;
  st.scaler.growthInterval = o.growthInterval;
  if (o.resume) {
    if (loadCheckpoint(x, o.checkpoint, st, err)) {
      if (!o.quiet)
        std::printf("resumed from %s at iteration %llu\n", o.checkpoint.c_str(),
                    (unsigned long long)st.iteration);
    } else if (!err.empty())
      die(err);
  }
  uint64_t &iteration = st.iteration;
  int64_t perEpoch = data.count / global; // the last partial batch is dropped
  uint64_t total =
      o.iterations ? (uint64_t)o.iterations : (uint64_t)(o.epochs * perEpoch);
  o.schedule.total = static_cast<int64_t>(total);
  if (std::string why = checkLrSchedule(o.schedule); !why.empty())
    die(why);
  const bool scheduled =
      o.schedule.kind != LrKind::Constant || o.schedule.warmup > 0;
  SampleOrder order(data.count, global, o.shuffle, o.seed, st.sampleCursor,
                    st.epoch);
  IterationGraph dumped;
  RunLog log;
  if (!o.log.empty() && root && !log.open(o.log, o.resume, st.iteration, err))
    die(err);
  const char *killAt = std::getenv("MEMFIT_KILL_AFTER_ITERATION");
  const uint64_t killAfter = killAt ? std::strtoull(killAt, nullptr, 10) : 0;

  auto t0 = std::chrono::steady_clock::now();
  auto tLog = t0;
  uint64_t done = 0, sinceLog = 0;
  float lastLoss = NAN, gradNorm = NAN;
  double waitedForData = 0, waitedForDevice = 0;
  // Started after every early exit above; stopped (joined) at the end of
  // this scope, before the weights are read for saving.
  {
    BatchFeeder feeder(x, data, mine, order,
                       total > iteration ? total - iteration : 0,
                       static_cast<int>(o.readerThreads));
    for (; iteration < total; ++iteration, ++done) {
      order.next();
      st.sampleCursor = order.cursor;
      st.epoch = order.epoch;
      const int32_t buffer = feeder.acquire();
      prepareIteration(x, comm, buffer, st, scaled,
                       scheduled ? &o.schedule : nullptr);
      const bool dump = done == 0 && !o.dumpGraph.empty();
      const bool apply = issueIteration(x, program, scaled, o.clipGradNorm,
                                        gradNorm, dump ? &dumped : nullptr);
      if (apply)
        ++st.appliedSteps;
      x.batchIssued();
      feeder.release(buffer);
      // The libraries allocate on first use: the first iteration has done
      // so (a wait once, not every iteration).
      if (done == 0) {
        x.synchronize();
        x.sampleDeviceMemory();
      }
      if (dump && root)
        writeGraph(x, o.dumpGraph, dumped);
      if (scaled) {
        if (!apply && !o.quiet)
          std::printf("iteration %llu  skipped: gradients not finite at loss "
                      "scale %g\n",
                      (unsigned long long)(iteration + 1),
                      double(st.scaler.scale));
        st.scaler.update(!apply);
      }
      ++sinceLog;
      // The loss is read (a wait for the device) only where it is used;
      // every rank reads at the same iterations, as the read is collective.
      const bool last = iteration + 1 == total;
      const bool logPoint =
          o.logEvery > 0 && ((iteration + 1) % o.logEvery == 0 || last);
      const bool checkpointNow = !o.checkpoint.empty() &&
                                 o.checkpointEvery > 0 &&
                                 (iteration + 1) % o.checkpointEvery == 0;
      if (logPoint || checkpointNow || last) {
        // The global batch's mean loss: the mean of the ranks' means.
        lastLoss = p.ranks > 1 ? float(comm.sum(x.readLoss()) / p.ranks)
                               : x.readLoss();
        // An fp16 step skipped for an overflow may come from the forward
        // pass.
        if (!std::isfinite(lastLoss) && apply)
          die("the loss is not finite at iteration " +
              std::to_string(iteration));
      }
      if (logPoint && (!o.quiet || log.isOpen())) {
        auto now = std::chrono::steady_clock::now();
        double secs = std::chrono::duration<double>(now - tLog).count();
        const double perSecond = secs > 0 ? sinceLog * global / secs : 0.0;
        if (log.isOpen() &&
            !log.write({.step = iteration + 1,
                        .loss = lastLoss,
                        .lr = x.lr,
                        .gradNorm = o.clipGradNorm > 0 ? gradNorm : NAN,
                        .samplesPerSecond = perSecond,
                        .tokensPerSample = data.tokens ? data.seqLen : 0,
                        .elapsedSeconds =
                            std::chrono::duration<double>(now - t0).count()},
                       err))
          die(err);
        char rate[96] = "";
        int at = 0;
        if (o.clipGradNorm > 0)
          at = std::snprintf(rate, sizeof rate, "  grad norm %.9g",
                             double(gradNorm));
        if (scheduled)
          std::snprintf(rate + at, sizeof rate - at, "  lr %.9g", double(x.lr));
        // Tokens per second for a token stream; the time left at this rate.
        char extra[96] = "";
        int used = 0;
        if (data.tokens)
          used = std::snprintf(extra, sizeof extra, "  tokens/s %.0f",
                               perSecond * double(data.seqLen));
        if (perSecond > 0 && !last)
          std::snprintf(extra + used, sizeof extra - used, "  left %.0f s",
                        double(total - iteration - 1) * global / perSecond);
        if (!o.quiet) {
          std::printf("iteration %llu  loss %.9g  images/s %.1f  device "
                      "memory %.2f MiB%s%s\n",
                      (unsigned long long)(iteration + 1), lastLoss, perSecond,
                      x.deviceBytes() / 1048576.0, extra, rate);
          std::fflush(stdout);
        }
        tLog = now;
        sinceLog = 0;
      }
      if (val &&
          ((o.valEvery > 0 && (iteration + 1) % o.valEvery == 0) || last)) {
        const Validation v = evaluate(x, program, *val, o.valBatches,
                                      static_cast<int>(o.readerThreads));
        if (!std::isfinite(v.loss))
          die("the validation loss is not finite after step " +
              std::to_string(iteration + 1));
        if (!o.quiet) {
          std::printf("validation after step %llu  %s\n",
                      (unsigned long long)(iteration + 1),
                      describeValidation(v).c_str());
          std::fflush(stdout);
        }
        if (log.isOpen() && !log.write(ValLogLine{.step = iteration + 1,
                                                  .loss = v.loss,
                                                  .accuracy = v.accuracy,
                                                  .perplexity = v.perplexity,
                                                  .samples = v.samples,
                                                  .seconds = v.seconds},
                                       err))
          die(err);
      }
      if (checkpointNow) {
        x.synchronize();
        x.gatherOptimizerState();
        LoopState next = st;
        ++next.iteration;
        if (root && !saveCheckpoint(x, o.checkpoint, next, err))
          die(err);
      }
      // The crash tests' kill at a known step (as MEMFIT_NVME_KILL_AT_WRITE
      // inside an NVMe write): nothing after it runs, as after a SIGKILL
      // from outside.
      if (killAfter > 0 && iteration + 1 == killAfter)
        std::raise(SIGKILL);
    }
    waitedForData = feeder.waitedSeconds();
    waitedForDevice = feeder.waitedForDeviceSeconds();
  }
  x.synchronize();
  finishRun(x, comm, o, st, done);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!o.quiet)
    std::printf("done: %llu iterations, final loss %.9g, %.1f images/s, "
                "device memory %.2f MiB planned, %.2f MiB measured (arena "
                "%.2f MiB)\n",
                (unsigned long long)done, lastLoss,
                secs > 0 ? done * global / secs : 0.0,
                x.deviceBytes() / 1048576.0,
                x.measuredDeviceBytes() / 1048576.0, p.arenaBytes / 1048576.0);
  if (!o.quiet && convs.checked)
    std::printf("%s\n", convCheckSummary(convs, o.convAlgos).c_str());
  // The feeder fills the next batch beside the running one; where it fell
  // behind, the run was input-bound for that long. A wait for a buffer the
  // device still reads is the device's time, not the data's.
  if (!o.quiet && done > 0)
    std::printf("input: waited %.3g s for batches being filled (%.1f%% of "
                "the run); %.3g s for the device to finish with a buffer\n",
                waitedForData, secs > 0 ? 100.0 * waitedForData / secs : 0.0,
                waitedForDevice);
  bool within = reportMemory(x, o.quiet || !root);
  comm.finalize();
  return within ? 0 : kOverBudgetExit;
}

} // namespace memfit::rt
