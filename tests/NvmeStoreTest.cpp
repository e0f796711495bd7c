//===- NvmeStoreTest.cpp - The NVMe tier's file and its updates -----------===//
//
// runtime/host/NvmeStore.h and NvmeState.h: the file starts as zeros,
// holds what was written, leaves nothing behind in its directory, and
// fails with a clear message where the directory is missing or lacks the
// space; the host optimizer's NVMe jobs are bit for bit its in-memory ones,
// the state they leave in the file included.
//
//===----------------------------------------------------------------------===//
#include "runtime/host/HostOptimizer.h"
#include "runtime/host/NvmeState.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace memfit::rt;
using memfit::rt::host::HostOptimizer;
using memfit::rt::host::NvmeState;
using memfit::rt::host::NvmeStore;

namespace {

namespace fs = std::filesystem;

/// A fresh directory under the system's temporary one, removed after.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "memfit-nvme-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()));
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
  size_t entries() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(path), fs::directory_iterator()));
  }
};

std::vector<float> randomVec(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

} // namespace

TEST_CASE("nvme store: zeros, then what was written; the file is unnamed",
          "[nvme]") {
  TempDir dir;
  std::string err;
  auto s = NvmeStore::open(dir.path.string(), 3 * NvmeStore::kAlign, err);
  REQUIRE(s);
  CHECK(err.empty());
  CHECK(s->size() == 3 * NvmeStore::kAlign);
  // Created and unlinked at once: nothing a crash could leave behind.
  CHECK(dir.entries() == 0);
  host::AlignedBuffer buf = host::alignedFloats(NvmeStore::kAlign / 4);
  REQUIRE(s->read(NvmeStore::kAlign, buf.get(), NvmeStore::kAlign));
  for (int64_t i = 0; i < NvmeStore::kAlign / 4; ++i)
    REQUIRE(buf[i] == 0.0f);
  for (int64_t i = 0; i < NvmeStore::kAlign / 4; ++i)
    buf[i] = static_cast<float>(i) * 0.5f;
  REQUIRE(s->write(2 * NvmeStore::kAlign, buf.get(), NvmeStore::kAlign));
  host::AlignedBuffer back = host::alignedFloats(NvmeStore::kAlign / 4);
  REQUIRE(s->read(2 * NvmeStore::kAlign, back.get(), NvmeStore::kAlign));
  CHECK(std::memcmp(buf.get(), back.get(), NvmeStore::kAlign) == 0);
  CHECK_FALSE(s->failed());
}

TEST_CASE("nvme store: a missing directory and a full one are clear errors",
          "[nvme]") {
  std::string err;
  CHECK_FALSE(NvmeStore::open("/nonexistent/memfit-nvme", 4096, err));
  CHECK(err.find("cannot create the NVMe state file in "
                 "/nonexistent/memfit-nvme") != std::string::npos);
  // A file size limit stands in for a full disk: the reservation fails at
  // open, before any training, and says how much was asked. In a child,
  // so that the limit does not outlive the check.
  TempDir dir;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit lim = {1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    std::string e;
    auto s = NvmeStore::open(dir.path.string(), int64_t(64) << 20, e);
    bool ok = !s && e.find("lacks the space for 0.06 GiB of optimizer "
                           "state") != std::string::npos;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(dir.entries() == 0);
}

TEST_CASE("nvme state: Adam and SGD through the file match in-memory updates "
          "bit for bit",
          "[nvme]") {
  // Two weights, neither a multiple of a chunk nor of a 4 KiB block, with
  // chunks small enough that several threads share each tensor; the master
  // in memory, then in the file beside the moments (16-bit programs),
  // where each chunk hands the updated master to the working copy.
  const std::vector<int64_t> counts = {70000, 1537};
  for (bool masterInFile : {false, true})
    for (Optimizer opt : {Optimizer::AdamW, Optimizer::SGD}) {
      CAPTURE(masterInFile, opt == Optimizer::SGD);
      std::vector<WeightInfo> ws;
      for (int64_t c : counts) {
        WeightInfo w{};
        w.onnxName = "w";
        w.count = c;
        w.trainable = true;
        w.home = Home::Host;
        w.stateOnNvme = true;
        w.masterOnNvme = masterInFile;
        ws.push_back(w);
      }
      ProgramInfo p{};
      p.optimizer = opt;
      p.hasMomentum = true;
      TempDir dir;
      NvmeState nv;
      std::string err;
      REQUIRE(nv.open(p, ws, dir.path.string(), err));
      HostOptimizer viaFile(3, 5000), inMemory(1);
      std::vector<std::vector<float>> w1, w2, g, m, v, copy, handed;
      for (size_t i = 0; i < counts.size(); ++i) {
        w1.push_back(randomVec(counts[i], 1 + i, 1));
        w2.push_back(w1.back());
        g.push_back(randomVec(counts[i], 11 + i, 0.1f));
        m.push_back(std::vector<float>(counts[i], 0.0f));
        v.push_back(std::vector<float>(counts[i], 0.0f));
        copy.push_back(std::vector<float>(counts[i], std::nanf("")));
        handed.push_back(std::vector<float>(counts[i], 0.0f));
        CHECK((nv.w[i] >= 0) == masterInFile);
        if (masterInFile)
          REQUIRE(nv.writeTensor(nv.w[i], counts[i], w1[i].data()));
      }
      for (int step = 1; step <= 3; ++step) {
        for (size_t i = 0; i < counts.size(); ++i) {
          const int64_t n = counts[i];
          HostOptimizer::NvmeAt at{.w = nv.w[i], .m = nv.m[i], .v = nv.v[i]};
          HostOptimizer::MasterOut out;
          float *w = w1[i].data();
          if (masterInFile) {
            w = nullptr;
            out = [&c = copy[i], &h = handed[i]](int64_t lo, int64_t hi,
                                                 const float *chunk) {
              for (int64_t e = lo; e < hi; ++e) {
                c[e] = chunk[e - lo];
                h[e] += 1;
              }
            };
          }
          if (opt == Optimizer::SGD) {
            host::SgdParams sp{0.01f, 0.9f, 1e-3f, step == 1};
            viaFile.submitSgdNvme(sp, n, w, g[i].data(), *nv.store, at, out);
            inMemory.submitSgd(sp, n, w2[i].data(), g[i].data(), m[i].data());
          } else {
            AdamParams ap{};
            ap.lr = 1e-3f;
            ap.beta1 = 0.9f;
            ap.beta2 = 0.999f;
            ap.eps = 1e-8f;
            ap.weightDecay = 0.01f;
            ap.decoupled = true;
            ap.step = step;
            viaFile.submitAdamNvme(ap, n, w, g[i].data(), *nv.store, at, out);
            inMemory.submitAdam(ap, n, w2[i].data(), g[i].data(), m[i].data(),
                                v[i].data());
          }
        }
        viaFile.waitAll();
        inMemory.waitAll();
        REQUIRE_FALSE(nv.store->failed());
      }
      for (size_t i = 0; i < counts.size(); ++i) {
        std::vector<float> fromFile(counts[i]);
        if (masterInFile) {
          REQUIRE(nv.readTensor(nv.w[i], counts[i], fromFile.data()));
          CHECK(sameBits(fromFile, w2[i]));
          // Every element handed over once a step, the last the update's.
          CHECK(sameBits(copy[i], w2[i]));
          CHECK(std::all_of(handed[i].begin(), handed[i].end(),
                            [](float k) { return k == 3.0f; }));
        } else {
          CHECK(sameBits(w1[i], w2[i]));
          CHECK_THAT(nv.transfer(nv.w, static_cast<int32_t>(i), counts[i],
                                 fromFile.data(), nullptr),
                     Catch::Contains("has no such tensor on NVMe"));
        }
        REQUIRE(nv.readTensor(nv.m[i], counts[i], fromFile.data()));
        CHECK(sameBits(fromFile, m[i]));
        if (opt != Optimizer::SGD) {
          REQUIRE(nv.readTensor(nv.v[i], counts[i], fromFile.data()));
          CHECK(sameBits(fromFile, v[i]));
        } else {
          CHECK(nv.v[i] == -1);
          CHECK_THAT(nv.transfer(nv.v, static_cast<int32_t>(i), counts[i],
                                 fromFile.data(), nullptr),
                     Catch::Contains("has no such tensor on NVMe"));
        }
        CHECK(nv.transfer(nv.m, static_cast<int32_t>(i), counts[i],
                          fromFile.data(), nullptr)
                  .empty());
        CHECK(sameBits(fromFile, m[i]));
      }
      // A checkpoint's write lands where the next update reads it.
      std::vector<float> mine = randomVec(counts[1], 99, 0.01f),
                         back(counts[1]);
      REQUIRE(nv.writeTensor(nv.m[1], counts[1], mine.data()));
      REQUIRE(nv.readTensor(nv.m[1], counts[1], back.data()));
      CHECK(sameBits(mine, back));
    }
}

TEST_CASE("nvme state: a program keeping state there needs a directory",
          "[nvme]") {
  WeightInfo w{};
  w.count = 10;
  w.trainable = true;
  w.stateOnNvme = true;
  ProgramInfo p{};
  p.optimizer = Optimizer::Adam;
  NvmeState nv;
  std::string err;
  CHECK_FALSE(nv.open(p, {w}, "", err));
  CHECK(err.find("give --nvme DIR") != std::string::npos);
}

TEST_CASE("nvme state: a stored master streams with stored state", "[nvme]") {
  WeightInfo w{};
  w.onnxName = "fc.weight";
  w.count = 10;
  w.trainable = true;
  w.masterOnNvme = true;
  ProgramInfo p{};
  p.optimizer = Optimizer::Adam;
  TempDir dir;
  NvmeState nv;
  std::string err;
  CHECK_FALSE(nv.open(p, {w}, dir.path.string(), err));
  CHECK(err.find("'fc.weight' has its master on NVMe and its optimizer state "
                 "in memory") != std::string::npos);
  // SGD without momentum keeps no state: the master alone is stored.
  p.optimizer = Optimizer::SGD;
  p.hasMomentum = false;
  err.clear();
  REQUIRE(nv.open(p, {w}, dir.path.string(), err));
  CHECK(nv.w[0] == 0);
  CHECK(nv.m[0] == -1);
}
