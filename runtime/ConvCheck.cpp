//===- ConvCheck.cpp - Planned convolutions against what cuDNN runs -------===//
#include "runtime/ConvCheck.h"

#include <sys/stat.h>

#include "runtime/AtomicFile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace memfit::rt {

bool cudnnDefinesConvAlgo(int32_t dir, int32_t algo) {
  switch (dir) {
  case ConvFwd:
    return algo >= 0 && algo <= 7;
  case ConvBwdData:
    return algo >= 0 && algo <= 5;
  case ConvBwdFilter:
    return algo >= 0 && algo <= 6 && algo != 4;
  default:
    return false;
  }
}

bool cudnnRunsConvAlgo(int cc, int32_t dir, int32_t algo) {
  if (!cudnnDefinesConvAlgo(dir, algo))
    return false;
  if (cc < 80)
    return true;
  // From sm_80 on: the implicit-GEMM family, and forward's explicit GEMM.
  return algo <= 1 || (dir == ConvFwd && algo == 2);
}

ConvChoice chooseConvAlgo(int32_t planned, bool plannedRuns,
                          int64_t plannedBytes, int64_t have,
                          const std::vector<ConvCandidate> &ranked) {
  if (plannedRuns && plannedBytes <= have)
    return {planned, false};
  for (const ConvCandidate &c : ranked)
    if (c.runs && c.bytes <= have)
      return {c.algo, c.algo != planned};
  return {};
}

ConvChoice chooseMeasured(int32_t planned, int32_t settled,
                          const std::vector<ConvTiming> &timed) {
  const ConvTiming *best = nullptr, *kept = nullptr;
  for (const ConvTiming &t : timed) {
    if (!best || t.seconds < best->seconds)
      best = &t;
    if (t.algo == settled)
      kept = &t;
  }
  int32_t algo = settled;
  if (best && (!kept || kept->seconds > best->seconds * (1 + kConvTuneSlack)))
    algo = best->algo;
  return {algo, algo != planned};
}

std::vector<ConvTiming> withinWorkspace(const std::vector<ConvTiming> &timed,
                                        int64_t have) {
  std::vector<ConvTiming> out;
  for (const ConvTiming &t : timed)
    if (t.bytes <= have)
      out.push_back(t);
  return out;
}

int32_t chooseGraphPlan(int32_t legacy, const std::vector<ConvTiming> &timed,
                        const std::vector<ConvTiming> &graph,
                        ConvGraphUse use) {
  if (use == ConvGraphUse::Off)
    return -1;
  int32_t best = -1;
  for (size_t i = 0; i < graph.size(); ++i)
    if (best < 0 || graph[i].seconds < graph[best].seconds)
      best = static_cast<int32_t>(i);
  if (best < 0 || use == ConvGraphUse::Always)
    return best;
  const ConvTiming *kept = nullptr;
  for (const ConvTiming &t : timed)
    if (t.algo == legacy)
      kept = &t;
  if (!kept || graph[best].seconds * (1 + kConvTuneSlack) >= kept->seconds)
    return -1;
  return best;
}

int64_t ConvCheckResult::engineTasks() const {
  std::set<std::string> names;
  for (const ConvEngineUse &u : engines)
    names.insert(u.task);
  return static_cast<int64_t>(names.size());
}

int64_t ConvCheckResult::changedTasks() const {
  std::set<std::string> names;
  for (const ConvSubstitution &s : changed)
    names.insert(s.task);
  return static_cast<int64_t>(names.size());
}

int64_t ConvCheckResult::changedTasks(bool faster) const {
  // A task some call of which was refused counts as refused.
  std::set<std::string> refused, quicker;
  for (const ConvSubstitution &s : changed)
    (s.faster ? quicker : refused).insert(s.task);
  if (!faster)
    return static_cast<int64_t>(refused.size());
  int64_t n = 0;
  for (const std::string &t : quicker)
    n += !refused.count(t);
  return n;
}

namespace {

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const char *taskKey(int32_t dir) {
  return dir == ConvFwd       ? "forward"
         : dir == ConvBwdData ? "backward_data"
                              : "backward_weight";
}

} // namespace

std::string convSubstitutionsJson(const ConvCheckResult &r) {
  std::ostringstream os;
  os << "{\n \"schema_version\": 1,\n"
     << " \"generator\": \"memfit trainer: convolution algorithms cuDNN "
        "refused\",\n"
     << " \"device\": {\n  \"name\": " << quoted(r.gpu)
     << ",\n  \"compute_capability\": " << quoted(r.computeCapability)
     << ",\n  \"cudnn\": " << quoted(r.cudnn) << "\n },\n"
     << " \"entries\": [";
  // One entry per (direction, signature, sub-batch), its algorithms in
  // ascending ids, each at the fastest time any call measured.
  std::map<std::tuple<int32_t, std::string, int64_t>,
           std::map<int32_t, ConvTiming>>
      entries;
  for (const ConvMeasured &m : r.measured)
    for (const ConvTiming &t : m.timings) {
      auto &algos = entries[{m.direction, m.signature, m.subBatch}];
      auto [it, fresh] = algos.emplace(t.algo, t);
      if (!fresh && t.seconds < it->second.seconds)
        it->second.seconds = t.seconds;
      if (!fresh)
        it->second.bytes = std::max(it->second.bytes, t.bytes);
    }
  bool first = true;
  for (const auto &[key, algos] : entries) {
    if (algos.empty())
      continue;
    os << (first ? "\n" : ",\n")
       << "  {\"task\": " << quoted(taskKey(std::get<0>(key)))
       << ", \"signature\": " << quoted(std::get<1>(key))
       << ", \"sub_batch\": " << std::get<2>(key) << ", \"algorithms\": [";
    first = false;
    bool firstAlgo = true;
    for (const auto &[algo, t] : algos) {
      char secs[40];
      std::snprintf(secs, sizeof secs, "%.9g", t.seconds);
      os << (firstAlgo ? "" : ", ") << "{\"algo\": " << algo
         << ", \"seconds\": " << secs << ", \"workspace_bytes\": " << t.bytes
         << "}";
      firstAlgo = false;
    }
    os << "]}";
  }
  os << (first ? "],\n" : "\n ],\n") << " \"refused\": [";
  first = true;
  for (const ConvSubstitution &s : r.changed) {
    if (s.faster)
      continue; // not a refusal: the entries say why
    os << (first ? "\n" : ",\n")
       << "  {\"task\": " << quoted(taskKey(s.direction))
       << ", \"signature\": " << quoted(s.signature)
       << ", \"sub_batch\": " << s.subBatch << ", \"algo\": " << s.planned
       << ", \"reason\": "
       << (s.askedBytes < 0 ? "\"unsupported\"" : "\"workspace\"");
    if (s.askedBytes >= 0)
      os << ", \"workspace_bytes\": " << s.askedBytes;
    os << ", \"planned_workspace_bytes\": " << s.plannedBytes
       << ", \"ran\": " << s.ran << "}";
    first = false;
  }
  os << (first ? "]," : "\n ],") << "\n \"graph_engines\": [";
  first = true;
  for (const ConvEngineUse &u : r.engines) {
    char secs[80];
    std::snprintf(secs, sizeof secs,
                  "\"seconds\": %.9g, \"legacy_seconds\": %.9g",
                  u.engine.seconds, u.legacySeconds);
    os << (first ? "\n" : ",\n")
       << "  {\"task\": " << quoted(taskKey(u.direction))
       << ", \"name\": " << quoted(u.task)
       << ", \"signature\": " << quoted(u.signature)
       << ", \"sub_batch\": " << u.subBatch
       << ", \"engine\": " << quoted(u.engine.engine) << ", " << secs
       << ", \"legacy_algo\": " << u.legacyAlgo
       << ", \"workspace_bytes\": " << u.engine.bytes << "}";
    first = false;
  }
  os << (first ? "]\n}\n" : "\n ]\n}\n");
  return os.str();
}

bool writeConvSubstitutions(const ConvCheckResult &r, const std::string &path,
                            std::string &err) {
  AtomicFile f(path);
  std::string text = convSubstitutionsJson(r);
  f.write(text.data(), text.size());
  if (!f.commit()) {
    err = f.error();
    return false;
  }
  return true;
}

std::string convAlgosPathBeside(const std::string &modelPath) {
  size_t slash = modelPath.find_last_of('/');
  std::string dir =
      slash == std::string::npos ? std::string() : modelPath.substr(0, slash);
  // A trainer copied to another machine no longer finds the directory it
  // was generated in: the file goes to the working directory there.
  struct stat st;
  if (dir.empty() || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "conv-algos.json";
  return dir + "/conv-algos.json";
}

std::string convCheckSummary(const ConvCheckResult &r,
                             const std::string &file) {
  std::string cc = r.computeCapability;
  cc.erase(std::remove(cc.begin(), cc.end(), '.'), cc.end());
  std::string out = "convolutions: " + std::to_string(r.changedTasks()) +
                    " of " + std::to_string(r.tasks) +
                    " tasks changed algorithm (cuDNN " + r.cudnn + ", " +
                    r.gpu + ", sm_" + cc + ")";
  if (!r.changed.empty())
    out += ": " + std::to_string(r.changedTasks(false)) + " refused, " +
           std::to_string(r.changedTasks(true)) + " measured faster";
  if (r.tuned) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", r.tuneSeconds);
    out += " (cuDNN timed " + std::to_string(r.measured.size()) + " calls in " +
           secs + " s)";
  }
  if (r.changed.empty() && !r.tuned)
    return out + "; the plan's algorithms run as planned";
  out += ", written to " + file + "; memfit plan --profile " + file +
         " plans with what " + (r.tuned ? "was measured" : "runs");
  if (r.engines.empty())
    return out;
  // The graph API's engines are a second line: what they saved, per pass
  // over the calls that use them.
  double legacy = 0, engine = 0;
  for (const ConvEngineUse &u : r.engines) {
    legacy += u.legacySeconds;
    engine += u.engine.seconds;
  }
  char ms[96];
  std::snprintf(ms, sizeof ms, "%.2f ms against the legacy API's %.2f ms",
                engine * 1e3, legacy * 1e3);
  return out + "\nconvolution engines: " + std::to_string(r.engineTasks()) +
         " of " + std::to_string(r.tasks) +
         " tasks run cuDNN graph-API engines, measured faster (" +
         std::to_string(r.engines.size()) + " calls: " + ms + ")";
}

} // namespace memfit::rt
