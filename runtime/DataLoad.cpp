//===- DataLoad.cpp - The trainer's data, mapped and checked --------------===//
#include "runtime/DataLoad.h"

#include "runtime/TrainerOptions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace memfit::rt {

namespace {

/// Int32 token ids travel in the float input buffers bit for bit.
float idAsFloat(int32_t id) {
  float f;
  std::memcpy(&f, &id, 4);
  return f;
}

/// --tokens: the file mapped and checked whole before the first step (every
/// id inside the vocabulary and the classes), windows of the model's
/// sequence length.
Dataset loadTokens(const Options &o, const ProgramInfo &p, int64_t least,
                   const char *role) {
  if (!p.intInput || p.mseLoss || p.labelPerSample != p.inputPerSample)
    die("--tokens is for language models, whose input is token ids and "
        "whose labels are one class per position; this trainer's model "
        "takes " +
        std::string(p.intInput ? "other labels" : "float inputs") +
        " (use --data and --labels)");
  if (o.seqLen != p.inputPerSample)
    die("--seq-len " + std::to_string(o.seqLen) +
        ": this trainer's model reads sequences of " +
        std::to_string(p.inputPerSample) +
        " tokens (the batch's input it was compiled for)");
  std::string err;
  std::shared_ptr<const TokenStream> t =
      TokenStream::open(o.tokens, o.tokenDtype, err);
  if (!t)
    die(err);
  const int64_t T = o.seqLen;
  if (t->size() < T + 1)
    die(o.tokens + ": " + std::to_string(t->size()) +
        " tokens, fewer than one window of " + std::to_string(T) +
        " and its next token");
  const int64_t limit = std::min(p.inputVocab, p.classes);
  if (int64_t bad = t->firstOutside(limit); bad >= 0)
    die(o.tokens + ": token id " + std::to_string(t->at(bad)) +
        " at position " + std::to_string(bad) + " is outside [0, " +
        std::to_string(limit) +
        "), the model's vocabulary (is --token-dtype right?)");
  Dataset d;
  d.count = (t->size() - 1) / T;
  if (d.count < least)
    die(o.tokens + ": " + std::to_string(t->size()) + " tokens make " +
        std::to_string(d.count) + " windows of " + std::to_string(T) +
        ", fewer than one batch of " + std::to_string(least));
  d.tokens = std::move(t);
  d.seqLen = T;
  d.tokenRandom = o.tokenOrderRandom;
  d.tokenSeed = o.seed;
  if (!o.quiet)
    std::printf("%stokens: %s, %lld %s ids mapped, %s windows of %lld "
                "(%lld to an epoch)\n",
                role, o.tokens.c_str(), (long long)d.tokens->size(),
                d.tokens->dtypeName(), d.tokenRandom ? "random" : "sequential",
                (long long)T, (long long)d.count);
  return d;
}

/// The items of a comma-separated list, in order; an empty one is refused
/// with `what` saying what the list is.
std::vector<std::string> commaItems(const std::string &text,
                                    const std::string &what) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos)
      end = text.size();
    if (end == at)
      die(what);
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

/// --data and --labels: one .npy, shards A.npy,B.npy in that order, or a
/// directory of .npy shards in the order of their names.
std::vector<std::string> shardPaths(const std::string &arg, const char *flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(arg, ec)) {
    std::vector<std::string> out;
    for (const fs::directory_entry &e : fs::directory_iterator(arg, ec))
      if (e.is_regular_file() && e.path().extension() == ".npy")
        out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    if (out.empty())
      die(std::string(flag) + " " + arg + ": a directory with no .npy file");
    return out;
  }
  return commaItems(arg,
                    std::string(flag) + " '" + arg + "': an empty file name");
}

/// --normalize MEAN/STD: one mean and one std per channel (the input's
/// axis 1), as torchvision's Normalize after ToTensor.
void setNormalization(const Options &o, const MappedArray &x,
                      const ProgramInfo &p, Dataset &d) {
  const std::string bad = "--normalize '" + o.normalize +
                          "': expected MEAN/STD, comma-separated numbers per "
                          "channel (ImageNet's: "
                          "0.485,0.456,0.406/0.229,0.224,0.225)";
  auto numbers = [&](const std::string &text) {
    std::vector<float> out;
    for (const std::string &item : commaItems(text, bad)) {
      char *stop = nullptr;
      const double v = std::strtod(item.c_str(), &stop);
      if (*stop || !std::isfinite(v))
        die(bad);
      out.push_back(static_cast<float>(v));
    }
    return out;
  };
  const size_t slash = o.normalize.find('/');
  if (slash == std::string::npos)
    die("--normalize '" + o.normalize + "': expected MEAN/STD");
  d.mean = numbers(o.normalize.substr(0, slash));
  d.std = numbers(o.normalize.substr(slash + 1));
  const auto channels = static_cast<int64_t>(d.mean.size());
  if (d.std.size() != d.mean.size())
    die("--normalize '" + o.normalize + "': " + std::to_string(channels) +
        " means and " + std::to_string(d.std.size()) + " stds");
  for (float s : d.std)
    if (!(s > 0))
      die("--normalize '" + o.normalize + "': every std must be above 0");
  if (x.shape().size() < 2 || x.shape()[1] != channels ||
      p.inputPerSample % channels)
    die("--normalize gives " + std::to_string(channels) + " channels; " +
        o.data + "'s samples have " +
        (x.shape().size() < 2 ? std::string("no channel axis")
                              : std::to_string(x.shape()[1]) + " on axis 1"));
  d.channelSize = p.inputPerSample / channels;
}

/// --random-resized-crop: the stored images (N x C x H x W, any size) are
/// cut to boxes resized to the model's square input of C x S x S.
void setResizedCrop(Dataset &d, const ProgramInfo &p) {
  const std::vector<int64_t> &xs = d.xs.front().shape();
  if (xs.size() != 4)
    die("--random-resized-crop: " + d.xs.name(0) + " holds no images (" +
        std::to_string(xs.size()) + "-D; expected N x C x H x W)");
  const int64_t c = xs[1];
  const auto side = static_cast<int64_t>(
      std::llround(std::sqrt(double(p.inputPerSample) / double(c))));
  if (c <= 0 || side * side * c != p.inputPerSample)
    die("--random-resized-crop: " + d.xs.name(0) + "'s images have " +
        std::to_string(c) + " channels; the model's input of " +
        std::to_string(p.inputPerSample) +
        " values is no square image of as many (resize to a square input)");
  d.resizedCrop = true;
  d.outHeight = d.outWidth = side;
}

/// What loadData and loadValidation share: `o`'s data, at least `least`
/// samples of it; `role` starts the lines it prints.
Dataset loadDataAs(const Options &o, const ProgramInfo &p, int64_t least,
                   const char *role) {
  if (!o.tokens.empty())
    return loadTokens(o, p, least, role);
  Dataset d;
  const int64_t labels = p.mseLoss ? 0 : p.labelPerSample; // per sample
  if (o.synthetic) {
    // One batch's worth of fixed random samples, reused every iteration, so
    // a falling loss shows the trainer learns.
    d.count = p.batch * p.ranks;
    std::mt19937_64 rng(o.seed * 7919 + 17);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.x.resize(d.count * p.inputPerSample);
    for (float &v : d.x)
      v = p.intInput ? idAsFloat(static_cast<int32_t>(rng() % p.inputVocab))
                     : nd(rng);
    if (p.mseLoss) {
      d.yf.resize(d.count * p.labelPerSample);
      for (float &v : d.yf)
        v = nd(rng);
    } else {
      d.y.resize(d.count * labels);
      for (int32_t &v : d.y)
        v = static_cast<int32_t>(rng() % p.classes);
    }
    return d;
  }
  std::string err;
  if (!d.xs.open(shardPaths(o.data, "--data"), err))
    die(err);
  const MappedArray &x = d.xs.front();
  const std::vector<int64_t> &xs = x.shape();
  const int64_t perSample = std::accumulate(xs.begin() + 1, xs.end(),
                                            int64_t(1), std::multiplies<>());
  if (o.resizedCrop && !p.intInput)
    setResizedCrop(d, p);
  else if (perSample != p.inputPerSample)
    die(d.xs.name(0) + ": each sample must have " +
        std::to_string(p.inputPerSample) + " values (the model's input), not " +
        std::to_string(perSample));
  d.count = d.xs.samples();
  if (p.intInput) {
    if (!o.normalize.empty() || o.cropPad >= 0 || o.hflip || o.resizedCrop)
      die("--normalize, --random-crop, --random-resized-crop and --hflip are "
          "for images; this trainer's model reads token ids");
    if (!x.isInteger())
      die(d.xs.name(0) + ": inputs must be integer token ids, not " +
          x.typeName());
    for (size_t part = 0; part < d.xs.size(); ++part) {
      const MappedArray &a = d.xs.part(part);
      if (const int64_t i = a.firstOutside(p.inputVocab); i >= 0)
        die(d.xs.name(part) + ": token id " + std::to_string(a.intAt(i)) +
            " at index " + std::to_string(i) + " is outside [0, " +
            std::to_string(p.inputVocab) + "), the embedding's vocabulary");
    }
  } else {
    // uint8 images are scaled to [0, 1] as torchvision's ToTensor does;
    // --normalize then takes each channel's mean and std.
    if (x.type() == ElemType::U8)
      d.divisor = 255.0f;
    if (!o.normalize.empty())
      setNormalization(o, x, p, d);
    if (o.cropPad >= 0 || o.hflip || o.resizedCrop) {
      if (xs.size() != 4)
        die(std::string(o.hflip ? "--hflip" : "--random-crop") + ": " +
            d.xs.name(0) + " holds no images (" + std::to_string(xs.size()) +
            "-D; expected N x C x H x W)");
      d.height = xs[2];
      d.width = xs[3];
      d.cropPad = o.cropPad;
      d.hflip = o.hflip;
      // Its own draws, apart from the token windows'.
      d.augmentSeed = o.seed ^ 0x5851f42d4c957f2dull;
    }
    buildByteTable(d);
  }
  if (!d.ys.open(shardPaths(o.labels, "--labels"), err))
    die(err);
  if (d.ys.samples() != d.count)
    die(o.labels + ": " + std::to_string(d.ys.samples()) + " labels, not " +
        std::to_string(d.count) + ", one per sample of " + o.data);
  const MappedArray &y = d.ys.front();
  const int64_t labelsPer = std::accumulate(
      y.shape().begin() + 1, y.shape().end(), int64_t(1), std::multiplies<>());
  if (p.mseLoss) {
    if (y.isInteger() || labelsPer != p.labelPerSample)
      die(d.ys.name(0) + ": mse targets must be floats with the output's "
                         "shape");
  } else {
    if (!y.isInteger())
      die(d.ys.name(0) + ": labels must be integer class ids, not " +
          y.typeName());
    if (labelsPer != labels)
      die(d.ys.name(0) + (labels == 1
                              ? std::string(": labels must be one class "
                                            "id per sample")
                              : ": labels must be " + std::to_string(labels) +
                                    " class ids per sample (one per "
                                    "position of the output)"));
    for (size_t part = 0; part < d.ys.size(); ++part) {
      const MappedArray &a = d.ys.part(part);
      if (const int64_t i = a.firstOutside(p.classes, p.ignoreIndex); i >= 0)
        die(d.ys.name(part) + ": label " + std::to_string(a.intAt(i)) +
            " of sample " + std::to_string(i / labels) + " is outside [0, " +
            std::to_string(p.classes) + ") and is not the ignored index " +
            std::to_string(p.ignoreIndex));
    }
  }
  if (d.count < least)
    die(o.data + " has " + std::to_string(d.count) +
        " samples, fewer than one batch of " + std::to_string(least));
  return d;
}

} // namespace

Dataset loadData(const Options &o, const ProgramInfo &p) {
  return loadDataAs(o, p, p.batch * p.ranks, "");
}

Dataset loadValidation(const Options &o, const ProgramInfo &p) {
  // The training data's normalization, no augmentation, windows in file
  // order; a last batch short of samples is padded (Exec::evalValidEnd).
  Options v = o;
  v.data = o.valData;
  v.labels = o.valLabels;
  v.tokens = o.valTokens;
  v.synthetic = false;
  v.cropPad = -1;
  v.hflip = false;
  v.resizedCrop = false;
  v.tokenOrderRandom = false;
  return loadDataAs(v, p, 1, "validation ");
}

} // namespace memfit::rt
