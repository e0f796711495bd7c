//===- Names.h - Untrusted ONNX names in generated source -------*- C++ -*-===//
//
// Names come from the model file and are untrusted. In generated code they
// appear only as identifier fragments reduced to [A-Za-z0-9_] and as comment
// text reduced to characters that cannot end a comment, start a directive or
// continue a line; nothing in a name can reach the program's tokens.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_NAMES_H
#define MEMFIT_CODEGEN_NAMES_H

#include <string>
#include <string_view>

namespace memfit {

/// `prefix` + a fragment of `name` with every other character turned into
/// '_', at most `maxLen` characters of it. Not unique: callers add an id.
std::string identifierFrom(std::string_view prefix, std::string_view name,
                           size_t maxLen = 32);
/// Comment-safe text: letters, digits, space and "._:-()[]," kept; every
/// other byte written as \xNN (without a backslash: "x" + hex), capped.
std::string commentText(std::string_view name, size_t maxLen = 80);
/// A C++ string literal with everything outside printable ASCII, quotes and
/// backslashes escaped as octal.
std::string stringLiteral(std::string_view text);

} // namespace memfit

#endif
