//===- NumericOptions.h - Numeric flags that refuse nonsense ----*- C++ -*-===//
//
// cl::opt<float> accepts "nan", "inf" and negative numbers, cl::opt<int64_t>
// negative ones. Every numeric flag of memfit is a count, a size, a rate or
// a fraction, so they are declared with these types, whose parsers (LLVM's
// documented way: a cl::parser specialization) refuse anything else on the
// command line, naming the flag and saying what is allowed, before any
// command runs. Each converts to its plain number.
//
// A flag whose default means "not given" (--batch: the model's, --sub-batch:
// chosen) is a PositiveCount with cl::init(0): the default does not pass
// through the parser, so 0 stands for "not given" while an explicit 0 is
// refused.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_MEMFIT_NUMERICOPTIONS_H
#define MEMFIT_TOOLS_MEMFIT_NUMERICOPTIONS_H

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <limits>

namespace memfit::tool {

/// A whole number >= 0.
struct Count {
  static constexpr int64_t least = 0;
  int64_t value = 0;
  Count(int64_t v = 0) : value(v) {}
  operator int64_t() const { return value; }
};

/// A whole number >= 1 (0 only as a default that means "not given").
struct PositiveCount {
  static constexpr int64_t least = 1;
  int64_t value = 0;
  PositiveCount(int64_t v = 0) : value(v) {}
  operator int64_t() const { return value; }
};

/// A finite real number >= 0.
struct Rate {
  static constexpr double below = std::numeric_limits<double>::infinity();
  double value = 0;
  Rate(double v = 0) : value(v) {}
  operator double() const { return value; }
};

/// A finite real number in [0, 1) (SGD momentum).
struct Fraction {
  static constexpr double below = 1;
  double value = 0;
  Fraction(double v = 0) : value(v) {}
  operator double() const { return value; }
};

/// Parse `arg` as a whole number >= least, or report through o.error; true
/// on error (cl::parser's convention).
bool parseWhole(llvm::cl::Option &o, llvm::StringRef arg, int64_t least,
                int64_t &value);
/// Parse `arg` as a finite number >= 0 and < below (any finite number when
/// `below` is infinite), or report through o.error; true on error.
bool parseReal(llvm::cl::Option &o, llvm::StringRef arg, double below,
               double &value);

/// The parser of every type above.
template <typename T> class NumberParser : public llvm::cl::basic_parser<T> {
  static constexpr bool whole = std::is_integral_v<decltype(T::value)>;

public:
  NumberParser(llvm::cl::Option &o) : llvm::cl::basic_parser<T>(o) {}
  bool parse(llvm::cl::Option &o, llvm::StringRef, llvm::StringRef arg, T &v) {
    if constexpr (whole)
      return parseWhole(o, arg, T::least, v.value);
    else
      return parseReal(o, arg, T::below, v.value);
  }
  llvm::StringRef getValueName() const override {
    return whole ? "n" : "number";
  }
  void printOptionDiff(const llvm::cl::Option &o, T v, llvm::cl::OptionValue<T>,
                       size_t globalWidth) const {
    this->printOptionName(o, globalWidth);
    llvm::outs() << "= " << v.value << "\n";
  }
};

} // namespace memfit::tool

namespace llvm::cl {

template <>
class parser<memfit::tool::Count>
    : public memfit::tool::NumberParser<memfit::tool::Count> {
public:
  using NumberParser::NumberParser;
};
template <>
class parser<memfit::tool::PositiveCount>
    : public memfit::tool::NumberParser<memfit::tool::PositiveCount> {
public:
  using NumberParser::NumberParser;
};
template <>
class parser<memfit::tool::Rate>
    : public memfit::tool::NumberParser<memfit::tool::Rate> {
public:
  using NumberParser::NumberParser;
};
template <>
class parser<memfit::tool::Fraction>
    : public memfit::tool::NumberParser<memfit::tool::Fraction> {
public:
  using NumberParser::NumberParser;
};

} // namespace llvm::cl

#endif
