//===- JsonText.h - JSON values in error messages ---------------*- C++ -*-===//
//
// The words every JSON reader (device files, profiles, plan.json) uses when
// a field has the wrong type or value, so the messages read alike.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_SUPPORT_JSONTEXT_H
#define MEMFIT_COMPILER_SUPPORT_JSONTEXT_H

#include <cstdio>
#include <string>

namespace memfit {

/// "a number", "a string", "a boolean", "an array", "an object" or "null".
template <typename Json> std::string jsonTypeName(const Json &v) {
  if (v.is_null())
    return "null";
  if (v.is_boolean())
    return "a boolean";
  if (v.is_number())
    return "a number";
  if (v.is_string())
    return "a string";
  if (v.is_array())
    return "an array";
  return "an object";
}

/// A number as people write it ("0", "1.5", "2e+10").
inline std::string numberText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

} // namespace memfit

#endif
