//===- AtomicFile.cpp - Trainer output that appears whole -----------------===//
#include "runtime/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace memfit::rt {

AtomicFile::AtomicFile(std::string target)
    : path(std::move(target)), tmp(path + ".tmp") {
  fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail("cannot create", errno);
}

AtomicFile::~AtomicFile() {
  if (fd >= 0)
    ::close(fd);
  if (!committed)
    ::unlink(tmp.c_str());
}

void AtomicFile::fail(const char *what, int errnum) {
  if (err.empty())
    err = path + ": " + what + ": " + std::strerror(errnum);
}

void AtomicFile::write(const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (err.empty() && size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      fail("cannot write", errno);
      return;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

bool AtomicFile::commit() {
  if (err.empty() && ::fsync(fd) != 0)
    fail("cannot flush", errno);
  if (fd >= 0 && ::close(fd) != 0)
    fail("cannot close", errno);
  fd = -1;
  if (err.empty() && ::rename(tmp.c_str(), path.c_str()) != 0)
    fail("cannot replace", errno);
  if (!err.empty())
    return false;
  committed = true;
  return true;
}

} // namespace memfit::rt
