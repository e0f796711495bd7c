//===- Profile.cpp - Measured task costs ----------------------------------===//
#include "compiler/cost/Profile.h"

#include "compiler/cost/ConvAlgo.h"
#include "compiler/cost/DeviceSpec.h"
#include "compiler/ops/OpSignature.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/JsonText.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

namespace memfit {

using nlohmann::json;

const AlgoMeasurement *ProfileLookup::find(int algo) const {
  for (const AlgoMeasurement &m : algorithms)
    if (m.algo == algo)
      return &m;
  return nullptr;
}

void Profile::add(ProfileEntry e) {
  std::sort(e.algorithms.begin(), e.algorithms.end(),
            [](const AlgoMeasurement &a, const AlgoMeasurement &b) {
              return a.algo < b.algo;
            });
  table[{static_cast<int>(e.kind), e.signature}][e.subBatch] =
      std::move(e.algorithms);
}

size_t Profile::size() const {
  size_t n = 0;
  for (const auto &kv : table)
    n += kv.second.size();
  return n;
}

std::vector<ProfileEntry> Profile::entries() const {
  std::vector<ProfileEntry> out;
  for (const auto &[key, bySub] : table)
    for (const auto &[sub, algos] : bySub)
      out.push_back({static_cast<TaskKind>(key.first), key.second, sub, algos});
  return out;
}

const std::map<int64_t, std::vector<AlgoMeasurement>> *
Profile::find(TaskKind k, llvm::StringRef signature) const {
  auto it = table.find({static_cast<int>(k), signature.str()});
  return it == table.end() ? nullptr : &it->second;
}

bool Profile::has(TaskKind k, llvm::StringRef signature) const {
  return find(k, signature) != nullptr;
}

std::vector<int64_t> Profile::subBatches(TaskKind k,
                                         llvm::StringRef signature) const {
  std::vector<int64_t> out;
  if (const auto *bySub = find(k, signature))
    for (const auto &kv : *bySub)
      out.push_back(kv.first);
  return out;
}

std::vector<int> Profile::commonAlgorithms(TaskKind k,
                                           llvm::StringRef signature) const {
  const auto *bySub = find(k, signature);
  if (!bySub || bySub->empty())
    return {};
  std::vector<int> common;
  for (const AlgoMeasurement &m : bySub->begin()->second)
    common.push_back(m.algo);
  for (const auto &kv : *bySub) {
    std::vector<int> here, kept;
    for (const AlgoMeasurement &m : kv.second)
      here.push_back(m.algo);
    std::set_intersection(common.begin(), common.end(), here.begin(),
                          here.end(), std::back_inserter(kept));
    common = std::move(kept);
  }
  return common;
}

ProfileLookup Profile::lookup(TaskKind k, llvm::StringRef signature,
                              int64_t b) const {
  ProfileLookup out;
  const auto *bySub = find(k, signature);
  if (!bySub)
    return out;
  auto hi = bySub->lower_bound(b);
  if (hi != bySub->end() && hi->first == b) {
    out.kind = LookupKind::Exact;
    out.algorithms = hi->second;
    return out;
  }
  if (hi == bySub->end() || hi == bySub->begin())
    return out; // outside the measured range: no extrapolation
  auto lo = std::prev(hi);
  double f = static_cast<double>(b - lo->first) /
             static_cast<double>(hi->first - lo->first);
  for (const AlgoMeasurement &l : lo->second)
    for (const AlgoMeasurement &h : hi->second)
      if (l.algo == h.algo)
        out.algorithms.push_back(
            {l.algo, l.seconds + (h.seconds - l.seconds) * f,
             std::max(l.workspaceBytes, h.workspaceBytes)});
  out.kind =
      out.algorithms.empty() ? LookupKind::Missing : LookupKind::Interpolated;
  return out;
}

void Profile::refuse(ConvRefusal r) {
  Key key{static_cast<int>(r.kind), r.signature};
  refused[key][{r.subBatch, r.algo}] = std::move(r);
}

std::vector<ConvRefusal> Profile::refusals() const {
  std::vector<ConvRefusal> out;
  for (const auto &kv : refused)
    for (const auto &r : kv.second)
      out.push_back(r.second);
  return out;
}

bool Profile::unsupported(TaskKind k, llvm::StringRef signature,
                          int algo) const {
  auto it = refused.find({static_cast<int>(k), signature.str()});
  if (it == refused.end())
    return false;
  for (const auto &r : it->second)
    if (r.second.algo == algo && r.second.unsupported())
      return true;
  return false;
}

int64_t Profile::askedWorkspace(TaskKind k, llvm::StringRef signature, int algo,
                                int64_t b) const {
  auto it = refused.find({static_cast<int>(k), signature.str()});
  if (it == refused.end())
    return 0;
  int64_t most = 0;
  for (const auto &r : it->second) {
    const ConvRefusal &x = r.second;
    if (x.algo != algo || x.unsupported() || x.subBatch <= 0)
      continue;
    // cuDNN's workspaces grow with the batch; proportional scaling keeps
    // the recorded point exact.
    double scaled = static_cast<double>(x.askedBytes) * static_cast<double>(b) /
                    static_cast<double>(x.subBatch);
    most = std::max(most, static_cast<int64_t>(std::ceil(scaled)));
  }
  return most;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {

/// Typed access to the fields of one JSON object, with errors that name the
/// file and the path of the object ("entries[3].algorithms[0]").
class ObjectReader {
public:
  ObjectReader(const json &obj, std::string where)
      : obj(obj), where(std::move(where)) {}

  llvm::Error checkObject() const {
    if (!obj.is_object())
      return makeError(where + ": expected an object, got " +
                       jsonTypeName(obj));
    return llvm::Error::success();
  }
  llvm::Error checkKnown(std::initializer_list<const char *> keys) const {
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (std::none_of(keys.begin(), keys.end(),
                       [&](const char *k) { return it.key() == k; }))
        return makeError(where + ": unknown field " + quoteName(it.key()));
    return llvm::Error::success();
  }
  bool has(const char *key) const { return obj.contains(key); }
  const json &at(const char *key) const { return obj.at(key); }

  llvm::Error missing(const char *key) const {
    return makeError(where + ": field '" + key + "' is missing");
  }
  llvm::Error wrong(const char *key, const llvm::Twine &what) const {
    return makeError(where + ": field '" + key + "' " + what);
  }

  llvm::Error string(const char *key, std::string &out, bool required) const {
    if (!has(key))
      return required ? missing(key) : llvm::Error::success();
    if (!at(key).is_string())
      return wrong(key, "must be a string, not " + jsonTypeName(at(key)));
    out = at(key).get<std::string>();
    return llvm::Error::success();
  }
  llvm::Error integer(const char *key, int64_t &out, int64_t min,
                      bool required) const {
    if (!has(key))
      return required ? missing(key) : llvm::Error::success();
    if (!at(key).is_number_integer())
      return wrong(key, "must be an integer, not " + jsonTypeName(at(key)));
    out = at(key).get<int64_t>();
    if (out < min)
      return wrong(key,
                   llvm::formatv("must be at least {0}, got {1}", min, out));
    return llvm::Error::success();
  }
  llvm::Error number(const char *key, double &out, bool positive,
                     bool required) const {
    if (!has(key))
      return required ? missing(key) : llvm::Error::success();
    if (!at(key).is_number())
      return wrong(key, "must be a number, not " + jsonTypeName(at(key)));
    out = at(key).get<double>();
    if (!std::isfinite(out) || out < 0 || (positive && out == 0))
      return wrong(key, llvm::Twine("must be ") +
                            (positive ? "positive" : "non-negative") +
                            ", got " + numberText(out));
    return llvm::Error::success();
  }

private:
  const json &obj;
  std::string where;
};

std::optional<ConvDirection> convDirectionOf(TaskKind k) {
  switch (k) {
  case TaskKind::Forward:
    return ConvDirection::Forward;
  case TaskKind::BackwardData:
    return ConvDirection::BackwardData;
  case TaskKind::BackwardWeight:
    return ConvDirection::BackwardFilter;
  default:
    return std::nullopt;
  }
}

llvm::Error readEntry(const json &e, const std::string &where, Profile &p,
                      std::set<std::tuple<int, std::string, int64_t>> &seen) {
  ObjectReader r(e, where);
  if (auto err = r.checkObject())
    return err;
  if (auto err = r.checkKnown({"task", "signature", "sub_batch", "algorithms"}))
    return err;
  std::string task;
  ProfileEntry entry;
  if (auto err = r.string("task", task, true))
    return err;
  auto kind = parseTaskKindKey(task);
  if (!kind)
    return r.wrong("task", "names an unknown task kind " + quoteName(task) +
                               " (expected forward, backward_data, "
                               "backward_weight, loss or update)");
  entry.kind = *kind;
  if (auto err = r.string("signature", entry.signature, true))
    return err;
  if (entry.signature.empty())
    return r.wrong("signature", "is empty");
  if (auto err = r.integer("sub_batch", entry.subBatch, 1, true))
    return err;
  if (!seen.insert(
               {static_cast<int>(entry.kind), entry.signature, entry.subBatch})
           .second)
    return makeError(where + ": a second entry for the same task, signature "
                             "and sub_batch");
  if (!r.has("algorithms"))
    return r.missing("algorithms");
  const json &algos = r.at("algorithms");
  if (!algos.is_array() || algos.empty())
    return r.wrong("algorithms", "must be a non-empty array");
  bool isConv = llvm::StringRef(entry.signature).startswith("Conv(");
  auto dir = convDirectionOf(entry.kind);
  for (size_t i = 0; i < algos.size(); ++i) {
    std::string aw = where + ".algorithms[" + std::to_string(i) + "]";
    ObjectReader ar(algos[i], aw);
    if (auto err = ar.checkObject())
      return err;
    if (auto err =
            ar.checkKnown({"algo", "name", "seconds", "workspace_bytes"}))
      return err;
    AlgoMeasurement m;
    int64_t algo = 0;
    std::string name;
    if (auto err = ar.integer("algo", algo, 0, true))
      return err;
    if (auto err = ar.string("name", name, false))
      return err;
    if (isConv && dir) {
      if (algo >= kMaxConvAlgoId || !findConvAlgo(*dir, (int)algo))
        return ar.wrong("algo", llvm::formatv("is not a cuDNN {0} algorithm "
                                              "id (got {1})",
                                              convDirectionName(*dir), algo));
    } else if (algo != 0) {
      return ar.wrong("algo", llvm::formatv("must be 0 for a task that is "
                                            "not a convolution, got {0}",
                                            algo));
    }
    m.algo = static_cast<int>(algo);
    if (auto err = ar.number("seconds", m.seconds, false, true))
      return err;
    if (auto err = ar.integer("workspace_bytes", m.workspaceBytes, 0, true))
      return err;
    for (const AlgoMeasurement &prev : entry.algorithms)
      if (prev.algo == m.algo)
        return makeError(aw + ": algorithm " + std::to_string(m.algo) +
                         " appears twice in this entry");
    entry.algorithms.push_back(m);
  }
  p.add(std::move(entry));
  return llvm::Error::success();
}

/// A record's "task": a convolution direction's task kind.
llvm::Error readConvKind(const ObjectReader &r, TaskKind &kind) {
  std::string task;
  if (auto err = r.string("task", task, true))
    return err;
  auto k = parseTaskKindKey(task);
  if (!k || !convDirectionOf(*k))
    return r.wrong("task", "must name a convolution direction (forward, "
                           "backward_data or backward_weight), got " +
                               quoteName(task));
  kind = *k;
  return llvm::Error::success();
}

/// A call a trainer ran on a cuDNN graph-API engine (runtime/ConvCheck.h):
/// what it took and the workspace it needed.
struct GraphEngine {
  TaskKind kind = TaskKind::Forward;
  std::string signature;
  int64_t subBatch = 1;
  double seconds = 0;
  int64_t workspaceBytes = 0;
  int64_t legacyAlgo = -1; // the planned algorithm it ran in place of
};

llvm::Error readEngine(const json &e, const std::string &where,
                       std::vector<GraphEngine> &out) {
  ObjectReader r(e, where);
  if (auto err = r.checkObject())
    return err;
  if (auto err = r.checkKnown({"task", "name", "signature", "sub_batch",
                               "engine", "seconds", "legacy_seconds",
                               "legacy_algo", "workspace_bytes"}))
    return err;
  GraphEngine g;
  std::string ignored;
  if (auto err = readConvKind(r, g.kind))
    return err;
  if (auto err = r.string("signature", g.signature, true))
    return err;
  if (auto err = r.integer("sub_batch", g.subBatch, 1, true))
    return err;
  if (auto err = r.number("seconds", g.seconds, true, true))
    return err;
  if (auto err = r.integer("workspace_bytes", g.workspaceBytes, 0, true))
    return err;
  if (auto err = r.integer("legacy_algo", g.legacyAlgo, 0, false))
    return err;
  if (auto err = r.string("name", ignored, false))
    return err;
  if (auto err = r.string("engine", ignored, false))
    return err;
  out.push_back(std::move(g));
  return llvm::Error::success();
}

/// Where a planned algorithm has at least an engine's workspace, the
/// trainer times that engine too and runs it if faster: the algorithm
/// costs at most the engine's time. The algorithm the engine ran in place
/// of is priced as it ran, at the engine's time and workspace (a plan
/// giving it that workspace gets the engine again); the others with less
/// workspace than the engine keep their own figures.
void boundByEngines(Profile &p, const std::vector<GraphEngine> &engines) {
  if (engines.empty())
    return;
  for (ProfileEntry e : p.entries()) {
    bool changed = false;
    for (const GraphEngine &g : engines) {
      if (g.kind != e.kind || g.signature != e.signature ||
          g.subBatch != e.subBatch)
        continue;
      for (AlgoMeasurement &m : e.algorithms) {
        if (!(g.seconds < m.seconds))
          continue;
        if (m.workspaceBytes < g.workspaceBytes) {
          if (m.algo != g.legacyAlgo)
            continue;
          m.workspaceBytes = g.workspaceBytes;
        }
        m.seconds = g.seconds;
        changed = true;
      }
    }
    if (changed)
      p.add(std::move(e));
  }
}

llvm::Error readRefusal(const json &e, const std::string &where, Profile &p) {
  ObjectReader r(e, where);
  if (auto err = r.checkObject())
    return err;
  if (auto err = r.checkKnown({"task", "signature", "sub_batch", "algo", "name",
                               "reason", "workspace_bytes",
                               "planned_workspace_bytes", "ran"}))
    return err;
  ConvRefusal x;
  std::string reason, name;
  if (auto err = readConvKind(r, x.kind))
    return err;
  const auto dir = convDirectionOf(x.kind);
  if (auto err = r.string("signature", x.signature, true))
    return err;
  if (!llvm::StringRef(x.signature).startswith("Conv("))
    return r.wrong("signature", "must be a convolution's (Conv(...)), got " +
                                    quoteName(x.signature));
  if (auto err = r.integer("sub_batch", x.subBatch, 1, true))
    return err;
  int64_t algo = 0, ran = -1, planned = 0;
  if (auto err = r.integer("algo", algo, 0, true))
    return err;
  if (algo >= kMaxConvAlgoId || !findConvAlgo(*dir, (int)algo))
    return r.wrong("algo", llvm::formatv("is not a cuDNN {0} algorithm id "
                                         "(got {1})",
                                         convDirectionName(*dir), algo));
  x.algo = static_cast<int>(algo);
  if (auto err = r.string("name", name, false))
    return err;
  if (auto err = r.string("reason", reason, true))
    return err;
  if (reason == "unsupported") {
    if (r.has("workspace_bytes"))
      return r.wrong("workspace_bytes", "is for reason 'workspace' only");
  } else if (reason == "workspace") {
    if (auto err = r.integer("workspace_bytes", x.askedBytes, 0, true))
      return err;
  } else {
    return r.wrong("reason", "must be 'unsupported' or 'workspace', got " +
                                 quoteName(reason));
  }
  if (auto err = r.integer("planned_workspace_bytes", planned, 0, false))
    return err;
  x.plannedBytes = planned;
  if (auto err = r.integer("ran", ran, 0, false))
    return err;
  if (r.has("ran") && !findConvAlgo(*dir, (int)ran))
    return r.wrong("ran", llvm::formatv("is not a cuDNN {0} algorithm id "
                                        "(got {1})",
                                        convDirectionName(*dir), ran));
  x.ran = static_cast<int>(ran);
  p.refuse(std::move(x));
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Profile> parseProfile(llvm::StringRef text,
                                     llvm::StringRef displayName) {
  std::string file = displayName.str();
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    return makeError(file + ": invalid JSON: " + e.what());
  }
  ObjectReader r(root, file);
  if (auto err = r.checkObject())
    return err;
  // graph_engines: a trainer's record of the calls it ran on cuDNN's
  // graph API (runtime/ConvCheck.h). Plans name legacy algorithms only;
  // the engines bound the time of those with room for them.
  if (auto err =
          r.checkKnown({"schema_version", "generator", "device", "transfer",
                        "calibration", "entries", "refused", "graph_engines"}))
    return err;
  int64_t version = 0;
  if (auto err = r.integer("schema_version", version, 0, true))
    return err;
  if (version != kProfileSchemaVersion)
    return makeErrorF("{0}: profile schema_version {1} is not supported "
                      "(this memfit reads version {2}); profile the device "
                      "again",
                      file, version, kProfileSchemaVersion);

  Profile p;
  if (r.has("device")) {
    ObjectReader d(r.at("device"), file + ": device");
    if (auto err = d.checkObject())
      return err;
    if (auto err =
            d.checkKnown({"name", "compute_capability", "sm_count",
                          "memory_bytes", "cuda_runtime", "cudnn", "math"}))
      return err;
    if (auto err = d.string("name", p.device.name, false))
      return err;
    if (auto err =
            d.string("compute_capability", p.device.computeCapability, false))
      return err;
    if (auto err = d.integer("sm_count", p.device.smCount, 0, false))
      return err;
    if (auto err = d.integer("memory_bytes", p.device.memoryBytes, 0, false))
      return err;
    if (auto err = d.string("cuda_runtime", p.device.cudaRuntime, false))
      return err;
    if (auto err = d.string("cudnn", p.device.cudnn, false))
      return err;
    if (auto err = d.string("math", p.device.math, false))
      return err;
  }

  if (r.has("transfer")) {
    ObjectReader t(r.at("transfer"), file + ": transfer");
    if (auto err = t.checkObject())
      return err;
    if (auto err = t.checkKnown({"h2d_bytes_per_second", "d2h_bytes_per_second",
                                 "latency_seconds"}))
      return err;
    TransferMeasurement m;
    if (auto err =
            t.number("h2d_bytes_per_second", m.h2dBytesPerSecond, true, true))
      return err;
    if (auto err =
            t.number("d2h_bytes_per_second", m.d2hBytesPerSecond, true, true))
      return err;
    if (auto err = t.number("latency_seconds", m.latencySeconds, false, true))
      return err;
    p.transfer = m;
  }

  if (r.has("calibration")) {
    p.calibration = r.at("calibration").dump();
    // Checked now so that a bad field is reported when the profile is read.
    DeviceSpec probe;
    probe.efficiency = defaultEfficiencies();
    if (auto err =
            applyDeviceOverrides(probe, p.calibration, file + ": calibration"))
      return err;
  }

  if (!r.has("entries"))
    return r.missing("entries");
  const json &entries = r.at("entries");
  if (!entries.is_array())
    return r.wrong("entries", "must be an array, not " + jsonTypeName(entries));
  std::set<std::tuple<int, std::string, int64_t>> seen;
  for (size_t i = 0; i < entries.size(); ++i)
    if (auto err = readEntry(
            entries[i], file + ": entries[" + std::to_string(i) + "]", p, seen))
      return err;
  if (r.has("refused")) {
    const json &refused = r.at("refused");
    if (!refused.is_array())
      return r.wrong("refused",
                     "must be an array, not " + jsonTypeName(refused));
    for (size_t i = 0; i < refused.size(); ++i)
      if (auto err = readRefusal(
              refused[i], file + ": refused[" + std::to_string(i) + "]", p))
        return err;
  }
  if (r.has("graph_engines")) {
    const json &engines = r.at("graph_engines");
    if (!engines.is_array())
      return r.wrong("graph_engines",
                     "must be an array, not " + jsonTypeName(engines));
    std::vector<GraphEngine> read;
    for (size_t i = 0; i < engines.size(); ++i)
      if (auto err = readEngine(
              engines[i], file + ": graph_engines[" + std::to_string(i) + "]",
              read))
        return err;
    boundByEngines(p, read);
  }
  return p;
}

llvm::Expected<Profile> loadProfile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return makeError(path +
                     ": cannot read profile: " + buf.getError().message());
  return parseProfile((*buf)->getBuffer(), path);
}

std::string profileToJson(const Profile &p) {
  using ojson = nlohmann::ordered_json;
  ojson root = ojson::object();
  root["schema_version"] = kProfileSchemaVersion;
  root["generator"] = "memfit profile";
  root["device"] = {{"name", p.device.name},
                    {"compute_capability", p.device.computeCapability},
                    {"sm_count", p.device.smCount},
                    {"memory_bytes", p.device.memoryBytes},
                    {"cuda_runtime", p.device.cudaRuntime},
                    {"cudnn", p.device.cudnn},
                    {"math", p.device.math}};
  if (p.transfer)
    root["transfer"] = {{"h2d_bytes_per_second", p.transfer->h2dBytesPerSecond},
                        {"d2h_bytes_per_second", p.transfer->d2hBytesPerSecond},
                        {"latency_seconds", p.transfer->latencySeconds}};
  if (!p.calibration.empty()) {
    // Read from a checked file or written by the profiler: always an object.
    ojson cal =
        ojson::parse(p.calibration, nullptr, /*allow_exceptions=*/false);
    assert(cal.is_object() && "profile calibration is not a JSON object");
    if (cal.is_object())
      root["calibration"] = std::move(cal);
  }
  ojson entries = ojson::array();
  for (const ProfileEntry &e : p.entries()) {
    bool isConv = llvm::StringRef(e.signature).startswith("Conv(");
    auto dir = convDirectionOf(e.kind);
    ojson algos = ojson::array();
    for (const AlgoMeasurement &m : e.algorithms) {
      const ConvAlgoInfo *info =
          isConv && dir ? findConvAlgo(*dir, m.algo) : nullptr;
      algos.push_back({{"algo", m.algo},
                       {"name", info ? std::string(info->name) : "default"},
                       {"seconds", m.seconds},
                       {"workspace_bytes", m.workspaceBytes}});
    }
    entries.push_back({{"task", std::string(taskKindKey(e.kind))},
                       {"signature", e.signature},
                       {"sub_batch", e.subBatch},
                       {"algorithms", std::move(algos)}});
  }
  root["entries"] = std::move(entries);
  std::vector<ConvRefusal> refusals = p.refusals();
  if (!refusals.empty()) {
    ojson refused = ojson::array();
    for (const ConvRefusal &x : refusals) {
      auto dir = convDirectionOf(x.kind);
      const ConvAlgoInfo *info = dir ? findConvAlgo(*dir, x.algo) : nullptr;
      ojson o = {{"task", std::string(taskKindKey(x.kind))},
                 {"signature", x.signature},
                 {"sub_batch", x.subBatch},
                 {"algo", x.algo},
                 {"name", info ? std::string(info->name) : "?"},
                 {"reason", x.unsupported() ? "unsupported" : "workspace"}};
      if (!x.unsupported())
        o["workspace_bytes"] = x.askedBytes;
      o["planned_workspace_bytes"] = x.plannedBytes;
      if (x.ran >= 0)
        o["ran"] = x.ran;
      refused.push_back(std::move(o));
    }
    root["refused"] = std::move(refused);
  }
  return root.dump(1) + "\n";
}

llvm::Error writeProfile(const Profile &p, llvm::StringRef path) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return makeError(path + ": cannot write profile: " + ec.message());
  os << profileToJson(p);
  os.close();
  if (os.has_error())
    return makeError(path + ": cannot write profile: " + os.error().message());
  return llvm::Error::success();
}

} // namespace memfit
