//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads the .npy format (versions 1 to 3, C order, little-endian float32,
// int32 and int64) that numpy.save writes. Every malformed header is an
// error naming the file.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_NPY_H
#define MEMFIT_RUNTIME_NPY_H

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace memfit::rt {

enum class NpyDType : uint8_t { F32, I32, I64 };

struct NpyArray {
  NpyDType dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
  int64_t count() const;
  std::vector<float> asFloat() const;
  std::vector<int32_t> asInt32() const;
};

/// A .npy file's header: its dtype as numpy writes it ('<u2', '<f4'), its
/// shape, the element count and where the data starts.
struct NpyHeader {
  std::string descr;
  std::vector<int64_t> shape;
  int64_t count = 0;
  int64_t dataOffset = 0;
};
/// Reads the header from a stream at the start of `size` bytes of .npy;
/// false with `err` naming `path` when it is malformed.
bool readNpyHeader(std::istream &in, int64_t size, const std::string &path,
                   NpyHeader &out, std::string &err);

std::optional<NpyArray> readNpy(const std::string &path, std::string &err);
/// The same from a stream positioned at the start of `size` bytes of .npy;
/// `name` stands for the file in messages.
std::optional<NpyArray> readNpy(std::istream &in, int64_t size,
                                const std::string &name, std::string &err);
bool writeNpy(const std::string &path, const NpyArray &a, std::string &err);

} // namespace memfit::rt

#endif
