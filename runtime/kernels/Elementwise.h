//===- Elementwise.h - Element kernels of both backends ---------*- C++ -*-===//
//
// One source for the element-wise operations memfit writes itself:
// activations, binary operations with broadcast, padding, dropout's mask,
// accumulation and the SGD step. Each function computes one output element
// and is compiled twice: by the host compiler into the CPU emulation
// (runtime/cpu, plain loops over the elements) and by nvcc into the CUDA
// backend (runtime/cuda, grid-stride kernels). The end-to-end tests on the
// CPU therefore run the very arithmetic a GPU runs; the CUDA backend is
// compiled with --fmad=false so that nvcc does not fuse a multiply and an
// add the host compiler keeps apart. Buffer operands are `auto`: float
// pointers in the emulation, typed device buffers in the CUDA backend
// (runtime/cuda/View.h), which read fp32 and round as they store in bf16
// and fp16 programs.
//
// Semantics (PyTorch's): NaN passes Relu and Clip; a kink takes the
// one-sided derivative (0 for Relu at 0, alpha for LeakyRelu at 0); Clip
// passes gradients strictly inside (lo, hi). Sigmoid evaluates exp in double.
// Softplus is PyTorch's with beta 1 and threshold 20 (x itself above it;
// ONNX's log(exp(x) + 1) rounds to the same float there), Mish is
// x * tanh(softplus(x)), LogSigmoid min(x, 0) - log1p(exp(-|x|)), which
// neither overflows nor loses the small values, as PyTorch computes them.
//
// The switches over the kinds have no default: a kind added to
// Activations.def or Binary.def without its arithmetic is a compile error
// (-Werror=switch, set for every target that compiles this file).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_ELEMENTWISE_H
#define MEMFIT_RUNTIME_KERNELS_ELEMENTWISE_H

#include "runtime/Kernels.h"
#include "runtime/kernels/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace memfit::rt::kernels {

/// The accumulate convention of Kernels.h: add into dst, or overwrite it
/// (dst is not read then, so poison there never leaks in).
/// dst is a float, or an element of a typed device buffer that rounds as it
/// is stored (runtime/cuda/View.h).
template <class D> MEMFIT_HD void put(D &&dst, float v, bool accumulate) {
  dst = accumulate ? float(dst) + v : v;
}

// --- activations ---

/// log(1 + exp(x)), x itself past PyTorch's threshold 20.
MEMFIT_HD float softplus(float v) {
  return v > 20.0f ? v : ::log1pf(::expf(v));
}

MEMFIT_HD float activation(const ActParams &p, float v) {
  switch (p.kind) {
  case ActKind::Relu:
    return v < 0 ? 0.0f : v;
  case ActKind::LeakyRelu:
    return v < 0 ? p.alpha * v : v;
  case ActKind::Sigmoid:
    return float(1.0 / (1.0 + ::exp(-double(v))));
  case ActKind::Tanh:
    return ::tanhf(v);
  case ActKind::Clip:
    return v < p.lo ? p.lo : (v > p.hi ? p.hi : v);
  case ActKind::Sqrt:
    return ::sqrtf(v);
  case ActKind::Erf:
    return ::erff(v);
  case ActKind::HardSigmoid: {
    float t = p.alpha * v + p.beta;
    return t < 0 ? 0.0f : (t > 1 ? 1.0f : t);
  }
  case ActKind::HardSwish: {
    float t = v + 3.0f;
    t = t < 0 ? 0.0f : (t > 6 ? 6.0f : t);
    return v * t / 6.0f;
  }
  case ActKind::Pow:
    return p.alpha == 2.0f ? v * v : float(::pow(double(v), double(p.alpha)));
  case ActKind::Gelu:
    return float(0.5 * double(v) * (1.0 + ::erf(double(v) * M_SQRT1_2)));
  case ActKind::GeluTanh: {
    double x = v, inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return float(0.5 * x * (1.0 + ::tanh(inner)));
  }
  case ActKind::Neg:
    return -v;
  case ActKind::NanTo:
    return v != v ? p.alpha : v;
  case ActKind::Softplus:
    return softplus(v);
  case ActKind::Mish:
    return v * ::tanhf(softplus(v));
  case ActKind::Celu: // elu(x, alpha, input_scale = 1 / alpha)
    return v > 0 ? v : (::expf(v * (1.0f / p.alpha)) - 1.0f) * p.alpha;
  case ActKind::LogSigmoid:
    return (v < 0 ? v : 0.0f) - ::log1pf(::expf(-::fabsf(v)));
  case ActKind::Exp:
    return float(::exp(double(v)));
  case ActKind::Abs:
    return ::fabsf(v);
  case ActKind::Log:
    return ::logf(v);
  }
  return 0;
}

/// dX from the output y, or from the input x for the kinds whose
/// activationGradReads is Input (PyTorch's derivative formulas and
/// boundary conventions).
MEMFIT_HD float activationGrad(const ActParams &p, float y, float dy) {
  const float x = y; // the kinds that read their input
  switch (p.kind) {
  case ActKind::Relu:
    return y > 0 ? dy : 0.0f;
  case ActKind::LeakyRelu:
    return y > 0 ? dy : p.alpha * dy;
  case ActKind::Sigmoid:
    return dy * y * (1.0f - y);
  case ActKind::Tanh:
    return dy * (1.0f - y * y);
  case ActKind::Clip:
    return y > p.lo && y < p.hi ? dy : 0.0f;
  case ActKind::Sqrt:
    // A norm's root (ReduceL2) takes torch.norm's subgradient 0 at a zero
    // vector, where x / sqrt(...) would give 0 * inf.
    return p.lo != 0 && y == 0 ? 0.0f : dy / (2.0f * y);
  case ActKind::Erf:
    return float(double(dy) * M_2_SQRTPI * ::exp(-double(x) * double(x)));
  case ActKind::HardSigmoid: {
    float t = p.alpha * x + p.beta;
    return t > 0 && t < 1 ? dy * p.alpha : 0.0f;
  }
  case ActKind::HardSwish:
    return x < -3.0f ? 0.0f : (x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy);
  case ActKind::Pow:
    return p.alpha == 0.0f ? 0.0f
                           : float(double(dy) * p.alpha *
                                   ::pow(double(x), double(p.alpha) - 1.0));
  case ActKind::Gelu: {
    double xd = x, cdf = 0.5 * (1.0 + ::erf(xd * M_SQRT1_2));
    double pdf = ::exp(-0.5 * xd * xd) * 0.3989422804014327;
    return float(double(dy) * (cdf + xd * pdf));
  }
  case ActKind::GeluTanh: {
    double xd = x, k = 0.7978845608028654;
    double inner = k * (xd + 0.044715 * xd * xd * xd);
    double t = ::tanh(inner);
    double dinner = k * (1.0 + 3.0 * 0.044715 * xd * xd);
    return float(double(dy) *
                 (0.5 * (1.0 + t) + 0.5 * xd * (1.0 - t * t) * dinner));
  }
  case ActKind::Neg:
    return -dy;
  case ActKind::NanTo:
    return x != x ? 0.0f : dy;
  case ActKind::Softplus: {
    float z = ::expf(x);
    return x > 20.0f ? dy : dy * z / (z + 1.0f);
  }
  case ActKind::Mish: {
    float sig = 1.0f / (1.0f + ::expf(-x));
    float t = ::tanhf(softplus(x));
    return dy * (t + x * sig * (1.0f - t * t));
  }
  case ActKind::Celu:
    return x > 0
               ? dy
               : dy * (1.0f / p.alpha) * p.alpha * ::expf(x * (1.0f / p.alpha));
  case ActKind::LogSigmoid: {
    float z = ::expf(-::fabsf(x));
    float maxDeriv = x < 0 ? 1.0f : 0.0f, sign = x < 0 ? 1.0f : -1.0f;
    return dy * (maxDeriv - sign * (z / (1.0f + z)));
  }
  case ActKind::Exp:
    return dy * y;
  case ActKind::Abs: // torch's sign(x): 0 at 0
    return x > 0 ? dy : (x < 0 ? -dy : 0.0f);
  case ActKind::Log:
    return dy / x;
  }
  return 0;
}

// --- binary operations ---

/// The element of b paired with element `at` of a (over all samples).
MEMFIT_HD int64_t binaryBIndex(const BinaryParams &p, int64_t at) {
  int64_t s = at / p.perSample, i = at - s * p.perSample;
  int64_t j = (i / p.inner) % p.bSize;
  return p.bBatched ? s * p.bSize + j : j;
}

MEMFIT_HD float binary(BinaryKind k, float a, float b) {
  switch (k) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::RSub:
    return b - a;
  case BinaryKind::RDiv:
    return b / a;
  }
  return 0;
}

/// Whether the derivatives read the operands (Binary.def's Reads).
MEMFIT_HD bool binaryGradReadsOperands(BinaryKind k) {
  switch (k) {
#define MEMFIT_BINARY(kind, reads)                                             \
  case BinaryKind::kind:                                                       \
    return GradReads::reads == GradReads::Operands;
#include "runtime/kernels/Binary.def"
  }
  return true;
}

/// d(a op b)/da * dy; `a` and `b` are read where binaryGradReadsOperands.
MEMFIT_HD float binaryGradA(BinaryKind k, float dy, float a, float b) {
  switch (k) {
  case BinaryKind::Add:
  case BinaryKind::Sub:
    return dy;
  case BinaryKind::Mul:
    return dy * b;
  case BinaryKind::Div:
    return dy / b;
  case BinaryKind::RSub:
    return -dy;
  case BinaryKind::RDiv:
    return -dy * b / (a * a);
  }
  return 0;
}

/// d(a op b)/db * dy; `a` and `b` are read for Mul and Div only.
MEMFIT_HD float binaryGradB(BinaryKind k, float dy, float a, float b) {
  switch (k) {
  case BinaryKind::Add:
    return dy;
  case BinaryKind::Sub:
    return -dy;
  case BinaryKind::Mul:
    return dy * a;
  case BinaryKind::Div:
    return -dy * a / (b * b);
  case BinaryKind::RSub:
    return dy;
  case BinaryKind::RDiv:
    return dy / a;
  }
  return 0;
}

// --- layout: transposes and slices ---

/// The x element that output element `t` of a transpose of n samples
/// reads.
MEMFIT_HD int64_t transposeSource(const TransposeParams &p, int64_t n,
                                  int64_t t) {
  int64_t stride = 1, xStride[kMaxRank];
  for (int i = p.rank - 1; i >= 0; --i) {
    xStride[i] = stride;
    stride *= p.dims[i] * (i == p.batchAxis ? n : 1);
  }
  int64_t src = 0;
  for (int i = p.rank - 1; i >= 0; --i) {
    int a = p.perm[i];
    int64_t extent = p.dims[a] * (a == p.batchAxis ? n : 1);
    src += (t % extent) * xStride[a];
    t /= extent;
  }
  return src;
}

/// The y element that holds x element `t`'s value (the inverse map).
MEMFIT_HD int64_t transposeTarget(const TransposeParams &p, int64_t n,
                                  int64_t t) {
  int64_t coord[kMaxRank];
  for (int i = p.rank - 1; i >= 0; --i) {
    int64_t extent = p.dims[i] * (i == p.batchAxis ? n : 1);
    coord[i] = t % extent;
    t /= extent;
  }
  int64_t dst = 0;
  for (int i = 0; i < p.rank; ++i) {
    int a = p.perm[i];
    dst = dst * (p.dims[a] * (a == p.batchAxis ? n : 1)) + coord[a];
  }
  return dst;
}

/// The x element that output element `t` of a slice of n samples reads.
MEMFIT_HD int64_t sliceSource(const SliceParams &p, int64_t n, int64_t t) {
  int64_t src = 0, stride = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    int64_t scale = i == p.batchAxis ? n : 1;
    int64_t yExtent = p.ydims[i] * scale;
    src += (t % yExtent * p.steps[i] + p.starts[i]) * stride;
    t /= yExtent;
    stride *= p.xdims[i] * scale;
  }
  return src;
}

/// The gradient of x element `t`: dy where the window covers it, else 0.
MEMFIT_HD float sliceGradAt(const SliceParams &p, int64_t n, auto dy,
                            int64_t t) {
  int64_t dst = 0, stride = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    int64_t scale = i == p.batchAxis ? n : 1;
    int64_t c = t % (p.xdims[i] * scale) - p.starts[i];
    t /= p.xdims[i] * scale;
    if (c < 0 || c % p.steps[i] != 0)
      return 0.0f;
    c /= p.steps[i];
    if (c >= p.ydims[i] * scale)
      return 0.0f;
    dst += c * stride;
    stride *= p.ydims[i] * scale;
  }
  return dy[dst];
}

/// The x element that output element `t` of a broadcast of n samples reads.
MEMFIT_HD int64_t expandSource(const ExpandParams &p, int64_t n, int64_t t) {
  int64_t src = 0, stride = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    int64_t scale = i == p.batchAxis ? n : 1;
    int64_t c = t % (p.ydims[i] * scale);
    t /= p.ydims[i] * scale;
    if (p.xdims[i] == p.ydims[i])
      src += c * stride;
    stride *= p.xdims[i] * scale;
  }
  return src;
}

/// The gradient of x element `t`: dy summed over the elements that repeat
/// it, in order, in double.
MEMFIT_HD float expandGradAt(const ExpandParams &p, int64_t n, auto dy,
                             int64_t t) {
  int64_t coord[kMaxRank], repeats = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    int64_t extent = p.xdims[i] * (i == p.batchAxis ? n : 1);
    coord[i] = t % extent;
    t /= extent;
    if (p.xdims[i] != p.ydims[i])
      repeats *= p.ydims[i];
  }
  double sum = 0;
  for (int64_t r = 0; r < repeats; ++r) {
    int64_t at[kMaxRank], rest = r;
    for (int i = p.rank - 1; i >= 0; --i) {
      at[i] = coord[i];
      if (p.xdims[i] != p.ydims[i]) {
        at[i] = rest % p.ydims[i];
        rest /= p.ydims[i];
      }
    }
    int64_t dst = 0;
    for (int i = 0; i < p.rank; ++i)
      dst = dst * (p.ydims[i] * (i == p.batchAxis ? n : 1)) + at[i];
    sum += dy[dst];
  }
  return float(sum);
}

// --- resize ---

/// The input coordinate of output index `o` along one axis.
MEMFIT_HD float resizeCoord(const ResizeParams &p, int64_t o, int64_t in,
                            int64_t out, float scale) {
  float x = float(o);
  switch (p.coordMode) {
  case 1: // pytorch_half_pixel
    return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
  case 2: // align_corners
    return out == 1 ? 0.0f : x * float(in - 1) / float(out - 1);
  case 3: // asymmetric
    return x / scale;
  default: // half_pixel
    return (x + 0.5f) / scale - 0.5f;
  }
}

MEMFIT_HD int64_t resizeNearest(const ResizeParams &p, float c, int64_t in) {
  float r;
  switch (p.nearestMode) {
  case 1: // round_prefer_ceil
    r = ::floorf(c + 0.5f);
    break;
  case 2:
    r = ::floorf(c);
    break;
  case 3:
    r = ::ceilf(c);
    break;
  default: // round_prefer_floor
    r = c == ::floorf(c) + 0.5f ? ::floorf(c) : ::roundf(c);
  }
  int64_t i = int64_t(r);
  return i < 0 ? 0 : (i >= in ? in - 1 : i);
}

/// The (up to two) input positions and weights output index `o` reads
/// along one axis.
MEMFIT_HD void resizeTaps(const ResizeParams &p, int64_t o, int64_t in,
                          int64_t out, float scale, int64_t &i0, int64_t &i1,
                          float &w1) {
  float c = resizeCoord(p, o, in, out, scale);
  if (!p.linear) {
    i0 = i1 = resizeNearest(p, c, in);
    w1 = 0;
    return;
  }
  c = c < 0 ? 0.0f : (c > float(in - 1) ? float(in - 1) : c);
  i0 = int64_t(::floorf(c));
  i1 = i0 + 1 < in ? i0 + 1 : i0;
  w1 = c - float(i0);
}

/// The four input elements output element t (of n * c planes) reads, as
/// offsets from the start of all planes, and their weights (nearest: one
/// element four times, three weights 0). The backward scatters along them.
MEMFIT_HD void resizeGradTaps(const ResizeParams &p, int64_t t, int64_t at[4],
                              float w[4]) {
  const int64_t plane = p.hout * p.wout;
  int64_t pl = t / plane, q = t - pl * plane;
  int64_t oh = q / p.wout, ow = q - oh * p.wout;
  int64_t h0, h1, w0, w1;
  float fh, fw;
  resizeTaps(p, oh, p.hin, p.hout, p.scaleH, h0, h1, fh);
  resizeTaps(p, ow, p.win, p.wout, p.scaleW, w0, w1, fw);
  const int64_t base = pl * p.hin * p.win;
  at[0] = base + h0 * p.win + w0;
  at[1] = base + h0 * p.win + w1;
  at[2] = base + h1 * p.win + w0;
  at[3] = base + h1 * p.win + w1;
  w[0] = (1 - fh) * (1 - fw);
  w[1] = (1 - fh) * fw;
  w[2] = fh * (1 - fw);
  w[3] = fh * fw;
}

/// Output element t of n * c planes.
MEMFIT_HD float resizeAt(const ResizeParams &p, auto x, int64_t t) {
  const int64_t plane = p.hout * p.wout;
  int64_t pl = t / plane, q = t - pl * plane;
  int64_t oh = q / p.wout, ow = q - oh * p.wout;
  int64_t h0, h1, w0, w1i;
  float fh, fw;
  resizeTaps(p, oh, p.hin, p.hout, p.scaleH, h0, h1, fh);
  resizeTaps(p, ow, p.win, p.wout, p.scaleW, w0, w1i, fw);
  auto xp = x + pl * p.hin * p.win;
  float top = xp[h0 * p.win + w0] * (1 - fw) + xp[h0 * p.win + w1i] * fw;
  float bottom = xp[h1 * p.win + w0] * (1 - fw) + xp[h1 * p.win + w1i] * fw;
  return top * (1 - fh) + bottom * fh;
}

// --- masked fill ---

MEMFIT_HD bool whereFilled(const WhereParams &p, auto mask, int64_t at) {
  int64_t s = at / p.perSample, i = at - s * p.perSample;
  int64_t m = (i / p.inner) % p.maskSize + (p.maskBatched ? s * p.maskSize : 0);
  return (mask[m] != 0.0f) == p.fillWhere;
}

// --- padding ---

/// Output element t of n * c planes: input (h - padTop, w - padLeft) when it
/// exists (begin pads may be negative: ONNX Pad crops then), else `value`.
MEMFIT_HD float padAt(const PadParams &p, auto x, int64_t t) {
  const int64_t plane = p.hout * p.wout;
  int64_t pl = t / plane, q = t - pl * plane;
  int64_t oh = q / p.wout, ow = q - oh * p.wout;
  int64_t ih = oh - p.padTop, iw = ow - p.padLeft;
  bool inside = ih >= 0 && ih < p.hin && iw >= 0 && iw < p.win;
  return inside ? x[(pl * p.hin + ih) * p.win + iw] : p.value;
}

/// Input gradient element t: a cropped input position gets none.
MEMFIT_HD float padGradAt(const PadParams &p, auto dy, int64_t t) {
  const int64_t plane = p.hin * p.win;
  int64_t pl = t / plane, q = t - pl * plane;
  int64_t ih = q / p.win, iw = q - ih * p.win;
  int64_t oh = ih + p.padTop, ow = iw + p.padLeft;
  bool kept = oh >= 0 && oh < p.hout && ow >= 0 && ow < p.wout;
  return kept ? dy[(pl * p.hout + oh) * p.wout + ow] : 0.0f;
}

// --- dropout's counter-based mask (splitmix64 steps) ---

MEMFIT_HD uint64_t mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z;
}

MEMFIT_HD uint64_t step64(uint64_t z) {
  return mix64(z + 0x9e3779b97f4a7c15ULL);
}

/// The key of one dropout task's masks in one iteration (runtime/cpu/
/// Dropout.cpp states the formula): a replayed CUDA graph computes it on
/// the device from the iteration in device memory, so the masks follow the
/// iteration without a capture per iteration.
MEMFIT_HD uint64_t dropoutKeyOf(uint64_t seed, uint64_t iteration,
                                uint64_t task) {
  return step64(step64(step64(seed) + iteration) + task);
}

/// The uniform in [0, 1) of element `element` of the sample whose key is
/// step64(key + sample): the top 24 bits, exact as a float.
MEMFIT_HD float uniformOf(uint64_t sampleKey, uint64_t element) {
  uint64_t h = step64(sampleKey + element);
  return float(uint32_t(h >> 40)) * 0x1.0p-24f;
}

/// The key of sample s (counted from `firstSample`) of a task's masks.
MEMFIT_HD uint64_t dropoutSampleKey(uint64_t key, int64_t firstSample,
                                    int64_t s) {
  return step64(key + uint64_t(firstSample + s));
}

/// Element i of a sample whose key is sampleKey, scaled and kept, or
/// dropped. Split from dropoutAt so that a kernel over a run of one
/// sample's elements derives the sample's key once.
MEMFIT_HD float dropoutKept(const DropoutParams &p, uint64_t sampleKey,
                            int64_t i, float in) {
  const float scale = 1.0f / (1.0f - p.ratio);
  uint64_t element = p.wholeSample ? 0 : uint64_t(i);
  return uniformOf(sampleKey, element) >= p.ratio ? in * scale : 0.0f;
}

/// Element `at` (of samples starting at `firstSample`) scaled and kept, or
/// dropped: the same for the forward, its recompute and the backward.
MEMFIT_HD float dropoutAt(const DropoutParams &p, uint64_t key,
                          int64_t firstSample, int64_t at, float in) {
  int64_t s = at / p.perSample, i = at - s * p.perSample;
  return dropoutKept(p, dropoutSampleKey(key, firstSample, s), i, in);
}

// --- dense layers' bias ---

/// Column j of an [n, m] matrix summed over its n rows, in double and in
/// row order: a bias gradient.
MEMFIT_HD double columnSum(auto dy, int64_t n, int64_t m, int64_t j) {
  double sum = 0;
  for (int64_t s = 0; s < n; ++s)
    sum += dy[s * m + j];
  return sum;
}

// --- SGD ---

/// torch.optim.SGD on one element (dampening 0, no Nesterov); `buf` null
/// without momentum.
MEMFIT_HD void sgdAt(int64_t i, float lr, float momentum, float weightDecay,
                     bool first, float *w, const float *dw, float *buf) {
  float g = dw[i] + weightDecay * w[i];
  if (buf) {
    buf[i] = first ? g : momentum * buf[i] + g;
    g = buf[i];
  }
  w[i] -= lr * g;
}

// --- Adam ---

/// One element of torch.optim.Adam / AdamW (amsgrad off), in PyTorch's
/// order of operations (its single-tensor implementation).
MEMFIT_HD void adamAt(const AdamParams &p, int64_t i, float *w, const float *dw,
                      float *m, float *v) {
  float g = dw[i];
  if (p.decoupled)
    w[i] *= 1.0f - p.lr * p.weightDecay;
  else
    g += p.weightDecay * w[i];
  m[i] += (g - m[i]) * (1.0f - p.beta1); // exp_avg.lerp_(grad, 1 - beta1)
  v[i] = v[i] * p.beta2 + (1.0f - p.beta2) * g * g;
  double bc1 = 1.0 - ::pow(double(p.beta1), double(p.step));
  double bc2 = 1.0 - ::pow(double(p.beta2), double(p.step));
  float stepSize = float(double(p.lr) / bc1);
  float denom = float(::sqrt(double(v[i])) / ::sqrt(bc2)) + p.eps;
  w[i] -= stepSize * (m[i] / denom);
}

} // namespace memfit::rt::kernels

#endif
