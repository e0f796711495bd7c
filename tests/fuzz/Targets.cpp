//===- Targets.cpp - The parsers of untrusted input, as fuzz targets ------===//
#include "tests/fuzz/Targets.h"

#include "codegen/PlanJson.h"
#include "compiler/cost/DeviceSpec.h"
#include "compiler/cost/Profile.h"
#include "compiler/ir/Graph.h"
#include "compiler/onnx/OnnxImport.h"
#include "runtime/Npy.h"

#include "llvm/Support/Error.h"

#include <cstdio>
#include <sstream>
#include <string>

namespace memfit::fuzz {

namespace {

/// A broken property: say which and stop the way a crash would.
[[noreturn]] void fail(const char *target, const std::string &what) {
  std::fprintf(stderr, "fuzz target %s: %s\n", target, what.c_str());
  __builtin_trap();
}

/// Errors must name the file they are about.
void checkNamed(const char *target, llvm::Error e, const std::string &name) {
  std::string msg = llvm::toString(std::move(e));
  if (msg.find(name) == std::string::npos)
    fail(target, "error does not name " + name + ": " + msg);
}

} // namespace

void onnxModel(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  ImportOptions opts;
  opts.batch = 2;
  auto g = importOnnxBytes(bytes, "fuzz.onnx", opts);
  if (!g)
    return checkNamed("onnx", g.takeError(), "fuzz.onnx");
  if (auto bad = verifyGraph(*g))
    fail("onnx", "imported graph is invalid: " + *bad);
}

void deviceFile(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto d = parseDeviceJson(text, "fuzz.json");
  if (!d)
    return checkNamed("device", d.takeError(), "fuzz.json");
  std::string json = deviceToJson(*d);
  auto back = parseDeviceJson(json, "again.json");
  if (!back)
    fail("device",
         "written spec not read back: " + llvm::toString(back.takeError()));
  if (deviceToJson(*back) != json)
    fail("device", "spec changed in a round trip");
}

void profile(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto p = parseProfile(text, "fuzz.json");
  if (!p)
    return checkNamed("profile", p.takeError(), "fuzz.json");
  std::string json = profileToJson(*p);
  auto back = parseProfile(json, "again.json");
  if (!back)
    fail("profile",
         "written profile not read back: " + llvm::toString(back.takeError()));
  if (profileToJson(*back) != json)
    fail("profile", "profile changed in a round trip");
}

void planJson(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto r = parsePlanJson(text, "fuzz.json");
  if (!r)
    return checkNamed("plan", r.takeError(), "fuzz.json");
  // What memfit report prints is derived from the report; writing it out
  // walks every field the reader filled in.
  (void)planToJson(*r);
}

void npy(const uint8_t *data, size_t size) {
  std::istringstream in(
      std::string(reinterpret_cast<const char *>(data), size));
  std::string err;
  auto a = rt::readNpy(in, static_cast<int64_t>(size), "fuzz.npy", err);
  if (!a) {
    if (err.find("fuzz.npy") == std::string::npos)
      fail("npy", "error does not name fuzz.npy: " + err);
    return;
  }
  int64_t width = a->dtype == rt::NpyDType::I64 ? 8 : 4;
  if (a->count() * width != static_cast<int64_t>(a->bytes.size()))
    fail("npy", "data size disagrees with the shape");
  if (a->dtype == rt::NpyDType::F32)
    (void)a->asFloat();
  else
    (void)a->asInt32();
}

const NamedTarget kTargets[5] = {{"onnx", onnxModel},
                                 {"device", deviceFile},
                                 {"profile", profile},
                                 {"plan", planJson},
                                 {"npy", npy}};

} // namespace memfit::fuzz
