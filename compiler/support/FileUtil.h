//===- FileUtil.h - Safe file output ----------------------------*- C++ -*-===//
//
// Output files appear whole or not at all: a reader (or a crash) never sees a
// half-written model, plan or report.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_SUPPORT_FILEUTIL_H
#define MEMFIT_COMPILER_SUPPORT_FILEUTIL_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace memfit {

/// Writes `bytes` to `path` atomically: into a temporary file in the same
/// directory, flushed to disk with fsync, then renamed over `path` (which it
/// replaces if it exists). On any failure the temporary file is removed,
/// `path` is left as it was, and the error names the path and the cause.
llvm::Error writeFileAtomically(const std::string &path, llvm::StringRef bytes);

/// Creates or truncates `path` and writes `bytes` to it, not atomically (for
/// files inside a directory that is itself published atomically). The error
/// names the path and the cause (a full disk says so).
llvm::Error writeFile(const std::string &path, llvm::StringRef bytes);

} // namespace memfit

#endif
