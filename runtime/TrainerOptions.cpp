//===- TrainerOptions.cpp - The generated trainer's flags -----------------===//
//
// Every numeric flag is checked in one place (parseNumber), so a value the
// trainer cannot use is refused naming the flag before the device is
// touched.
//
//===----------------------------------------------------------------------===//
#include "runtime/TrainerOptions.h"
#include "runtime/Exec.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace memfit::rt {

namespace {
/// The ranks of a data-parallel trainer: an error on one stops them all.
Comm *ranks = nullptr;
} // namespace

void setErrorRanks(Comm *comm) { ranks = comm; }

void sayError(const std::string &msg) {
  std::fprintf(stderr, "trainer: error: %s\n", msg.c_str());
  std::fflush(stderr);
}

namespace {
thread_local bool failuresThrow = false;
} // namespace

ThrowFailures::ThrowFailures() : was(failuresThrow) { failuresThrow = true; }
ThrowFailures::~ThrowFailures() { failuresThrow = was; }

void throwIfFailuresThrow(const std::string &msg, int code) {
  if (failuresThrow)
    throw TrainerFailure(msg, code);
}

[[noreturn]] void die(const std::string &msg) {
  throwIfFailuresThrow(msg, 1);
  sayError(msg);
  if (ranks && ranks->size() > 1)
    ranks->abortAll(1);
  std::exit(1);
}

namespace {

const char *kUsage =
    "usage: trainer [--data X.npy --labels Y.npy [--normalize MEAN/STD]\n"
    "               [--random-crop PAD | --random-resized-crop] [--hflip]\n"
    "               [--reader-threads N]\n"
    "               | --tokens FILE --seq-len T\n"
    "               [--token-order random|sequential] [--token-dtype "
    "uint16|uint32]\n"
    "               | --synthetic]\n"
    "               [--val-data X.npy --val-labels Y.npy | --val-tokens "
    "FILE]\n"
    "               [--val-every N] [--val-batches N]\n"
    "               [--iterations N | --epochs E] [--lr F] [--momentum F]\n"
    "               [--weight-decay F] [--no-decay REGEX|auto] [--beta1 F]\n"
    "               [--beta2 F] [--eps F] [--clip-grad-norm F]\n"
    "               [--lr-schedule constant|step|cosine|linear|onecycle]\n"
    "               [--warmup-steps W] [--min-lr F] [--lr-step-size N] "
    "[--lr-gamma F]\n"
    "               [--seed N] [--shuffle]\n"
    "               [--save trained.onnx] [--checkpoint DIR "
    "[--checkpoint-every N]] [--resume]\n"
    "               [--model model.onnx] [--log-every N] [--log FILE] "
    "[--quiet]\n"
    "               [--dump-graph FILE] [--conv-algos FILE] "
    "[--no-tune-convs] [--no-conv-graph]\n"
    "               [--nvme DIR]\n"
    "               fp16 only: [--loss-scale F] "
    "[--loss-scale-growth-interval N]\n";

std::string formatG(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// Every numeric flag of the trainer is a count, a seed or a rate: a finite
/// number >= 0 that fits its type, at least `least` and, for a float, below
/// `below`. Anything else (nan, inf, -5, 1e40 for a float, 2.5 for a count,
/// 0 iterations, momentum 1) is refused naming the flag and what it takes.
template <typename T>
T parseNumber(const std::string &flag, const char *v, T least = 0,
              double below = std::numeric_limits<double>::infinity()) {
  char *end = nullptr;
  errno = 0;
  T out{};
  bool ok = v[0] && v[0] != '-' && v[0] != '+';
  if constexpr (std::is_floating_point_v<T>) {
    double d = std::strtod(v, &end);
    out = static_cast<T>(d);
    ok = ok && std::isfinite(d) && std::isfinite(out) && d < below;
  } else {
    unsigned long long u = std::strtoull(v, &end, 10);
    ok = ok &&
         u <= static_cast<unsigned long long>(std::numeric_limits<T>::max());
    out = static_cast<T>(u);
  }
  if (!ok || *end || errno || out < least) {
    std::string want;
    if constexpr (std::is_floating_point_v<T>)
      want = std::isinf(below) ? "a finite number >= 0"
                               : "a number in [0, " + formatG(below) + ")";
    else
      want = "a whole number >= " + std::to_string(least);
    die("invalid value '" + std::string(v) + "' for " + flag + ": expected " +
        want);
  }
  return out;
}

/// Edit distance (insertions, deletions, replacements) between a and b.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// A command line the trainer cannot read: exit status 2, as memfit's, so a
/// script tells a misspelt flag from a failed run.
[[noreturn]] void usageError(const std::string &msg) {
  sayError(msg + " (trainer --help lists the options)");
  if (ranks && ranks->size() > 1)
    ranks->abortAll(2);
  std::exit(2);
}

/// Refuses `arg`, which is no flag of the trainer, naming the nearest flag
/// of the usage text (the one list of them, so a new flag is suggested once
/// it is documented).
[[noreturn]] void unknownOption(const std::string &arg) {
  if (arg.size() < 2 || arg[0] != '-')
    usageError("unexpected argument '" + arg + "'");
  std::string name = arg.substr(0, arg.find('='));
  std::string usage = std::string(kUsage) + " --help";
  std::string best;
  size_t bestDistance = std::numeric_limits<size_t>::max();
  for (size_t at = usage.find("--"); at != std::string::npos;
       at = usage.find("--", at)) {
    size_t end = usage.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyz0123456789-", at + 2);
    std::string flag = usage.substr(at, end - at);
    at = end;
    if (flag == name)
      usageError("'" + arg + "': " + flag +
                 " takes its value as the next argument");
    size_t d = editDistance(name, flag);
    if (d < bestDistance) {
      bestDistance = d;
      best = flag;
    }
  }
  usageError("unknown option '" + name + "'; did you mean '" + best + "'?");
}

} // namespace

Options parseArgs(int argc, char **argv, const char *defaultModel,
                  bool readsData) {
  Options o;
  o.model = defaultModel;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--data")
      o.data = value();
    else if (a == "--conv-algos")
      o.convAlgos = value();
    else if (a == "--no-tune-convs")
      o.tuneConvs = false;
    else if (a == "--no-conv-graph")
      o.convGraph = false;
    else if (a == "--labels")
      o.labels = value();
    else if (a == "--synthetic")
      o.synthetic = true;
    else if (a == "--iterations")
      o.iterations = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--epochs")
      o.epochs = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--lr") {
      // Checked as the float the update uses; a schedule computes from the
      // double, as PyTorch's schedulers do from a Python float.
      const char *v = value();
      o.lr = parseNumber<float>(a, v);
      o.schedule.lr = std::strtod(v, nullptr);
    } else if (a == "--lr-schedule") {
      const std::string name = value();
      auto k = parseLrKind(name);
      if (!k)
        die("invalid value '" + name +
            "' for --lr-schedule: expected constant, step, cosine, linear "
            "or onecycle");
      o.schedule.kind = *k;
    } else if (a == "--warmup-steps")
      o.schedule.warmup = parseNumber<int64_t>(a, value());
    else if (a == "--min-lr") {
      const char *v = value();
      parseNumber<float>(a, v);
      o.schedule.minLr = std::strtod(v, nullptr);
    } else if (a == "--lr-step-size")
      o.schedule.stepSize = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--lr-gamma")
      o.schedule.gamma = parseNumber<double>(a, value());
    else if (a == "--momentum") {
      o.momentum = parseNumber<float>(a, value(), 0, 1);
      o.momentumSet = true;
    } else if (a == "--weight-decay") {
      o.weightDecay = parseNumber<float>(a, value());
      o.weightDecaySet = true;
    } else if (a == "--no-decay") {
      o.noDecay = value();
      if (o.noDecay.empty())
        die("--no-decay needs a regular expression over the weights' names, "
            "or auto");
    } else if (a == "--clip-grad-norm")
      o.clipGradNorm = parseNumber<float>(a, value());
    else if (a == "--tokens")
      o.tokens = value();
    else if (a == "--val-data")
      o.valData = value();
    else if (a == "--val-labels")
      o.valLabels = value();
    else if (a == "--val-tokens")
      o.valTokens = value();
    else if (a == "--val-every")
      o.valEvery = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--val-batches")
      o.valBatches = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--seq-len")
      o.seqLen = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--token-dtype") {
      o.tokenDtype = value();
      if (o.tokenDtype != "uint16" && o.tokenDtype != "uint32")
        die("invalid value '" + o.tokenDtype +
            "' for --token-dtype: expected uint16 or uint32 (a raw token "
            "file's ids; a .npy says its own)");
    } else if (a == "--token-order") {
      const std::string name = value();
      if (name != "random" && name != "sequential")
        die("invalid value '" + name +
            "' for --token-order: expected random or sequential");
      o.tokenOrderRandom = name == "random";
      o.tokenOrderSet = true;
    } else if (a == "--beta1")
      o.beta1 = parseNumber<float>(a, value(), 0, 1);
    else if (a == "--beta2")
      o.beta2 = parseNumber<float>(a, value(), 0, 1);
    else if (a == "--eps")
      o.eps = parseNumber<float>(a, value());
    else if (a == "--seed")
      o.seed = parseNumber<uint64_t>(a, value());
    else if (a == "--shuffle")
      o.shuffle = true;
    else if (a == "--save")
      o.save = value();
    else if (a == "--checkpoint")
      o.checkpoint = value();
    else if (a == "--nvme")
      o.nvme = value();
    else if (a == "--checkpoint-every")
      o.checkpointEvery = parseNumber<int64_t>(a, value());
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--model")
      o.model = value();
    else if (a == "--normalize")
      o.normalize = value();
    else if (a == "--random-crop")
      o.cropPad = parseNumber<int64_t>(a, value());
    else if (a == "--hflip")
      o.hflip = true;
    else if (a == "--random-resized-crop")
      o.resizedCrop = true;
    else if (a == "--reader-threads")
      o.readerThreads = parseNumber<int64_t>(a, value(), 1);
    else if (a == "--log")
      o.log = value();
    else if (a == "--log-every")
      o.logEvery = parseNumber<int64_t>(a, value());
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--dump-graph")
      o.dumpGraph = value();
    else if (a == "--loss-scale") {
      o.lossScale = parseNumber<float>(a, value());
      if (o.lossScale == 0)
        die("invalid value '0' for --loss-scale: expected a number > 0");
      o.lossScaleSet = true;
    } else if (a == "--loss-scale-growth-interval") {
      o.growthInterval = parseNumber<int64_t>(a, value(), 1);
      o.lossScaleSet = true;
    } else
      unknownOption(a);
  }
  const int sources =
      int(o.synthetic) + int(!o.data.empty()) + int(!o.tokens.empty());
  if (readsData && sources != 1)
    die("give one of --data and --labels, --tokens, or --synthetic");
  if (!readsData && sources != 0)
    die("a session takes its batches from the caller: --data, --labels, "
        "--tokens and --synthetic are the command-line trainer's");
  if (!o.tokens.empty() && o.seqLen == 0)
    die("--tokens needs --seq-len T, the model's sequence length");
  if ((!o.normalize.empty() || o.cropPad >= 0 || o.hflip || o.resizedCrop) &&
      o.data.empty())
    die(std::string(!o.normalize.empty() ? "--normalize"
                    : o.hflip            ? "--hflip"
                    : o.resizedCrop      ? "--random-resized-crop"
                                         : "--random-crop") +
        " is for --data");
  if (o.resizedCrop && o.cropPad >= 0)
    die("give --random-crop or --random-resized-crop, not both");
  if (o.tokens.empty() && (o.seqLen || o.tokenOrderSet))
    die(std::string(o.seqLen ? "--seq-len" : "--token-order") +
        " is for --tokens");
  if (!o.data.empty() && o.labels.empty())
    die("--data needs --labels");
  if (!o.valData.empty() && !o.valTokens.empty())
    die("give --val-data and --val-labels, or --val-tokens, not both");
  if (!o.valData.empty() != !o.valLabels.empty())
    die(o.valData.empty() ? "--val-labels needs --val-data"
                          : "--val-data needs --val-labels");
  if (!o.valTokens.empty() && o.tokens.empty())
    die("--val-tokens is for a trainer reading --tokens (windows of its "
        "--seq-len); use --val-data and --val-labels");
  if (!o.valData.empty() && !o.tokens.empty())
    die("--val-data is for a trainer reading --data; with --tokens give "
        "--val-tokens");
  if ((o.valEvery || o.valBatches) && !o.validates())
    die(std::string(o.valEvery ? "--val-every" : "--val-batches") +
        " needs --val-data and --val-labels, or --val-tokens");
  if (o.iterations && o.epochs)
    die("give --iterations or --epochs, not both");
  if (!o.iterations && !o.epochs)
    o.iterations = 1;
  if (o.schedule.minLr >= 0 && o.schedule.kind == LrKind::Constant)
    die("--min-lr is for --lr-schedule cosine, linear or onecycle");
  if (o.resume && o.checkpoint.empty())
    die("--resume needs --checkpoint DIR");
  return o;
}

void checkAgainstProgram(Options &o, const ProgramInfo &p) {
  if (!o.nvme.empty() && !p.nvmeDir)
    die("--nvme: this trainer's plan keeps no optimizer state on NVMe "
        "(compile with memfit's --nvme DIR for one that does)");
  if (o.nvme.empty() && p.nvmeDir)
    o.nvme = p.nvmeDir;
  bool adam = p.optimizer != Optimizer::SGD;
  if (!adam && !p.hasMomentum && o.momentum != 0)
    die("this trainer was compiled without momentum buffers (--momentum=0); "
        "pass --momentum 0 or recompile");
  if (adam && o.momentumSet)
    die(std::string("--momentum is SGD's; this trainer was compiled for ") +
        (p.optimizer == Optimizer::AdamW ? "AdamW" : "Adam") +
        " (--beta1, --beta2, --eps)");
  // torch.optim.AdamW's default weight decay.
  if (p.optimizer == Optimizer::AdamW && !o.weightDecaySet)
    o.weightDecay = 0.01f;
  // The plan decides whether the updates wait for a norm; the trainer may
  // change the value, or turn clipping off with 0.
  if (o.clipGradNorm < 0)
    o.clipGradNorm = p.clipGradNorm;
  else if (o.clipGradNorm > 0 && !(p.clipGradNorm > 0))
    die("--clip-grad-norm: this trainer's plan does not clip gradients, so "
        "its host updates may start before the last gradient; compile with "
        "memfit's --clip-grad-norm for one that does");
  if (o.validates() && p.evalSubBatch <= 0)
    die(std::string("this trainer cannot validate: ") +
        (p.evalWhy ? p.evalWhy
                   : "it was compiled by a memfit without evaluation "
                     "programs; recompile it"));
  if (o.lossScaleSet && p.precision != Precision::FP16)
    die("--loss-scale is for fp16 trainers; this one was compiled for " +
        std::string(p.precision == Precision::BF16   ? "bf16"
                    : p.precision == Precision::TF32 ? "tf32"
                                                     : "fp32") +
        ", which needs none");
}

} // namespace memfit::rt
