//===- SelfCheckVector.cpp - The typed vector paths of the CUDA backend ---===//
//
// Dropout, concatenation, padding, slices, transposes, broadcasts, masked
// fills and LayerNorm against the reference kernels, in fp32, bf16 and
// fp16 storage: counts that leave a tail after the 16-byte packs, an
// output one element off its alignment (no packs), concatenations whose
// segments are and are not whole packs, innermost runs of step 1, 2 and 0,
// 16-bit data with an fp32 output (mixed storage: the View kernels), and
// every backward overwriting and accumulating. Everything but LayerNorm
// must agree bit for bit; LayerNorm sums its rows in float in another
// order than the reference's double, so it agrees to a stated tolerance.
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

constexpr int64_t kArena = 16 << 20;

/// A block of `count` values in the arena, `shift` elements past a 256-byte
/// boundary; `wide` keeps it fp32 in a 16-bit program.
struct Block {
  int64_t off, count;
  bool wide;
};

struct VectorBench {
  Precision precision;
  cuda::Store store;
  ProgramInfo info;
  WeightInfo weights[1] = {
      {"w0", nullptr, nullptr, 16, 4, 4, Init::Zeros, true, false}};
  HostSlot slots[1] = {{64, 0}};
  Exec x;
  int64_t top = 0;

  static ProgramInfo infoFor(Precision p) {
    ProgramInfo i{
        "selfcheck-vector", 8, 8, 1, kArena, 1, 4, 1, false, 5, true, 1, 1};
    i.precision = p;
    return i;
  }
  explicit VectorBench(Precision p)
      : precision(p), store(p == Precision::BF16   ? cuda::Store::BF16
                            : p == Precision::FP16 ? cuda::Store::FP16
                                                   : cuda::Store::F32),
        info(infoFor(p)), x(info, weights, slots) {}

  bool narrow() const { return store != cuda::Store::F32; }
  float round(float v) const {
    return store == cuda::Store::BF16   ? kernels::roundToBf16(v)
           : store == cuda::Store::FP16 ? kernels::roundToFp16(v)
                                        : v;
  }
  Vec rounded(Vec v) const {
    for (float &f : v)
      f = round(f);
    return v;
  }
  int64_t bytes(const Block &b) const { return narrow() && !b.wide ? 2 : 4; }

  /// A block holding v (stored in the program's format unless `wide`).
  Block put(const Vec &v, int64_t shift = 0, bool wide = false) {
    Block b{top, int64_t(v.size()), wide};
    b.off += shift * bytes(b);
    top += ((b.off - top) + b.count * bytes(b) + 255) / 256 * 256;
    if (top > kArena) {
      std::fprintf(stderr, "selfcheck: arena too small\n");
      std::exit(2);
    }
    char *at = reinterpret_cast<char *>(x.arena(0)) + b.off;
    if (bytes(b) == 4) {
      upload(at, v.data(), b.count * 4);
    } else {
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        bits[i] = cuda::narrowBits(store, v[i]);
      upload(at, bits.data(), b.count * 2);
    }
    return b;
  }
  Block zeros(int64_t count, int64_t shift = 0, bool wide = false) {
    return put(Vec(count, 0.0f), shift, wide);
  }
  /// What the operation about to run receives for block b.
  float *operator()(const Block &b) {
    return bytes(b) == 4 ? reinterpret_cast<float *>(
                               reinterpret_cast<char *>(x.arena(0)) + b.off)
                         : x.arena16(b.off, b.count * 2);
  }
  Vec get(const Block &b) {
    x.synchronize();
    Vec v(b.count);
    const char *at = reinterpret_cast<const char *>(x.arena(0)) + b.off;
    if (bytes(b) == 4) {
      cudaMemcpy(v.data(), at, b.count * 4, cudaMemcpyDeviceToHost);
      return v;
    }
    std::vector<uint16_t> bits(b.count);
    cudaMemcpy(bits.data(), at, b.count * 2, cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < b.count; ++i) {
      // Widened exactly: a bf16 is the top half of its float; an fp16
      // through the device's own conversion is not available here, so its
      // value is rebuilt from the fields.
      if (store == cuda::Store::BF16) {
        v[i] = kernels::bitsFloat(uint32_t(bits[i]) << 16);
        continue;
      }
      const uint32_t sign = uint32_t(bits[i] & 0x8000u) << 16;
      const uint32_t e = (bits[i] >> 10) & 0x1fu, m = bits[i] & 0x3ffu;
      v[i] = e == 0 ? kernels::bitsFloat(
                          sign | kernels::floatBits(float(m) * 0x1.0p-24f))
             : e == 31
                 ? kernels::bitsFloat(sign | 0x7f800000u | (m << 13))
                 : kernels::bitsFloat(sign | ((e + 112u) << 23) | (m << 13));
    }
    return v;
  }
  void task(const char *what, int64_t n) {
    top = 0;
    x.n = n;
    x.firstSample = 0;
    x.setTask(what);
  }
  std::string tag(const std::string &what) const {
    return std::string(precision == Precision::BF16   ? "bf16 "
                       : precision == Precision::FP16 ? "fp16 "
                                                      : "fp32 ") +
           what;
  }
};

/// " (count, unaligned)" and the like, for the names of the checks.
std::string shape(int64_t count, int64_t shift) {
  return " (" + std::to_string(count) + (shift ? ", unaligned)" : ")");
}

void checkDropout(VectorBench &b) {
  const int64_t n = 3;
  // 3 x 64: whole packs; 3 x 37: a tail, and packs across samples.
  for (int64_t per : {64, 37})
    for (int64_t shift : {0, 1}) {
      const DropoutParams p{per, 0.3f};
      const int64_t count = n * per;
      const std::string sh = shape(count, shift);
      Vec x = b.rounded(random(count)), y(count);
      b.task("dropout", n);
      b.x.seed = 99;
      b.x.iteration = 5;
      b.x.firstSample = 2;
      const uint64_t key = dropoutKey(99, 5, 17);
      dropoutForward(p, n, key, 2, x.data(), y.data());
      Block bx = b.put(x), by = b.zeros(count, shift);
      b.x.dropoutForward(p, 17, b(bx), b(by));
      expect(b.tag("dropout forward") + sh, b.get(by), b.rounded(y), 0);
      for (bool acc : {false, true}) {
        Vec start = b.rounded(random(count)), want = start;
        dropoutBackward(p, n, key, 2, x.data(), want.data(), acc);
        Block bs = b.put(start, shift);
        b.x.dropoutBackward(p, 17, b(bx), b(bs), acc);
        expect(b.tag(acc ? "dropout backward acc" : "dropout backward") + sh,
               b.get(bs), b.rounded(want), 0);
      }
    }
}

void checkConcat(VectorBench &b) {
  const int64_t n = 3;
  // Segments of whole 16-byte packs in every format, and segments that
  // are not.
  const int64_t packed[] = {16, 32, 8}, ragged[] = {12, 30, 7};
  for (const int64_t *parts : {packed, ragged}) {
    const int64_t total = parts[0] + parts[1] + parts[2];
    const std::string sh = shape(n * total, 0);
    Vec in[3], d[3], w[3];
    for (int k = 0; k < 3; ++k)
      in[k] = b.rounded(random(n * parts[k]));
    const float *ins[] = {in[0].data(), in[1].data(), in[2].data()};
    Vec y(n * total), dy = b.rounded(random(n * total));
    concatForward(n, 3, parts, ins, y.data());
    b.task("concat", n);
    Block bi[3], by = b.zeros(n * total);
    for (int k = 0; k < 3; ++k)
      bi[k] = b.put(in[k]);
    const float *gins[] = {b(bi[0]), b(bi[1]), b(bi[2])};
    b.x.concatForward(3, parts, gins, b(by));
    expect(b.tag("concat forward") + sh, b.get(by), y, 0);
    // Gradient 0 accumulated, 1 absent, 2 overwritten.
    for (int k = 0; k < 3; ++k)
      w[k] = d[k] = b.rounded(random(n * parts[k]));
    float *outs[] = {w[0].data(), nullptr, w[2].data()};
    const bool acc[] = {true, false, false};
    concatBackward(n, 3, parts, dy.data(), outs, acc);
    b.task("concat backward", n);
    Block bd0 = b.put(d[0]), bd2 = b.put(d[2]), bdy = b.put(dy);
    float *gouts[] = {b(bd0), nullptr, b(bd2)};
    b.x.concatBackward(3, parts, b(bdy), gouts, acc);
    expect(b.tag("concat backward acc") + sh, b.get(bd0), b.rounded(w[0]), 0);
    expect(b.tag("concat backward") + sh, b.get(bd2), b.rounded(w[2]), 0);
  }
}

void checkPad(VectorBench &b) {
  const int64_t n = 3;
  const PadParams p{2, 5, 6, 8, 5, 2, -1, 0.5f}; // padded rows, a crop
  const int64_t xs = n * 2 * 5 * 6, ys = n * 2 * 8 * 5;
  Vec x = b.rounded(random(xs)), y(ys), dy = b.rounded(random(ys));
  padForward(p, n, x.data(), y.data());
  for (int64_t shift : {0, 1}) {
    b.task("pad", n);
    Block bx = b.put(x), by = b.zeros(ys, shift);
    b.x.padForward(p, b(bx), b(by));
    expect(b.tag("pad forward") + shape(ys, shift), b.get(by), b.rounded(y), 0);
    for (bool acc : {false, true}) {
      Vec start = b.rounded(random(xs)), want = start;
      padBackward(p, n, dy.data(), want.data(), acc);
      Block bdy = b.put(dy), bs = b.put(start, shift);
      b.x.padBackward(p, b(bdy), b(bs), acc);
      expect(b.tag(acc ? "pad backward acc" : "pad backward") +
                 shape(xs, shift),
             b.get(bs), b.rounded(want), 0);
    }
  }
}

/// A gather's forward and backward (acc off and on) against the reference.
template <typename Fwd, typename Bwd, typename GpuFwd, typename GpuBwd>
void checkGather(VectorBench &b, const std::string &name, int64_t n, int64_t xs,
                 int64_t ys, Fwd fwd, Bwd bwd, GpuFwd gpuFwd, GpuBwd gpuBwd) {
  Vec x = b.rounded(random(xs)), y(ys), dy = b.rounded(random(ys));
  fwd(x.data(), y.data());
  for (int64_t shift : {0, 1}) {
    b.task(name.c_str(), n);
    Block bx = b.put(x), by = b.zeros(ys, shift);
    gpuFwd(b(bx), b(by));
    expect(b.tag(name + " forward") + shape(ys, shift), b.get(by), b.rounded(y),
           0);
    for (bool acc : {false, true}) {
      Vec start = b.rounded(random(xs)), want = start;
      bwd(dy.data(), want.data(), acc);
      Block bdy = b.put(dy), bs = b.put(start, shift);
      gpuBwd(b(bdy), b(bs), acc);
      expect(b.tag(name + (acc ? " backward acc" : " backward")) +
                 shape(xs, shift),
             b.get(bs), b.rounded(want), 0);
    }
  }
}

void checkLayouts(VectorBench &b) {
  const int64_t n = 3;
  // Slices whose innermost run has step 1 and step 2.
  for (int64_t step : {1, 2}) {
    SliceParams p{3, {1, 6, 10}, {1, 4, step == 1 ? 8 : 4}, {0, 1, 1}, 0};
    p.steps[2] = step;
    checkGather(
        b, "slice step " + std::to_string(step), n, n * 60, n * 4 * p.ydims[2],
        [&](const float *x, float *y) { sliceForward(p, n, x, y); },
        [&](const float *dy, float *dx, bool acc) {
          sliceBackward(p, n, dy, dx, acc);
        },
        [&](const float *x, float *y) { b.x.sliceForward(p, x, y); },
        [&](const float *dy, float *dx, bool acc) {
          b.x.sliceBackward(p, dy, dx, acc);
        });
  }
  // Transposes keeping and moving the innermost axis.
  const int32_t perms[][3] = {{0, 2, 1}, {1, 0, 2}};
  for (const auto &perm : perms) {
    TransposeParams p{3, {1, 6, 10}, {perm[0], perm[1], perm[2]}, 0};
    checkGather(
        b,
        "transpose " + std::to_string(perm[0]) + std::to_string(perm[1]) +
            std::to_string(perm[2]),
        n, n * 60, n * 60,
        [&](const float *x, float *y) { transposeForward(p, n, x, y); },
        [&](const float *dy, float *dx, bool acc) {
          transposeBackward(p, n, dy, dx, acc);
        },
        [&](const float *x, float *y) { b.x.transposeForward(p, x, y); },
        [&](const float *dy, float *dx, bool acc) {
          b.x.transposeBackward(p, dy, dx, acc);
        });
  }
  // Broadcasts along an outer axis (innermost step 1) and the innermost
  // axis (step 0).
  const ExpandParams expands[] = {{3, {1, 1, 10}, {1, 6, 10}, 0},
                                  {3, {1, 6, 1}, {1, 6, 9}, 0}};
  for (const ExpandParams &p : expands) {
    const int64_t xs = n * p.xdims[1] * p.xdims[2],
                  ys = n * p.ydims[1] * p.ydims[2];
    checkGather(
        b, p.xdims[2] == 1 ? "expand inner" : "expand outer", n, xs, ys,
        [&](const float *x, float *y) { expandForward(p, n, x, y); },
        [&](const float *dy, float *dx, bool acc) {
          expandBackward(p, n, dy, dx, acc);
        },
        [&](const float *x, float *y) { b.x.expandForward(p, x, y); },
        [&](const float *dy, float *dx, bool acc) {
          b.x.expandBackward(p, dy, dx, acc);
        });
  }
  // A masked fill; the mask stays fp32 (a View of another storage).
  const WhereParams wp{60, 6, 10, -5.0f, true};
  Vec mask(6);
  for (int i = 0; i < 6; ++i)
    mask[i] = float(i % 2);
  Block bm{};
  checkGather(
      b, "masked fill", n, n * 60, n * 60,
      [&](const float *x, float *y) { whereForward(wp, n, mask.data(), x, y); },
      [&](const float *dy, float *dx, bool acc) {
        whereBackward(wp, n, mask.data(), dy, dx, acc);
      },
      [&](const float *x, float *y) {
        bm = b.put(mask, 0, true);
        b.x.whereForward(wp, b(bm), x, y);
      },
      [&](const float *dy, float *dx, bool acc) {
        bm = b.put(mask, 0, true);
        b.x.whereBackward(wp, b(bm), dy, dx, acc);
      });
  if (!b.narrow())
    return;
  // Mixed storage: 16-bit x into an fp32 y, exact (the View kernel).
  SliceParams p{3, {1, 6, 10}, {1, 4, 8}, {0, 1, 1}, 0};
  Vec x = b.rounded(random(n * 60)), y(n * 32);
  sliceForward(p, n, x.data(), y.data());
  b.task("slice", n);
  Block bx = b.put(x), by = b.zeros(n * 32, 0, true);
  b.x.sliceForward(p, b(bx), b(by));
  expect(b.tag("slice into fp32"), b.get(by), y, 0);
}

void checkLayerNorm(VectorBench &b) {
  const int64_t n = 3;
  // Rows of whole packs (64) and not (45); an unaligned output; rows
  // offset from zero, where a float variance must not cancel.
  struct Case {
    int64_t d, shift;
    float offset;
  };
  const double tol =
      b.narrow() ? (b.store == cuda::Store::BF16 ? 8e-3 : 1e-3) : 1e-5;
  for (const Case c : {Case{64, 0, 0.0f}, Case{45, 0, 0.0f}, Case{64, 1, 0.0f},
                       Case{64, 0, 10.0f}}) {
    const LayerNormParams p{5, c.d, 1e-5f};
    const int64_t count = n * p.rows * p.d;
    const std::string sh = shape(count, c.shift) + (c.offset ? " offset" : "");
    Vec x = random(count), scale = random(p.d), bias = random(p.d),
        dy = b.rounded(random(count)), y(count);
    for (float &v : x)
      v += c.offset;
    x = b.rounded(x);
    layerNormForward(p, n, x.data(), scale.data(), bias.data(), y.data());
    b.task("layer norm", n);
    Block bx = b.put(x), by = b.zeros(count, c.shift),
          bsc = b.put(scale, 0, true), bb = b.put(bias, 0, true);
    b.x.layerNormForward(p, b(bx), b(bsc), b(bb), b(by));
    expect(b.tag("layer norm forward") + sh, b.get(by), b.rounded(y), tol);
    for (bool acc : {false, true}) {
      Vec start = b.rounded(random(count)), want = start;
      layerNormBackwardData(p, n, x.data(), scale.data(), dy.data(),
                            want.data(), acc);
      b.task("layer norm backward", n);
      Block bx2 = b.put(x), bdy = b.put(dy), bs = b.put(start, c.shift),
            bsc2 = b.put(scale, 0, true);
      b.x.layerNormBackwardData(p, b(bx2), b(bsc2), b(bdy), b(bs), acc);
      expect(b.tag(acc ? "layer norm backward acc" : "layer norm backward") +
                 sh,
             b.get(bs), b.rounded(want), 2 * tol);
      Vec ds0 = random(p.d), db0 = random(p.d), ds = ds0, db = db0;
      layerNormBackwardWeight(p, n, x.data(), dy.data(), ds.data(), db.data(),
                              acc);
      Block bds = b.put(ds0, 0, true), bdb = b.put(db0, 0, true);
      b.x.layerNormBackwardWeight(p, b(bx2), b(bdy), b(bds), b(bdb), acc);
      // fp32 sums of up to n * rows products: float rounding, relative.
      expect(b.tag(acc ? "layer norm weight grad acc"
                       : "layer norm weight "
                         "grad") +
                 sh,
             b.get(bds), ds, 1e-5);
      expect(b.tag(acc ? "layer norm bias grad acc" : "layer norm bias grad") +
                 sh,
             b.get(bdb), db, 1e-5);
    }
  }
}

} // namespace

void checkVectorPaths(Precision p) {
  VectorBench b(p);
  checkDropout(b);
  checkConcat(b);
  checkPad(b);
  checkLayouts(b);
  checkLayerNorm(b);
}

} // namespace memfit::rt::selfcheck
