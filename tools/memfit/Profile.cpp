//===- Profile.cpp - memfit profile ---------------------------------------===//
//
// memfit profile MODEL.onnx --batch B [--sub-batches 1,2,4,...] -o FILE
//
// Measures the model's task signatures on the GPU this runs on and writes a
// profile (docs/cost-model.md) that planning commands take with --profile.
// Progress goes to stderr. Without a usable GPU, or in a build without
// CUDA, it exits 1 saying so. The output file is written atomically and an
// existing one is kept unless --force is given.
//
//===----------------------------------------------------------------------===//
#include "compiler/cost/Profile.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/support/FileUtil.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/NumericOptions.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

#if MEMFIT_HAVE_CUDA
#include "tools/profiler/Profiler.h"
#endif

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("profile", "Measure a model's task costs on this GPU "
                              "(cuDNN algorithms, kernels, copies)");
cl::opt<std::string> ModelPath(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required, cl::sub(Cmd));
cl::opt<std::string> OutputPath("o", cl::desc("Output profile (JSON)"),
                                cl::value_desc("file"), cl::sub(Cmd));
cl::opt<PositiveCount> Batch("batch",
                             cl::desc("Batch size (default: the model's fixed "
                                      "batch dimension)"),
                             cl::init(0), cl::sub(Cmd));
cl::list<PositiveCount> SubBatches(
    "sub-batches",
    cl::desc("Sub-batch sizes to measure (default: powers of two up to the "
             "batch, and the batch)"),
    cl::CommaSeparated, cl::value_desc("b1,b2,..."), cl::sub(Cmd));
cl::opt<PositiveCount> Repeats("repeats",
                               cl::desc("Timed runs per measurement"),
                               cl::init(10), cl::sub(Cmd));
cl::opt<Count> Warmup("warmup", cl::desc("Untimed runs before timing"),
                      cl::init(3), cl::sub(Cmd));
cl::opt<bool> AllowTf32("allow-tf32",
                        cl::desc("Let cuDNN/cuBLAS use TF32 tensor cores for "
                                 "FP32 (default: strict FP32)"),
                        cl::sub(Cmd));
cl::opt<bool> Force("force", cl::desc("Overwrite an existing output file"),
                    cl::sub(Cmd));

int run() {
  if (OutputPath.empty())
    return reportError(makeError("no output file given; use -o FILE"));
  if (!Force && sys::fs::exists(OutputPath))
    return reportError(
        makeErrorF("output file {0} exists; use --force to overwrite it",
                   std::string(OutputPath)));

#if !MEMFIT_HAVE_CUDA
  return reportError(makeError(
      "memfit was built without CUDA, so it cannot measure a GPU; rebuild "
      "it where CMake finds the CUDA toolkit and cuDNN, or plan with the "
      "analytic model (--device)"));
#else
  // Before reading the model: without a device there is nothing to do.
  if (auto err = checkCudaDevice())
    return reportError(std::move(err));

  ImportOptions io;
  io.batch = Batch;
  io.keepWeightData = false;
  auto graph = importOnnxFile(ModelPath, io);
  if (!graph)
    return reportError(graph.takeError());

  ProfilerOptions opts;
  opts.warmup = Warmup;
  opts.repeats = Repeats;
  opts.allowTf32 = AllowTf32;
  if (SubBatches.empty()) {
    for (int64_t b = 1; b < graph->batch; b *= 2)
      opts.subBatches.push_back(b);
    opts.subBatches.push_back(graph->batch);
  } else {
    opts.subBatches.assign(SubBatches.begin(), SubBatches.end());
  }
  std::sort(opts.subBatches.begin(), opts.subBatches.end());
  opts.subBatches.erase(
      std::unique(opts.subBatches.begin(), opts.subBatches.end()),
      opts.subBatches.end());

  auto profile = runProfiler(*graph, opts, errs());
  if (!profile)
    return reportError(profile.takeError());
  if (auto err = writeFileAtomically(OutputPath, profileToJson(*profile)))
    return reportError(std::move(err));
  errs() << "memfit profile: wrote " << profile->size() << " entries to "
         << OutputPath << "\n";
  return ExitOk;
#endif
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
