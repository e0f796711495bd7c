//===- Diagnostics.h - User-facing errors -----------------------*- C++ -*-===//
//
// User errors travel as llvm::Error. Messages are lower-case, name the file,
// the ONNX node and the tensor where there is one, and say what was expected.
// Internal invariants use assert instead.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_SUPPORT_DIAGNOSTICS_H
#define MEMFIT_COMPILER_SUPPORT_DIAGNOSTICS_H

#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>
#include <string_view>

namespace memfit {

/// Exit codes of every memfit command (docs/user-guide.md lists them).
enum ExitCode : int { ExitOk = 0, ExitUserError = 1, ExitInternalError = 2 };

inline llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

template <typename... Ts>
llvm::Error makeErrorF(const char *fmt, Ts &&...vals) {
  return makeError(llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

/// Quotes an untrusted name for a diagnostic: printable ASCII kept, anything
/// else shown as \xNN, length capped so a hostile name cannot flood a log.
std::string quoteName(std::string_view name);

} // namespace memfit

#endif
