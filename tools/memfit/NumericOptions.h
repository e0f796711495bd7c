//===- NumericOptions.h - Numeric flags that refuse nonsense ----*- C++ -*-===//
//
// cl::opt<float> accepts "nan", "inf" and negative numbers, cl::opt<int64_t>
// negative ones. Every numeric flag of memfit is a count, a size or a rate
// that is finite and not negative, so they are declared with these types,
// whose parsers (LLVM's documented way: a cl::parser specialization) refuse
// anything else on the command line, naming the flag, before any command
// runs. Both convert to their plain number.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_MEMFIT_NUMERICOPTIONS_H
#define MEMFIT_TOOLS_MEMFIT_NUMERICOPTIONS_H

#include "llvm/Support/CommandLine.h"

#include <cstdint>

namespace memfit::tool {

/// An integer >= 0.
struct Count {
  int64_t value = 0;
  Count(int64_t v = 0) : value(v) {}
  operator int64_t() const { return value; }
};

/// A finite real number >= 0.
struct Rate {
  double value = 0;
  Rate(double v = 0) : value(v) {}
  operator double() const { return value; }
};

} // namespace memfit::tool

namespace llvm::cl {

template <>
class parser<memfit::tool::Count> : public basic_parser<memfit::tool::Count> {
public:
  parser(Option &o) : basic_parser(o) {}
  bool parse(Option &o, StringRef argName, StringRef arg,
             memfit::tool::Count &value);
  StringRef getValueName() const override { return "n"; }
  void printOptionDiff(const Option &o, memfit::tool::Count value,
                       OptionValue<memfit::tool::Count> defaultValue,
                       size_t globalWidth) const;
};

template <>
class parser<memfit::tool::Rate> : public basic_parser<memfit::tool::Rate> {
public:
  parser(Option &o) : basic_parser(o) {}
  bool parse(Option &o, StringRef argName, StringRef arg,
             memfit::tool::Rate &value);
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option &o, memfit::tool::Rate value,
                       OptionValue<memfit::tool::Rate> defaultValue,
                       size_t globalWidth) const;
};

} // namespace llvm::cl

#endif
