//===- TokenStreamTest.cpp - The trainer's --tokens file ------------------===//
#include "runtime/TokenStream.h"

#include "NpyTestUtil.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace memfit::rt;
using memfit::test::npy;
using memfit::test::raw;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "memfit-tok-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()));
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string &name, const std::string &bytes) const {
    std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary).write(bytes.data(), bytes.size());
    return p;
  }
};

} // namespace

TEST_CASE("a raw token file is nanoGPT's little-endian uint16 ids",
          "[tokens]") {
  TempDir d;
  const std::vector<uint16_t> ids = {5, 0, 65535, 7, 9};
  std::string err;
  auto t = TokenStream::open(d.file("train.bin", raw(ids)), "uint16", err);
  REQUIRE(t);
  REQUIRE(t->size() == 5);
  CHECK(t->at(2) == 65535);
  CHECK(t->at(4) == 9);
  CHECK(std::string(t->dtypeName()) == "uint16");
  CHECK(t->firstOutside(65536) == -1);
  CHECK(t->firstOutside(10) == 2);
  // The same bytes as uint32: half as many ids.
  auto wide = TokenStream::open(d.file("w.bin", raw(ids) + std::string(2, 0)),
                                "uint32", err);
  REQUIRE(wide);
  CHECK(wide->size() == 3);
  CHECK(wide->at(0) == 5);
}

TEST_CASE("a .npy token file says its dtype; other files are refused "
          "naming them",
          "[tokens]") {
  TempDir d;
  std::string err;
  const std::vector<int64_t> ids = {3, -1, 8};
  auto t = TokenStream::open(d.file("ids.npy", npy("<i8", "(3,)", raw(ids))),
                             "uint16", err);
  REQUIRE(t);
  CHECK(t->size() == 3);
  CHECK(t->at(1) == -1);
  CHECK(t->firstOutside(100) == 1);

  auto refused = [&](const std::string &name, const std::string &bytes,
                     const std::string &what) {
    std::string e;
    CHECK_FALSE(TokenStream::open(d.file(name, bytes), "uint16", e));
    INFO(e);
    CHECK(e.find(name) != std::string::npos);
    CHECK(e.find(what) != std::string::npos);
  };
  refused("odd.bin", std::string(5, '\1'), "no whole number of uint16");
  refused("two.npy", npy("<u2", "(2, 2)", std::string(8, 0)),
          "one-dimensional");
  refused("float.npy", npy("<f4", "(2,)", std::string(8, 0)),
          "token ids of dtype float32");
  refused("short.npy", npy("<u4", "(4,)", std::string(8, 0)), "truncated");
  CHECK_FALSE(TokenStream::open((d.path / "none.bin").string(), "uint16", err));
  CHECK(err.find("none.bin: cannot open") != std::string::npos);
}

TEST_CASE("windows: sequential ones tile the file, random ones are drawn "
          "from (seed, epoch, sample) alone",
          "[tokens]") {
  CHECK(windowStart(0, 0, 100, 8, false, 1) == 0);
  CHECK(windowStart(3, 5, 100, 8, false, 1) == 24);
  // Random: inside [0, n - T), the same for the same key, and another
  // window for another epoch, sample or seed (of 1000 draws, nearly all
  // distinct).
  std::set<int64_t> starts;
  for (int64_t s = 0; s < 1000; ++s) {
    const int64_t at = windowStart(s, 0, 100000, 16, true, 7);
    CHECK(at >= 0);
    CHECK(at < 100000 - 16);
    CHECK(at == windowStart(s, 0, 100000, 16, true, 7));
    starts.insert(at);
  }
  CHECK(starts.size() > 990);
  CHECK(windowStart(4, 0, 100000, 16, true, 7) !=
        windowStart(4, 1, 100000, 16, true, 7));
  CHECK(windowStart(4, 0, 100000, 16, true, 7) !=
        windowStart(4, 0, 100000, 16, true, 8));
}
