//===- MappedArray.h - A .npy file mapped, not read --------------*- C++
//-*-===//
//
// The trainer's --data and --labels: a NumPy array of any size (far larger
// than host memory) mapped read-only, its samples converted to what the
// model reads as each batch is filled. Element types: uint8, int8, uint16,
// int16, uint32, int32, int64, float16, bfloat16 (as ml_dtypes writes it:
// numpy records its 2-byte type as '<V2') and float32, little-endian, C
// order.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_MAPPEDARRAY_H
#define MEMFIT_RUNTIME_MAPPEDARRAY_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memfit::rt {

enum class ElemType : uint8_t {
  U8,
  I8,
  U16,
  I16,
  U32,
  I32,
  I64,
  F16,
  BF16,
  F32
};

/// float16 and bfloat16 bit patterns as float (exact).
float halfToFloat(uint16_t h);
float bf16ToFloat(uint16_t h);

/// A whole regular file mapped read-only, unmapped with this object: what
/// MappedArray and TokenStream read their elements from.
class MappedFile {
public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  /// False with `err` naming the file when it cannot be opened, is no
  /// regular file or cannot be mapped; an empty file maps nothing.
  bool open(const std::string &path, std::string &err);
  const unsigned char *bytes() const {
    return static_cast<const unsigned char *>(map);
  }
  int64_t size() const { return static_cast<int64_t>(mapBytes); }
  /// Unmaps the file (size 0 after).
  void close();

private:
  void *map = nullptr;
  size_t mapBytes = 0;
};

class MappedArray {
public:
  /// Null with `err` naming the file when it is no .npy this reads, or is
  /// shorter than its header says.
  static std::unique_ptr<MappedArray> open(const std::string &path,
                                           std::string &err);
  MappedArray(const MappedArray &) = delete;
  MappedArray &operator=(const MappedArray &) = delete;

  const std::vector<int64_t> &shape() const { return dims; }
  int64_t count() const { return elems; }
  ElemType type() const { return kind; }
  bool isInteger() const {
    return kind != ElemType::F16 && kind != ElemType::BF16 &&
           kind != ElemType::F32;
  }
  /// numpy's name of the element type ("uint8", "bfloat16").
  const char *typeName() const;
  /// Element i as a float (integers converted, exactly up to 2^24).
  float floatAt(int64_t i) const;
  /// Element i of an integer array.
  int64_t intAt(int64_t i) const;
  /// The first element of an integer array outside [0, limit) and not
  /// `skip` (a loss's ignored label), or -1.
  int64_t firstOutside(int64_t limit,
                       std::optional<int64_t> skip = std::nullopt) const;
  /// The elements' bytes, little-endian, in C order.
  const unsigned char *bytes() const { return data; }

private:
  MappedArray() = default;
  MappedFile file;
  const unsigned char *data = nullptr; // the elements, inside file
  std::vector<int64_t> dims;
  int64_t elems = 0, width = 4;
  ElemType kind = ElemType::F32;
};

/// Shards of one array along axis 0 (--data A.npy,B.npy or a directory),
/// read as their concatenation: one element type, one shape past axis 0.
class ShardedArray {
public:
  /// Maps each file in order; false with `err` naming the first that
  /// cannot be read or differs from the first shard in type or shape.
  bool open(const std::vector<std::string> &paths, std::string &err);
  /// Appends a mapped shard (no checks: the benchmark's one file).
  void add(std::shared_ptr<const MappedArray> a);
  bool empty() const { return parts.empty(); }
  const MappedArray &front() const { return *parts.front(); }
  size_t size() const { return parts.size(); }
  const MappedArray &part(size_t i) const { return *parts[i]; }
  const std::string &name(size_t i) const { return names[i]; }
  /// Samples (rows of axis 0) over every shard.
  int64_t samples() const { return first.empty() ? 0 : first.back(); }
  /// The shard holding sample s, and s's row in it.
  std::pair<const MappedArray *, int64_t> at(int64_t s) const;

private:
  std::vector<std::shared_ptr<const MappedArray>> parts;
  std::vector<std::string> names;
  std::vector<int64_t> first; // each shard's first sample, then the total
};

} // namespace memfit::rt

#endif
