//===- Profile.h - Measured task costs --------------------------*- C++ -*-===//
//
// A measured profile, as `memfit profile` writes it: for each (task kind,
// op signature, sub-batch) the time and workspace of every algorithm that
// ran, plus the measured pinned host-device bandwidth and calibration values
// for the device spec. The JSON schema carries a schema_version; readers
// refuse versions they do not know and name the file, the entry and the
// field of every error.
//
// A profile may also hold what a trainer found cuDNN refusing at start-up
// (ConvRefusal, the "refused" array); such a file has no entries of its
// own and serves `memfit plan --profile` like any other.
//
// Lookup is by signature, never by op name, so a profile taken on one model
// serves every model with the same shapes. A sub-batch between two measured
// ones is interpolated linearly (task times are affine in the sub-batch); its
// workspace is the larger of the two neighbours so that it never
// underestimates. Anything else is Missing and the caller falls back to the
// analytic model.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_COST_PROFILE_H
#define MEMFIT_COMPILER_COST_PROFILE_H

#include "compiler/ir/TaskGraph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memfit {

constexpr int kProfileSchemaVersion = 1;

struct AlgoMeasurement {
  int algo = 0;
  double seconds = 0;
  int64_t workspaceBytes = 0;
};

struct ProfileEntry {
  TaskKind kind = TaskKind::Forward;
  std::string signature;
  int64_t subBatch = 1;
  std::vector<AlgoMeasurement> algorithms; // ascending algo ids
};

struct TransferMeasurement {
  double h2dBytesPerSecond = 0;
  double d2hBytesPerSecond = 0;
  double latencySeconds = 0; // fixed cost of one copy
};

/// Where the profile was taken; informative, not used for lookup.
struct ProfileDeviceInfo {
  std::string name;              // cudaDeviceProp::name
  std::string computeCapability; // "9.0"
  int64_t smCount = 0;
  int64_t memoryBytes = 0;
  std::string cudaRuntime; // "13.0"
  std::string cudnn;       // "9.19.0"
  std::string math;        // "fma" (strict FP32) or "default" (TF32 allowed)
};

/// What a trainer found at start-up (its conv-algos file, written in this
/// format): cuDNN refused the planned algorithm of a convolution task at a
/// sub-batch, because it does not run it for the shape at all
/// (`askedBytes` < 0) or because it asked `askedBytes` of workspace where
/// the plan set aside `plannedBytes`. `ran` is what the trainer ran
/// instead. A plan made with the profile no longer offers a refused
/// algorithm for the signature, and prices a too-small workspace at what
/// cuDNN asked (scaled with the sub-batch).
struct ConvRefusal {
  TaskKind kind = TaskKind::Forward;
  std::string signature;
  int64_t subBatch = 1;
  int algo = 0;
  int64_t askedBytes = -1;
  int64_t plannedBytes = 0;
  int ran = -1;
  bool unsupported() const { return askedBytes < 0; }
};

enum class LookupKind : uint8_t { Missing, Exact, Interpolated };

struct ProfileLookup {
  LookupKind kind = LookupKind::Missing;
  std::vector<AlgoMeasurement> algorithms;
  const AlgoMeasurement *find(int algo) const;
};

class Profile {
public:
  ProfileDeviceInfo device;
  std::optional<TransferMeasurement> transfer;
  /// A JSON object with device-spec fields (DeviceSpec.h) that the measuring
  /// run determined, e.g. {"launch_us": 2.4}; empty when none.
  std::string calibration;

  /// Adds an entry, replacing one with the same kind, signature and
  /// sub-batch. Algorithms are kept sorted by id.
  void add(ProfileEntry e);
  size_t size() const;
  /// All entries sorted by task kind, signature, sub-batch.
  std::vector<ProfileEntry> entries() const;

  bool has(TaskKind k, llvm::StringRef signature) const;
  /// Measured sub-batches of a signature, ascending.
  std::vector<int64_t> subBatches(TaskKind k, llvm::StringRef signature) const;
  /// Algorithm ids measured at every sub-batch of the signature, ascending.
  std::vector<int> commonAlgorithms(TaskKind k,
                                    llvm::StringRef signature) const;
  ProfileLookup lookup(TaskKind k, llvm::StringRef signature, int64_t b) const;

  /// Records a refusal, replacing one with the same task, signature,
  /// sub-batch and algorithm.
  void refuse(ConvRefusal r);
  /// All refusals sorted by task kind, signature, sub-batch, algorithm.
  std::vector<ConvRefusal> refusals() const;
  /// Whether cuDNN refused to run `algo` for the signature at some
  /// sub-batch (not for its workspace: at all).
  bool unsupported(TaskKind k, llvm::StringRef signature, int algo) const;
  /// The least workspace cuDNN is known to ask for `algo` at sub-batch
  /// `b`: each workspace refusal's bytes scaled by b over its sub-batch
  /// (rounded up), the largest; 0 when none is recorded.
  int64_t askedWorkspace(TaskKind k, llvm::StringRef signature, int algo,
                         int64_t b) const;

private:
  using Key = std::pair<int, std::string>;
  const std::map<int64_t, std::vector<AlgoMeasurement>> *
  find(TaskKind k, llvm::StringRef signature) const;
  std::map<Key, std::map<int64_t, std::vector<AlgoMeasurement>>> table;
  /// (kind, signature) -> (sub-batch, algo) -> refusal.
  std::map<Key, std::map<std::pair<int64_t, int>, ConvRefusal>> refused;
};

/// `displayName` names the source in errors.
llvm::Expected<Profile> parseProfile(llvm::StringRef text,
                                     llvm::StringRef displayName);
llvm::Expected<Profile> loadProfile(llvm::StringRef path);
/// Deterministic JSON: entries sorted, object keys sorted.
std::string profileToJson(const Profile &p);
llvm::Error writeProfile(const Profile &p, llvm::StringRef path);

} // namespace memfit

#endif
