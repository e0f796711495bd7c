//===- KernelReferenceTest.cpp - kernels against PyTorch's results --------===//
//
// Compares the CPU reference kernels with results PyTorch computed in float64
// (tests/kernel_reference.py, run by ctest as the `kernel_reference` fixture
// into $MEMFIT_KERNEL_REFERENCE_DIR). The cases, their parameters and shapes
// come from the directory's index.json; every case must be understood and
// every kind the script writes must be present.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/host/HostOptimizer.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace memfit::rt;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char &ch : s)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

using Vec = std::vector<float>;

class Case {
public:
  Case(const fs::path &dir, const json &entry) : dir(dir), entry(entry) {}

  std::string name() const { return entry.at("name").get<std::string>(); }
  int64_t i(const char *key) const {
    const json &v = entry.at("params").at(key);
    return v.is_boolean() ? int64_t(v.get<bool>()) : v.get<int64_t>();
  }
  float f(const char *key) const {
    return entry.at("params").at(key).get<float>();
  }
  std::string str(const char *key) const {
    return entry.at("params").at(key).get<std::string>();
  }
  bool b(const char *key) const {
    return entry.at("params").at(key).get<bool>();
  }
  bool has(const char *tensor) const {
    return entry.at("tensors").contains(tensor);
  }

  /// The tensor's values; REQUIREs that the file holds exactly its shape.
  Vec load(const char *tensor) const {
    int64_t count = 1;
    for (const json &d : entry.at("tensors").at(tensor))
      count *= d.get<int64_t>();
    fs::path file = dir / (name() + "." + tensor + ".f32");
    std::ifstream in(file, std::ios::binary);
    INFO("reading " << file);
    REQUIRE(in.good());
    Vec v(count);
    in.read(reinterpret_cast<char *>(v.data()), count * sizeof(float));
    REQUIRE(in.gcount() == std::streamsize(count * sizeof(float)));
    REQUIRE(in.peek() == std::char_traits<char>::eof());
    return v; // little-endian files, little-endian hosts only
  }

  /// Relative tolerance 1e-4, with a floor of 1e-4 * 5% of the tensor's
  /// largest magnitude for entries near zero.
  void expect(const char *tensor, const Vec &got) const {
    Vec want = load(tensor);
    REQUIRE(got.size() == want.size());
    double maxAbs = 0;
    for (float w : want)
      maxAbs = std::max(maxAbs, double(std::abs(w)));
    int64_t bad = 0, firstBad = -1;
    for (size_t e = 0; e < want.size(); ++e) {
      double tol = 1e-4 * std::max(double(std::abs(want[e])), 0.05 * maxAbs);
      if (!(std::abs(double(got[e]) - want[e]) <= tol + 1e-7)) {
        if (firstBad < 0)
          firstBad = int64_t(e);
        ++bad;
      }
    }
    INFO(name() << "." << tensor << ": " << bad << " of " << want.size()
                << " entries off; first at " << firstBad << ": got "
                << (firstBad >= 0 ? got[firstBad] : 0.0f) << ", want "
                << (firstBad >= 0 ? want[firstBad] : 0.0f));
    CHECK(bad == 0);
  }

private:
  fs::path dir;
  const json &entry;
};

void runConv(const Case &c) {
  ConvParams p{c.i("cin"),  c.i("hin"),  c.i("win"),    c.i("cout"),
               c.i("hout"), c.i("wout"), c.i("kh"),     c.i("kw"),
               c.i("sh"),   c.i("sw"),   c.i("padTop"), c.i("padLeft"),
               c.i("dh"),   c.i("dw"),   c.i("group")};
  int64_t n = c.i("n");
  Vec x = c.load("x"), w = c.load("w"), dy = c.load("dy");
  bool bias = c.b("bias");
  Vec b = bias ? c.load("b") : Vec();
  Vec y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
  convForward(p, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
  convBackwardData(p, n, w.data(), dy.data(), dx.data(), false);
  convBackwardFilter(p, n, x.data(), dy.data(), dw.data(),
                     bias ? db.data() : nullptr, false);
  c.expect("y", y);
  c.expect("dx", dx);
  c.expect("dw", dw);
  if (bias)
    c.expect("db", db);
}

void runPool(const Case &c) {
  PoolParams p{c.b("max") ? PoolKind::Max : PoolKind::Average,
               c.i("c"),
               c.i("hin"),
               c.i("win"),
               c.i("hout"),
               c.i("wout"),
               c.i("kh"),
               c.i("kw"),
               c.i("sh"),
               c.i("sw"),
               c.i("padTop"),
               c.i("padLeft"),
               c.i("padBottom"),
               c.i("padRight"),
               c.b("countIncludePad")};
  int64_t n = c.i("n");
  Vec x = c.load("x"), dy = c.load("dy");
  Vec y(dy.size()), dx(x.size());
  poolForward(p, n, x.data(), y.data());
  poolBackward(p, n, x.data(), y.data(), dy.data(), dx.data(), false);
  c.expect("y", y);
  c.expect("dx", dx);
}

void runGlobalAvgPool(const Case &c) {
  int64_t n = c.i("n"), ch = c.i("c"), spatial = c.i("spatial");
  Vec x = c.load("x"), dy = c.load("dy");
  Vec y(dy.size()), dx(x.size());
  globalAvgPoolForward(n, ch, spatial, x.data(), y.data());
  globalAvgPoolBackward(n, ch, spatial, dy.data(), dx.data(), false);
  c.expect("y", y);
  c.expect("dx", dx);
}

void runBatchNorm(const Case &c) {
  BatchNormParams p{c.i("c"), c.i("spatial"), c.f("epsilon"), c.f("momentum")};
  int64_t n = c.i("n");
  Vec x = c.load("x"), scale = c.load("scale"), bias = c.load("bias"),
      rm = c.load("runMean"), rv = c.load("runVar"), dy = c.load("dy");
  Vec y(x.size()), mean(p.c), invStd(p.c), dx(x.size()), ds(p.c), dbias(p.c);
  batchNormForward(p, n, x.data(), scale.data(), bias.data(), rm.data(),
                   rv.data(), y.data(), mean.data(), invStd.data(), true);
  batchNormBackwardData(p, n, x.data(), scale.data(), mean.data(),
                        invStd.data(), dy.data(), dx.data(), false);
  batchNormBackwardWeight(p, n, x.data(), mean.data(), invStd.data(), dy.data(),
                          ds.data(), dbias.data(), false);
  c.expect("y", y);
  c.expect("runMeanOut", rm);
  c.expect("runVarOut", rv);
  c.expect("savedMean", mean);
  c.expect("savedInvStd", invStd);
  c.expect("dx", dx);
  c.expect("dscale", ds);
  c.expect("dbias", dbias);
}

void runLrn(const Case &c) {
  LRNParams p{c.i("c"),     c.i("spatial"), c.i("size"),
              c.f("alpha"), c.f("beta"),    c.f("bias")};
  int64_t n = c.i("n");
  Vec x = c.load("x"), dy = c.load("dy");
  Vec y(x.size()), dx(x.size());
  lrnForward(p, n, x.data(), y.data());
  lrnBackward(p, n, x.data(), y.data(), dy.data(), dx.data(), false);
  c.expect("y", y);
  c.expect("dx", dx);
}

void runGemm(const Case &c) {
  GemmParams p{c.i("k"), c.i("m"), c.b("transB"), c.f("alpha"), c.f("beta")};
  int64_t n = c.i("n");
  bool bias = c.b("bias");
  Vec x = c.load("x"), w = c.load("w"), dy = c.load("dy");
  Vec b = bias ? c.load("b") : Vec();
  Vec y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
  gemmForward(p, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
  gemmBackwardData(p, n, w.data(), dy.data(), dx.data(), false);
  gemmBackwardWeight(p, n, x.data(), dy.data(), dw.data(),
                     bias ? db.data() : nullptr, false);
  c.expect("y", y);
  c.expect("dx", dx);
  c.expect("dw", dw);
  if (bias)
    c.expect("db", db);
}

void runSoftmax(const Case &c) {
  int64_t n = c.i("n"), features = c.i("features");
  bool log = c.b("log");
  Vec x = c.load("x"), dy = c.load("dy");
  Vec y(x.size()), dx(x.size());
  softmaxForward(n, features, log, x.data(), y.data());
  softmaxBackward(n, features, log, y.data(), dy.data(), dx.data(), false);
  c.expect("y", y);
  c.expect("dx", dx);
}

void runActivation(const Case &c) {
  // The case names the kind as Activations.def does, in lower case.
  static const std::map<std::string, ActKind> kinds = [] {
    std::map<std::string, ActKind> m;
#define MEMFIT_ACTIVATION(kind, reads) m[lower(#kind)] = ActKind::kind;
#include "runtime/kernels/Activations.def"
    return m;
  }();
  ActParams p;
  std::string kind = c.str("act");
  REQUIRE(kinds.count(kind));
  p.kind = kinds.at(kind);
  if (p.kind == ActKind::LeakyRelu || p.kind == ActKind::HardSigmoid ||
      p.kind == ActKind::Pow || p.kind == ActKind::Celu)
    p.alpha = c.f("alpha");
  if (p.kind == ActKind::HardSigmoid)
    p.beta = c.f("beta");
  if (p.kind == ActKind::Clip) {
    p.lo = c.f("lo");
    p.hi = c.f("hi");
  }
  Vec x = c.load("x"), dy = c.load("dy");
  Vec y(x.size()), dx(x.size());
  activationForward(p, c.i("count"), x.data(), y.data());
  // The derivative reads y, or x for the kinds whose derivative needs it.
  const Vec &src = activationGradReads(p.kind) == GradReads::Input ? x : y;
  activationBackward(p, c.i("count"), src.data(), dy.data(), dx.data(), false);
  c.expect("y", y);
  c.expect("dx", dx);
}

void runCrossEntropy(const Case &c) {
  int64_t n = c.i("n"), classes = c.i("classes");
  Vec logits = c.load("logits"), labelValues = c.load("labels");
  std::vector<int32_t> labels(labelValues.begin(), labelValues.end());
  REQUIRE(validateLabels(n, classes, labels.data(), -100));
  Vec loss{0.0f}, d(logits.size());
  softmaxCrossEntropy({1, classes, 1}, n, double(n), logits.data(),
                      labels.data(), -100, &loss[0], d.data());
  c.expect("loss", loss);
  c.expect("dlogits", d);
}

void runMse(const Case &c) {
  int64_t n = c.i("n"), features = c.i("features");
  Vec y = c.load("y"), target = c.load("target");
  Vec loss{0.0f}, dy(y.size());
  meanSquaredError(n, features, n, y.data(), target.data(), &loss[0],
                   dy.data());
  c.expect("loss", loss);
  c.expect("dy", dy);
}

/// The host optimizer (runtime/host) runs the same steps on two threads in
/// chunks of three elements, so that a tensor spans several chunks.
constexpr int kHostThreads = 2;
constexpr int64_t kHostChunk = 3;

void runSgd(const Case &c) {
  int64_t count = c.i("count"), steps = c.i("steps");
  float momentum = c.f("momentum");
  for (bool onHost : {false, true}) {
    INFO((onHost ? "host optimizer" : "emulation"));
    host::HostOptimizer opt(kHostThreads, kHostChunk);
    Vec w = c.load("w0"), grads = c.load("grads"), after;
    Vec buf(momentum != 0 ? count : 0);
    float *b = buf.empty() ? nullptr : buf.data();
    for (int64_t s = 0; s < steps; ++s) {
      const float *g = grads.data() + s * count;
      if (onHost)
        opt.wait(
            opt.submitSgd({c.f("lr"), momentum, c.f("weightDecay"), s == 0},
                          count, w.data(), g, b));
      else
        sgdUpdate(count, c.f("lr"), momentum, c.f("weightDecay"), s == 0,
                  w.data(), g, b);
      after.insert(after.end(), w.begin(), w.end());
    }
    c.expect("w", after);
    if (momentum != 0)
      c.expect("buf", buf);
  }
}

void runAdam(const Case &c) {
  int64_t count = c.i("count"), steps = c.i("steps");
  for (bool onHost : {false, true}) {
    INFO((onHost ? "host optimizer" : "emulation"));
    host::HostOptimizer opt(kHostThreads, kHostChunk);
    Vec w = c.load("w0"), grads = c.load("grads"), after, m(count, 0.0f),
        v(count, 0.0f);
    for (int64_t s = 0; s < steps; ++s) {
      AdamParams p{c.f("lr"),
                   0.9f,
                   0.999f,
                   1e-8f,
                   c.f("weightDecay"),
                   static_cast<uint64_t>(s + 1),
                   c.b("decoupled")};
      const float *g = grads.data() + s * count;
      if (onHost)
        opt.wait(opt.submitAdam(p, count, w.data(), g, m.data(), v.data()));
      else
        adamUpdate(p, count, w.data(), g, m.data(), v.data());
      after.insert(after.end(), w.begin(), w.end());
    }
    c.expect("w", after);
    c.expect("m", m);
    c.expect("v", v);
  }
}

} // namespace

TEST_CASE("kernels match PyTorch", "[kernels][reference]") {
  fs::path dir;
  if (const char *env = std::getenv("MEMFIT_KERNEL_REFERENCE_DIR")) {
    // Under ctest the fixture has written it: its absence is a failure.
    dir = env;
    INFO("MEMFIT_KERNEL_REFERENCE_DIR=" << dir);
    REQUIRE(fs::exists(dir / "index.json"));
  } else {
    dir = fs::path(MEMFIT_BINARY_DIR) / "kernel-reference";
    if (!fs::exists(dir / "index.json")) {
      WARN("no PyTorch reference results in "
           << dir << "; run `ctest -R 'kernel_reference|unit'` to make them");
      return;
    }
  }
  std::ifstream in(dir / "index.json");
  json index = json::parse(in);
  REQUIRE(index.at("format") == 1);

  using Runner = void (*)(const Case &);
  const std::map<std::string, Runner> runners{
      {"conv", runConv},
      {"pool", runPool},
      {"globalavgpool", runGlobalAvgPool},
      {"batchnorm", runBatchNorm},
      {"lrn", runLrn},
      {"gemm", runGemm},
      {"softmax", runSoftmax},
      {"activation", runActivation},
      {"crossentropy", runCrossEntropy},
      {"mse", runMse},
      {"sgd", runSgd},
      {"adam", runAdam}};
  std::set<std::string> seen;
  for (const json &entry : index.at("cases")) {
    Case c(dir, entry);
    std::string kind = entry.at("kind").get<std::string>();
    INFO("case " << c.name() << " (" << kind << ")");
    auto it = runners.find(kind);
    CHECK(it != runners.end());
    if (it == runners.end())
      continue;
    seen.insert(kind);
    it->second(c);
  }
  for (const auto &[kind, runner] : runners) {
    INFO("kind " << kind);
    CHECK(seen.count(kind) == 1);
  }
}
