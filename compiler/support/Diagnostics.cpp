//===- Diagnostics.cpp - User-facing errors -------------------------------===//
#include "compiler/support/Diagnostics.h"

namespace memfit {

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
