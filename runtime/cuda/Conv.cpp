//===- Conv.cpp - CUDA backend: cuDNN convolutions ------------------------===//
//
// Convolutions run through cuDNN's legacy convolution API (still present,
// though deprecated, in cuDNN 9) with the algorithm the plan chose: its id
// is cuDNN's own enum value for the direction (compiler/ConvAlgo.h).
// Cross-correlation, fp32 compute, groups through
// cudnnSetConvolutionGroupCount. fp32 programs use CUDNN_FMA_MATH:
// CUDNN_DEFAULT_MATH lets Ampere and later GPUs round through TF32 tensor
// cores, which is not the fp32 arithmetic the reference kernels define (the
// profiler measures under the same math type); TF32 programs use tensor
// cores on fp32 data. Accumulating gradients blend with beta = 1.
//
// bf16 and fp16 programs run cuDNN's 16-bit data with fp32 compute (its
// pseudo-half configurations) on tensor cores. cuDNN wants one data type
// throughout a call, so the pieces that mix a 16-bit activation with an
// fp32 master are memfit's own kernels: the bias is added to the stored
// 16-bit output, its gradient summed from dy in double, and the weight
// gradient is computed in 16 bits into the task's planned staging room
// (rt::convGradStagingBytes, the start of its workspace) and then added to
// the fp32 master gradient. The CPU emulation rounds at the same points.
//
// cuDNN pads both sides of an axis alike. The model's end pads only show in
// the output size, so a convolution is run exactly when cuDNN, padding the
// begin pads on both sides, produces the model's output size: the windows
// are then the same and any extra padding is never read. Otherwise the
// convolution is refused with an error naming the task.
//
// Descriptors are created on first use, per (ConvParams, n); the
// last sub-batch may be smaller. Before the first iteration the trainer
// hands every planned call to checkConvolutions (runtime/ConvCheck.h):
// where cuDNN does not run the planned algorithm for a shape, or asks for
// more workspace than the plan set aside, the best-ranked algorithm of
// cudnnGetConvolution*Algorithm_v7 that runs within the planned workspace
// takes its place, and the change is reported; if none does, the trainer
// stops naming the task. Same arithmetic up to rounding, never more
// memory. A call the list lacks (the self-check's) is settled the same
// way at its first run, with a warning. With tuning on, a call that does
// not accumulate may instead run a cuDNN graph-API plan measured faster
// within the same workspace (ConvGraph.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Impl.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace memfit::rt {

using cuda::check;
using cuda::ConvEntry;

namespace {

enum Direction { Fwd = 0, BwdData = 1, BwdFilter = 2 };
const char *kDirName[] = {"forward", "backward-data", "backward-filter"};

int toInt(const Exec &x, int64_t v, const char *what) {
  if (v < 0 || v > INT_MAX)
    x.fatal(std::string(what) + " " + std::to_string(v) +
            " does not fit cuDNN's 32-bit descriptors");
  return static_cast<int>(v);
}

cudnnDataType_t dataType(cuda::Store s) {
  switch (s) {
  case cuda::Store::BF16:
    return CUDNN_DATA_BFLOAT16;
  case cuda::Store::FP16:
    return CUDNN_DATA_HALF;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

void setTensor(const Exec &x, cudnnTensorDescriptor_t d, cudnnDataType_t type,
               int64_t n, int64_t c, int64_t h, int64_t w) {
  // cuDNN's descriptors hold int strides: one sample must fit.
  toInt(x, c * h * w, "a sample of");
  check(x,
        cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type,
                                   toInt(x, n, "batch"),
                                   toInt(x, c, "channels"),
                                   toInt(x, h, "height"), toInt(x, w, "width")),
        "cudnnSetTensor4dDescriptor");
}

ConvEntry &entryFor(const Exec &x, Exec::Impl &im, const ConvParams &p,
                    int64_t n, cuda::Store store) {
  cuda::ConvKey key{p, n, store};
  const cudnnDataType_t type = dataType(store);
  auto it = im.convs.find(key);
  if (it != im.convs.end())
    return *it->second;
  auto e = std::make_unique<ConvEntry>();
  if (p.group <= 0 || p.cin % p.group || p.cout % p.group)
    x.fatal("convolution channels " + std::to_string(p.cin) + " -> " +
            std::to_string(p.cout) + " do not divide into " +
            std::to_string(p.group) + " groups");
  check(x, cudnnCreateTensorDescriptor(&e->x), "cudnnCreateTensorDescriptor");
  check(x, cudnnCreateTensorDescriptor(&e->y), "cudnnCreateTensorDescriptor");
  check(x, cudnnCreateTensorDescriptor(&e->bias),
        "cudnnCreateTensorDescriptor");
  check(x, cudnnCreateFilterDescriptor(&e->w), "cudnnCreateFilterDescriptor");
  check(x, cudnnCreateConvolutionDescriptor(&e->conv),
        "cudnnCreateConvolutionDescriptor");
  setTensor(x, e->x, type, n, p.cin, p.hin, p.win);
  setTensor(x, e->y, type, n, p.cout, p.hout, p.wout);
  setTensor(x, e->bias, type, 1, p.cout, 1, 1);
  check(x,
        cudnnSetFilter4dDescriptor(
            e->w, type, CUDNN_TENSOR_NCHW, toInt(x, p.cout, "output channels"),
            toInt(x, p.cin / p.group, "input channels"),
            toInt(x, p.kh, "kernel height"), toInt(x, p.kw, "kernel width")),
        "cudnnSetFilter4dDescriptor");
  if (p.padTop < 0 || p.padLeft < 0)
    x.fatal("negative convolution pads are not supported by cuDNN");
  check(x,
        cudnnSetConvolution2dDescriptor(
            e->conv, toInt(x, p.padTop, "pad"), toInt(x, p.padLeft, "pad"),
            toInt(x, p.sh, "stride"), toInt(x, p.sw, "stride"),
            toInt(x, p.dh, "dilation"), toInt(x, p.dw, "dilation"),
            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(x, cudnnSetConvolutionGroupCount(e->conv, static_cast<int>(p.group)),
        "cudnnSetConvolutionGroupCount");
  // fp32 plans are priced and profiled on FMA units; TF32 plans on tensor
  // cores, which read TF32-rounded inputs (cuDNN's TENSOR_OP math), and
  // 16-bit data on tensor cores too.
  check(
      x,
      cudnnSetConvolutionMathType(e->conv, x.info().precision == Precision::FP32
                                               ? CUDNN_FMA_MATH
                                               : CUDNN_TENSOR_OP_MATH),
      "cudnnSetConvolutionMathType");
  int on = 0, oc = 0, oh = 0, ow = 0;
  check(x,
        cudnnGetConvolution2dForwardOutputDim(e->conv, e->x, e->w, &on, &oc,
                                              &oh, &ow),
        "cudnnGetConvolution2dForwardOutputDim");
  if (oh != p.hout || ow != p.wout) {
    // The smallest end pads that give the model's output size.
    int64_t padBottom =
        (p.hout - 1) * p.sh + (p.kh - 1) * p.dh + 1 - p.hin - p.padTop;
    int64_t padRight =
        (p.wout - 1) * p.sw + (p.kw - 1) * p.dw + 1 - p.win - p.padLeft;
    x.fatal("asymmetric convolution padding (begin " +
            std::to_string(p.padTop) + ", " + std::to_string(p.padLeft) +
            "; end at least " + std::to_string(padBottom) + ", " +
            std::to_string(padRight) +
            ") is not supported by cuDNN, which pads both sides alike: it "
            "would produce " +
            std::to_string(oh) + "x" + std::to_string(ow) +
            " outputs instead of the model's " + std::to_string(p.hout) + "x" +
            std::to_string(p.wout) +
            "; pad the input with an explicit Pad node instead");
  }
  return *im.convs.emplace(key, std::move(e)).first->second;
}

/// cuDNN's ranked answer for the convolution (best first), with each
/// algorithm's status and workspace: host-side heuristics, no device memory.
/// The workspace is what cudnnGetConvolution*WorkspaceSize says, the
/// figure the call itself is held to: on an H200 (cuDNN 9.19, bf16) the
/// ranking's own `memory` was smaller for backward-data algorithms, and the
/// call then failed with "workSpaceSizeInBytes < requiredWorkspace".
std::vector<ConvCandidate> ranked(const Exec &x, const Exec::Impl &im,
                                  const ConvEntry &e, int dir) {
  std::vector<ConvCandidate> out;
  const int max = cuda::convAlgoCount(x, im, dir);
  int got = 0;
  auto add = [&](const auto &perf) {
    for (int i = 0; i < got; ++i)
      out.push_back({static_cast<int32_t>(perf[i].algo),
                     perf[i].status == CUDNN_STATUS_SUCCESS,
                     static_cast<int64_t>(perf[i].memory)});
  };
  switch (dir) {
  case Fwd: {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max);
    check(x,
          cudnnGetConvolutionForwardAlgorithm_v7(im.cudnn, e.x, e.w, e.conv,
                                                 e.y, max, &got, perf.data()),
          "cudnnGetConvolutionForwardAlgorithm_v7");
    add(perf);
    break;
  }
  case BwdData: {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max);
    check(x,
          cudnnGetConvolutionBackwardDataAlgorithm_v7(
              im.cudnn, e.w, e.y, e.conv, e.x, max, &got, perf.data()),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    add(perf);
    break;
  }
  default: {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max);
    check(x,
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              im.cudnn, e.x, e.y, e.conv, e.w, max, &got, perf.data()),
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    add(perf);
    break;
  }
  }
  for (ConvCandidate &c : out) {
    size_t bytes = 0;
    if (!c.runs)
      continue;
    if (cuda::convWorkspace(im, e, dir, c.algo, bytes) != CUDNN_STATUS_SUCCESS)
      c.runs = false;
    else
      c.bytes = std::max(c.bytes, static_cast<int64_t>(bytes));
  }
  return out;
}

/// What cuDNN says of the planned algorithm, and what runs instead.
struct Settled {
  ConvChoice choice;
  bool plannedRuns = false;
  size_t plannedNeed = 0;
  std::string why; // empty when the planned algorithm runs
};

/// The planned algorithm when cuDNN runs it here within `have` bytes, else
/// the best-ranked one that does (chooseConvAlgo); fatal when none does.
Settled settle(const Exec &x, const Exec::Impl &im, const ConvEntry &e, int dir,
               int32_t algo, int64_t have) {
  Settled s;
  cudnnStatus_t st = cudnnDefinesConvAlgo(dir, algo)
                         ? cuda::convWorkspace(im, e, dir, algo, s.plannedNeed)
                         : CUDNN_STATUS_BAD_PARAM;
  s.plannedRuns = st == CUDNN_STATUS_SUCCESS;
  const int64_t need = static_cast<int64_t>(s.plannedNeed);
  if (s.plannedRuns && need <= have) {
    s.choice = {algo, false};
    return s;
  }
  s.why = !cudnnDefinesConvAlgo(dir, algo)
              ? std::string("cuDNN defines no such algorithm")
          : !s.plannedRuns ? std::string(cudnnGetErrorString(st))
                           : "it needs " + std::to_string(need) +
                                 " bytes of workspace, the plan set aside " +
                                 std::to_string(have);
  s.choice =
      chooseConvAlgo(algo, s.plannedRuns, need, have, ranked(x, im, e, dir));
  if (s.choice.algo < 0)
    x.fatal(std::string("cuDNN runs no ") + kDirName[dir] +
            " convolution algorithm within the planned " +
            std::to_string(have) + " bytes of workspace (planned algorithm " +
            std::to_string(algo) + ": " + s.why + ")");
  return s;
}

/// The algorithm a call runs: what the start-up check settled for it, else
/// settled now (a call the program's list lacks), with a warning when it
/// changes.
int32_t algoFor(const Exec &x, Exec::Impl &im, ConvEntry &e, int dir,
                int32_t algo, int64_t wsBytes) {
  const int64_t have = std::max<int64_t>(wsBytes, 0);
  auto key = std::make_tuple(dir, algo, have);
  auto it = e.algoUsed.find(key);
  if (it != e.algoUsed.end())
    return it->second;
  Settled s = settle(x, im, e, dir, algo, have);
  if (s.choice.changed) {
    ++im.convChanges;
    std::fprintf(stderr,
                 "trainer: warning: %s: cuDNN cannot run the planned %s "
                 "convolution algorithm %d here (%s); running algorithm %d, "
                 "the best-ranked one within the workspace\n",
                 x.taskName(), kDirName[dir], static_cast<int>(algo),
                 s.why.c_str(), static_cast<int>(s.choice.algo));
  }
  e.algoUsed[key] = s.choice.algo;
  return s.choice.algo;
}

/// Times the graph API's plans of a tuned call and, where one beats the
/// legacy algorithm the tuning chose, records it for the call's
/// non-accumulating runs (ConvGraph.cpp). Shapes timed once per
/// (entry, direction, workspace): their graph keeps the timings.
void chooseEngine(Exec &x, Exec::Impl &im, const ConvTask &t, ConvEntry &e,
                  int64_t n, int64_t have, int32_t legacy,
                  const std::vector<ConvTiming> &timed, ConvGraphUse use,
                  ConvCheckResult &r) {
  cuda::ConvGraph *g = nullptr;
  const std::vector<ConvTiming> plans = cuda::timeConvGraph(
      x, im, e, t.params, n, im.narrow, t.direction, have, g);
  const int32_t pick = chooseGraphPlan(legacy, timed, plans, use);
  if (!g || pick < 0)
    return;
  e.graphUsed[std::make_tuple(int(t.direction), t.algo, have)] = {
      g, plans[pick].algo};
  ConvEngineUse u;
  u.direction = t.direction;
  u.task = t.task;
  u.signature = t.signature;
  u.subBatch = n;
  u.legacyAlgo = legacy;
  for (const ConvTiming &l : timed)
    if (l.algo == legacy)
      u.legacySeconds = l.seconds;
  u.engine = plans[pick];
  r.engines.push_back(std::move(u));
}

} // namespace

ConvCheckResult Exec::checkConvolutions(const ConvTask *tasks, int32_t count,
                                        bool tune, ConvGraphUse graph) {
  ConvCheckResult r;
  r.checked = true;
  r.tuned = tune;
  const auto t0 = std::chrono::steady_clock::now();
  // cuDNN's timings per (convolution, sub-batch, direction), in the
  // arena's room: tasks of one shape share them whatever their workspace.
  std::map<std::tuple<const ConvEntry *, int32_t>, std::vector<ConvTiming>>
      timed;
  cudaDeviceProp prop{};
  MEMFIT_CHECK(cudaGetDeviceProperties(&prop, impl->device));
  r.gpu = prop.name;
  r.computeCapability =
      std::to_string(prop.major) + "." + std::to_string(prop.minor);
  const size_t v = cudnnGetVersion();
  r.cudnn = std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) +
            "." + std::to_string(v % 100);
  // Every sub-batch size the rounds run: the last may be smaller.
  std::vector<int64_t> programSizes{prog.subBatch};
  const int64_t last = prog.batch - (prog.numSubBatches - 1) * prog.subBatch;
  if (prog.chunks <= 1 && last > 0 && last != prog.subBatch)
    programSizes.push_back(last);
  const bool narrow = impl->narrow != cuda::Store::F32;
  std::set<std::tuple<int32_t, std::string, int64_t, int32_t>> seen;
  for (int32_t i = 0; i < count; ++i) {
    const ConvTask &t = tasks[i];
    setTask(t.task);
    // A call of another round (the evaluation's) runs at its own sizes.
    std::vector<int64_t> sizes = programSizes;
    if (t.subBatch > 0) {
      sizes = {t.subBatch};
      if (t.lastSubBatch > 0 && t.lastSubBatch != t.subBatch)
        sizes.push_back(t.lastSubBatch);
    }
    int64_t have = std::max<int64_t>(t.workspaceBytes, 0);
    if (t.direction == BwdFilter && narrow) {
      // The call stages the 16-bit gradient at the workspace's start.
      const ConvParams &p = t.params;
      int64_t staging =
          convGradStagingBytes(p.cout * (p.cin / p.group) * p.kh * p.kw);
      if (have < staging)
        continue; // no weight gradient: the call runs no cuDNN filter pass
      have -= staging;
    }
    for (int64_t n : sizes) {
      ConvEntry &e = entryFor(*this, *impl, t.params, n, impl->narrow);
      Settled s = settle(*this, *impl, e, t.direction, t.algo, have);
      bool faster = false;
      if (tune) {
        auto key = std::make_tuple(&e, t.direction);
        auto it = timed.find(key);
        if (it == timed.end()) {
          it = timed
                   .emplace(key, cuda::timeConvAlgos(*this, *impl, e, t.params,
                                                     n, impl->narrow,
                                                     t.direction, have))
                   .first;
          if (!it->second.empty())
            r.measured.push_back({t.direction, t.signature, n, it->second});
        }
        const std::vector<ConvTiming> fits = withinWorkspace(it->second, have);
        ConvChoice m = chooseMeasured(t.algo, s.choice.algo, fits);
        faster = m.algo != s.choice.algo;
        s.choice = m;
        if (graph != ConvGraphUse::Off)
          chooseEngine(*this, *impl, t, e, n, have, s.choice.algo, fits, graph,
                       r);
      }
      e.algoUsed[std::make_tuple(int(t.direction), t.algo, have)] =
          s.choice.algo;
      ++r.calls;
      if (!s.choice.changed ||
          !seen.insert({t.direction, t.signature, n, t.algo}).second)
        continue;
      ConvSubstitution sub;
      sub.direction = t.direction;
      sub.task = t.task;
      sub.signature = t.signature;
      sub.subBatch = n;
      sub.planned = t.algo;
      sub.ran = s.choice.algo;
      sub.askedBytes =
          s.plannedRuns ? static_cast<int64_t>(s.plannedNeed) : int64_t(-1);
      sub.plannedBytes = have;
      // Refused or not, it ran what cuDNN measured fastest: a refusal
      // still tells the next plan what cuDNN will not run.
      sub.faster = faster && s.plannedRuns &&
                   static_cast<int64_t>(s.plannedNeed) <= have;
      r.changed.push_back(std::move(sub));
    }
  }
  setTask("");
  r.tuneSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::set<std::string> names;
  for (int32_t i = 0; i < count; ++i)
    names.insert(tasks[i].task);
  r.tasks = static_cast<int64_t>(names.size());
  return r;
}

int64_t Exec::convAlgoChanges() const { return impl->convChanges; }

void cuda::destroyConvs(Exec::Impl &im) { im.convs.clear(); }

/// The planned workspace as a pointer, after checking it lies in the arena.
static void *workspace(Exec &x, int64_t offset, int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  if (offset < 0 || offset + bytes > x.info().arenaBytes)
    x.fatal("the convolution workspace leaves the arena");
  return x.arena(offset);
}

namespace {
/// The graph-API plan the start-up tuning chose for a call, if any.
const std::pair<cuda::ConvGraph *, int32_t> *
engineFor(const ConvEntry &e, int dir, int32_t algo, int64_t wsBytes) {
  auto it = e.graphUsed.find(
      std::make_tuple(dir, algo, std::max<int64_t>(wsBytes, 0)));
  return it == e.graphUsed.end() ? nullptr : &it->second;
}

/// The storage every operand of a cuDNN call shares; a mix is refused.
cuda::Store sharedStore(const Exec &x, std::initializer_list<cuda::View> vs) {
  cuda::Store s = cuda::Store::F32;
  bool first = true;
  for (const cuda::View &v : vs) {
    if (!v)
      continue;
    if (!first && v.t != s)
      x.fatal("a convolution whose operands are stored in different types");
    s = v.t;
    first = false;
  }
  return s;
}
} // namespace

void Exec::convForward(const ConvParams &p, int32_t algo, const float *x,
                       const float *w, const float *b, float *y, int64_t wsOff,
                       int64_t wsBytes) {
  const cuda::View vx = impl->view(x), vw = impl->view(w), vy = impl->view(y);
  const cuda::Store store = sharedStore(*this, {vx, vw, vy});
  ConvEntry &e = entryFor(*this, *impl, p, n, store);
  int32_t a = algoFor(*this, *impl, e, Fwd, algo, wsBytes);
  void *ws = workspace(*this, wsOff, wsBytes);
  const float one = 1, zero = 0;
  if (auto *g = engineFor(e, Fwd, algo, wsBytes))
    cuda::runConvGraph(*this, *impl, *g->first, g->second, x, w, y, ws);
  else
    MEMFIT_CHECK(cudnnConvolutionForward(
        impl->cudnn, &one, e.x, x, e.w, w, e.conv,
        static_cast<cudnnConvolutionFwdAlgo_t>(a), ws,
        static_cast<size_t>(std::max<int64_t>(wsBytes, 0)), &zero, e.y, y));
  if (b && store == cuda::Store::F32)
    MEMFIT_CHECK(cudnnAddTensor(impl->cudnn, &one, e.bias, b, &one, e.y, y));
  else if (b)
    cuda::channelBiasAdd(*impl, n, p.cout, p.hout * p.wout, impl->view(b), vy);
  impl->done(*this, "convForward");
}

void Exec::convTransposeBackwardData(const ConvParams &p, const float *dy,
                                     const float *w, float *dx, bool acc) {
  if (!dx)
    return;
  const cuda::Store store =
      sharedStore(*this, {impl->view(dy), impl->view(w), impl->view(dx)});
  ConvEntry &e = entryFor(*this, *impl, p, n, store);
  int32_t a = algoFor(*this, *impl, e, Fwd, 0, 0);
  const float one = 1, zero = 0;
  MEMFIT_CHECK(
      cudnnConvolutionForward(impl->cudnn, &one, e.x, dy, e.w, w, e.conv,
                              static_cast<cudnnConvolutionFwdAlgo_t>(a),
                              nullptr, 0, acc ? &one : &zero, e.y, dx));
  impl->done(*this, "convTransposeBackwardData");
}

void Exec::convBackwardData(const ConvParams &p, int32_t algo, const float *w,
                            const float *dy, float *dx, bool acc, int64_t wsOff,
                            int64_t wsBytes) {
  if (!dx)
    return;
  const cuda::Store store =
      sharedStore(*this, {impl->view(w), impl->view(dy), impl->view(dx)});
  ConvEntry &e = entryFor(*this, *impl, p, n, store);
  int32_t a = algoFor(*this, *impl, e, BwdData, algo, wsBytes);
  void *ws = workspace(*this, wsOff, wsBytes);
  const float one = 1, zero = 0;
  if (!acc)
    if (auto *g = engineFor(e, BwdData, algo, wsBytes)) {
      cuda::runConvGraph(*this, *impl, *g->first, g->second, dy, w, dx, ws);
      impl->done(*this, "convBackwardData");
      return;
    }
  MEMFIT_CHECK(cudnnConvolutionBackwardData(
      impl->cudnn, &one, e.w, w, e.y, dy, e.conv,
      static_cast<cudnnConvolutionBwdDataAlgo_t>(a), ws,
      static_cast<size_t>(std::max<int64_t>(wsBytes, 0)), acc ? &one : &zero,
      e.x, dx));
  impl->done(*this, "convBackwardData");
}

void Exec::convBackwardFilter(const ConvParams &p, int32_t algo, const float *x,
                              const float *dy, float *dw, float *db, bool acc,
                              int64_t wsOff, int64_t wsBytes) {
  const cuda::View vx = impl->view(x), vdy = impl->view(dy);
  const cuda::Store store = sharedStore(*this, {vx, vdy});
  ConvEntry &e = entryFor(*this, *impl, p, n, store);
  const float one = 1, zero = 0;
  const bool narrow = store != cuda::Store::F32;
  if (dw) {
    // 16-bit data: the gradient goes to the staging room first.
    const int64_t count = p.cout * (p.cin / p.group) * p.kh * p.kw;
    const int64_t staging = narrow ? convGradStagingBytes(count) : 0;
    if (wsBytes < staging)
      fatal("the plan left no workspace to stage the 16-bit weight gradient");
    const int64_t algoBytes = wsBytes - staging;
    int32_t a = algoFor(*this, *impl, e, BwdFilter, algo, algoBytes);
    void *ws = workspace(*this, wsOff + staging, algoBytes);
    void *out = narrow ? workspace(*this, wsOff, staging) : dw;
    const auto *g =
        narrow || !acc ? engineFor(e, BwdFilter, algo, algoBytes) : nullptr;
    if (g)
      cuda::runConvGraph(*this, *impl, *g->first, g->second, x, dy, out, ws);
    else
      MEMFIT_CHECK(cudnnConvolutionBackwardFilter(
          impl->cudnn, &one, e.x, x, e.y, dy, e.conv,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), ws,
          static_cast<size_t>(std::max<int64_t>(algoBytes, 0)),
          narrow || !acc ? &zero : &one, e.w, out));
    if (narrow)
      cuda::putInto(*impl, count, {static_cast<char *>(out), store},
                    impl->view(dw), acc);
  }
  if (db && !narrow)
    MEMFIT_CHECK(cudnnConvolutionBackwardBias(impl->cudnn, &one, e.y, dy,
                                              acc ? &one : &zero, e.bias, db));
  else if (db)
    cuda::channelSum(*impl, n, p.cout, p.hout * p.wout, vdy, impl->view(db),
                     acc);
  impl->done(*this, "convBackwardFilter");
}

} // namespace memfit::rt
