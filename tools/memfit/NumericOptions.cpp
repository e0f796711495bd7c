//===- NumericOptions.cpp - Numeric flags that refuse nonsense ------------===//
#include "tools/memfit/NumericOptions.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace llvm::cl {

bool parser<memfit::tool::Count>::parse(Option &o, StringRef, StringRef arg,
                                        memfit::tool::Count &value) {
  int64_t v = 0;
  if (arg.trim().getAsInteger(0, v))
    return o.error("expected a whole number, got '" + arg + "'");
  if (v < 0)
    return o.error("expected a number >= 0, got '" + arg + "'");
  value = v;
  return false;
}

void parser<memfit::tool::Count>::printOptionDiff(
    const Option &o, memfit::tool::Count value,
    OptionValue<memfit::tool::Count>, size_t globalWidth) const {
  printOptionName(o, globalWidth);
  outs() << "= " << value.value << "\n";
}

bool parser<memfit::tool::Rate>::parse(Option &o, StringRef, StringRef arg,
                                       memfit::tool::Rate &value) {
  double v = 0;
  // getAsDouble takes "nan" and "inf"; neither is a rate.
  if (arg.trim().getAsDouble(v) || !std::isfinite(v))
    return o.error("expected a finite number, got '" + arg + "'");
  if (v < 0)
    return o.error("expected a number >= 0, got '" + arg + "'");
  value = v;
  return false;
}

void parser<memfit::tool::Rate>::printOptionDiff(
    const Option &o, memfit::tool::Rate value, OptionValue<memfit::tool::Rate>,
    size_t globalWidth) const {
  printOptionName(o, globalWidth);
  outs() << "= " << value.value << "\n";
}

} // namespace llvm::cl
