//===- OutputDirTest.cpp - Output directories that appear whole -----------===//
#include "compiler/support/OutputDir.h"
#include "compiler/support/FileUtil.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace memfit;
namespace fs = std::filesystem;

namespace {

std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

std::string readFile(const fs::path &path) {
  auto buf = llvm::MemoryBuffer::getFile(path.string());
  REQUIRE(buf);
  return (*buf)->getBuffer().str();
}

std::vector<std::string> names(const fs::path &dir) {
  std::vector<std::string> out;
  for (const auto &e : fs::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("of two outputs racing for one new directory the first wins whole",
          "[fileutil]") {
  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("memfit-outdir", dir));
  fs::path target = fs::path(dir.str().str()) / "out";
  // Both start before either has published anything.
  auto a = OutputDir::create(target.string(), /*replace=*/false);
  auto b = OutputDir::create(target.string(), /*replace=*/false);
  REQUIRE(static_cast<bool>(a));
  REQUIRE(static_cast<bool>(b));
  REQUIRE(errorText(a->write("plan.json", "a")) == "");
  REQUIRE(errorText(b->write("plan.json", "b")) == "");
  REQUIRE(errorText(b->write("src/one.cpp", "b")) == "");
  REQUIRE(errorText(a->commit()) == "");
  std::string msg = errorText(b->commit());
  CHECK(msg.find("appeared while this command ran") != std::string::npos);
  CHECK(msg.find(target.string()) != std::string::npos);
  // The winner's directory, whole: not b's, not a mix.
  CHECK(readFile(target / "plan.json") == "a");
  CHECK(names(target) == std::vector<std::string>{"plan.json"});
  { auto gone = std::move(*b); } // the loser's temporary directory goes
  CHECK(names(dir.str().str()) == std::vector<std::string>{"out"});
  // An empty directory in the way is not silently replaced either.
  fs::path empty = fs::path(dir.str().str()) / "empty";
  auto c = OutputDir::create(empty.string(), false);
  REQUIRE(static_cast<bool>(c));
  fs::create_directory(empty);
  CHECK(errorText(c->commit()).find("appeared") != std::string::npos);
  fs::remove_all(dir.str().str());
}

TEST_CASE("a failed write names the file and the cause and keeps the old "
          "output",
          "[fileutil]") {
  // /dev/full fails every write with ENOSPC: the writer's error path with a
  // real full-device error (tests/cli/faults.sh fills a real file system).
  REQUIRE(fs::exists("/dev/full"));
  std::string msg = errorText(writeFile("/dev/full", "data"));
  CHECK(msg == "cannot write '/dev/full': No space left on device");

  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("memfit-outdir", dir));
  fs::path target = fs::path(dir.str().str()) / "out";
  auto first = OutputDir::create(target.string(), false);
  REQUIRE(static_cast<bool>(first));
  REQUIRE(errorText(first->write("plan.json", "old")) == "");
  REQUIRE(errorText(first->commit()) == "");

  auto second = OutputDir::create(target.string(), /*replace=*/true);
  REQUIRE(static_cast<bool>(second));
  // A file of the new output that cannot be written: its path is a
  // directory.
  fs::create_directories(fs::path(second->tempPath()) / "report.txt");
  std::string err = errorText(second->write("report.txt", "new"));
  CHECK(err.find("report.txt") != std::string::npos);
  CHECK(err.find(target.string() + " is left as it was") != std::string::npos);
  { auto gone = std::move(*second); }
  CHECK(readFile(target / "plan.json") == "old");
  CHECK(names(dir.str().str()) == std::vector<std::string>{"out"});
  fs::remove_all(dir.str().str());
}
