//===- DiagnosticsTest.cpp - Typed errors and their exit codes ------------===//
#include "compiler/support/Diagnostics.h"

#include <catch2/catch.hpp>

using namespace memfit;

namespace {

/// What a handler sees: (is internal, message) per error, in order.
std::vector<std::pair<bool, std::string>> parts(llvm::Error err) {
  std::vector<std::pair<bool, std::string>> out;
  llvm::handleAllErrors(
      std::move(err),
      [&](const InternalError &e) {
        out.push_back({true, e.text()});
      },
      [&](const llvm::ErrorInfoBase &e) {
        out.push_back({false, e.message()});
      });
  return out;
}

} // namespace

TEST_CASE("makeError is a user error, makeInternalError an internal one",
          "[diagnostics]") {
  CHECK(
      parts(makeErrorF("budget {0} too small", 5)) ==
      std::vector<std::pair<bool, std::string>>{{false, "budget 5 too small"}});
  CHECK(parts(makeInternalErrorF("block {0} lost", 7)) ==
        std::vector<std::pair<bool, std::string>>{{true, "block 7 lost"}});
}

TEST_CASE("withContext prefixes every part and keeps its type",
          "[diagnostics]") {
  llvm::Error both = llvm::joinErrors(makeError("too small"),
                                      makeInternalError("verifier rejected"));
  CHECK(parts(withContext(std::move(both), "m.onnx: ")) ==
        std::vector<std::pair<bool, std::string>>{
            {false, "m.onnx: too small"}, {true, "m.onnx: verifier rejected"}});
  // A foreign error type becomes a user error with the prefix.
  llvm::Error foreign =
      llvm::createStringError(llvm::inconvertibleErrorCode(), "io failed");
  CHECK(parts(withContext(std::move(foreign), "f: ")) ==
        std::vector<std::pair<bool, std::string>>{{false, "f: io failed"}});
}

TEST_CASE("takeInternalErrors splits an error list", "[diagnostics]") {
  llvm::Error err =
      llvm::joinErrors(makeError("no room"), makeInternalError("bug"));
  llvm::Error internal = takeInternalErrors(err);
  CHECK(parts(std::move(internal)) ==
        std::vector<std::pair<bool, std::string>>{{true, "bug"}});
  CHECK(parts(std::move(err)) ==
        std::vector<std::pair<bool, std::string>>{{false, "no room"}});

  llvm::Error userOnly = makeError("no room");
  CHECK(!takeInternalErrors(userOnly));
  CHECK(parts(std::move(userOnly)).size() == 1);
}

TEST_CASE("dropInfeasible keeps every other error", "[diagnostics]") {
  llvm::Error err = llvm::joinErrors(
      makeInfeasibleF("no room at sub-batch {0}", 4),
      llvm::joinErrors(makeError("bad flag"), makeInternalError("bug")));
  CHECK(parts(dropInfeasible(std::move(err))) ==
        std::vector<std::pair<bool, std::string>>{{false, "bad flag"},
                                                  {true, "bug"}});
  CHECK(!dropInfeasible(makeInfeasibleF("no room")));
  // Infeasible is a user error: exit code 1 where it reaches the user.
  llvm::Error alone = makeInfeasibleF("no room");
  CHECK(alone.isA<UserError>());
  llvm::consumeError(std::move(alone));
}

TEST_CASE("withContext keeps an Infeasible error Infeasible", "[diagnostics]") {
  llvm::Error err = withContext(makeInfeasibleF("no room"), "m.onnx: ");
  CHECK(err.isA<Infeasible>());
  CHECK(llvm::toString(std::move(err)) == "m.onnx: no room");
}
