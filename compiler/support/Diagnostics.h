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

/// An error that is its message; `Kind` tells the exit code.
template <typename Kind> class MessageError : public llvm::ErrorInfo<Kind> {
public:
  explicit MessageError(std::string message) : message_(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message_; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  const std::string &text() const { return message_; }

private:
  std::string message_;
};

/// Something the user gave memfit is wrong: a flag, a file, a model, a
/// budget. Exit code 1.
class UserError : public MessageError<UserError> {
public:
  using MessageError::MessageError;
  static char ID;
};

/// memfit broke one of its own guarantees on real input (a plan the
/// verifier rejects, a malformed IR, code generation asked for a block a
/// task does not hold). Exit code 2, whatever else failed beside it: it is
/// a bug to report, never an answer about the user's model.
class InternalError : public MessageError<InternalError> {
public:
  using MessageError::MessageError;
  static char ID;
};

/// No plan exists under the settings asked for: the budget cannot be met by
/// this policy, sub-batch, chunk count or set of decisions, or the settings
/// cannot apply to this model. A user error (exit code 1) that a search may
/// drop when another candidate wins; every other error it must return.
class Infeasible : public llvm::ErrorInfo<Infeasible, UserError> {
public:
  using ErrorInfo::ErrorInfo;
  static char ID;
};

inline llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::make_error<UserError>(msg.str());
}

template <typename... Ts>
llvm::Error makeErrorF(const char *fmt, Ts &&...vals) {
  return makeError(llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

inline llvm::Error makeInternalError(const llvm::Twine &msg) {
  return llvm::make_error<InternalError>(msg.str());
}

template <typename... Ts>
llvm::Error makeInternalErrorF(const char *fmt, Ts &&...vals) {
  return makeInternalError(llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

template <typename... Ts>
llvm::Error makeInfeasibleF(const char *fmt, Ts &&...vals) {
  return llvm::make_error<Infeasible>(
      llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

/// Puts `prefix` (a file name, a stage) in front of every message in
/// `err`, keeping each error's type: an internal error stays internal, an
/// Infeasible one Infeasible.
/// Errors of other types become user errors with the prefix.
llvm::Error withContext(llvm::Error err, const llvm::Twine &prefix);

/// Moves every internal error out of `err` and returns them (success when
/// there is none); `err` keeps the rest. Lets a caller that may drop some
/// failures (one candidate plan of many) never drop an internal one.
llvm::Error takeInternalErrors(llvm::Error &err);

/// `err` without its Infeasible errors: what a search that tries several
/// settings must still return (user errors of other kinds, internal ones).
llvm::Error dropInfeasible(llvm::Error err);

/// Quotes an untrusted name for a diagnostic: printable ASCII kept, anything
/// else shown as \xNN, length capped so a hostile name cannot flood a log.
std::string quoteName(std::string_view name);

} // namespace memfit

#endif
