//===- NpyTestUtil.h - .npy bytes written in a test --------------*- C++
//-*-===//
//
// The tests of the trainer's data readers (MappedArrayTest, TokenStreamTest)
// write .npy files of any descr and shape, as numpy.save does, including
// the ones runtime/Npy.h's writeNpy does not write.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TESTS_NPYTESTUTIL_H
#define MEMFIT_TESTS_NPYTESTUTIL_H

#include <string>
#include <vector>

namespace memfit::test {

/// A .npy of `descr` and `shape` holding `data`, as numpy.save writes it.
inline std::string npy(const std::string &descr, const std::string &shape,
                       const std::string &data) {
  std::string h = "{'descr': '" + descr +
                  "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 255);
  out += static_cast<char>(h.size() >> 8);
  return out + h + data;
}

/// The bytes of `v`, little-endian as the machine's.
template <typename T> std::string raw(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()),
                     v.size() * sizeof(T));
}

} // namespace memfit::test

#endif
