//===- ConvCheck.h - Planned convolutions against what cuDNN runs -*- C++ -*-=//
//
// A generated trainer lists every convolution call its plan makes
// (ConvTask: parameters, direction, planned algorithm and workspace, the
// task's name and op signature). Before the first iteration the CUDA
// backend asks cuDNN, for each at every sub-batch size the trainer runs,
// whether the planned algorithm runs within the planned workspace; where
// not, it runs the fastest algorithm cuDNN ranks
// (cudnnGetConvolution*Algorithm_v7) that fits, never silently the slowest.
// The trainer's summary says how many tasks changed algorithm and the
// changes are written as a profile (compiler/cost/Profile.h's "refused"
// array) that `memfit plan --profile` reads back, so the next plan is made
// with what runs.
//
// What lives here is backend-independent and pure, so it is tested without
// a GPU: the choice over cuDNN's ranked list, the algorithms cuDNN 9 runs
// per architecture (the twin of compiler/cost's convAlgoOffered, which the
// runtime may not include; ConvAlgoTest holds them equal), and the file.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_CONVCHECK_H
#define MEMFIT_RUNTIME_CONVCHECK_H

#include "runtime/Kernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace memfit::rt {

/// Directions as cuDNN's three algorithm enums (and compiler/cost's
/// ConvDirection) number them.
enum ConvDir : int32_t { ConvFwd = 0, ConvBwdData = 1, ConvBwdFilter = 2 };

/// One planned convolution call, as the generated program lists it.
struct ConvTask {
  ConvParams params;
  int32_t direction; // ConvDir
  int32_t algo;      // cuDNN's id for the direction
  /// The workspace the call is given (a 16-bit backward-filter's staging
  /// room included, as the call receives it).
  int64_t workspaceBytes;
  const char *task;      // the task's name
  const char *signature; // the op's signature (compiler/ops/OpSignature.h)
  /// The sub-batch sizes this call runs at when they are not the training
  /// round's (the evaluation round's convolutions); 0: the program's.
  int64_t subBatch = 0, lastSubBatch = 0;
};

/// Whether cuDNN 9's legacy API runs algorithm `algo` of direction `dir` on
/// compute capability `cc` (major * 10 + minor; 0: unknown, every id).
bool cudnnRunsConvAlgo(int cc, int32_t dir, int32_t algo);
/// The ids of `dir` (cuDNN defines no backward-filter 4, and none beyond
/// 7, 5, 6 per direction).
bool cudnnDefinesConvAlgo(int32_t dir, int32_t algo);

/// One row of cuDNN's ranked answer (cudnnConvolution*AlgoPerf_t): best
/// first.
struct ConvCandidate {
  int32_t algo = 0;
  bool runs = false; // status CUDNN_STATUS_SUCCESS
  int64_t bytes = 0; // the workspace it asks
};

struct ConvChoice {
  int32_t algo = -1; // -1: nothing runs within the workspace
  bool changed = false;
};

/// The planned algorithm where it runs within `have` bytes; else the first
/// of `ranked` that runs within them (cuDNN's rank, so the fastest it
/// knows, whatever its id); else none.
ConvChoice chooseConvAlgo(int32_t planned, bool plannedRuns,
                          int64_t plannedBytes, int64_t have,
                          const std::vector<ConvCandidate> &ranked);

/// One algorithm cuDNN timed for a call within its planned workspace.
struct ConvTiming {
  int32_t algo = 0; // cuDNN's algorithm id; a graph-API plan's index
  double seconds = 0;
  int64_t bytes = 0;       // the workspace it asks
  std::string engine = {}; // a graph-API plan's engine and knobs (cuDNN's tag)
};

/// What runs where cuDNN measured `timed` (algorithms that ran within the
/// planned workspace): the fastest, unless `settled` (what runs without
/// measuring: the planned algorithm, or the check's substitute) is within
/// kConvTuneSlack of it, a difference timing noise can make; `settled`
/// where nothing was timed. `changed` compares with `planned`.
constexpr double kConvTuneSlack = 0.03;
ConvChoice chooseMeasured(int32_t planned, int32_t settled,
                          const std::vector<ConvTiming> &timed);

/// The timings whose workspace is at most `have` bytes: what a call held to
/// its planned workspace may run. The start-up tuning times every algorithm
/// in as much workspace as the arena holds, so that the file it writes
/// tells the next plan (memfit plan --profile) what more workspace would
/// buy; the run itself chooses among these.
std::vector<ConvTiming> withinWorkspace(const std::vector<ConvTiming> &timed,
                                        int64_t have);

/// cuDNN's timings of one convolution call at one sub-batch size.
/// Where the start-up tuning runs cuDNN's graph-API plans instead of the
/// legacy API's algorithm: never; where one measures faster than the legacy
/// algorithm; wherever one runs (the self-check's way to run them all).
enum class ConvGraphUse : uint8_t { Off, WhereFaster, Always };

/// The graph-API plan (an index into `graph`, cuDNN's graph-API timings of
/// the same call within the same workspace) to run instead of the legacy
/// algorithm `legacy`, or -1: the fastest plan, where it beats the legacy
/// algorithm's measured time by more than kConvTuneSlack. -1 where the
/// legacy algorithm was not measured: nothing to compare with. `Always`:
/// the fastest plan, whatever the legacy API measured; `Off`: -1.
int32_t chooseGraphPlan(int32_t legacy, const std::vector<ConvTiming> &timed,
                        const std::vector<ConvTiming> &graph,
                        ConvGraphUse use = ConvGraphUse::WhereFaster);

/// A call that runs a cuDNN graph-API engine instead of the legacy API's
/// algorithm (the start-up tuning measured it faster).
struct ConvEngineUse {
  int32_t direction = ConvFwd;
  std::string task, signature;
  int64_t subBatch = 0;
  int32_t legacyAlgo = 0;
  double legacySeconds = 0;
  ConvTiming engine; // its `algo` is the plan's index
};

struct ConvMeasured {
  int32_t direction = ConvFwd;
  std::string signature;
  int64_t subBatch = 0;
  std::vector<ConvTiming> timings;
};

/// A planned algorithm the trainer did not run.
struct ConvSubstitution {
  int32_t direction = ConvFwd;
  std::string task, signature;
  int64_t subBatch = 0;
  int32_t planned = 0, ran = 0;
  /// What cuDNN asked for the planned algorithm; -1: it does not run it.
  int64_t askedBytes = -1;
  int64_t plannedBytes = 0;
  /// Replaced because cuDNN measured `ran` faster, not because it refused
  /// the planned algorithm.
  bool faster = false;
};

/// What the start-up check found.
struct ConvCheckResult {
  bool checked = false; // false on a backend without cuDNN
  int64_t calls = 0;    // (call, sub-batch) pairs checked
  int64_t tasks = 0;    // distinct task names checked
  std::vector<ConvSubstitution> changed;
  /// cuDNN's timings, one per (direction, signature, sub-batch); empty
  /// when not measured.
  std::vector<ConvMeasured> measured;
  /// Calls that run a graph-API engine (measured faster than the legacy
  /// API's best within the same workspace); empty when not measured.
  std::vector<ConvEngineUse> engines;
  bool tuned = false;                        // the algorithms were measured
  double tuneSeconds = 0;                    // what measuring took
  std::string gpu, computeCapability, cudnn; // "NVIDIA H200", "9.0", "9.19.0"
  /// Tasks (by name) with at least one changed call; `faster`: changed
  /// because cuDNN measured another algorithm faster (else refused).
  int64_t changedTasks() const;
  int64_t changedTasks(bool faster) const;
  /// Tasks (by name) with at least one call on a graph-API engine.
  int64_t engineTasks() const;
};

/// The profile JSON (schema 1: cuDNN's timings as entries, the refusals as
/// the "refused" array) that `memfit plan --profile` reads.
std::string convSubstitutionsJson(const ConvCheckResult &r);
/// Writes it atomically (runtime/AtomicFile.h); false and `err` on failure.
bool writeConvSubstitutions(const ConvCheckResult &r, const std::string &path,
                            std::string &err);

/// "conv-algos.json" in the directory of `modelPath` (the generated
/// trainer's directory, where its model copy lies), or in the working
/// directory where that directory does not exist (a trainer carried to
/// another machine).
std::string convAlgosPathBeside(const std::string &modelPath);
/// One line for the trainer's summary, e.g. "convolutions: 3 of 53 tasks
/// changed algorithm (cuDNN 9.19.0, NVIDIA H200, sm_90): 1 refused, 2
/// measured faster (cuDNN timed 41 calls in 1.2 s), written to F; memfit plan
/// --profile F plans with what runs".
std::string convCheckSummary(const ConvCheckResult &r, const std::string &file);

} // namespace memfit::rt

#endif
