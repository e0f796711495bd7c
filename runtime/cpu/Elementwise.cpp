//===- Elementwise.cpp - Reference activations, binary ops, concat, pad
//----===//
//
// Activation backwards read only the output, so every activation may run in
// place. Their derivative at a kink is the one-sided value PyTorch uses:
// 0 for Relu at 0, alpha for LeakyRelu at 0; Clip passes the gradient only
// strictly inside (lo, hi) (Hardtanh/ReLU6's rule). Broadcast gradients of a
// binary op's b are summed in double.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace memfit::rt {
using cpu::put;

void activationForward(const ActParams &p, int64_t count, const float *x,
                       float *y) {
  for (int64_t i = 0; i < count; ++i) {
    float v = x[i];
    switch (p.kind) {
    case ActKind::Relu:
      y[i] = v < 0 ? 0.0f : v; // NaN passes through, as in PyTorch
      break;
    case ActKind::LeakyRelu:
      y[i] = v < 0 ? p.alpha * v : v;
      break;
    case ActKind::Sigmoid:
      y[i] = float(1.0 / (1.0 + std::exp(-double(v))));
      break;
    case ActKind::Tanh:
      y[i] = std::tanh(v);
      break;
    case ActKind::Clip:
      y[i] = v < p.lo ? p.lo : (v > p.hi ? p.hi : v);
      break;
    }
  }
}

void activationBackward(const ActParams &p, int64_t count, const float *y,
                        const float *dy, float *dx, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) {
    float v = y[i], g = dy[i], d = 0;
    switch (p.kind) {
    case ActKind::Relu:
      d = v > 0 ? g : 0.0f;
      break;
    case ActKind::LeakyRelu:
      d = v > 0 ? g : p.alpha * g;
      break;
    case ActKind::Sigmoid:
      d = g * v * (1.0f - v);
      break;
    case ActKind::Tanh:
      d = g * (1.0f - v * v);
      break;
    case ActKind::Clip:
      d = v > p.lo && v < p.hi ? g : 0.0f;
      break;
    }
    put(dx[i], d, accumulate);
  }
}

namespace {
float apply(BinaryKind k, float a, float b) {
  switch (k) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  }
  return 0;
}

/// Index of b paired with element i of sample s.
int64_t bIndex(const BinaryParams &p, int64_t s, int64_t i) {
  return p.bBatched ? s * p.perSample + i : (i / p.inner) % p.bSize;
}
} // namespace

void binaryForward(const BinaryParams &p, int64_t n, const float *a,
                   const float *b, float *y) {
  assert(p.bBatched || (p.bSize > 0 && p.inner > 0));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < p.perSample; ++i) {
      int64_t at = s * p.perSample + i;
      y[at] = apply(p.kind, a[at], b[bIndex(p, s, i)]);
    }
}

void binaryBackward(const BinaryParams &p, int64_t n, const float *a,
                    const float *b, const float *dy, float *da, float *db,
                    bool accumulateA, bool accumulateB) {
  assert(p.bBatched || (p.bSize > 0 && p.inner > 0));
  if (da)
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < p.perSample; ++i) {
        int64_t at = s * p.perSample + i;
        float g =
            p.kind == BinaryKind::Mul ? dy[at] * b[bIndex(p, s, i)] : dy[at];
        put(da[at], g, accumulateA);
      }
  if (!db)
    return;
  auto gradB = [&](int64_t at) {
    switch (p.kind) {
    case BinaryKind::Add:
      return dy[at];
    case BinaryKind::Sub:
      return -dy[at];
    case BinaryKind::Mul:
      return dy[at] * a[at];
    }
    return 0.0f;
  };
  if (p.bBatched) {
    for (int64_t at = 0; at < n * p.perSample; ++at)
      put(db[at], gradB(at), accumulateB);
    return;
  }
  std::vector<double> sum(p.bSize, 0.0);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < p.perSample; ++i)
      sum[bIndex(p, s, i)] += gradB(s * p.perSample + i);
  for (int64_t j = 0; j < p.bSize; ++j)
    put(db[j], float(sum[j]), accumulateB);
}

void concatForward(int64_t n, int64_t numInputs, const int64_t *parts,
                   const float *const *inputs, float *y) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < numInputs; ++k) {
      const float *src = inputs[k] + s * parts[k];
      std::copy(src, src + parts[k], y);
      y += parts[k];
    }
}

void concatBackward(int64_t n, int64_t numInputs, const int64_t *parts,
                    const float *dy, float *const *dInputs,
                    const bool *accumulate) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < numInputs; ++k) {
      if (float *dst = dInputs[k])
        for (int64_t i = 0; i < parts[k]; ++i)
          put(dst[s * parts[k] + i], dy[i], accumulate[k]);
      dy += parts[k];
    }
}

// Begin pads may be negative (ONNX Pad crops then); output position (h, w)
// reads input (h - padTop, w - padLeft) when that exists, else `value`.
void padForward(const PadParams &p, int64_t n, const float *x, float *y) {
  for (int64_t pl = 0; pl < n * p.c; ++pl) {
    const float *xin = x + pl * p.hin * p.win;
    float *yout = y + pl * p.hout * p.wout;
    for (int64_t oh = 0; oh < p.hout; ++oh) {
      int64_t ih = oh - p.padTop;
      for (int64_t ow = 0; ow < p.wout; ++ow) {
        int64_t iw = ow - p.padLeft;
        bool inside = ih >= 0 && ih < p.hin && iw >= 0 && iw < p.win;
        yout[oh * p.wout + ow] = inside ? xin[ih * p.win + iw] : p.value;
      }
    }
  }
}

void padBackward(const PadParams &p, int64_t n, const float *dy, float *dx,
                 bool accumulate) {
  for (int64_t pl = 0; pl < n * p.c; ++pl) {
    const float *dyout = dy + pl * p.hout * p.wout;
    float *dxin = dx + pl * p.hin * p.win;
    for (int64_t ih = 0; ih < p.hin; ++ih) {
      int64_t oh = ih + p.padTop;
      for (int64_t iw = 0; iw < p.win; ++iw) {
        int64_t ow = iw + p.padLeft;
        // A cropped input position gets no gradient.
        bool kept = oh >= 0 && oh < p.hout && ow >= 0 && ow < p.wout;
        put(dxin[ih * p.win + iw], kept ? dyout[oh * p.wout + ow] : 0.0f,
            accumulate);
      }
    }
  }
}

void accumulate(int64_t count, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i)
    y[i] += x[i];
}

} // namespace memfit::rt
