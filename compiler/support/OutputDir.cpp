//===- OutputDir.cpp - An output directory that appears whole -------------===//
#include "compiler/support/OutputDir.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/FileUtil.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;

namespace memfit {

llvm::Expected<OutputDir> OutputDir::create(const std::string &target,
                                            bool replace) {
  if (target.empty())
    return makeError("no output directory given (-o DIR)");
  std::error_code ec;
  fs::path t = fs::absolute(fs::path(target), ec).lexically_normal();
  if (ec)
    return makeErrorF("{0}: {1}", target, ec.message());
  if (t.filename().empty())
    t = t.parent_path();
  if (fs::exists(t, ec) && !replace)
    return makeErrorF("{0} already exists; pass --force to replace it", target);
  if (fs::exists(t) && !fs::is_directory(t))
    return makeErrorF("{0} exists and is not a directory", target);
  fs::path parent = t.parent_path();
  if (!fs::is_directory(parent, ec))
    return makeErrorF("{0}: the directory it goes in does not exist", target);
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path tmp =
        parent / ("." + t.filename().string() + ".tmp-" +
                  std::to_string(::getpid()) + "-" + std::to_string(attempt));
    if (fs::create_directory(tmp, ec))
      return OutputDir(t.string(), tmp.string(), replace);
    if (ec)
      break; // not a name taken by an earlier attempt: trying on is futile
  }
  return makeErrorF("{0}: cannot create a temporary directory beside it{1}",
                    target, ec ? ": " + ec.message() : std::string());
}

OutputDir::OutputDir(OutputDir &&o) noexcept
    : target(std::move(o.target)), temp(std::move(o.temp)), replace(o.replace),
      committed(o.committed) {
  o.committed = true; // the moved-from object owns nothing
}

OutputDir::~OutputDir() {
  if (!committed && !temp.empty()) {
    std::error_code ec;
    fs::remove_all(temp, ec);
  }
}

static llvm::Expected<fs::path> inside(const std::string &root,
                                       const std::string &rel) {
  fs::path p = fs::path(rel).lexically_normal();
  if (p.is_absolute() || p.empty() || p.string().rfind("..", 0) == 0)
    return makeErrorF("refusing to write '{0}' outside the output directory",
                      rel);
  return fs::path(root) / p;
}

/// What became of the target when writing failed: nothing was published,
/// so an older directory is as it was.
std::string OutputDir::untouched() const {
  std::error_code ec;
  return fs::exists(target, ec) ? "; " + target + " is left as it was"
                                : "; nothing was written to " + target;
}

llvm::Error OutputDir::write(const std::string &relPath,
                             const std::string &contents) {
  auto p = inside(temp, relPath);
  if (!p)
    return p.takeError();
  std::error_code ec;
  fs::create_directories(p->parent_path(), ec);
  if (ec)
    return makeErrorF("cannot create {0}: {1}{2}", p->parent_path().string(),
                      ec.message(), untouched());
  if (llvm::Error err = writeFile(p->string(), contents))
    return makeErrorF("{0}{1}", llvm::toString(std::move(err)), untouched());
  return llvm::Error::success();
}

llvm::Error OutputDir::copyFile(const std::string &from,
                                const std::string &relPath) {
  auto p = inside(temp, relPath);
  if (!p)
    return p.takeError();
  std::error_code ec;
  fs::create_directories(p->parent_path(), ec);
  if (!ec)
    fs::copy_file(from, *p, fs::copy_options::overwrite_existing, ec);
  if (ec)
    return makeErrorF("cannot copy {0}: {1}{2}", from, ec.message(),
                      untouched());
  return llvm::Error::success();
}

/// rename(2) that fails with EEXIST instead of replacing `to` (an empty
/// directory at `to` would otherwise be replaced silently).
static int renameNoReplace(const fs::path &from, const fs::path &to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                  RENAME_NOREPLACE) == 0)
    return 0;
  return errno;
}

llvm::Error OutputDir::commit() {
  std::error_code ec;
  fs::path old;
  if (!replace) {
    // Another command may have published `target` since create() looked:
    // the first to finish wins whole, the others fail here and leave it be.
    int err = renameNoReplace(temp, target);
    if (err == EEXIST || err == ENOTEMPTY)
      return makeErrorF("{0} appeared while this command ran (written by "
                        "another one?); it is left as it is; pass --force to "
                        "replace it",
                        target);
    if (err != 0)
      return makeErrorF("cannot move the output into {0}: {1}", target,
                        std::strerror(err));
    committed = true;
    return llvm::Error::success();
  }
  if (fs::exists(target)) {
    old = fs::path(temp).string() + ".old";
    fs::rename(target, old, ec);
    if (ec)
      return makeErrorF("cannot move the old {0} aside: {1}", target,
                        ec.message());
  }
  fs::rename(temp, target, ec);
  if (ec) {
    if (!old.empty())
      fs::rename(old, target); // put the old one back
    return makeErrorF("cannot move the output into {0}: {1}", target,
                      ec.message());
  }
  committed = true;
  if (!old.empty())
    fs::remove_all(old, ec);
  return llvm::Error::success();
}

} // namespace memfit
