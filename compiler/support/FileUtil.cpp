//===- FileUtil.cpp - Safe file output ------------------------------------===//
#include "compiler/support/FileUtil.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace memfit {

namespace {

llvm::Error ioError(const std::string &what, const std::string &path, int err) {
  return makeErrorF("cannot {0} {1}: {2}", what, quoteName(path),
                    std::strerror(err));
}

/// Writes everything, retrying short writes and interrupted calls.
int writeAll(int fd, llvm::StringRef bytes) {
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

} // namespace

llvm::Error writeFileAtomically(const std::string &path,
                                llvm::StringRef bytes) {
  if (path.empty())
    return makeError("cannot write a file with an empty name");
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(path));
  if (dir.empty())
    dir = ".";
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(path) +
                                     ".tmp-%%%%%%%%");
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tmp))
    return makeErrorF("cannot create a temporary file in {0} to write {1}: "
                      "{2}",
                      quoteName(dir.str()), quoteName(path), ec.message());

  int err = writeAll(fd, bytes);
  const char *what = "write";
  if (err == 0 && ::fsync(fd) != 0) {
    err = errno;
    what = "flush";
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    what = "close";
  }
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    what = "replace";
  }
  if (err != 0) {
    ::unlink(tmp.c_str());
    return ioError(what, path, err);
  }
  // Make the rename itself durable; a failure here loses no data.
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  return llvm::Error::success();
}

llvm::Error writeFile(const std::string &path, llvm::StringRef bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return ioError("create", path, errno);
  int err = writeAll(fd, bytes);
  const char *what = "write";
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    what = "close";
  }
  if (err != 0)
    return ioError(what, path, err);
  return llvm::Error::success();
}

} // namespace memfit
