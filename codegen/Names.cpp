//===- Names.cpp - Untrusted ONNX names in generated source ---------------===//
#include "codegen/Names.h"

#include <cstdio>

namespace memfit {

std::string identifierFrom(std::string_view prefix, std::string_view name,
                           size_t maxLen) {
  std::string out(prefix);
  for (size_t i = 0; i < name.size() && i < maxLen; ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

std::string commentText(std::string_view name, size_t maxLen) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (out.size() >= maxLen) {
      out += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == ' ' || c == '.' || c == '_' ||
              c == ':' || c == '-' || c == '(' || c == ')' || c == '[' ||
              c == ']' || c == ',';
    if (ok) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string stringLiteral(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

} // namespace memfit
