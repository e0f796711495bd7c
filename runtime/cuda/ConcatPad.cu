//===- ConcatPad.cu - CUDA backend: concatenation and padding -------------===//
//
// Concatenation (DenseNet, Inception, U-Net) copies each sample's row
// segment of every input into its place in the output row, and its
// backward copies (or adds) them back. On operands of one storage the
// kernel is templated on it (ConcatTyped) and, where every segment starts
// and ends on a 16-byte boundary, moves 16-byte packs; otherwise element
// by element without a per-element switch. Padding gathers through
// kernels::padAt / padGradAt (GatherTyped: the output by 16-byte packs).
// Mixed storage keeps the View kernels. Every path converts each value as
// the View kernels do, so all agree bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Gather.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Elementwise.h"

namespace memfit::rt {

using cuda::gridFor;
using cuda::kThreads;
using cuda::put;
using cuda::Store;
using cuda::View;

namespace {

/// Up to kConcatChunk inputs of a concatenation, handled by one launch:
/// columns [begin, begin + width) of each sample's `total`.
constexpr int kConcatChunk = 16;
struct ConcatChunk {
  int count = 0;
  int64_t begin = 0, width = 0;
  int64_t offset[kConcatChunk]; // first column of input k
  int64_t part[kConcatChunk];   // its columns per sample
  View ptr[kConcatChunk];       // the input (forward) or its gradient
  bool acc[kConcatChunk];

  /// The input holding column `col` (of this chunk).
  __device__ int inputOf(int64_t col) const {
    int k = 0;
    while (k + 1 < count && col >= offset[k + 1])
      ++k;
    return k;
  }
};

/// Forward: y[s, col] = input_k[s, col - offset_k]. Backward: the same
/// element of dy goes (put) into gradient k, unless that is null.
struct ConcatKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(ConcatChunk c, int64_t n, int64_t total, View y,
                             View dy, bool backward) {
    MEMFIT_GRID_LOOP(t, n * c.width) {
      int64_t s = t / c.width, col = c.begin + (t - s * c.width);
      const int k = c.inputOf(col);
      int64_t at = s * c.part[k] + (col - c.offset[k]);
      if (!backward)
        y[s * total + col] = c.ptr[k][at];
      else if (c.ptr[k])
        put(c.ptr[k][at], dy[s * total + col], c.acc[k]);
    }
  }
};

/// ConcatKernel on operands of one storage S, in units of one 16-byte pack
/// (`packed`: every segment and row aligned) or of one element. A copy
/// converts each value (read as float, stored rounded) as the View kernel
/// does, so a 16-bit NaN comes out as it would there.
template <Store S> struct ConcatTyped {
  static constexpr int threads = kThreads;
  using P = cuda::Pack<S>;
  using T = cuda::Typed<S>;
  __device__ static void run(ConcatChunk c, int64_t n, int64_t total, char *y,
                             const char *dy, bool backward, bool packed) {
    const int64_t unit = packed ? P::width : 1, units = c.width / unit;
    MEMFIT_GRID_LOOP(t, n * units) {
      int64_t s = t / units, col = c.begin + (t - s * units) * unit;
      const int k = c.inputOf(col);
      const int64_t at = s * c.part[k] + (col - c.offset[k]);
      const int64_t yAt = s * total + col;
      char *dst = backward ? c.ptr[k].p : y;
      if (!dst)
        continue;
      const char *src = backward ? dy : c.ptr[k].p;
      const int64_t from = backward ? yAt : at, to = backward ? at : yAt;
      const bool acc = backward && c.acc[k];
      if (packed) {
        const P in = P::load(src, from / P::width);
        P out = acc ? P::load(dst, to / P::width) : P{};
#pragma unroll
        for (int j = 0; j < P::width; ++j)
          out.set(j, acc ? out.get(j) + in.get(j) : in.get(j));
        out.store(dst, to / P::width);
      } else {
        const float v = T::load(src, from);
        T::store(dst, to, acc ? T::load(dst, to) + v : v);
      }
    }
  }
};

/// Whether chunk c moves by 16-byte packs of `width` elements: the output
/// row, every input's segment and where it lands all whole packs, and
/// every base address 16-byte aligned.
bool concatPacked(const ConcatChunk &c, int64_t total, View whole, int width) {
  auto aligned = [](const View &v) {
    return reinterpret_cast<uintptr_t>(v.p) % 16 == 0;
  };
  if (total % width != 0 || !aligned(whole))
    return false;
  for (int k = 0; k < c.count; ++k)
    if (c.part[k] % width != 0 || c.offset[k] % width != 0 ||
        !aligned(c.ptr[k]))
      return false;
  return true;
}

/// Whether the chunk's operands (the null gradients aside) share the
/// output's storage.
bool concatSameStore(const ConcatChunk &c, View whole) {
  for (int k = 0; k < c.count; ++k)
    if (c.ptr[k] && c.ptr[k].t != whole.t)
      return false;
  return true;
}

void concatChunk(const Exec::Impl &im, const ConcatChunk &c, int64_t n,
                 int64_t total, View y, View dy) {
  const View whole = dy ? dy : y;
  if (!concatSameStore(c, whole)) {
    cuda::launch<ConcatKernel>(gridFor(n * c.width), im.compute(), c, n, total,
                               y, dy, bool(dy));
    return;
  }
  cuda::withStore(whole.t, [&](auto s) {
    using K = ConcatTyped<decltype(s)::value>;
    const bool packed = concatPacked(c, total, whole, K::P::width);
    const int64_t units = n * (packed ? c.width / K::P::width : c.width);
    cuda::launch<K>(gridFor(units), im.compute(), c, n, total, y.p, dy.p,
                    bool(dy), packed);
  });
}

/// Launches the concatenation over the inputs in chunks of kConcatChunk.
void concat(const Exec::Impl &im, int64_t n, int64_t numInputs,
            const int64_t *parts, float *const *ptrs, const bool *acc, View y,
            View dy) {
  int64_t total = 0;
  for (int64_t k = 0; k < numInputs; ++k)
    total += parts[k];
  int64_t column = 0;
  for (int64_t first = 0; first < numInputs; first += kConcatChunk) {
    ConcatChunk c;
    c.begin = column;
    for (int64_t k = first; k < numInputs && c.count < kConcatChunk; ++k) {
      c.offset[c.count] = column;
      c.part[c.count] = parts[k];
      c.ptr[c.count] = im.view(ptrs[k]);
      c.acc[c.count] = acc ? acc[k] : false;
      column += parts[k];
      ++c.count;
    }
    c.width = column - c.begin;
    if (c.width > 0)
      concatChunk(im, c, n, total, y, dy);
  }
}

struct PadForwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(PadParams p, int64_t n, View x, View y) {
    MEMFIT_GRID_LOOP(t, n * p.c * p.hout * p.wout) {
      y[t] = kernels::padAt(p, x, t);
    }
  }
};

struct PadBackwardKernel {
  static constexpr int threads = kThreads;
  __device__ static void run(PadParams p, int64_t n, View dy, View dx,
                             bool acc) {
    MEMFIT_GRID_LOOP(t, n * p.c * p.hin * p.win) {
      put(dx[t], kernels::padGradAt(p, dy, t), acc);
    }
  }
};

/// kernels::padAt and padGradAt as GatherTyped's functions.
struct PadAt {
  PadParams p;
  __device__ float operator()(auto x, int64_t t) const {
    return kernels::padAt(p, x, t);
  }
};
struct PadGradAt {
  PadParams p;
  __device__ float operator()(auto dy, int64_t t) const {
    return kernels::padGradAt(p, dy, t);
  }
};

} // namespace

void Exec::concatForward(int64_t numInputs, const int64_t *parts,
                         const float *const *inputs, float *y, int64_t rows) {
  // The kernel only reads inputs in the forward direction.
  concat(*impl, n * rows, numInputs, parts, const_cast<float *const *>(inputs),
         nullptr, impl->view(y), View{});
  impl->done(*this, "concat forward kernel");
}

void Exec::concatBackward(int64_t numInputs, const int64_t *parts,
                          const float *dy, float *const *dInputs,
                          const bool *acc, int64_t rows) {
  concat(*impl, n * rows, numInputs, parts, dInputs, acc, View{},
         impl->view(dy));
  impl->done(*this, "concat backward kernel");
}

void Exec::padForward(const PadParams &p, const float *x, float *y) {
  const int64_t count = n * p.c * p.hout * p.wout;
  const View vx = impl->view(x), vy = impl->view(y);
  if (!cuda::gatherTyped(impl->compute(), PadAt{p}, count, vx, vy, false))
    cuda::launch<PadForwardKernel>(gridFor(count), impl->compute(), p, n, vx,
                                   vy);
  impl->done(*this, "pad forward kernel");
}

void Exec::padBackward(const PadParams &p, const float *dy, float *dx,
                       bool acc) {
  if (!dx)
    return;
  const int64_t count = n * p.c * p.hin * p.win;
  const View vdy = impl->view(dy), vdx = impl->view(dx);
  if (!cuda::gatherTyped(impl->compute(), PadGradAt{p}, count, vdy, vdx, acc))
    cuda::launch<PadBackwardKernel>(gridFor(count), impl->compute(), p, n, vdy,
                                    vdx, acc);
  impl->done(*this, "pad backward kernel");
}

} // namespace memfit::rt
