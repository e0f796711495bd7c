//===- Units.cpp - Byte sizes for people ----------------------------------===//
#include "compiler/support/Units.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace memfit {

llvm::Expected<int64_t> parseSize(std::string_view text) {
  llvm::StringRef s = llvm::StringRef(text.data(), text.size()).trim();
  size_t i = 0;
  while (i < s.size() && (std::isdigit((unsigned char)s[i]) || s[i] == '.'))
    ++i;
  llvm::StringRef num = s.take_front(i);
  llvm::StringRef unit = s.drop_front(i).trim();
  double value = 0;
  if (num.empty() || num.getAsDouble(value) || !(value >= 0))
    return makeErrorF("invalid size '{0}': expected a number with an optional "
                      "unit, e.g. 12GiB, 500MB or 1073741824",
                      s);
  struct UnitDef {
    const char *name;
    double scale;
  };
  static const UnitDef units[] = {{"", 1},
                                  {"b", 1},
                                  {"k", 1024.0},
                                  {"kib", 1024.0},
                                  {"kb", 1e3},
                                  {"m", 1048576.0},
                                  {"mib", 1048576.0},
                                  {"mb", 1e6},
                                  {"g", 1073741824.0},
                                  {"gib", 1073741824.0},
                                  {"gb", 1e9},
                                  {"t", 1099511627776.0},
                                  {"tib", 1099511627776.0},
                                  {"tb", 1e12}};
  std::string lower = unit.lower();
  for (const UnitDef &u : units)
    if (lower == u.name) {
      double bytes = std::floor(value * u.scale);
      if (bytes > (double)std::numeric_limits<int64_t>::max() / 2)
        return makeErrorF("size '{0}' is too large", s);
      return static_cast<int64_t>(bytes);
    }
  return makeErrorF("invalid size unit '{0}' in '{1}': expected B, KiB, MiB, "
                    "GiB, TiB, KB, MB, GB or TB",
                    unit, s);
}

std::string formatBytes(int64_t bytes) {
  static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0)
    return llvm::formatv("{0} B", bytes).str();
  return llvm::formatv("{0:F2} {1}", v, names[u]).str();
}

} // namespace memfit
