//===- BatchFill.h - A batch's samples, converted and augmented -*- C++ -*-===//
//
// The data set the trainer reads (mapped .npy files, a token stream, or
// samples held whole) and the conversion of its samples into a batch's
// input and label layout: element types converted, uint8 images through a
// per-channel table, normalized and augmented, token windows cut. The
// feeder thread calls it (BatchFeeder.h), over several reader threads
// where --reader-threads asks; tools/bench/ReaderBench.cpp times it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_BATCHFILL_H
#define MEMFIT_RUNTIME_BATCHFILL_H

#include "runtime/MappedArray.h"
#include "runtime/TokenStream.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace memfit::rt {

/// The data set: `count` samples, from mapped files (xs, ys: converted as
/// each batch is filled), a token stream, or held whole (synthetic: inputs
/// as float, labels as int32 class ids or floats for mse).
struct Dataset {
  int64_t count = 0;
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<float> yf;
  /// --data and --labels, mapped; float inputs are (v / divisor - mean[c])
  /// / std[c] in float, c the channel of channelSize values (no mean:
  /// v / divisor), as torchvision's ToTensor and Normalize compute.
  ShardedArray xs, ys;
  float divisor = 1.0f;
  /// Augmentation of [C, H, W] images, drawn per (seed, epoch, sample):
  /// torchvision's RandomCrop(padding=cropPad) when cropPad >= 0, then
  /// RandomHorizontalFlip when hflip; padding reads as 0 before scaling.
  int64_t cropPad = -1;
  bool hflip = false;
  int64_t height = 0, width = 0;
  /// torchvision's RandomResizedCrop(size, scale, ratio=(3/4, 4/3)) on the
  /// image as ToTensor makes it, bilinear without antialiasing, before the
  /// flip and Normalize: a box of the stored height x width image resized
  /// to the model's outHeight x outWidth.
  bool resizedCrop = false;
  double scaleLo = 0.08, scaleHi = 1.0;
  int64_t outHeight = 0, outWidth = 0;
  uint64_t augmentSeed = 0;
  std::vector<float> mean, std;
  int64_t channelSize = 0;
  /// uint8 inputs: each channel's 256 possible values already divided and
  /// normalized (the same float arithmetic), channel-major; empty else.
  std::vector<float> lut;
  /// uint8 inputs: v / divisor for each byte (what a resized crop
  /// interpolates); empty else.
  std::vector<float> scaled;
  /// --tokens: `count` windows of seqLen tokens cut from a mapped token
  /// file as the samples come (x and y stay empty).
  std::shared_ptr<const TokenStream> tokens;
  int64_t seqLen = 0;
  bool tokenRandom = true;
  uint64_t tokenSeed = 0;
};

inline std::vector<int64_t> epochOrder(int64_t count, bool shuffle,
                                       uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> idx(count);
  std::iota(idx.begin(), idx.end(), 0);
  if (shuffle) {
    std::mt19937_64 rng(seed * 1000003 + epoch);
    for (int64_t i = count - 1; i > 0; --i)
      std::swap(idx[i], idx[rng() % (i + 1)]);
  }
  return idx;
}

/// Which samples batch after batch holds: the epoch's order and the cursor
/// in it, as a checkpoint keeps them. The trainer's loop and the feeder
/// thread each walk their own copy, so they agree without sharing it.
struct SampleOrder {
  int64_t count, global;
  bool shuffle;
  uint64_t seed, cursor, epoch;
  std::vector<int64_t> idx;
  SampleOrder(int64_t count, int64_t global, bool shuffle, uint64_t seed,
              uint64_t cursor, uint64_t epoch)
      : count(count), global(global), shuffle(shuffle), seed(seed),
        cursor(cursor), epoch(epoch),
        idx(epochOrder(count, shuffle, seed, epoch)) {}
  /// The next global batch's first position in idx; the last partial
  /// batch of an epoch is dropped.
  uint64_t next() {
    if (cursor + global > static_cast<uint64_t>(count)) {
      cursor = 0;
      ++epoch;
      idx = epochOrder(count, shuffle, seed, epoch);
    }
    uint64_t at = cursor;
    cursor += global;
    return at;
  }
};

/// A resized crop's box in the stored image (Dataset::resizedCrop).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};
/// The box of sample `s` of epoch `epoch`: RandomResizedCrop.get_params's
/// algorithm (ten tries of an area in [scaleLo, scaleHi] of the image and
/// a log-uniform aspect ratio in [3/4, 4/3], sides rounded half to even as
/// Python's round, then a uniform position; else the centre crop), its
/// uniform draws from a counter-based stream of (seed, epoch, sample).
CropBox resizedCropBox(const Dataset &d, uint64_t epoch, int64_t s);
/// Whether sample `s` of epoch `epoch` is flipped (Dataset::hflip).
bool flipped(const Dataset &d, uint64_t epoch, int64_t s);

/// For uint8 inputs (d.xs), fills d.lut from d.divisor, d.mean and d.std,
/// and d.scaled;
/// other inputs keep none.
void buildByteTable(Dataset &d);

/// What one sample of a batch holds (the program's ProgramInfo says).
struct SampleLayout {
  int64_t inputPerSample = 0; // floats (token ids as int32 bits)
  int64_t labelPerSample = 0; // int32 class ids, or floats for mse
  bool intInput = false, mseLoss = false;
};

/// Writes data samples samples[0 .. count) of epoch `epoch` as a batch:
/// sample i's input at hx + i * inputPerSample, its labels at
/// hy + i * labelPerSample * 4; split over `threads` threads (contiguous
/// ranges of the batch, so the bytes do not depend on the count).
void fillBatch(const Dataset &d, const SampleLayout &l, const int64_t *samples,
               int64_t count, uint64_t epoch, float *hx, char *hy,
               int threads = 1);

} // namespace memfit::rt

#endif
