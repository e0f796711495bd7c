//===- Attention.cu - CUDA backend: fused attention -----------------------===//
//
// memfit's own memory-efficient attention for any head size up to
// kMaxAttentionWidth, tiled as FlashAttention tiles it: a block owns a tile
// of query rows (the forward, dQ) or of key rows (dK, dV), one row per
// thread, and stages the other side's rows through shared memory one tile at
// a time with the loaders and steps of runtime/kernels/Attention.h, the
// emulation's source. Exact, no T x S memory, no atomics. cuDNN's fused
// attention (fp16 and bf16 only) is not used: memfit trains in fp32.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Device.cuh"
#include "runtime/cuda/Impl.h"
#include "runtime/kernels/Attention.h"

namespace memfit::rt {

using cuda::View;
using AttnSample = kernels::AttnSampleT<View>;
using kernels::kAttnQueryTile;

namespace {

constexpr int64_t kTileFloats = kernels::kAttnTileBytes / sizeof(float);

__device__ AttnSample sampleOf(const AttentionParams &p, int64_t i, View q,
                               View k, View v, View mask) {
  return {q + i * p.heads * p.t * p.d, k + i * p.kvHeads * p.s * p.d,
          v + i * p.kvHeads * p.s * p.dv, mask, i};
}

/// Blocks for `tiles` tiles: one each, up to a grid the kernels stride over.
unsigned blocksFor(int64_t tiles) {
  return static_cast<unsigned>(tiles < (1 << 20) ? tiles : (1 << 20));
}

/// The key tiles of head h, one after another: the block loads each into
/// shared memory (every thread a share), then `step(s0, count)` runs. The
/// block's query rows [t0, t0 + tc) skip a tile wholly outside a band mask,
/// the same tiles the CPU skips; the test is the block's, so every thread
/// reaches the same barriers.
template <typename Step>
__device__ void walkKeyTiles(const AttentionParams &p, const AttnSample &a,
                             int64_t h, int64_t t0, int64_t tc, float *kTile,
                             float *vTile, int64_t kc, Step step) {
  for (int64_t s0 = 0; s0 < p.s; s0 += kc) {
    int64_t sc = p.s - s0 < kc ? p.s - s0 : kc;
    if (kernels::attnSkipTile(p, t0, tc, s0, sc))
      continue;
    __syncthreads();
    kernels::attnLoadKeys(p, a, kernels::attnKVHead(p, h), s0, sc, kTile, vTile,
                          threadIdx.x, blockDim.x);
    __syncthreads();
    step(s0, sc);
  }
}

/// Block: kAttnQueryTile query rows of one sample and head; W bounds the
/// head widths (widthOf).
template <int W> struct AttentionKernel {
  static constexpr int threads = kAttnQueryTile;
  __device__ static void run(AttentionParams p, int64_t n,
                             cuda::DropoutKey dropKey, int64_t firstSample,
                             View q, View k, View v, View mask, View o,
                             View lse) {
    __shared__ float tile[kTileFloats];
    const uint64_t key = dropKey.get();
    int64_t perHead = kernels::attnTiles(p.t);
    int64_t tiles = n * p.heads * perHead;
    int64_t kc = kernels::attnKeyTile(p);
    float *kTile = tile, *vTile = tile + kc * p.d;
    for (int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
      int64_t i = b / (p.heads * perHead), h = b / perHead % p.heads;
      int64_t t0 = b % perHead * kAttnQueryTile, t = t0 + threadIdx.x;
      int64_t tc = p.t - t0 < kAttnQueryTile ? p.t - t0 : kAttnQueryTile;
      AttnSample a = sampleOf(p, i, q, k, v, mask);
      kernels::AttnRow<W> row;
      kernels::attnRowBegin(p, row);
      walkKeyTiles(p, a, h, t0, tc, kTile, vTile, kc,
                   [&](int64_t s0, int64_t sc) {
                     if (t < p.t)
                       kernels::attnForwardKeys(p, a, key, firstSample, h, t,
                                                s0, sc, kTile, vTile, row);
                   });
      if (t < p.t) {
        int64_t r = (i * p.heads + h) * p.t + t;
        kernels::attnRowEnd(p, row, o + r * p.dv, lse + r);
      }
    }
  }
};

/// Block: kAttnQueryTile query rows of one sample and head.
template <int W> struct AttentionGradQKernel {
  static constexpr int threads = kAttnQueryTile;
  __device__ static void run(AttentionParams p, int64_t n,
                             cuda::DropoutKey dropKey, int64_t firstSample,
                             View q, View k, View v, View mask, View o,
                             View lse, View dO, View dq, bool acc) {
    __shared__ float tile[kTileFloats];
    const uint64_t key = dropKey.get();
    int64_t perHead = kernels::attnTiles(p.t);
    int64_t tiles = n * p.heads * perHead;
    int64_t kc = kernels::attnKeyTile(p);
    float *kTile = tile, *vTile = tile + kc * p.d;
    for (int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
      int64_t i = b / (p.heads * perHead), h = b / perHead % p.heads;
      int64_t t0 = b % perHead * kAttnQueryTile, t = t0 + threadIdx.x;
      int64_t tc = p.t - t0 < kAttnQueryTile ? p.t - t0 : kAttnQueryTile;
      int64_t r = (i * p.heads + h) * p.t + t;
      AttnSample a = sampleOf(p, i, q, k, v, mask);
      kernels::AttnQGrad<W> grad;
      if (t < p.t)
        kernels::attnGradQBegin(p, o + r * p.dv, dO + r * p.dv, grad);
      walkKeyTiles(p, a, h, t0, tc, kTile, vTile, kc,
                   [&](int64_t s0, int64_t sc) {
                     if (t < p.t)
                       kernels::attnGradQKeys(p, a, key, firstSample, h, t,
                                              dO + r * p.dv, lse[r], s0, sc,
                                              kTile, vTile, grad);
                   });
      if (t < p.t)
        kernels::attnGradQEnd(p, grad, dq + r * p.d, acc);
    }
  }
};

/// Block: kAttnQueryTile key rows of one sample and K/V head, against every
/// query tile of the heads that read them, in head order.
template <int W> struct AttentionGradKVKernel {
  static constexpr int threads = kAttnQueryTile;
  __device__ static void run(AttentionParams p, int64_t n,
                             cuda::DropoutKey dropKey, int64_t firstSample,
                             View q, View k, View v, View mask, View o,
                             View lse, View dO, View dk, View dv, bool accK,
                             bool accV) {
    __shared__ float tile[kTileFloats];
    const uint64_t key = dropKey.get();
    int64_t perHead = kernels::attnTiles(p.s);
    int64_t tiles = n * p.kvHeads * perHead;
    int64_t qc = kernels::attnQueryTileOfKV(p);
    float *qTile = tile, *dOTile = qTile + qc * p.d;
    float *lseTile = dOTile + qc * p.dv, *dDotTile = lseTile + qc;
    int64_t rowsPerSample = p.heads * p.t;
    for (int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
      int64_t i = b / (p.kvHeads * perHead), hk = b / perHead % p.kvHeads;
      int64_t s0 = b % perHead * kAttnQueryTile, s = s0 + threadIdx.x;
      int64_t sc = p.s - s0 < kAttnQueryTile ? p.s - s0 : kAttnQueryTile;
      AttnSample a = sampleOf(p, i, q, k, v, mask);
      const View oS = o + i * rowsPerSample * p.dv;
      const View dOS = dO + i * rowsPerSample * p.dv;
      const View lseS = lse + i * rowsPerSample;
      kernels::AttnKVGrad<W> grad;
      if (s < p.s)
        kernels::attnGradKVBegin(p, grad);
      int64_t h0 = p.kvHeads == 1 ? 0 : hk;
      int64_t h1 = p.kvHeads == 1 ? p.heads : hk + 1;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t t0 = 0; t0 < p.t; t0 += qc) {
          int64_t tc = p.t - t0 < qc ? p.t - t0 : qc;
          if (kernels::attnSkipTile(p, t0, tc, s0, sc))
            continue;
          __syncthreads();
          kernels::attnLoadQueries(p, a, oS, dOS, lseS, h, t0, tc, qTile,
                                   dOTile, lseTile, dDotTile, threadIdx.x,
                                   blockDim.x);
          __syncthreads();
          if (s < p.s)
            kernels::attnGradKVQueries(p, a, key, firstSample, h, s, t0, tc,
                                       qTile, dOTile, lseTile, dDotTile, grad);
        }
      if (s < p.s) {
        int64_t head = i * p.kvHeads + hk;
        kernels::attnGradKVEnd(p, s, grad, dk + head * p.s * p.d,
                               dv + head * p.s * p.dv, accK, accV);
      }
    }
  }
};

/// The smallest of 64, 128 and 256 that bounds both head widths: a row's
/// state of 64 floats stays in registers, of 256 in local memory, whose
/// size the driver reserves for every thread the GPU can hold.
int widthOf(const AttentionParams &p) {
  const int64_t w = p.d > p.dv ? p.d : p.dv;
  return w <= 64 ? 64 : w <= 128 ? 128 : 256;
}
static_assert(kMaxAttentionWidth == 256, "widthOf's largest bucket");

/// Launches K<64>, K<128> or K<256> for the widths of p.
template <template <int> class K, class... Args>
void launchWidth(const AttentionParams &p, unsigned blocks, cudaStream_t st,
                 Args &&...args) {
  switch (widthOf(p)) {
  case 64:
    cuda::launch<K<64>>(blocks, st, p, std::forward<Args>(args)...);
    break;
  case 128:
    cuda::launch<K<128>>(blocks, st, p, std::forward<Args>(args)...);
    break;
  default:
    cuda::launch<K<256>>(blocks, st, p, std::forward<Args>(args)...);
  }
}

} // namespace

void Exec::attentionForward(const AttentionParams &p, uint64_t taskKey,
                            const float *q, const float *k, const float *v,
                            const float *mask, float *o, float *lse) {
  int64_t tiles = n * p.heads * kernels::attnTiles(p.t);
  launchWidth<AttentionKernel>(
      p, blocksFor(tiles), impl->compute(), n, impl->dropoutKey(*this, taskKey),
      firstSample, impl->view(q), impl->view(k), impl->view(v),
      impl->view(mask), impl->view(o), impl->view(lse));
  impl->done(*this, "attention kernel");
}

void Exec::attentionBackward(const AttentionParams &p, uint64_t taskKey,
                             const float *q, const float *k, const float *v,
                             const float *mask, const float *o,
                             const float *lse, const float *dO, float *dq,
                             float *dk, float *dv, bool accQ, bool accK,
                             bool accV) {
  const cuda::DropoutKey key = impl->dropoutKey(*this, taskKey);
  if (dq) {
    int64_t tiles = n * p.heads * kernels::attnTiles(p.t);
    launchWidth<AttentionGradQKernel>(
        p, blocksFor(tiles), impl->compute(), n, key, firstSample,
        impl->view(q), impl->view(k), impl->view(v), impl->view(mask),
        impl->view(o), impl->view(lse), impl->view(dO), impl->view(dq), accQ);
    impl->done(*this, "attention dQ kernel");
  }
  if (dk || dv) {
    int64_t tiles = n * p.kvHeads * kernels::attnTiles(p.s);
    launchWidth<AttentionGradKVKernel>(
        p, blocksFor(tiles), impl->compute(), n, key, firstSample,
        impl->view(q), impl->view(k), impl->view(v), impl->view(mask),
        impl->view(o), impl->view(lse), impl->view(dO), impl->view(dk),
        impl->view(dv), accK, accV);
    impl->done(*this, "attention dK/dV kernel");
  }
}

} // namespace memfit::rt
