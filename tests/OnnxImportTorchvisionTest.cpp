//===- OnnxImportTorchvisionTest.cpp - Importing real PyTorch exports -----===//
//
// The ctest fixture export_torchvision (tests/export_torchvision.sh) exports
// torchvision models into ${MEMFIT_BINARY_DIR}/testmodels, each with a JSON
// sidecar holding torch's own numbers: parameter count, BatchNorm state,
// and how many times the traced model runs each op kind. The import must
// reproduce them exactly. Without the exports (no torch on the machine) the
// test says so and passes.
//
//===----------------------------------------------------------------------===//
#include "compiler/ir/Graph.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OpDef.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>

using namespace memfit;

namespace {

std::vector<std::string> sidecars(const std::string &dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".onnx.json"))
      out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("torchvision exports import with torch's own numbers",
          "[onnx][torchvision]") {
  std::string dir = std::string(MEMFIT_BINARY_DIR) + "/testmodels";
  std::vector<std::string> found = sidecars(dir);
  if (found.empty()) {
    WARN("no torchvision exports in " << dir
                                      << "; run ctest (export_torchvision) "
                                         "on a machine with python3-torch");
    return;
  }
  for (const std::string &json : found) {
    std::string model = json.substr(0, json.size() - 5);
    SECTION(llvm::sys::path::filename(model).str()) {
      nlohmann::json facts = nlohmann::json::parse(std::ifstream(json));
      // Dynamic-batch models are imported at batch 3; fixed ones as they are.
      ImportOptions opts;
      opts.batch = facts["batch"].is_null() ? 3 : 0;
      int64_t batch = facts["batch"].is_null() ? 3 : facts["batch"].get<int>();
      auto g = importOnnxFile(model, opts);
      if (!g)
        FAIL(llvm::toString(g.takeError()));
      CHECK(g->batch == batch);

      std::vector<int64_t> in = {batch};
      for (int64_t d : facts["input"])
        in.push_back(d);
      CHECK(g->values[g->input].dims == in);
      std::vector<int64_t> out = {batch};
      for (int64_t d : facts["output"])
        out.push_back(d);
      CHECK(g->values[g->output].dims == out);

      // State: BatchNorm's running statistics (other non-trainable weights
      // are the model's constants, as a scale factor).
      int64_t trainable = 0, state = 0;
      for (ValueId w : g->weights()) {
        const Value &v = g->values[w];
        bool bn = llvm::any_of(v.consumers, [&](OpId c) {
          return g->ops[c].kind == OpKind::BatchNorm;
        });
        if (v.trainable)
          trainable += v.bytesAt(batch);
        else if (bn)
          state += v.bytesAt(batch);
        CHECK(static_cast<int64_t>(v.data.size()) == v.elementsPerSample());
      }
      // Torch's eval export may have folded computations on parameters into
      // new initializers; then the sidecar counts what the file holds.
      CHECK(trainable ==
            4 * facts.value("exported_parameters", facts["parameters"])
                    .get<int64_t>());
      CHECK(state == 4 * facts["bn_state"].get<int64_t>());

      std::map<std::string, int64_t> counts;
      for (const Op &op : g->ops)
        ++counts[std::string(opKindName(op.kind))];
      for (auto &[kind, n] : facts["ops"].items()) {
        INFO(kind);
        CHECK(counts[kind] == n.get<int64_t>());
      }
    }
  }
}
