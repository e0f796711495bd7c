//===- Diagnostics.cpp - User-facing errors -------------------------------===//
#include "compiler/support/Diagnostics.h"

namespace memfit {

char UserError::ID = 0;
char InternalError::ID = 0;
char Infeasible::ID = 0;

llvm::Error withContext(llvm::Error err, const llvm::Twine &prefix) {
  std::string pre = prefix.str();
  return llvm::handleErrors(
      std::move(err),
      [&](std::unique_ptr<InternalError> e) -> llvm::Error {
        return makeInternalError(pre + e->text());
      },
      [&](std::unique_ptr<Infeasible> e) -> llvm::Error {
        return llvm::make_error<Infeasible>(pre + e->message());
      },
      [&](std::unique_ptr<llvm::ErrorInfoBase> e) -> llvm::Error {
        return makeError(pre + e->message());
      });
}

llvm::Error takeInternalErrors(llvm::Error &err) {
  llvm::Error internal = llvm::Error::success();
  err =
      llvm::handleErrors(std::move(err), [&](std::unique_ptr<InternalError> e) {
        internal =
            llvm::joinErrors(std::move(internal), llvm::Error(std::move(e)));
      });
  return internal;
}

llvm::Error dropInfeasible(llvm::Error err) {
  return llvm::handleErrors(std::move(err), [](const Infeasible &) {});
}

std::string quoteName(std::string_view name) {
  constexpr size_t kMaxShown = 120;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    auto ch = static_cast<unsigned char>(name[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\') {
      out += static_cast<char>(ch);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  if (name.size() > kMaxShown)
    out += "...";
  out += "'";
  return out;
}

} // namespace memfit
