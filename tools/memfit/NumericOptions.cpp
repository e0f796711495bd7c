//===- NumericOptions.cpp - Numeric flags that refuse nonsense ------------===//
#include "tools/memfit/NumericOptions.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace memfit::tool {

bool parseWhole(llvm::cl::Option &o, llvm::StringRef arg, int64_t least,
                int64_t &value) {
  int64_t v = 0;
  std::string want = "a whole number >= " + std::to_string(least);
  if (arg.trim().getAsInteger(0, v) || v < least)
    return o.error("expected " + want + ", got '" + arg + "'");
  value = v;
  return false;
}

bool parseReal(llvm::cl::Option &o, llvm::StringRef arg, double below,
               double &value) {
  double v = 0;
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", below);
  std::string want = std::isinf(below)
                         ? std::string("a finite number >= 0")
                         : "a number in [0, " + std::string(bound) + ")";
  // getAsDouble takes "nan" and "inf"; neither is a rate or a fraction.
  if (arg.trim().getAsDouble(v) || !std::isfinite(v) || v < 0 || v >= below)
    return o.error("expected " + want + ", got '" + arg + "'");
  value = v;
  return false;
}

} // namespace memfit::tool
