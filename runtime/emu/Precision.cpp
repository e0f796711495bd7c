//===- Precision.cpp - The emulation's 16-bit storage and TF32 ------------===//
//
// Where the CPU emulation rounds: a 16-bit block handed to an operation
// (Exec::arena16) is rounded to bf16 or fp16 as soon as the operation is
// done, before any later call can read it or copy it out, which is where a
// GPU kernel rounds as it stores; the operation itself computes in fp32
// from values that are already exact 16-bit numbers (fp32 accumulation, as
// tensor cores and cuDNN's 16-bit kernels do). Working copies of weights
// are the rounded master. Under TF32 the inputs of convolutions and matrix
// products are rounded to TF32 first, what a tensor core reads.
//
//===----------------------------------------------------------------------===//
#include "runtime/GradClip.h"
#include "runtime/emu/EmuImpl.h"
#include "runtime/kernels/Rounding.h"

#include <cmath>

namespace memfit::rt {

void roundTo16Bit(Precision p, float *values, int64_t count) {
  if (p == Precision::BF16)
    for (int64_t i = 0; i < count; ++i)
      values[i] = kernels::roundToBf16(values[i]);
  else if (p == Precision::FP16)
    for (int64_t i = 0; i < count; ++i)
      values[i] = kernels::roundToFp16(values[i]);
}

void scaleLossGradient(float *d, int64_t count, float scale) {
  if (!d || scale == 1.0f)
    return;
  for (int64_t i = 0; i < count; ++i)
    d[i] *= scale;
}

int64_t convWeightCount(const ConvParams &p) {
  return p.cout * (p.cin / p.group) * p.kh * p.kw;
}

void Exec::Impl::settle() {
  for (auto [p, count] : stores16)
    roundTo16Bit(precision, p, count);
  stores16.clear();
}

const float *Exec::Impl::tensorCoreInput(int k, const float *p, int64_t count) {
  if (precision != Precision::TF32 || !p)
    return p;
  std::vector<float> &buf = tf32In[k];
  buf.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    buf[i] = kernels::roundToTf32(p[i]);
  return buf.data();
}

float *Exec::arena16(int64_t offset, int64_t bytes) {
  if (!stores16Bit(prog.precision))
    fatal("a 16-bit block in a program of fp32 storage");
  float *p = arena(offset);
  if (offset + bytes > prog.arenaBytes || bytes % 2)
    fatal("16-bit block out of the arena");
  impl->stores16.push_back({p, bytes / 2});
  return p;
}

float *Exec::weightCopy(int32_t id) {
  std::vector<float> &c = impl->wCopy[id];
  if (c.empty())
    fatal("weight " + std::string(wInfo[id].onnxName) +
          " has no 16-bit working copy");
  // Refreshed from the master on first use after it changed: the update,
  // a weight write or a gather of a sharded update.
  if (impl->copyStale[id]) {
    if (wInfo[id].masterOnNvme)
      fatal("weight " + std::string(wInfo[id].onnxName) +
            " has its master on NVMe: its working copy is written with it");
    c = impl->w[id];
    roundTo16Bit(prog.precision, c.data(), static_cast<int64_t>(c.size()));
    impl->copyStale[id] = false;
  }
  // Kept on the device while the weight is homed on the host: the rounds
  // read the device's copy, which the upload after the host's update (at
  // joinHost) makes the copy at home, rounded above.
  if (wInfo[id].copyOnGpu) {
    if (wInfo[id].home != Home::Host)
      fatal("weight " + std::string(wInfo[id].onnxName) +
            " keeps its working copy on the device but is not homed on "
            "the host");
    if (impl->devStale[id]) {
      impl->wCopyDev[id] = c;
      impl->devStale[id] = false;
    }
    return impl->wCopyDev[id].data();
  }
  return c.data();
}

float Exec::clipGradients(float maxNorm) {
  impl->settle();
  auto slice = [&](size_t id) {
    const auto count = static_cast<int64_t>(impl->g[id].size());
    return prog.shard >= 1 ? comm->mySlice(count)
                           : std::pair<int64_t, int64_t>{0, count};
  };
  std::vector<float> norms(wInfo.size(), 0.0f);
  for (size_t id = 0; id < wInfo.size(); ++id)
    if (!impl->g[id].empty()) {
      auto [lo, hi] = slice(id);
      norms[id] = l2Norm(impl->g[id].data() + lo, hi - lo);
    }
  const float norm = globalNorm(norms.data(), norms.size(), *comm, prog.shard);
  const float coef = clipCoefficient(maxNorm, norm);
  for (size_t id = 0; id < wInfo.size(); ++id) {
    std::span<float> g = impl->g[id];
    if (g.empty())
      continue;
    auto [lo, hi] = slice(id);
    for (int64_t i = lo; i < hi; ++i)
      g[i] *= coef;
  }
  return norm;
}

bool Exec::unscaleGradients() {
  impl->settle();
  // GradScaler unscales by the fp32 reciprocal of the scale.
  const float inv = static_cast<float>(1.0 / double(lossScale));
  bool finite = true;
  for (size_t id = 0; id < wInfo.size(); ++id) {
    std::span<float> g = impl->g[id];
    if (g.empty())
      continue;
    auto [lo, hi] = prog.shard >= 1
                        ? comm->mySlice(static_cast<int64_t>(g.size()))
                        : std::pair<int64_t, int64_t>{0, int64_t(g.size())};
    for (int64_t i = lo; i < hi; ++i) {
      g[i] *= inv;
      finite = finite && std::isfinite(g[i]);
    }
  }
  if (prog.ranks > 1) {
    float bad = finite ? 0.0f : 1.0f;
    comm->allReduceSum(&bad, 1);
    finite = bad == 0.0f;
  }
  return finite;
}

} // namespace memfit::rt
