//===- ReaderBench.cpp - Time the trainer's batch reader ------------------===//
//
// memfit_reader_bench FILE.npy THREADS BATCH BATCHES [PAD]
//                     [--resized-crop SIZE] [--dump OUT.npy]
//
// Fills BATCHES batches of BATCH uint8 images from FILE (N x C x H x W,
// mapped as the trainer maps --data) the way the trainer's feeder does
// (runtime/BatchFill.h): random crop with PAD pixels of padding (default
// 4), or with --resized-crop a random resized crop to SIZE x SIZE,
// horizontal flip and ImageNet's per-channel normalization into the float
// batch layout, on THREADS reader threads, the samples in a shuffled
// order. Prints one JSON line: images/s over all batches after a warm-up
// batch, and the median batch's. tools/bench/reader.py writes the file and
// the table. --dump writes the batch of samples 0 .. BATCH-1 (epoch 0)
// instead, and each sample's box and flip beside it (OUT.npy.boxes: top
// left height width flip), for tests/cli/augment.sh's torchvision check.
//
//===----------------------------------------------------------------------===//
#include "runtime/BatchFill.h"
#include "runtime/Npy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

using namespace memfit::rt;

namespace {

int dumpBatch(const Dataset &d, const SampleLayout &l, int64_t batch,
              const std::string &path) {
  std::vector<float> hx(static_cast<size_t>(batch * l.inputPerSample));
  std::vector<char> hy(static_cast<size_t>(batch * 4));
  std::vector<int64_t> samples(static_cast<size_t>(batch));
  std::iota(samples.begin(), samples.end(), 0);
  fillBatch(d, l, samples.data(), batch, 0, hx.data(), hy.data(), 1);
  const int64_t side = d.resizedCrop ? d.outHeight : d.height;
  NpyArray a{NpyDType::F32, {batch, 3, side, side}, {}};
  a.bytes.resize(hx.size() * sizeof(float));
  std::memcpy(a.bytes.data(), hx.data(), a.bytes.size());
  std::string err;
  if (!writeNpy(path, a, err)) {
    std::fprintf(stderr, "memfit_reader_bench: %s\n", err.c_str());
    return 1;
  }
  std::ofstream boxes(path + ".boxes");
  for (int64_t s = 0; s < batch; ++s) {
    const CropBox b = d.resizedCrop ? resizedCropBox(d, 0, s) : CropBox{};
    boxes << b.top << " " << b.left << " " << b.height << " " << b.width << " "
          << (flipped(d, 0, s) ? 1 : 0) << "\n";
  }
  return boxes.good() ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: memfit_reader_bench FILE.npy THREADS BATCH "
                         "BATCHES [PAD] [--resized-crop SIZE] [--dump "
                         "OUT.npy]\n");
    return 2;
  }
  const std::string file = argv[1];
  const int threads = std::atoi(argv[2]);
  const int64_t batch = std::atoll(argv[3]), batches = std::atoll(argv[4]);
  int64_t pad = 4, resized = 0;
  std::string dump;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--resized-crop" && i + 1 < argc)
      resized = std::atoll(argv[++i]);
    else if (a == "--dump" && i + 1 < argc)
      dump = argv[++i];
    else
      pad = std::atoll(argv[i]);
  }
  std::string err;
  Dataset d;
  if (!d.xs.open({file}, err)) {
    std::fprintf(stderr, "memfit_reader_bench: %s\n", err.c_str());
    return 1;
  }
  const std::vector<int64_t> &shape = d.xs.front().shape();
  if (shape.size() != 4 || d.xs.front().type() != ElemType::U8 ||
      shape[1] != 3 || threads < 1 || batch < 1 || batches < 1) {
    std::fprintf(stderr,
                 "memfit_reader_bench: %s must hold uint8 images "
                 "N x 3 x H x W; THREADS, BATCH, BATCHES >= 1\n",
                 file.c_str());
    return 2;
  }
  d.count = shape[0];
  d.ys = d.xs; // labels are not timed: read as the images' first bytes
  d.divisor = 255.0f;
  d.mean = {0.485f, 0.456f, 0.406f};
  d.std = {0.229f, 0.224f, 0.225f};
  d.height = shape[2];
  d.width = shape[3];
  d.channelSize = shape[2] * shape[3];
  d.cropPad = resized > 0 ? -1 : pad;
  d.hflip = true;
  d.augmentSeed = 7;
  d.resizedCrop = resized > 0;
  d.outHeight = d.outWidth = resized;
  buildByteTable(d);
  const SampleLayout l{3 * (resized > 0 ? resized * resized : d.channelSize), 1,
                       false, false};
  if (!dump.empty())
    return dumpBatch(d, l, batch, dump);
  std::vector<float> hx(static_cast<size_t>(batch * l.inputPerSample));
  std::vector<char> hy(static_cast<size_t>(batch * 4));
  const std::vector<int64_t> order = epochOrder(d.count, true, 1, 0);
  std::vector<int64_t> samples(static_cast<size_t>(batch));
  std::vector<double> secs;
  double total = 0;
  for (int64_t k = 0; k <= batches; ++k) {
    for (int64_t i = 0; i < batch; ++i)
      samples[i] = order[static_cast<size_t>((k * batch + i) % d.count)];
    auto t0 = std::chrono::steady_clock::now();
    fillBatch(d, l, samples.data(), batch, 0, hx.data(), hy.data(), threads);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (k == 0)
      continue; // warm-up: the threads' first start, first page touches
    secs.push_back(s);
    total += s;
  }
  std::sort(secs.begin(), secs.end());
  std::printf("{\"threads\": %d, \"batch\": %lld, \"batches\": %lld, "
              "\"height\": %lld, \"width\": %lld, \"pad\": %lld, "
              "\"images_per_s\": %.1f, \"median_batch_images_per_s\": %.1f}\n",
              threads, static_cast<long long>(batch),
              static_cast<long long>(batches), static_cast<long long>(d.height),
              static_cast<long long>(d.width), static_cast<long long>(pad),
              double(batch * batches) / total,
              double(batch) / secs[secs.size() / 2]);
  return 0;
}
