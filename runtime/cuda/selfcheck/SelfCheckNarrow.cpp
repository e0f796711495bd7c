//===- SelfCheckNarrow.cpp - The CUDA backend's 16-bit programs -----------===//
//
// A bf16 or fp16 program's operations on real 16-bit storage (blocks handed
// out by Exec::arena16, a working copy by Exec::weightCopy) against the
// reference kernels run the way the CPU emulation runs them: inputs rounded
// to 16 bits, fp32 arithmetic, the result rounded where the GPU stores it
// (runtime/emu/Precision.cpp). cuDNN and cuBLAS may sum in another order,
// which can move a result by one 16-bit step, so values agree to within
// about one unit in the last place of the format.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cuda/View.h"
#include "runtime/cuda/selfcheck/SelfCheck.h"
#include "runtime/kernels/Rounding.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace memfit::rt::selfcheck {

namespace {

constexpr int64_t kArena = 64 << 20, kWorkspace = 16 << 20;

float widen(cuda::Store s, uint16_t bits) {
  if (s == cuda::Store::BF16)
    return kernels::bitsFloat(uint32_t(bits) << 16);
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  const uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
  if (e == 0) // zero or subnormal: m * 2^-24
    return kernels::bitsFloat(
        sign | kernels::floatBits(float(m) * (1.0f / 16777216.0f)));
  if (e == 31)
    return kernels::bitsFloat(sign | 0x7f800000u | (m << 13));
  return kernels::bitsFloat(sign | ((e + 112u) << 23) | (m << 13));
}

struct NarrowBench {
  Precision precision;
  cuda::Store store;
  ProgramInfo info;
  WeightInfo weights[1] = {
      {"w0", nullptr, nullptr, 17 * 9, 17, 9, Init::Zeros, true, true}};
  HostSlot slots[1] = {{64, 0}};
  Exec x;
  int64_t top = 0;

  static ProgramInfo infoFor(Precision p, int64_t batch) {
    ProgramInfo i{"selfcheck-16", batch, batch, 1, kArena, 1, 4, 1,
                  false,          5,     true,  1, 1};
    i.precision = p;
    return i;
  }
  /// `batch`: the one sub-batch the start-up convolution check settles.
  explicit NarrowBench(Precision p, int64_t batch = 8)
      : precision(p),
        store(p == Precision::BF16 ? cuda::Store::BF16 : cuda::Store::FP16),
        info(infoFor(p, batch)), x(info, weights, slots) {}

  float round(float v) const {
    return store == cuda::Store::BF16 ? kernels::roundToBf16(v)
                                      : kernels::roundToFp16(v);
  }
  Vec rounded(Vec v) const {
    for (float &f : v)
      f = round(f);
    return v;
  }
  /// A 16-bit block holding v (rounded); its arena offset.
  int64_t put16(const Vec &v) {
    int64_t off = top;
    top += (static_cast<int64_t>(v.size()) * 2 + 255) / 256 * 256;
    if (top > kArena - kWorkspace) {
      std::fprintf(stderr, "selfcheck: arena too small\n");
      std::exit(2);
    }
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      bits[i] = cuda::narrowBits(store, v[i]);
    upload(reinterpret_cast<char *>(x.arena(0)) + off, bits.data(),
           static_cast<int64_t>(bits.size()) * 2);
    return off;
  }
  /// An fp32 block holding v; its pointer.
  float *put32(const Vec &v) {
    int64_t off = top;
    top += (static_cast<int64_t>(v.size()) * 4 + 255) / 256 * 256;
    upload(x.arena(off), v.data(), static_cast<int64_t>(v.size()) * 4);
    return x.arena(off);
  }
  /// What the operation about to run receives for a 16-bit block.
  float *a16(int64_t off, int64_t count) { return x.arena16(off, count * 2); }
  Vec get16(int64_t off, int64_t count) {
    x.synchronize();
    std::vector<uint16_t> bits(count);
    cudaMemcpy(bits.data(), reinterpret_cast<char *>(x.arena(0)) + off,
               count * 2, cudaMemcpyDeviceToHost);
    Vec v(count);
    for (int64_t i = 0; i < count; ++i)
      v[i] = widen(store, bits[i]);
    return v;
  }
  Vec get32(const float *p, int64_t count) {
    x.synchronize();
    Vec v(count);
    cudaMemcpy(v.data(), p, count * 4, cudaMemcpyDeviceToHost);
    return v;
  }
  void reset(int64_t n) {
    top = 0;
    x.n = n;
    x.firstSample = 0;
  }
  /// About one unit in the last place of the format, relative.
  double ulp() const { return store == cuda::Store::BF16 ? 8e-3 : 1e-3; }
  std::string tag(const char *what) const {
    return std::string(precision == Precision::BF16 ? "bf16 " : "fp16 ") + what;
  }
};

void checkConv(NarrowBench &b, const ConvParams &p) {
  const int64_t n = 3, xs = n * p.cin * p.hin * p.win,
                ys = n * p.cout * p.hout * p.wout,
                ws = p.cout * p.cin / p.group * p.kh * p.kw;
  const int64_t wsOff = kArena - kWorkspace;
  Vec x = b.rounded(random(xs)), w = b.rounded(random(ws)),
      bias = b.rounded(random(p.cout)), dy = b.rounded(random(ys));
  // Forward: the convolution stored, then the bias added and stored.
  Vec y(ys);
  convForward(p, n, x.data(), w.data(), nullptr, y.data());
  for (int64_t i = 0; i < ys; ++i)
    y[i] = b.round(b.round(y[i]) + bias[i / (p.hout * p.wout) % p.cout]);
  b.reset(n);
  int64_t ox = b.put16(x), ow = b.put16(w), ob = b.put16(bias),
          oy = b.put16(Vec(ys, 0.0f)), ody = b.put16(dy);
  b.x.setTask("conv forward");
  b.x.convForward(p, 1, b.a16(ox, xs), b.a16(ow, ws), b.a16(ob, p.cout),
                  b.a16(oy, ys), wsOff, kWorkspace);
  expect(b.tag("conv forward"), b.get16(oy, ys), y, b.ulp());
  // Backward-data into 16 bits, accumulating.
  Vec dx0 = b.rounded(random(xs)), dx = dx0;
  convBackwardData(p, n, w.data(), dy.data(), dx.data(), true);
  dx = b.rounded(dx);
  int64_t odx = b.put16(dx0);
  b.x.setTask("conv backward data");
  b.x.convBackwardData(p, 1, b.a16(ow, ws), b.a16(ody, ys), b.a16(odx, xs),
                       true, wsOff, kWorkspace);
  expect(b.tag("conv backward-data acc"), b.get16(odx, xs), dx, 2 * b.ulp());
  // Backward-filter: the 16-bit gradient staged, then added to the fp32
  // master gradient; the bias gradient summed from dy into fp32.
  for (bool acc : {false, true}) {
    Vec dw0 = random(ws), db0 = random(p.cout), staged(ws), db = db0;
    convBackwardFilter(p, n, x.data(), dy.data(), staged.data(), db.data(),
                       acc);
    Vec dw = dw0;
    for (int64_t i = 0; i < ws; ++i)
      dw[i] = acc ? dw0[i] + b.round(staged[i]) : b.round(staged[i]);
    float *gdw = b.put32(dw0), *gdb = b.put32(db0);
    b.x.setTask("conv backward filter");
    b.x.convBackwardFilter(p, 1, b.a16(ox, xs), b.a16(ody, ys), gdw, gdb, acc,
                           wsOff, kWorkspace);
    expect(b.tag(acc ? "conv backward-filter acc" : "conv backward-filter"),
           b.get32(gdw, ws), dw, b.ulp());
    expect(b.tag("conv backward-bias") + " (" +
               std::to_string(p.hout * p.wout) + " positions)",
           b.get32(gdb, p.cout), db, 1e-5);
  }
}

/// The three directions on cuDNN's graph API: the start-up check told to
/// run the fastest graph-API plan of each call that has one (the trainers
/// run one only where it beats the legacy API). Not accumulating: an
/// accumulating call stays on the legacy API.
void checkConvGraph(Precision precision) {
  const ConvParams p{6, 9, 11, 8, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2};
  const int64_t n = 3, xs = n * p.cin * p.hin * p.win,
                ys = n * p.cout * p.hout * p.wout,
                ws = p.cout * p.cin / p.group * p.kh * p.kw;
  NarrowBench b(precision, n);
  const int64_t wsOff = kArena - kWorkspace;
  b.reset(n);
  const std::array<bool, 3> on = settleOnGraph(b.x, p, kWorkspace);
  const char *names[] = {"graph forward", "graph backward-data",
                         "graph backward-filter"};
  for (int d = 0; d < 3; ++d)
    if (!on[d])
      std::printf("note: %s: no graph-API plan runs here\n",
                  b.tag(names[d]).c_str());
  Vec x = b.rounded(random(xs)), w = b.rounded(random(ws)),
      dy = b.rounded(random(ys));
  b.reset(n);
  int64_t ox = b.put16(x), ow = b.put16(w), ody = b.put16(dy),
          oy = b.put16(Vec(ys, 0.0f)), odx = b.put16(random(xs));
  if (on[ConvFwd]) {
    Vec y(ys);
    convForward(p, n, x.data(), w.data(), nullptr, y.data());
    b.x.setTask("graph forward");
    b.x.convForward(p, 1, b.a16(ox, xs), b.a16(ow, ws), nullptr, b.a16(oy, ys),
                    wsOff, kWorkspace);
    expect(b.tag("graph-API conv forward"), b.get16(oy, ys), b.rounded(y),
           b.ulp());
  }
  if (on[ConvBwdData]) {
    Vec dx(xs, 0.0f);
    convBackwardData(p, n, w.data(), dy.data(), dx.data(), false);
    b.x.setTask("graph backward-data");
    b.x.convBackwardData(p, 1, b.a16(ow, ws), b.a16(ody, ys), b.a16(odx, xs),
                         false, wsOff, kWorkspace);
    expect(b.tag("graph-API conv backward-data"), b.get16(odx, xs),
           b.rounded(dx), b.ulp());
  }
  if (on[ConvBwdFilter]) {
    Vec staged(ws, 0.0f), db(p.cout, 0.0f);
    convBackwardFilter(p, n, x.data(), dy.data(), staged.data(), db.data(),
                       false);
    float *gdw = b.put32(random(ws));
    b.x.setTask("graph backward-filter");
    b.x.convBackwardFilter(p, 1, b.a16(ox, xs), b.a16(ody, ys), gdw, nullptr,
                           false, wsOff, kWorkspace);
    expect(b.tag("graph-API conv backward-filter"), b.get32(gdw, ws),
           b.rounded(staged), b.ulp());
  }
}

void checkDense(NarrowBench &b) {
  const int64_t n = 6;
  const GemmParams p{17, 9, true, 0.5f, 2.0f};
  Vec master = random(p.k * p.m), w = b.rounded(master);
  Vec x = b.rounded(random(n * p.k)), bias = b.rounded(random(p.m)),
      dy = b.rounded(random(n * p.m)), y(n * p.m);
  gemmForward(p, n, x.data(), w.data(), nullptr, y.data());
  for (int64_t i = 0; i < n * p.m; ++i)
    y[i] = b.round(b.round(y[i]) + p.beta * bias[i % p.m]);
  b.reset(n);
  // The weight through its working copy, refreshed from the master.
  b.x.writeWeight(0, master.data());
  int64_t ox = b.put16(x), ob = b.put16(bias), oy = b.put16(Vec(n * p.m)),
          ody = b.put16(dy);
  b.x.setTask("gemm forward");
  b.x.gemmForward(p, b.a16(ox, n * p.k), b.x.weightCopy(0), b.a16(ob, p.m),
                  b.a16(oy, n * p.m));
  expect(b.tag("gemm forward, working copy"), b.get16(oy, n * p.m), y, b.ulp());
  // 16-bit inputs, the fp32 master gradient.
  Vec dw0 = random(p.k * p.m), dw = dw0;
  gemmBackwardWeight(p, n, x.data(), dy.data(), dw.data(), nullptr, true);
  float *gdw = b.put32(dw0);
  b.x.setTask("gemm backward weight");
  b.x.gemmBackwardWeight(p, b.a16(ox, n * p.k), b.a16(ody, n * p.m), gdw,
                         nullptr, true);
  expect(b.tag("gemm backward-weight into fp32"), b.get32(gdw, p.k * p.m), dw,
         1e-5);
}

void checkRows(NarrowBench &b) {
  // An activation and LayerNorm with fp32 scale and bias: 16-bit in and out.
  const int64_t n = 4, d = 40;
  const LayerNormParams lp{3, d, 1e-5f};
  const ActParams ap{ActKind::Gelu};
  const int64_t count = n * lp.rows * d;
  Vec x = b.rounded(random(count)), scale = random(d), bias = random(d);
  Vec act(count), ln(count);
  activationForward(ap, count, x.data(), act.data());
  layerNormForward(lp, n, x.data(), scale.data(), bias.data(), ln.data());
  act = b.rounded(act);
  ln = b.rounded(ln);
  b.reset(n);
  int64_t ox = b.put16(x), oa = b.put16(Vec(count)), ol = b.put16(Vec(count));
  float *gs = b.put32(scale), *gb = b.put32(bias);
  b.x.setTask("activation");
  b.x.actForward(ap, lp.rows * d, b.a16(ox, count), b.a16(oa, count));
  expect(b.tag("gelu forward"), b.get16(oa, count), act, b.ulp());
  b.x.setTask("layer norm");
  b.x.layerNormForward(lp, b.a16(ox, count), gs, gb, b.a16(ol, count));
  expect(b.tag("layer norm forward"), b.get16(ol, count), ln, b.ulp());
}

void checkLossScale(NarrowBench &b) {
  // Cross-entropy on 16-bit logits: the gradient scaled by the loss scale
  // before it is stored (fp16 programs scale; the others pass 1).
  const int64_t n = 8, classes = 5;
  const float scale = b.precision == Precision::FP16 ? 1024.0f : 1.0f;
  Vec logits = b.rounded(random(n * classes)), dl(n * classes);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i)
    labels[i] = int32_t(i % classes);
  float loss = 0;
  softmaxCrossEntropy({1, classes, 1}, n, double(n), logits.data(),
                      labels.data(), -100, &loss, dl.data());
  for (float &v : dl)
    v = b.round(v * scale);
  b.reset(n);
  int64_t ol = b.put16(logits), od = b.put16(Vec(n * classes));
  int64_t olab = b.top;
  b.top += 256;
  upload(b.x.arena(olab), labels.data(), n * 4);
  b.x.lossScale = scale;
  b.x.setTask("loss");
  b.x.loss(b.a16(ol, n * classes), b.x.arenaInt(olab), b.x.lossValue(),
           b.a16(od, n * classes));
  expect(b.tag("loss gradient, scaled"), b.get16(od, n * classes), dl, b.ulp());
  expect(b.tag("loss"), {b.x.readLoss()}, {loss}, 1e-5);
  if (b.precision == Precision::FP16) {
    // GradScaler's unscale: divided by the scale; a non-finite value
    // anywhere skips the step.
    const int64_t count = b.weights[0].count;
    Vec g = random(count), want = g;
    for (float &v : want)
      v *= static_cast<float>(1.0 / 1024.0);
    upload(b.x.grad(0), g.data(), count * 4);
    bool finite = b.x.unscaleGradients();
    expect("fp16 unscale", b.get32(b.x.grad(0), count), want, 0);
    g[count / 2] = INFINITY;
    upload(b.x.grad(0), g.data(), count * 4);
    if (!finite || b.x.unscaleGradients()) {
      std::printf("MISMATCH fp16 unscale: finite gradients %s, an infinity "
                  "%s\n",
                  finite ? "kept" : "skipped", finite ? "not seen" : "ignored");
      ++failures;
    }
    ++checks;
  }
  b.x.lossScale = 1.0f;
}

void checkElementwise16(NarrowBench &b) {
  // The typed kernels on 16-bit operands: 3 x 40 elements are whole packs
  // of 8, 3 x 45 leave a tail of 7 elements stored one by one.
  const int64_t n = 3;
  const ActParams ap{ActKind::Sigmoid};
  for (int64_t per : {40, 45}) {
    const int64_t count = n * per;
    const std::string size = " (" + std::to_string(count) + ")";
    Vec x = b.rounded(random(count)), y(count), dy = b.rounded(random(count));
    Vec other = b.rounded(random(count)), sum(count);
    activationForward(ap, count, x.data(), y.data());
    y = b.rounded(y);
    const BinaryParams bp{BinaryKind::Add, per, false, per, 1};
    binaryForward(bp, n, x.data(), other.data(), sum.data());
    sum = b.rounded(sum);
    Vec dx0 = b.rounded(random(count)), dx = dx0;
    activationBackward(ap, count, y.data(), dy.data(), dx.data(), true);
    dx = b.rounded(dx);
    Vec acc = other;
    accumulate(count, x.data(), acc.data());
    acc = b.rounded(acc);
    // Mul's first-operand gradient reads b (broadcast per channel of 5),
    // accumulated into da: the typed path with a gathered operand.
    const BinaryParams mp{BinaryKind::Mul, per, false, 5, per / 5};
    Vec scale = b.rounded(random(5)), da0 = b.rounded(random(count)), da = da0;
    binaryBackward(mp, n, x.data(), scale.data(), dy.data(), da.data(), nullptr,
                   true, false);
    da = b.rounded(da);
    b.reset(n);
    int64_t ox = b.put16(x), oy = b.put16(Vec(count)), ody = b.put16(dy),
            oo = b.put16(other), os = b.put16(Vec(count)), odx = b.put16(dx0);
    b.x.setTask("elementwise");
    b.x.actForward(ap, per, b.a16(ox, count), b.a16(oy, count));
    expect(b.tag("sigmoid forward") + size, b.get16(oy, count), y, b.ulp());
    b.x.actBackward(ap, per, b.a16(oy, count), b.a16(ody, count),
                    b.a16(odx, count), true);
    expect(b.tag("sigmoid backward acc") + size, b.get16(odx, count), dx,
           2 * b.ulp());
    b.x.binaryForward(bp, b.a16(ox, count), b.a16(oo, count), b.a16(os, count));
    expect(b.tag("add forward") + size, b.get16(os, count), sum, 0);
    b.x.accumulateInto(per, b.a16(ox, count), b.a16(oo, count));
    expect(b.tag("accumulate") + size, b.get16(oo, count), acc, 0);
    int64_t osc = b.put16(scale), oda = b.put16(da0);
    b.x.binaryBackward(mp, b.a16(ox, count), b.a16(osc, 5), b.a16(ody, count),
                       b.a16(oda, count), nullptr, true, false);
    expect(b.tag("mul backward acc") + size, b.get16(oda, count), da,
           2 * b.ulp());
  }
}

void checkPool16(NarrowBench &b) {
  // Max pooling on 16-bit blocks (the typed kernels): VGG's disjoint 2x2/2
  // over odd planes, and ResNet's overlapping 3x3/2 (tiled). Integer inputs
  // make ties; the maximum is an input, and a gradient one sum rounded once
  // as it is stored, so both agree exactly.
  static const PoolParams pools[] = {
      {PoolKind::Max, 3, 9, 7, 4, 3, 2, 2, 2, 2, 0, 0, 0, 0, false},
      {PoolKind::Max, 2, 70, 45, 35, 23, 3, 3, 2, 2, 1, 1, 1, 1, false},
  };
  const int64_t n = 2;
  for (const PoolParams &p : pools) {
    const int64_t xs = n * p.c * p.hin * p.win, ys = n * p.c * p.hout * p.wout;
    const std::string shape = " " + std::to_string(p.kh) + "x" +
                              std::to_string(p.kw) + "/" + std::to_string(p.sh);
    Vec x = b.rounded(random(xs, true)), dy = b.rounded(random(ys));
    Vec y(ys);
    poolForward(p, n, x.data(), y.data());
    b.reset(n);
    const int64_t ox = b.put16(x), oy = b.put16(Vec(ys)), ody = b.put16(dy);
    b.x.setTask("pool");
    b.x.poolForward(p, b.a16(ox, xs), b.a16(oy, ys));
    expect(b.tag("max pool forward") + shape, b.get16(oy, ys), y, 0);
    for (bool acc : {false, true}) {
      Vec start = b.rounded(random(xs)), want = start;
      poolBackward(p, n, x.data(), y.data(), dy.data(), want.data(), acc);
      want = b.rounded(want);
      const int64_t odx = b.put16(start);
      b.x.poolBackward(p, b.a16(ox, xs), b.a16(oy, ys), b.a16(ody, ys),
                       b.a16(odx, xs), acc);
      expect(b.tag("max pool backward") + shape + (acc ? " acc" : ""),
             b.get16(odx, xs), want, 0);
    }
  }
}

} // namespace

void checkNarrow(Precision p) {
  NarrowBench b(p);
  // Strided and grouped, 30 output positions (the bias gradient element by
  // element); "same" 3x3 over 8 x 8 (whole 16-byte packs a plane).
  checkConv(b, {6, 9, 11, 8, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2});
  checkConv(b, {5, 8, 8, 7, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  checkDense(b);
  checkRows(b);
  checkElementwise16(b);
  checkPool16(b);
  checkLossScale(b);
  checkConvGraph(p);
}

} // namespace memfit::rt::selfcheck
