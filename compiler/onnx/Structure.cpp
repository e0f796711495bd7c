//===- Structure.cpp - Checks for models newer than the ONNX library ------===//
//
// ONNX 1.12's checker and shape inference stop at opset 17 and IR version 8;
// PyTorch 2's dynamo exporter writes opset 18 and IR version 10. For such
// models memfit checks the graph's structure itself, and refuses any
// attribute it does not read: an attribute added after opset 17 may change
// what a node computes (Resize's antialias), and silently ignoring it would
// plan a different model. Translation then checks every value it reads.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include "llvm/Support/FormatVariadic.h"

#include "onnx/defs/schema.h"

#include <google/protobuf/unknown_field_set.h>

#include <map>
#include <set>
#include <unordered_set>

namespace memfit::onnximport {
namespace {

/// Attributes newer than opset 17 that the translation of the op reads and
/// checks.
const std::map<std::string, std::set<std::string>> &newerAttributes() {
  static const std::map<std::string, std::set<std::string>> m = {
      {"Split", {"num_outputs"}},
      {"Resize", {"antialias", "axes", "keep_aspect_ratio_policy"}},
      // Opset 18 gave every reduction ReduceSum's axes input and flag.
      {"ReduceMean", {"noop_with_empty_axes"}},
      {"ReduceMax", {"noop_with_empty_axes"}},
      {"ReduceMin", {"noop_with_empty_axes"}},
      {"ReduceProd", {"noop_with_empty_axes"}},
      {"ReduceL1", {"noop_with_empty_axes"}},
      {"ReduceL2", {"noop_with_empty_axes"}},
      {"ReduceSumSquare", {"noop_with_empty_axes"}},
      {"ReduceLogSum", {"noop_with_empty_axes"}},
      {"ReduceLogSumExp", {"noop_with_empty_axes"}},
      {"AveragePool", {"dilations"}},
      {"Gelu", {"approximate"}},
      // Saturation applies to float8 targets only, which memfit refuses.
      {"Cast", {"saturate"}},
  };
  return m;
}

} // namespace

llvm::Error checkNewerModel(const pb::GraphProto &graph,
                            const std::vector<bool> &live,
                            const std::string &file, int64_t opset) {
  std::unordered_set<std::string> defined;
  for (const auto &in : graph.input())
    if (!defined.insert(in.name()).second)
      return makeErrorF("'{0}': graph input {1} is declared twice", file,
                        quoteName(in.name()));
  std::unordered_set<std::string> inits;
  for (const auto &t : graph.initializer()) {
    // An initializer may also be listed as a graph input (its default).
    if (!inits.insert(t.name()).second)
      return makeErrorF("'{0}': initializer {1} is defined twice", file,
                        quoteName(t.name()));
    defined.insert(t.name());
  }
  const auto &newer = newerAttributes();
  for (int k = 0; k < graph.node_size(); ++k) {
    const pb::NodeProto &n = graph.node(k);
    if (live[k]) {
      for (const std::string &in : n.input())
        if (!in.empty() && !defined.count(in))
          return makeErrorF("'{0}': {1}: operand {2} is not defined before "
                            "the node",
                            file, nodeLabel(n, k), quoteName(in));
      const pb::OpSchema *schema = pb::OpSchemaRegistry::Schema(
          n.op_type(), static_cast<int>(kMaxCheckedOpset));
      auto extra = newer.find(n.op_type());
      for (const auto &a : n.attribute()) {
        bool known = (schema && schema->attributes().count(a.name())) ||
                     (extra != newer.end() && extra->second.count(a.name()));
        if (!known)
          return makeErrorF("'{0}': {1}: attribute {2} is not supported at "
                            "opset {3}; memfit reads only the attributes it "
                            "knows the meaning of",
                            file, nodeLabel(n, k), quoteName(a.name()), opset);
      }
    }
    for (const std::string &out : n.output())
      if (!out.empty() && !defined.insert(out).second)
        return makeErrorF("'{0}': {1}: output {2} is already defined", file,
                          nodeLabel(n, k), quoteName(out));
  }
  return llvm::Error::success();
}

std::unordered_set<std::string> torchBuffers(const pb::GraphProto &graph) {
  // ValueInfoProto.metadata_props is field 4 (IR version 10), a repeated
  // StringStringEntryProto.
  constexpr int kMetadataProps = 4;
  std::unordered_set<std::string> out;
  for (const pb::ValueInfoProto &vi : graph.value_info()) {
    const google::protobuf::UnknownFieldSet &unknown =
        vi.GetReflection()->GetUnknownFields(vi);
    for (int i = 0; i < unknown.field_count(); ++i) {
      const google::protobuf::UnknownField &f = unknown.field(i);
      if (f.number() != kMetadataProps ||
          f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
        continue;
      pb::StringStringEntryProto entry;
      if (entry.ParseFromString(f.length_delimited()) &&
          entry.key() == "pkg.torch.export.graph_signature.InputSpec.kind" &&
          (entry.value() == "BUFFER" || entry.value() == "CONSTANT_TENSOR"))
        out.insert(vi.name());
    }
  }
  return out;
}

} // namespace memfit::onnximport
