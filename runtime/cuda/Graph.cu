//===- Graph.cu - CUDA backend: iteration graphs and the batch buffers ----===//
//
// An iteration is a few CUDA graphs: one per round (sub-batch index, and
// batch buffer, since the input's copy-in reads one of two pinned buffers)
// and one for the update. Exec::issue runs a part's first issue eagerly,
// so that every decision made on the host (cuDNN descriptors and algorithm
// checks, cuBLAS's workspace, lazy module loading) is made outside any
// capture; the part's next issue is captured and every later one replays
// the graph.
//
// The capture starts on the compute stream. The copy streams join it by
// waiting for an event recorded there (the fork) and rejoin it at the end
// (the join), so the plan's copies are nodes of the graph and the plan's
// events its edges: a record and a wait inside a capture become a
// dependency, nothing else.
//
// What changes between iterations must not be frozen into the graph: the
// batch is read from the buffer's fixed pinned address (one graph per
// buffer); Adam's step, the iteration (dropout's and attention-dropout's
// masks: the kernels compute their key from it on the device) and fp16's
// loss scale from cuda::IterationState in device memory, written before
// each iteration (beginIteration). An operation that would read another
// such value on the host says so while capturing (Impl::readsHostValue):
// the capture is dropped and the trainer runs eagerly, saying why. In fp16
// the decision to skip an update (a non-finite gradient) stays on the host
// between the rounds' graphs and the update's, a wait once an iteration.
// Data-parallel programs (NCCL's collectives) and MEMFIT_CUDA_SYNC runs are
// issued eagerly from the start; MEMFIT_CUDA_GRAPHS=0 does the same on
// request.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memfit::rt {

namespace {

struct SetIterationStateKernel {
  static constexpr int threads = 1;
  __device__ static void run(cuda::IterationState *state,
                             cuda::IterationState value) {
    *state = value;
  }
};

} // namespace

void cuda::initGraphs(const Exec &x, Exec::Impl &im) {
  const ProgramInfo &p = x.info();
  const char *env = std::getenv("MEMFIT_CUDA_GRAPHS");
  if (env && std::strcmp(env, "0") == 0)
    im.eagerWhy = "MEMFIT_CUDA_GRAPHS=0";
  else if (im.syncEachOp)
    im.eagerWhy = "MEMFIT_CUDA_SYNC waits after every operation";
  else if (p.ranks > 1)
    im.eagerWhy = "data-parallel collectives are issued eagerly";
}

void cuda::destroyGraphs(Exec::Impl &im) {
  for (auto &[key, exec] : im.graphs)
    cudaGraphExecDestroy(exec);
  im.graphs.clear();
}

std::string Exec::eagerReason() const { return impl->eagerWhy; }

float *Exec::hostInput(int32_t b) { return impl->input[b]; }
void *Exec::hostLabels(int32_t b) { return impl->labels[b]; }

void Exec::prepareBatch(int32_t b) {
  uint16_t *staged = impl->input16[b];
  if (!staged)
    return;
  const float *in = impl->input[b];
  const int64_t count = prog.batch * prog.inputPerSample;
  for (int64_t i = 0; i < count; ++i)
    staged[i] = cuda::narrowBits(impl->narrow, in[i]);
}

void Exec::useBatch(int32_t b) { impl->batch = b; }

void Exec::batchIssued() {
  // Every round ends with the copy streams joined into the compute stream
  // (the plan's events, or the capture's join), so an event there covers
  // the copy-ins that read the buffer.
  MEMFIT_CHECK(cudaEventRecord(impl->batchFree[impl->batch], impl->compute()));
}

void Exec::waitBatchFree(int32_t b) {
  // A never-recorded event is complete: the first fill of each buffer
  // does not wait.
  MEMFIT_CHECK(cudaEventSynchronize(impl->batchFree[b]));
}

void Exec::beginIteration() {
  // The profile leaves the first iteration out: cuDNN's and cuBLAS's
  // start-up and the kernels loaded on first use are not an iteration's.
  if (impl->profile && iteration == 1) {
    cudaDeviceSynchronize();
    impl->opTimes.clear();
  }
  cuda::IterationState now;
  now.step = step;
  now.iteration = iteration;
  now.lossScale = lossScale;
  now.lr = lr;
  now.lossCount = lossPositions();
  cuda::launch<SetIterationStateKernel>(1, impl->compute(), impl->stateDev,
                                        now);
  impl->done(*this, "iteration state");
}

namespace {

/// fn captured into a graph; null when the capture was dropped (im.eagerWhy
/// then says why).
cudaGraphExec_t capture(Exec &x, Exec::Impl &im, void (*fn)(Exec &)) {
  cudaStream_t c = im.compute();
  // Thread-local: the feeder thread's event waits during the capture are
  // no part of it.
  cuda::check(x, cudaStreamBeginCapture(c, cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture");
  cuda::check(x, cudaEventRecord(im.fork, c), "cudaEventRecord (fork)");
  for (int s : {CopyOut, CopyIn})
    cuda::check(x, cudaStreamWaitEvent(im.stream[s], im.fork, 0),
                "cudaStreamWaitEvent (fork)");
  // A dropped capture ran nothing: what it marked on the host must read
  // as before when fn runs again eagerly.
  const std::vector<bool> stale = im.copyStale;
  im.capturing = true;
  im.hostValueRead = nullptr;
  fn(x);
  im.capturing = false;
  for (int s : {CopyOut, CopyIn}) {
    cuda::check(x, cudaEventRecord(im.join[s - 1], im.stream[s]),
                "cudaEventRecord (join)");
    cuda::check(x, cudaStreamWaitEvent(c, im.join[s - 1], 0),
                "cudaStreamWaitEvent (join)");
  }
  cudaGraph_t g = nullptr;
  cuda::check(x, cudaStreamEndCapture(c, &g), "cudaStreamEndCapture");
  if (im.hostValueRead) {
    cudaGraphDestroy(g);
    im.copyStale = stale;
    im.eagerWhy = std::string("the program reads a value the host changes "
                              "between iterations: ") +
                  im.hostValueRead;
    std::fprintf(stderr,
                 "trainer: note: iterations run without CUDA graphs: "
                 "%s\n",
                 im.eagerWhy.c_str());
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  cuda::check(x, cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(g);
  return exec;
}

/// Issues part `part` eagerly, as a new capture or as a replay.
void issuePart(Exec &x, Exec::Impl &im, int32_t part, void (*fn)(Exec &)) {
  // The update's host updates are queued anew whenever fn runs (a replay
  // does not run it and keeps the queue).
  auto run = [&]() {
    if (part < 0)
      im.hostQueue.clear();
    fn(x);
  };
  // The first issue of each part is the warm-up; the first iteration's
  // update reads firstIteration (SGD's momentum buffer starts as the
  // gradient), which no replay may repeat. The evaluation's buffer has no
  // graphs (the key below numbers the training's two), so what reads it
  // runs eagerly, before it could count as a part's warm-up.
  if (!im.eagerWhy.empty() || im.batch >= kBatchBuffers ||
      im.warmed.insert(part).second || x.firstIteration) {
    run();
    return;
  }
  const int64_t key = part < 0 ? -1 : int64_t(part) * kBatchBuffers + im.batch;
  auto it = im.graphs.find(key);
  if (it == im.graphs.end()) {
    if (part < 0)
      im.hostQueue.clear();
    cudaGraphExec_t exec = capture(x, im, fn);
    if (!exec) {
      run(); // nothing of the dropped capture ran
      return;
    }
    it = im.graphs.emplace(key, exec).first;
  }
  cuda::check(x, cudaGraphLaunch(it->second, im.compute()), "cudaGraphLaunch");
}

} // namespace

void Exec::issue(int32_t part, void (*fn)(Exec &)) {
  Impl &im = *impl;
  // Before the update: the rounds issued so far, copy-outs included, are
  // done when this fires (the host updates wait for it).
  if (part < 0)
    MEMFIT_CHECK(cudaEventRecord(im.roundsDone, im.compute()));
  issuePart(*this, im, part, fn);
  if (part < 0)
    cuda::runHostUpdates(*this, im);
}

} // namespace memfit::rt
