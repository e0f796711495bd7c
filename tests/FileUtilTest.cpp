//===- FileUtilTest.cpp - Atomic file writes ------------------------------===//
#include "compiler/support/FileUtil.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <catch2/catch.hpp>

using namespace memfit;

namespace {

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    names.push_back(llvm::sys::path::filename(it->path()).str());
  std::sort(names.begin(), names.end());
  return names;
}

/// The error's message, or "" for success.
std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

std::string readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  REQUIRE(buf);
  return (*buf)->getBuffer().str();
}

} // namespace

TEST_CASE("writeFileAtomically writes, replaces and cleans up", "[fileutil]") {
  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("memfit-fileutil", dir));
  std::string path = (dir + "/model.onnx").str();

  REQUIRE(errorText(writeFileAtomically(path, "first")) == "");
  CHECK(readFile(path) == "first");
  REQUIRE(errorText(writeFileAtomically(path, std::string(100000, 'x'))) == "");
  CHECK(readFile(path) == std::string(100000, 'x'));
  // No temporary file is left beside the result.
  CHECK(listDir(dir.str().str()) == std::vector<std::string>{"model.onnx"});

  // Renaming over a directory fails: the error names the path, the
  // temporary file is gone and the directory is untouched.
  std::string sub = (dir + "/sub").str();
  REQUIRE(!llvm::sys::fs::create_directory(sub));
  std::string msg = errorText(writeFileAtomically(sub, "data"));
  CHECK(msg.find("cannot replace '") != std::string::npos);
  CHECK(msg.find("/sub'") != std::string::npos);
  CHECK(listDir(dir.str().str()) ==
        std::vector<std::string>{"model.onnx", "sub"});
  CHECK(listDir(sub).empty());

  // A missing directory is reported, not created.
  std::string missing =
      errorText(writeFileAtomically((dir + "/no/such/dir/f").str(), "data"));
  CHECK(missing.find("cannot create a temporary file in") != std::string::npos);

  llvm::sys::fs::remove_directories(dir);
}
