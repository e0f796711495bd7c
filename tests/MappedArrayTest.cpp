//===- MappedArrayTest.cpp - The trainer's mapped .npy data ---------------===//
#include "runtime/MappedArray.h"

#include "NpyTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace memfit::rt;
using memfit::test::npy;
using memfit::test::raw;
namespace fs = std::filesystem;

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string &bytes) {
    std::string t = (fs::temp_directory_path() / "memfit-npy-XXXXXX").string();
    int fd = mkstemp(t.data());
    REQUIRE(fd >= 0);
    close(fd);
    path = t;
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
  }
  ~TempFile() { fs::remove(path); }
};

} // namespace

TEST_CASE("float16 and bfloat16 bit patterns convert exactly", "[data]") {
  CHECK(halfToFloat(0x3c00) == 1.0f);
  CHECK(halfToFloat(0xc000) == -2.0f);
  CHECK(halfToFloat(0x7bff) == 65504.0f);
  CHECK(halfToFloat(0x0001) == std::ldexp(1.0f, -24)); // smallest subnormal
  CHECK(halfToFloat(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(halfToFloat(0x8000) == 0.0f);
  CHECK(std::signbit(halfToFloat(0x8000)));
  CHECK(std::isinf(halfToFloat(0x7c00)));
  CHECK(std::isnan(halfToFloat(0x7e00)));
  CHECK(bf16ToFloat(0x3f80) == 1.0f);
  CHECK(bf16ToFloat(0xc040) == -3.0f);
}

TEST_CASE("a mapped .npy reads every element type as numpy wrote it",
          "[data]") {
  std::string err;
  TempFile u8(
      npy("|u1", "(2, 3)", raw(std::vector<uint8_t>{0, 7, 255, 1, 2, 3})));
  auto a = MappedArray::open(u8.path, err);
  REQUIRE(a);
  CHECK(a->shape() == std::vector<int64_t>{2, 3});
  CHECK(a->isInteger());
  CHECK(a->intAt(2) == 255);
  CHECK(a->floatAt(1) == 7.0f);
  CHECK(std::string(a->typeName()) == "uint8");

  TempFile i8(npy("|i1", "(2,)", raw(std::vector<int8_t>{-5, 9})));
  a = MappedArray::open(i8.path, err);
  REQUIRE(a);
  CHECK(a->intAt(0) == -5);

  TempFile f16(npy("<f2", "(2,)", raw(std::vector<uint16_t>{0x3c00, 0xc000})));
  a = MappedArray::open(f16.path, err);
  REQUIRE(a);
  CHECK_FALSE(a->isInteger());
  CHECK(a->floatAt(1) == -2.0f);

  // ml_dtypes' bfloat16: numpy records it as a 2-byte void.
  TempFile bf(npy("<V2", "(1,)", raw(std::vector<uint16_t>{0x3f80})));
  a = MappedArray::open(bf.path, err);
  REQUIRE(a);
  CHECK(std::string(a->typeName()) == "bfloat16");
  CHECK(a->floatAt(0) == 1.0f);

  TempFile i64(
      npy("<i8", "(1,)", raw(std::vector<int64_t>{-(int64_t(1) << 40)})));
  a = MappedArray::open(i64.path, err);
  REQUIRE(a);
  CHECK(a->intAt(0) == -(int64_t(1) << 40));
}

TEST_CASE("a .npy the trainer cannot read is refused naming it", "[data]") {
  std::string err;
  TempFile f8(npy("<f8", "(1,)", std::string(8, 0)));
  CHECK_FALSE(MappedArray::open(f8.path, err));
  CHECK(err.find(f8.path + ": unsupported dtype '<f8'") != std::string::npos);
  TempFile shortFile(npy("<f4", "(4,)", std::string(8, 0)));
  CHECK_FALSE(MappedArray::open(shortFile.path, err));
  CHECK(err.find("truncated data") != std::string::npos);
  TempFile junk(std::string("not numpy at all"));
  CHECK_FALSE(MappedArray::open(junk.path, err));
  CHECK(err.find("not a .npy file") != std::string::npos);
}
