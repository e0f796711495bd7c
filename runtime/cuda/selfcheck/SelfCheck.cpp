//===- SelfCheck.cpp - The CUDA backend against the reference kernels -----===//
//
// memfit_cuda_selfcheck runs every operation of the CUDA Exec on random data
// and compares it with the CPU reference kernel of runtime/cpu on the same
// data: every convolution algorithm id of every direction, pooling with
// ceil-mode windows and ties (integer inputs, so max pooling's first-maximum
// rule is checked exactly), BatchNorm with its running statistics, LRN of
// odd and even size, gemm both ways, broadcast binary gradients along both
// reduction paths, concat, pad with crops, softmax, both losses, SGD, and
// dropout, whose masks must match bit for bit, and fused attention across
// tiles; and 16-bit programs (SelfCheckNarrow.cpp). Backward operations run
// once overwriting and once accumulating into random contents. Copies go
// out to host slots and back through events.
//
// Exit status: 0 when everything agrees, 1 when something does not (each
// mismatch is printed), 77 when there is no CUDA device (ctest: skipped).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/selfcheck/SelfCheck.h"
#include "runtime/ConvCheck.h"
#include "runtime/Exec.h"
#include "runtime/kernels/Softmax.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace memfit::rt;

namespace memfit::rt::selfcheck {

int failures = 0, checks = 0;
std::mt19937 rng(12345);

Vec random(int64_t count, bool integers) {
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  std::uniform_int_distribution<int> id(-3, 3);
  Vec v(count);
  for (float &f : v)
    f = integers ? float(id(rng)) : ud(rng);
  return v;
}

void upload(void *dst, const void *src, int64_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "selfcheck: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

void expect(const std::string &what, const Vec &got, const Vec &want,
            double tol) {
  ++checks;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok = std::memcmp(&got[i], &want[i], 4) == 0 ||
              (std::isnan(g) && std::isnan(w)) ||
              (tol > 0 && std::isfinite(w) &&
               std::fabs(g - w) <= tol * (1 + std::fabs(w)));
    if (!ok) {
      std::printf("MISMATCH %s at %zu: cuda %.9g, reference %.9g\n",
                  what.c_str(), i, got[i], want[i]);
      ++failures;
      return;
    }
  }
}

std::array<bool, 3> settleOnGraph(Exec &x, const ConvParams &p,
                                  int64_t workspaceBytes) {
  const ConvTask tasks[] = {
      {p, ConvFwd, 1, workspaceBytes, "graph forward", "selfcheck"},
      {p, ConvBwdData, 1, workspaceBytes, "graph backward-data", "selfcheck"},
      {p, ConvBwdFilter, 1, workspaceBytes, "graph backward-filter",
       "selfcheck"}};
  ConvCheckResult r = x.checkConvolutions(tasks, 3, true, ConvGraphUse::Always);
  std::array<bool, 3> on{};
  for (const ConvEngineUse &u : r.engines)
    on[u.direction] = true;
  return on;
}

} // namespace memfit::rt::selfcheck

namespace {

using namespace memfit::rt::selfcheck;

constexpr int64_t kArena = 256 << 20;

/// Device buffers carved out of the arena, one test case at a time; the
/// arena's top kWorkspace bytes are the convolutions' workspace.
constexpr int64_t kWorkspace = 64 << 20;

/// Batch 8 in one sub-batch of 8: cross-entropy over `width` classes at
/// `inner` positions per sample ([classes, inner] per sample), or mse over
/// `width` features.
ProgramInfo programInfo(bool mse, int64_t width, int64_t inner = 1) {
  ProgramInfo i{"selfcheck", 8, 8, 1, kArena, 4, 4, 1, mse, 0, true, 2, 1};
  i.labelPerSample = mse ? width : inner;
  i.classes = mse ? 0 : width;
  i.lossInner = mse ? 1 : inner;
  return i;
}

struct Bench {
  ProgramInfo info;
  WeightInfo weights[2] = {
      {"w0", nullptr, nullptr, 1000, 10, 10, Init::Zeros, true},
      {"w1", nullptr, nullptr, 37, 1, 1, Init::Zeros, true}};
  HostSlot slots[1] = {{4096, 64}};
  Exec x;
  int64_t top = 0;

  explicit Bench(ProgramInfo i = programInfo(false, 5))
      : info(i), x(info, weights, slots) {}

  float *put(const Vec &v) {
    float *p = x.arena(top);
    top += (static_cast<int64_t>(v.size()) * 4 + 255) / 256 * 256;
    if (top > kArena - kWorkspace) {
      std::fprintf(stderr, "selfcheck: arena too small\n");
      std::exit(2);
    }
    upload(p, v.data(), static_cast<int64_t>(v.size()) * 4);
    return p;
  }
  float *zeros(int64_t count) { return put(Vec(count, 0.0f)); }
  Vec get(const float *p, int64_t count) {
    x.synchronize();
    Vec v(count);
    cudaError_t e = cudaMemcpy(v.data(), p, count * 4, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "selfcheck: %s\n", cudaGetErrorString(e));
      std::exit(1);
    }
    return v;
  }
  void reset(int64_t n) {
    top = 0;
    x.n = n;
    x.firstSample = 0;
    x.subBatchIndex = 0;
  }
};

constexpr double kTol = 2e-4;
// FFT and Winograd algorithms round differently from a direct sum.
constexpr double kConvTol = 1e-3;

/// Compute capability of the device the Bench runs on, major * 10 + minor.
int computeCapability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) !=
          cudaSuccess)
    return 0;
  return major * 10 + minor;
}

/// After a convolution call asked for `algo`: a call that ran another one
/// is an algorithm the self-check could not run. On every architecture
/// cuDNN 9 runs the implicit-GEMM family and forward GEMM for every shape,
/// so not running one of those is a failure; the transform algorithms
/// offered below sm_80 apply to some shapes only, and their refusal is a
/// note.
void expectRan(Bench &b, int64_t &changes, ConvDir dir, int32_t algo,
               const std::string &what) {
  int64_t now = b.x.convAlgoChanges();
  if (now == changes)
    return;
  changes = now;
  if (cudnnRunsConvAlgo(80, dir, algo)) {
    std::printf("NOT RUN %s: cuDNN ran another algorithm\n", what.c_str());
    ++failures;
  } else {
    std::printf("note: %s: cuDNN does not run it for this shape\n",
                what.c_str());
  }
}

/// Grouped and strided with a padded ceil; "same" 3x3; dilated; depthwise
/// 1x1: on every legacy algorithm and on cuDNN's graph API.
const ConvParams kConvShapes[] = {
    {6, 9, 11, 8, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},
    {4, 8, 8, 6, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {3, 10, 9, 4, 6, 5, 3, 3, 1, 1, 0, 0, 2, 2, 1},
    {8, 7, 7, 8, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, 8},
};

void checkConv(Bench &b) {
  const auto &params = kConvShapes;
  // Only the algorithms the device model offers on this architecture
  // (compiler/cost/ConvAlgo.h, twinned in runtime/ConvCheck.h).
  const int cc = computeCapability();
  int64_t changes = b.x.convAlgoChanges();
  const int64_t n = 3, wsBytes = kWorkspace, wsOff = kArena - kWorkspace;
  for (const ConvParams &p : params) {
    int64_t xs = n * p.cin * p.hin * p.win, ys = n * p.cout * p.hout * p.wout;
    int64_t ws = p.cout * p.cin / p.group * p.kh * p.kw;
    Vec x = random(xs), w = random(ws), bias = random(p.cout), dy = random(ys);
    Vec y0(ys), dx0 = random(xs), dw0 = random(ws), db0 = random(p.cout);
    convForward(p, n, x.data(), w.data(), bias.data(), y0.data());
    std::string tag = "conv " + std::to_string(&p - &params[0]);
    for (int algo = 0; algo < 8; ++algo) {
      if (cudnnRunsConvAlgo(cc, ConvFwd, algo)) {
        b.reset(n);
        float *gx = b.put(x), *gw = b.put(w), *gb = b.put(bias),
              *gy = b.zeros(ys);
        b.x.setTask("conv forward");
        b.x.convForward(p, algo, gx, gw, gb, gy, wsOff, wsBytes);
        std::string t = tag + " forward algo " + std::to_string(algo);
        expectRan(b, changes, ConvFwd, algo, t);
        expect(t, b.get(gy, ys), y0, kConvTol);
      }
      if (cudnnRunsConvAlgo(cc, ConvBwdData, algo)) {
        for (bool acc : {false, true}) {
          b.reset(n);
          float *gw = b.put(w);
          Vec want = dx0;
          convBackwardData(p, n, w.data(), dy.data(), want.data(), acc);
          float *g = b.put(dx0);
          b.x.setTask("conv backward data");
          b.x.convBackwardData(p, algo, gw, b.put(dy), g, acc, wsOff, wsBytes);
          std::string t = tag + " backward-data algo " + std::to_string(algo) +
                          (acc ? " acc" : "");
          expectRan(b, changes, ConvBwdData, algo, t);
          expect(t, b.get(g, xs), want, kConvTol);
        }
      }
      if (!cudnnRunsConvAlgo(cc, ConvBwdFilter, algo))
        continue; // cuDNN defines no backward-filter 4 or 7
      for (bool acc : {false, true}) {
        b.reset(n);
        float *gx = b.put(x);
        Vec wantW = dw0, wantB = db0;
        convBackwardFilter(p, n, x.data(), dy.data(), wantW.data(),
                           wantB.data(), acc);
        float *gdw = b.put(dw0), *gdb = b.put(db0);
        b.x.setTask("conv backward filter");
        b.x.convBackwardFilter(p, algo, gx, b.put(dy), gdw, gdb, acc, wsOff,
                               wsBytes);
        std::string t = tag + " backward-filter algo " + std::to_string(algo) +
                        (acc ? " acc" : "");
        expectRan(b, changes, ConvBwdFilter, algo, t);
        expect(t, b.get(gdw, ws), wantW, kConvTol);
        expect(t + " bias", b.get(gdb, p.cout), wantB, kConvTol);
      }
    }
  }
}

/// Every shape above on cuDNN's graph API, fp32 (FMA engines only, as the
/// legacy calls): the start-up check told to run the fastest graph-API plan
/// of each call that has one (trainers run one only where it beats the
/// legacy API). Not accumulating: an accumulating call stays on the legacy
/// API.
void checkConvGraph() {
  const auto &params = kConvShapes;
  const int64_t n = 3, wsBytes = kWorkspace, wsOff = kArena - kWorkspace;
  ProgramInfo info = programInfo(false, 5);
  info.batch = info.subBatch = n;
  Bench b(info);
  int ran = 0;
  for (const ConvParams &p : params) {
    const std::string tag = "graph-API conv " + std::to_string(&p - &params[0]);
    b.reset(n);
    const std::array<bool, 3> on = settleOnGraph(b.x, p, wsBytes);
    int64_t xs = n * p.cin * p.hin * p.win, ys = n * p.cout * p.hout * p.wout;
    int64_t ws = p.cout * p.cin / p.group * p.kh * p.kw;
    Vec x = random(xs), w = random(ws), dy = random(ys);
    b.reset(n);
    float *gx = b.put(x), *gw = b.put(w), *gdy = b.put(dy);
    if (on[ConvFwd]) {
      Vec y(ys);
      convForward(p, n, x.data(), w.data(), nullptr, y.data());
      float *gy = b.put(random(ys));
      b.x.setTask("graph forward");
      b.x.convForward(p, 1, gx, gw, nullptr, gy, wsOff, wsBytes);
      expect(tag + " forward", b.get(gy, ys), y, kConvTol);
      ++ran;
    }
    if (on[ConvBwdData]) {
      Vec dx(xs, 0.0f);
      convBackwardData(p, n, w.data(), dy.data(), dx.data(), false);
      float *g = b.put(random(xs));
      b.x.setTask("graph backward-data");
      b.x.convBackwardData(p, 1, gw, gdy, g, false, wsOff, wsBytes);
      expect(tag + " backward-data", b.get(g, xs), dx, kConvTol);
      ++ran;
    }
    if (on[ConvBwdFilter]) {
      Vec dw(ws, 0.0f);
      convBackwardFilter(p, n, x.data(), dy.data(), dw.data(), nullptr, false);
      float *g = b.put(random(ws));
      b.x.setTask("graph backward-filter");
      b.x.convBackwardFilter(p, 1, gx, gdy, g, nullptr, false, wsOff, wsBytes);
      expect(tag + " backward-filter", b.get(g, ws), dw, kConvTol);
      ++ran;
    }
  }
  std::printf("graph-API convolutions: %d of %d calls had a plan and were "
              "checked\n",
              ran, static_cast<int>(3 * std::size(params)));
}

void checkPool(Bench &b) {
  // Ceil-mode 3x3/2 max with an end pad; 2x2/2 average with and without
  // counting the pad; integer inputs make ties. The 70 x 45 max pool spans
  // six of the tiled backward's 32 x 32 tiles, ragged at two edges; the
  // 18-wide stride-1 one is past what a tile's scratch holds (per position).
  // The 2x2/2, 2x2/3 and ceil-mode 3x3/3 ones have disjoint windows (the
  // per-window backward), with rows and columns in no window.
  static const PoolParams pools[] = {
      {PoolKind::Max, 3, 9, 7, 4, 3, 2, 2, 2, 2, 0, 0, 0, 0, false},
      {PoolKind::Max, 2, 10, 11, 3, 4, 2, 2, 3, 3, 0, 0, 0, 0, false},
      {PoolKind::Max, 2, 9, 10, 4, 4, 3, 3, 3, 3, 1, 1, 1, 1, false},
      {PoolKind::Max, 3, 9, 8, 5, 4, 3, 3, 2, 2, 1, 0, 1, 1, false},
      {PoolKind::Max, 2, 7, 7, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, false},
      {PoolKind::Max, 2, 70, 45, 35, 23, 3, 3, 2, 2, 1, 1, 1, 1, false},
      {PoolKind::Max, 1, 40, 36, 39, 35, 18, 18, 1, 1, 8, 8, 8, 8, false},
      {PoolKind::Average, 3, 7, 7, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, true},
      {PoolKind::Average, 3, 7, 7, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, false},
  };
  const int64_t n = 2;
  for (const PoolParams &p : pools) {
    int64_t xs = n * p.c * p.hin * p.win, ys = n * p.c * p.hout * p.wout;
    bool isMax = p.kind == PoolKind::Max;
    Vec x = random(xs, true), dy = random(ys, true);
    Vec y(ys);
    poolForward(p, n, x.data(), y.data());
    std::string tag = std::string("pool ") + (isMax ? "max" : "avg") +
                      (p.countIncludePad ? " incl-pad" : "");
    b.reset(n);
    float *dx = b.put(x), *dy_ = b.zeros(ys);
    b.x.poolForward(p, dx, dy_);
    expect(tag + " forward", b.get(dy_, ys), y, isMax ? 0 : 1e-6);
    for (bool acc : {false, true}) {
      Vec start = random(xs, true), want = start;
      poolBackward(p, n, x.data(), y.data(), dy.data(), want.data(), acc);
      float *g = b.put(start);
      b.x.poolBackward(p, dx, dy_, b.put(dy), g, acc);
      expect(tag + " backward" + (acc ? " acc" : ""), b.get(g, xs), want, 0);
    }
  }
  const int64_t c = 5, spatial = 49;
  Vec x = random(n * c * spatial), y(n * c), dy = random(n * c);
  globalAvgPoolForward(n, c, spatial, x.data(), y.data());
  b.reset(n);
  float *gy = b.zeros(n * c);
  b.x.gapForward(c, spatial, b.put(x), gy);
  expect("global average pool forward", b.get(gy, n * c), y, 1e-6);
  Vec start = random(n * c * spatial), want = start;
  globalAvgPoolBackward(n, c, spatial, dy.data(), want.data(), true);
  float *g = b.put(start);
  b.x.gapBackward(c, spatial, b.put(dy), g, true);
  expect("global average pool backward", b.get(g, n * c * spatial), want, 0);
}

void checkActivation(Bench &b, const ActParams &p, int64_t n, int64_t per,
                     int64_t offset) {
  std::string tag = "activation " + std::to_string(int(p.kind)) + " (" +
                    std::to_string(n) + " x " + std::to_string(per) +
                    (offset ? ", unaligned)" : ")");
  Vec x = random(n * per), y(n * per), dy = random(n * per);
  // Log takes positive inputs (its gradient at 0 is an infinity whose sign
  // fast division need not keep); the others their whole range and 0.
  const bool positive = p.kind == ActKind::Log || p.kind == ActKind::Sqrt;
  if (positive)
    for (float &v : x)
      v = std::fabs(v) + 0.05f;
  x[0] = NAN;
  x[1] = positive ? 1.0f : 0.0f;
  x[2] = positive ? 2.0f : p.lo;
  activationForward(p, n * per, x.data(), y.data());
  // The derivative reads x or y, as the kind says (Activations.def).
  const Vec &src = activationGradReads(p.kind) == GradReads::Input ? x : y;
  // The library's transcendental functions are within 2 ulp of the CPU's.
  const double tol = p.kind == ActKind::Relu || p.kind == ActKind::LeakyRelu ||
                             p.kind == ActKind::Clip || p.kind == ActKind::Abs
                         ? 1e-6
                         : 4e-6;
  b.reset(n);
  float *gy = b.zeros(n * per + offset) + offset;
  b.x.actForward(p, per, b.put(x), gy);
  expect(tag + " forward", b.get(gy, n * per), y, tol);
  for (bool acc : {false, true}) {
    Vec start = random(n * per), want = start;
    activationBackward(p, n * per, src.data(), dy.data(), want.data(), acc);
    float *g = b.put(start);
    b.x.actBackward(p, per, b.put(src), b.put(dy), g, acc);
    expect(tag + " backward" + (acc ? " acc" : ""), b.get(g, n * per), want,
           tol);
  }
}

void checkActivations(Bench &b) {
  const ActParams acts[] = {{ActKind::Relu},
                            {ActKind::LeakyRelu, 0.1f},
                            {ActKind::Sigmoid},
                            {ActKind::Tanh},
                            {ActKind::Clip, 0, -0.5f, 0.25f},
                            {ActKind::Exp},
                            {ActKind::Abs},
                            {ActKind::Log},
                            {ActKind::Sqrt},
                            {ActKind::Gelu},
                            {ActKind::GeluTanh},
                            {ActKind::Erf},
                            {ActKind::Softplus},
                            {ActKind::LogSigmoid},
                            {ActKind::Mish},
                            {ActKind::HardSwish},
                            {ActKind::Neg}};
  // 4 x 1000 elements are whole float4 packs; 3 x 333 leave a tail of 3;
  // an operand one element off its 16-byte alignment takes no packs.
  struct Shape {
    int64_t n, per, offset;
  };
  for (const Shape sh : {Shape{4, 1000, 0}, Shape{3, 333, 0}, Shape{4, 250, 1}})
    for (const ActParams &p : acts)
      checkActivation(b, p, sh.n, sh.per, sh.offset);
}

/// The program's batch of 8 as two chunks of 4 (passes/search/Chunk.h): the
/// statistics combined over the chunks, finalized once, normalization and
/// BP-data per chunk, against the CPU's whole-batch kernels. With `rows` > 1
/// each sample is that many rows ([N * T, C], BatchNorm1d over tokens),
/// which the CPU's kernels see as n * rows samples.
void checkChunkedNorm(Bench &b, int64_t rows) {
  const BatchNormParams p{6, rows > 1 ? 5 : 37, 1e-5f, 0.9f, rows};
  const int64_t n = 8 * rows, half = 4, count = n * p.c * p.spatial,
                per = half * rows * p.c * p.spatial;
  Vec x = random(count), scale = random(p.c), bias = random(p.c),
      dy = random(count);
  for (int64_t i = 0; i < per; ++i)
    x[per + i] += 3.0f; // chunks with different means
  Vec rm = random(p.c), rv = random(p.c), y(count), saved(2 * p.c);
  Vec rm0 = rm, rv0 = rv;
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm.data(),
                   rv.data(), y.data(), saved.data(), saved.data() + p.c, true);
  Vec ws(p.c), wb(p.c), dx(count);
  batchNormBackwardWeight(p, n, x.data(), saved.data(), saved.data() + p.c,
                          dy.data(), ws.data(), wb.data(), false);
  batchNormBackwardData(p, n, x.data(), scale.data(), saved.data(),
                        saved.data() + p.c, dy.data(), dx.data(), false);
  b.reset(half);
  float *gx = b.put(x), *gscale = b.put(scale), *gbias = b.put(bias),
        *grm = b.put(rm0), *grv = b.put(rv0), *gy = b.zeros(count),
        *gdy = b.put(dy), *gdx = b.zeros(count), *gs = b.zeros(p.c),
        *gb = b.zeros(p.c), *gst = b.zeros(2 * p.c + 4 * p.c + 2);
  for (int64_t c = 0; c < 2; ++c)
    b.x.bnStatistics(p, gx + c * per, gst, c > 0);
  b.x.bnFinalize(p, gst, grm, grv);
  for (int64_t c = 0; c < 2; ++c)
    b.x.bnApply(p, gx + c * per, gscale, gbias, gst, gy + c * per);
  for (int64_t c = 0; c < 2; ++c)
    b.x.bnBackwardWeight(p, gx + c * per, gst, gdy + c * per, gs, gb, c > 0);
  for (int64_t c = 0; c < 2; ++c)
    b.x.bnBackwardDataBatch(p, gx + c * per, gscale, gst, gs, gb, gdy + c * per,
                            gdx + c * per, false);
  const std::string tag =
      "batchnorm chunks" +
      (rows > 1 ? " of " + std::to_string(rows) + " rows a sample" : "");
  expect(tag + " forward", b.get(gy, count), y, 1e-5);
  expect(tag + " saved", b.get(gst, 2 * p.c), saved, 1e-5);
  expect(tag + " running mean", b.get(grm, p.c), rm, 1e-6);
  expect(tag + " running var", b.get(grv, p.c), rv, 1e-6);
  expect(tag + " backward-weight scale", b.get(gs, p.c), ws, 1e-4);
  expect(tag + " backward-weight bias", b.get(gb, p.c), wb, 1e-4);
  expect(tag + " backward-data", b.get(gdx, count), dx, 1e-4);
}

void checkNorm(Bench &b) {
  for (int64_t spatial : {int64_t(1), int64_t(37)}) {
    const BatchNormParams p{6, spatial, 1e-6f, 0.9f};
    const int64_t n = 5, count = n * p.c * spatial;
    Vec x = random(count), scale = random(p.c), bias = random(p.c),
        dy = random(count);
    Vec rm = random(p.c), rv = random(p.c), y(count), saved(2 * p.c);
    Vec rm0 = rm, rv0 = rv;
    batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm.data(),
                     rv.data(), y.data(), saved.data(), saved.data() + p.c,
                     true);
    std::string tag = "batchnorm spatial " + std::to_string(spatial);
    b.reset(n);
    float *gx = b.put(x), *gscale = b.put(scale), *grm = b.put(rm0),
          *grv = b.put(rv0), *gy = b.zeros(count), *gsaved = b.zeros(2 * p.c);
    b.x.bnForward(p, gx, gscale, b.put(bias), grm, grv, gy, gsaved, true);
    expect(tag + " forward", b.get(gy, count), y, 1e-5);
    expect(tag + " saved", b.get(gsaved, 2 * p.c), saved, 1e-5);
    expect(tag + " running mean", b.get(grm, p.c), rm, 1e-6);
    expect(tag + " running var", b.get(grv, p.c), rv, 1e-6);
    for (bool acc : {false, true}) {
      Vec start = random(count), want = start;
      batchNormBackwardData(p, n, x.data(), scale.data(), saved.data(),
                            saved.data() + p.c, dy.data(), want.data(), acc);
      float *g = b.put(start);
      b.x.bnBackwardData(p, gx, gscale, gsaved, b.put(dy), g, acc);
      expect(tag + " backward-data" + (acc ? " acc" : ""), b.get(g, count),
             want, 1e-4);
      Vec s0 = random(p.c), b0 = random(p.c), ws = s0, wb = b0;
      batchNormBackwardWeight(p, n, x.data(), saved.data(), saved.data() + p.c,
                              dy.data(), ws.data(), wb.data(), acc);
      float *gs = b.put(s0), *gb = b.put(b0);
      b.x.bnBackwardWeight(p, gx, gsaved, b.put(dy), gs, gb, acc);
      expect(tag + " backward-weight scale", b.get(gs, p.c), ws, 1e-4);
      expect(tag + " backward-weight bias", b.get(gb, p.c), wb, 1e-4);
    }
  }
  checkChunkedNorm(b, 1);
  checkChunkedNorm(b, 3);
  for (int64_t size : {int64_t(5), int64_t(4)}) {
    const LRNParams p{7, 13, size, 1e-2f, 0.75f, 2.0f};
    const int64_t n = 3, count = n * p.c * p.spatial;
    Vec x = random(count), y(count), dy = random(count);
    lrnForward(p, n, x.data(), y.data());
    std::string tag = "lrn size " + std::to_string(size);
    b.reset(n);
    float *gx = b.put(x), *gy = b.zeros(count);
    b.x.lrnForward(p, gx, gy);
    expect(tag + " forward", b.get(gy, count), y, 1e-5);
    Vec start = random(count), want = start;
    lrnBackward(p, n, x.data(), y.data(), dy.data(), want.data(), true);
    float *g = b.put(start);
    b.x.lrnBackward(p, gx, b.put(y), b.put(dy), g, true);
    expect(tag + " backward", b.get(g, count), want, 1e-5);
  }
}

void checkDense(Bench &b) {
  const int64_t n = 6;
  for (bool transB : {true, false}) {
    const GemmParams p{17, 9, transB, 0.5f, 2.0f};
    Vec x = random(n * p.k), w = random(p.k * p.m), bias = random(p.m),
        dy = random(n * p.m), y(n * p.m);
    gemmForward(p, n, x.data(), w.data(), bias.data(), y.data());
    std::string tag = std::string("gemm transB ") + (transB ? "1" : "0");
    b.reset(n);
    float *gx = b.put(x), *gw = b.put(w), *gy = b.zeros(n * p.m);
    b.x.gemmForward(p, gx, gw, b.put(bias), gy);
    expect(tag + " forward", b.get(gy, n * p.m), y, kTol);
    for (bool acc : {false, true}) {
      Vec dx0 = random(n * p.k), wantX = dx0;
      gemmBackwardData(p, n, w.data(), dy.data(), wantX.data(), acc);
      float *g = b.put(dx0);
      b.x.gemmBackwardData(p, gw, b.put(dy), g, acc);
      expect(tag + " backward-data", b.get(g, n * p.k), wantX, kTol);
      Vec dw0 = random(p.k * p.m), db0 = random(p.m), wantW = dw0, wantB = db0;
      gemmBackwardWeight(p, n, x.data(), dy.data(), wantW.data(), wantB.data(),
                         acc);
      float *g1 = b.put(dw0), *g2 = b.put(db0);
      b.x.gemmBackwardWeight(p, gx, b.put(dy), g1, g2, acc);
      expect(tag + " backward-weight", b.get(g1, p.k * p.m), wantW, kTol);
      expect(tag + " backward-bias", b.get(g2, p.m), wantB, kTol);
    }
  }
  for (bool log : {false, true}) {
    const int64_t f = 300;
    Vec x = random(n * f), y(n * f), dy = random(n * f);
    softmaxForward(n, f, log, x.data(), y.data());
    std::string tag = log ? "log-softmax" : "softmax";
    b.reset(n);
    float *gy = b.zeros(n * f);
    b.x.softmaxForward(f, log, b.put(x), gy);
    expect(tag + " forward", b.get(gy, n * f), y, 1e-5);
    Vec start = random(n * f), want = start;
    softmaxBackward(n, f, log, y.data(), dy.data(), want.data(), true);
    float *g = b.put(start);
    b.x.softmaxBackward(f, log, b.put(y), b.put(dy), g, true);
    expect(tag + " backward", b.get(g, n * f), want, 1e-5);
  }
}

/// Fused attention across tiles (query and key rows past one 64-row tile),
/// with a causal fill and dropout at a sub-batch offset, at head widths
/// that take each of the kernels' widths (64, 128, 256): shared key/value
/// heads and K read transposed at 128, one K/V head per head at 64 and 256.
void checkAttention(Bench &b, int64_t d, int64_t dv, bool shared,
                    bool band = false) {
  const int64_t n = 2;
  AttentionParams p{.heads = 2,
                    .kvHeads = shared ? 1 : 2,
                    .t = 150,
                    .s = 133,
                    .d = d,
                    .dv = dv,
                    .kTransposed = shared,
                    .scale = 0.125f,
                    .maskMode = 2,
                    .maskSize = 150 * 133,
                    .fill = -INFINITY,
                    .fillWhere = false,
                    .dropout = 0.2f,
                    .nanToZero = false};
  Vec mask(p.t * p.s);
  for (int64_t t = 0; t < p.t; ++t)
    for (int64_t s = 0; s < p.s; ++s)
      mask[t * p.s + s] = s <= t;
  if (band) { // the causal mask as a rule: tiles past the diagonal skipped
    p.band = true;
    p.bandLo = -p.t;
    p.bandHi = 0;
    p.maskSize = 1;
  }
  b.reset(n);
  b.x.seed = 7;
  b.x.iteration = 3;
  b.x.firstSample = 4;
  uint64_t key = dropoutKey(7, 3, 21);
  Vec q = random(n * p.heads * p.t * p.d),
      k = random(n * p.kvHeads * p.s * p.d),
      v = random(n * p.kvHeads * p.s * p.dv),
      dO = random(n * p.heads * p.t * p.dv);
  Vec o(n * p.heads * p.t * p.dv), lse(n * p.heads * p.t);
  attentionForward(p, n, key, 4, q.data(), k.data(), v.data(), mask.data(),
                   o.data(), lse.data());
  float *gq = b.put(q), *gk = b.put(k), *gv = b.put(v), *gm = b.put(mask);
  float *go = b.zeros(o.size()), *gl = b.zeros(lse.size());
  b.x.attentionForward(p, 21, gq, gk, gv, gm, go, gl);
  const std::string w = " d=" + std::to_string(d) +
                        " dv=" + std::to_string(dv) + (band ? " band" : "");
  expect("attention forward" + w, b.get(go, o.size()), o, kTol);
  expect("attention log-sum-exp" + w, b.get(gl, lse.size()), lse, kTol);
  for (bool acc : {false, true}) {
    Vec dq = random(q.size()), dk = random(k.size()), dv = random(v.size());
    Vec wq = dq, wk = dk, wv = dv;
    attentionBackward(p, n, key, 4, q.data(), k.data(), v.data(), mask.data(),
                      o.data(), lse.data(), dO.data(), wq.data(), wk.data(),
                      wv.data(), acc, acc, acc);
    float *g1 = b.put(dq), *g2 = b.put(dk), *g3 = b.put(dv);
    b.x.attentionBackward(p, 21, gq, gk, gv, gm, b.put(o), b.put(lse),
                          b.put(dO), g1, g2, g3, acc, acc, acc);
    std::string tag = w + (acc ? " (accumulating)" : "");
    expect("attention dQ" + tag, b.get(g1, dq.size()), wq, kTol);
    expect("attention dK" + tag, b.get(g2, dk.size()), wk, kTol);
    expect("attention dV" + tag, b.get(g3, dv.size()), wv, kTol);
  }
}

// The losses over two sub-batches of 5 and 3 of a batch of 8
// (info.batch), with firstSample and subBatchIndex as the trainer sets
// them: the first resets the loss scalar, the second adds to it.

void checkCrossEntropy(Bench &b, const std::string &tag) {
  const int64_t classes = b.info.classes, inner = b.info.lossInner;
  const int64_t batch = b.info.batch, per = classes * inner;
  Vec logits = random(batch * per);
  std::vector<int32_t> labels(batch * inner);
  // Every fourth position ignored (torch's ignore_index, -100): the mean
  // runs over the others.
  for (size_t q = 0; q < labels.size(); ++q)
    labels[q] = q % 4 == 3 ? -100 : int32_t((q * 3) % classes);
  const double counted = double(
      kernels::countedLabels(int64_t(labels.size()), labels.data(), -100));
  float want = 0;
  Vec dWant(batch * per);
  b.reset(5);
  float *gl = b.put(logits), *gd = b.zeros(batch * per);
  int32_t *glab = reinterpret_cast<int32_t *>(b.zeros(batch * inner));
  upload(glab, labels.data(), batch * inner * 4);
  for (int64_t first : {int64_t(0), int64_t(5)}) {
    int64_t n = first == 0 ? 5 : 3;
    softmaxCrossEntropy(
        {1, classes, inner}, n, counted, logits.data() + first * per,
        labels.data() + first * inner, -100, &want, dWant.data() + first * per);
    b.x.n = n;
    b.x.lossCount = counted;
    b.x.firstSample = first;
    b.x.subBatchIndex = first == 0 ? 0 : 1;
    b.x.loss(gl + first * per, glab + first * inner, b.x.lossValue(),
             gd + first * per);
  }
  expect("cross-entropy loss" + tag, {b.x.readLoss()}, {want}, 1e-6);
  expect("cross-entropy gradient" + tag, b.get(gd, batch * per), dWant, 1e-6);
}

/// The fused head (Exec::headLoss) against the reference's product, loss
/// and products of the gradient over the whole batch at once: a batch of
/// 8 in sub-batches of 5 and 3, 4 rows a sample, chunks of 3 rows (the
/// last of each sub-batch shorter), every fourth label ignored.
void checkFusedHead() {
  const int64_t rows = 4, classes = 37;
  Bench b(programInfo(false, classes, 1));
  const int64_t batch = b.info.batch, all = batch * rows;
  GemmParams p{6, classes, true, 1.0f, 0.0f};
  p.rows = rows;
  Vec x = random(all * p.k), w = random(p.m * p.k);
  std::vector<int32_t> labels(all);
  for (size_t q = 0; q < labels.size(); ++q)
    labels[q] = q % 4 == 3 ? -100 : int32_t((q * 5) % classes);
  const double counted =
      double(kernels::countedLabels(all, labels.data(), -100));
  Vec logits(all * p.m), dl(all * p.m), dxWant(all * p.k), dwWant(p.m * p.k);
  float want = 0;
  gemmForward(p, all, x.data(), w.data(), nullptr, logits.data());
  softmaxCrossEntropy({all, p.m, 1}, 1, counted, logits.data(), labels.data(),
                      -100, &want, dl.data());
  gemmBackwardData(p, all, w.data(), dl.data(), dxWant.data(), false);
  gemmBackwardWeight(p, all, x.data(), dl.data(), dwWant.data(), nullptr,
                     false);
  b.reset(5);
  float *gx = b.put(x), *gw = b.put(w), *gdx = b.zeros(all * p.k),
        *gdw = b.zeros(p.m * p.k), *scratch = b.zeros(3 * p.m);
  int32_t *glab = reinterpret_cast<int32_t *>(b.zeros(all));
  upload(glab, labels.data(), all * 4);
  for (int64_t first : {int64_t(0), int64_t(5)}) {
    b.x.n = first == 0 ? 5 : 3;
    b.x.lossCount = counted;
    b.x.firstSample = first;
    b.x.subBatchIndex = first == 0 ? 0 : 1;
    const int64_t at = first * rows;
    b.x.headLoss(p, 3, gx + at * p.k, gw, glab + at, scratch, b.x.lossValue(),
                 gdx + at * p.k, false, gdw, first != 0);
  }
  expect("fused head loss", {b.x.readLoss()}, {want}, 1e-6);
  expect("fused head dx", b.get(gdx, all * p.k), dxWant, 1e-5);
  expect("fused head dW", b.get(gdw, p.m * p.k), dwWant, 1e-5);
}

void checkMse(int64_t features, const std::string &tag) {
  Bench b(programInfo(true, features));
  const int64_t batch = b.info.batch;
  Vec y = random(batch * features), t = random(batch * features);
  float want = 0;
  Vec dWant(batch * features);
  b.reset(5);
  float *gyv = b.put(y), *gt = b.put(t), *gd = b.zeros(batch * features);
  for (int64_t first : {int64_t(0), int64_t(5)}) {
    int64_t n = first == 0 ? 5 : 3, at = first * features;
    meanSquaredError(n, features, batch, y.data() + at, t.data() + at, &want,
                     dWant.data() + at);
    b.x.n = n;
    b.x.firstSample = first;
    b.x.subBatchIndex = first == 0 ? 0 : 1;
    b.x.loss(gyv + at, gt + at, b.x.lossValue(), gd + at);
  }
  expect("mse loss" + tag, {b.x.readLoss()}, {want}, 1e-6);
  expect("mse gradient" + tag, b.get(gd, batch * features), dWant, 1e-6);
}

void checkLosses(Bench &b) {
  // One block of the first pass; then many: 5000 labelled positions over
  // 625 blocks, and 500,000 squared errors over all 1024 blocks (a
  // grid-stride loop), each with a partial sum the second pass adds.
  checkCrossEntropy(b, "");
  Bench wide(programInfo(false, 37, 1000));
  checkCrossEntropy(wide, " (many blocks)");
  checkMse(7, "");
  checkMse(100000, " (many blocks)");
  checkFusedHead();
}

void checkElementwise(Bench &b) {
  const int64_t n = 3;
  struct Case {
    BinaryParams p;
    const char *name;
  };
  const Case cases[] = {
      {{BinaryKind::Mul, 60, true, 60, 1}, "batched mul"},
      {{BinaryKind::Add, 60, false, 4, 15}, "per-channel add"},
      {{BinaryKind::Sub, 60, false, 60, 1}, "full-shape sub"},
      {{BinaryKind::Mul, 6000, false, 4, 1500}, "per-channel mul (long)"},
      // 3 x 61 elements: 45 float4 packs and a tail of 3.
      {{BinaryKind::Div, 61, false, 61, 1}, "full-shape div (tail)"},
  };
  for (const Case &c : cases) {
    const BinaryParams &p = c.p;
    int64_t bCount = p.bBatched ? n * p.perSample : p.bSize;
    Vec a = random(n * p.perSample), bv = random(bCount),
        dy = random(n * p.perSample), y(n * p.perSample);
    binaryForward(p, n, a.data(), bv.data(), y.data());
    b.reset(n);
    float *ga = b.put(a), *gb = b.put(bv), *gy = b.zeros(n * p.perSample);
    b.x.binaryForward(p, ga, gb, gy);
    expect(std::string(c.name) + " forward", b.get(gy, n * p.perSample), y,
           1e-6);
    Vec da0 = random(n * p.perSample), db0 = random(bCount), wa = da0, wb = db0;
    binaryBackward(p, n, a.data(), bv.data(), dy.data(), wa.data(), wb.data(),
                   true, true);
    float *gda = b.put(da0), *gdb = b.put(db0);
    b.x.binaryBackward(p, ga, gb, b.put(dy), gda, gdb, true, true);
    expect(std::string(c.name) + " backward a", b.get(gda, n * p.perSample), wa,
           1e-6);
    expect(std::string(c.name) + " backward b", b.get(gdb, bCount), wb, 1e-5);
  }
  {
    const int64_t parts[] = {12, 30, 7};
    Vec in0 = random(n * 12), in1 = random(n * 30), in2 = random(n * 7);
    const float *ins[] = {in0.data(), in1.data(), in2.data()};
    Vec y(n * 49), dy = random(n * 49);
    concatForward(n, 3, parts, ins, y.data());
    b.reset(n);
    const float *gins[] = {b.put(in0), b.put(in1), b.put(in2)};
    float *gy = b.zeros(n * 49);
    b.x.concatForward(3, parts, gins, gy);
    expect("concat forward", b.get(gy, n * 49), y, 0);
    Vec d0 = random(n * 12), d2 = random(n * 7), w0 = d0, w2 = d2;
    float *outs[] = {w0.data(), nullptr, w2.data()};
    const bool acc[] = {true, false, false};
    concatBackward(n, 3, parts, dy.data(), outs, acc);
    float *gouts[] = {b.put(d0), nullptr, b.put(d2)};
    b.x.concatBackward(3, parts, b.put(dy), gouts, acc);
    expect("concat backward 0", b.get(gouts[0], n * 12), w0, 0);
    expect("concat backward 2", b.get(gouts[2], n * 7), w2, 0);
  }
  {
    const PadParams p{2, 5, 6, 8, 5, 2, -1, 0.5f};
    int64_t xs = n * 2 * 5 * 6, ys = n * 2 * 8 * 5;
    Vec x = random(xs), y(ys), dy = random(ys);
    padForward(p, n, x.data(), y.data());
    b.reset(n);
    float *gy = b.zeros(ys);
    b.x.padForward(p, b.put(x), gy);
    expect("pad forward", b.get(gy, ys), y, 0);
    Vec start = random(xs), want = start;
    padBackward(p, n, dy.data(), want.data(), true);
    float *g = b.put(start);
    b.x.padBackward(p, b.put(dy), g, true);
    expect("pad backward", b.get(g, xs), want, 0);
  }
  {
    // Masks and kept values bit for bit, at a sub-batch offset.
    const DropoutParams p{777, 0.3f};
    b.reset(n);
    b.x.seed = 99;
    b.x.iteration = 5;
    b.x.firstSample = 2;
    uint64_t key = dropoutKey(99, 5, 17);
    Vec x = random(n * p.perSample), y(n * p.perSample),
        dy = random(n * p.perSample);
    dropoutForward(p, n, key, 2, x.data(), y.data());
    float *gy = b.zeros(n * p.perSample);
    b.x.dropoutForward(p, 17, b.put(x), gy);
    expect("dropout forward", b.get(gy, n * p.perSample), y, 0);
    Vec start = random(n * p.perSample), want = start;
    dropoutBackward(p, n, key, 2, dy.data(), want.data(), true);
    float *g = b.put(start);
    b.x.dropoutBackward(p, 17, b.put(dy), g, true);
    expect("dropout backward", b.get(g, n * p.perSample), want, 0);
  }
  for (int64_t per : {100, 101}) { // whole float4 packs, a tail of 3
    Vec x = random(n * per), y = random(n * per), want = y;
    accumulate(n * per, x.data(), want.data());
    b.reset(n);
    float *gy = b.put(y);
    b.x.accumulateInto(per, b.put(x), gy);
    expect("accumulate " + std::to_string(n * per), b.get(gy, n * per), want,
           0);
    if (per != 100)
      continue;
    float *gc = b.zeros(n * per);
    b.x.copy(per, gy, gc);
    expect("copy", b.get(gc, n * per), want, 0);
  }
}

void checkUpdateAndCopies(Bench &b) {
  // SGD with momentum and weight decay, two steps (first, then later).
  int64_t count = b.weights[0].count;
  Vec w = random(count), g = random(count), buf(count, 0.0f);
  b.x.writeWeight(0, w.data());
  upload(b.x.grad(0), g.data(), count * 4);
  b.x.lr = 0.1f;
  b.x.momentum = 0.9f;
  b.x.weightDecay = 1e-2f;
  for (bool first : {true, false}) {
    b.x.firstIteration = first;
    b.x.sgd(0);
    sgdUpdate(count, 0.1f, 0.9f, 1e-2f, first, w.data(), g.data(), buf.data());
  }
  Vec gotW(count), gotM(count);
  b.x.synchronize();
  b.x.readWeight(0, gotW.data());
  b.x.readMomentum(0, gotM.data());
  expect("sgd weights", gotW, w, 0);
  expect("sgd momentum", gotM, buf, 0);

  // Out to the host slot and back into another place, ordered by events.
  b.reset(2);
  int64_t bytes = b.slots[0].perSample * 2 + b.slots[0].fixed;
  Vec v = random(bytes / 4);
  auto offsetOf = [&](float *p) {
    return reinterpret_cast<char *>(p) - reinterpret_cast<char *>(b.x.arena(0));
  };
  int64_t srcOff = offsetOf(b.put(v)), dstOff = offsetOf(b.zeros(bytes / 4));
  b.x.record(Compute, 0);
  b.x.wait(CopyOut, 0);
  b.x.copyOut(srcOff, 0);
  b.x.record(CopyOut, 1);
  b.x.wait(CopyIn, 1);
  b.x.copyIn(0, dstOff);
  b.x.record(CopyIn, 2);
  b.x.wait(Compute, 2);
  float *dst = b.x.arena(dstOff);
  expect("copy out and in", b.get(dst, bytes / 4), v, 0);
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("selfcheck: no CUDA device, skipped\n");
    return 77;
  }
  Bench b;
  checkConv(b);
  checkConvGraph();
  checkPool(b);
  checkActivations(b);
  checkNorm(b);
  checkDense(b);
  checkAttention(b, 96, 64, true);
  checkAttention(b, 64, 64, false);
  checkAttention(b, 160, 144, false);
  checkAttention(b, 64, 64, false, true);
  checkLosses(b);
  checkElementwise(b);
  checkUpdateAndCopies(b);
  checkNarrow(Precision::BF16);
  checkNarrow(Precision::FP16);
  for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16})
    checkVectorPaths(p);
  std::printf("selfcheck: %d checks, %d mismatches; measured device memory "
              "%.2f MiB (planned %.2f MiB)\n",
              checks, failures, b.x.measuredDeviceBytes() / 1048576.0,
              b.x.deviceBytes() / 1048576.0);
  return failures ? 1 : 0;
}
