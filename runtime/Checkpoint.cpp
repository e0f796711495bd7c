//===- Checkpoint.cpp - The trainer's checkpoints -------------------------===//
#include "runtime/Checkpoint.h"

#include "runtime/AtomicFile.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace memfit::rt {

namespace {
// Version 1: fp32, tf32 and bf16 programs. Version 2 (programs with a loss
// scale) appends the applied updates and the scaler's state.
constexpr char kMagicV1[8] = {'M', 'F', 'C', 'K', 'P', 'T', '0', '1'};
constexpr char kMagicV2[8] = {'M', 'F', 'C', 'K', 'P', 'T', '0', '2'};

bool hasLossScale(const Exec &x) {
  return x.info().precision == Precision::FP16;
}

/// Frozen weights the model file holds: the trainer reads them at every
/// start, so the checkpoint keeps their hash instead of their values.
bool fromModelFrozen(const WeightInfo &w) {
  return w.frozen && w.init == Init::FromModel && !w.data;
}

/// FNV-1a over the values of the weights left out of checkpoints; 0 when
/// there are none (the checkpoint then holds no hash).
uint64_t frozenHash(Exec &x) {
  uint64_t h = 14695981039346656037ull;
  bool any = false;
  std::vector<float> buf;
  for (int32_t id = 0; id < (int32_t)x.weightInfo().size(); ++id) {
    const WeightInfo &w = x.weightInfo()[id];
    if (!fromModelFrozen(w))
      continue;
    any = true;
    buf.resize(w.count);
    x.readWeight(id, buf.data());
    const auto *c = reinterpret_cast<const unsigned char *>(buf.data());
    for (size_t i = 0; i < buf.size() * sizeof(float); ++i)
      h = (h ^ c[i]) * 1099511628211ull;
  }
  return any ? h : 0;
}

struct ScalerRecord {
  uint64_t appliedSteps;
  double scale;
  int64_t cleanSteps, growthInterval;
};
} // namespace

bool saveCheckpoint(Exec &x, const std::string &dir, const LoopState &s,
                    std::string &err) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    err = "cannot create checkpoint directory " + dir + ": " + ec.message();
    return false;
  }
  std::string path = dir + "/checkpoint.bin";
  {
    AtomicFile f(path);
    f.write(hasLossScale(x) ? kMagicV2 : kMagicV1, 8);
    uint64_t head[4] = {s.iteration, s.sampleCursor, s.epoch,
                        (uint64_t)x.weightInfo().size()};
    f.write(head, sizeof head);
    if (uint64_t h = frozenHash(x))
      f.write(&h, sizeof h);
    std::vector<float> buf;
    for (int32_t id = 0; id < (int32_t)x.weightInfo().size(); ++id) {
      const WeightInfo &w = x.weightInfo()[id];
      if (fromModelFrozen(w))
        continue;
      buf.resize(w.count);
      x.readWeight(id, buf.data());
      f.write(buf.data(), w.count * 4);
      if (w.trainable && x.info().hasMomentum) {
        x.readMomentum(id, buf.data());
        f.write(buf.data(), w.count * 4);
      }
      if (w.trainable && x.info().optimizer != Optimizer::SGD) {
        x.readSecondMoment(id, buf.data());
        f.write(buf.data(), w.count * 4);
      }
    }
    if (hasLossScale(x)) {
      ScalerRecord r{s.appliedSteps, s.scaler.scale, s.scaler.cleanSteps,
                     s.scaler.growthInterval};
      f.write(&r, sizeof r);
    }
    if (!f.commit())
      err = f.error();
  } // the temporary file is gone before the trainer stops
  if (err.empty())
    return true;
  err =
      "checkpoint at iteration " + std::to_string(s.iteration) +
      " not written: " + err +
      (std::filesystem::exists(path, ec) ? "; the previous checkpoint is intact"
                                         : "");
  return false;
}

bool loadCheckpoint(Exec &x, const std::string &dir, LoopState &s,
                    std::string &err) {
  std::string path = dir + "/checkpoint.bin";
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return false;
  char magic[8];
  uint64_t head[4];
  f.read(magic, 8);
  f.read(reinterpret_cast<char *>(head), sizeof head);
  if (!f || std::memcmp(magic, hasLossScale(x) ? kMagicV2 : kMagicV1, 8) ||
      head[3] != x.weightInfo().size()) {
    err = path + ": not a checkpoint of this trainer";
    return false;
  }
  s.iteration = head[0];
  s.sampleCursor = head[1];
  s.epoch = head[2];
  s.appliedSteps = s.iteration;
  if (uint64_t h = frozenHash(x)) {
    uint64_t saved = 0;
    f.read(reinterpret_cast<char *>(&saved), sizeof saved);
    if (f && saved != h) {
      err = path + ": written with other values of the frozen weights (the "
                   "trainer reads them from the model: another --model?)";
      return false;
    }
  }
  std::vector<float> buf;
  for (int32_t id = 0; id < (int32_t)x.weightInfo().size(); ++id) {
    const WeightInfo &w = x.weightInfo()[id];
    if (fromModelFrozen(w))
      continue;
    buf.resize(w.count);
    f.read(reinterpret_cast<char *>(buf.data()), w.count * 4);
    x.writeWeight(id, buf.data());
    if (w.trainable && x.info().hasMomentum) {
      f.read(reinterpret_cast<char *>(buf.data()), w.count * 4);
      x.writeMomentum(id, buf.data());
    }
    if (w.trainable && x.info().optimizer != Optimizer::SGD) {
      f.read(reinterpret_cast<char *>(buf.data()), w.count * 4);
      x.writeSecondMoment(id, buf.data());
    }
  }
  if (hasLossScale(x)) {
    ScalerRecord r{};
    f.read(reinterpret_cast<char *>(&r), sizeof r);
    s.appliedSteps = r.appliedSteps;
    s.scaler.scale = static_cast<float>(r.scale);
    s.scaler.cleanSteps = r.cleanSteps;
    s.scaler.growthInterval = r.growthInterval;
  }
  if (!f) {
    err = path + ": truncated checkpoint";
    return false;
  }
  return true;
}

} // namespace memfit::rt
