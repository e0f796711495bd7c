//===- Import.cpp - ONNX model to forward Graph: the driver ---------------===//
//
// The import is straight-line: parse, check the opset and the single output,
// find the nodes that reach the output and refuse unsupported ones among
// them, resolve external data, run the ONNX checker and shape inference,
// then translate node by node in file order (the checker guarantees a
// topological order, so the ops come out topologically sorted too). Models
// newer than the ONNX library (opset 18 and up) get memfit's own structural
// checks instead (Structure.cpp) and no shape inference.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"
#include "compiler/onnx/OperatorTable.h"
#include "compiler/ops/OpDef.h"
#include "compiler/ops/RuntimeKinds.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include <algorithm>
#include <exception>
#include <optional>

namespace memfit {

using namespace onnximport;
using llvm::Error;
using llvm::Expected;

const std::vector<std::string> &supportedOnnxOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> all = foldOpTypes();
    for (const OpDef &d : allOpDefs())
      for (std::string_view t : d.onnxTypes)
        all.push_back(std::string(t));
    for (const ImporterOp &op : importerOps())
      all.push_back(std::string(op.opType));
    // Integer steps on the token ids (ArgMax) that nothing else runs.
    for (auto k = uint8_t(0); k <= uint8_t(ops::RtIntOp::CumSumExclusive); ++k)
      if (std::string_view t =
              ops::runtimeKind(static_cast<ops::RtIntOp>(k)).onnx;
          !t.empty())
        all.push_back(std::string(t));
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return all;
  }();
  return ops;
}

namespace onnximport {

/// Messages from the ONNX library quote model contents: keep them printable
/// and bounded.
static std::string sanitizeMessage(std::string_view s) {
  constexpr size_t kMax = 600;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    auto ch = static_cast<unsigned char>(s[i]);
    if (ch == '\n' || ch == '\t')
      out += ' ';
    else if (ch >= 0x20 && ch < 0x7f)
      out += static_cast<char>(ch);
    else
      out += llvm::formatv("\\x{0:x-2}", static_cast<unsigned>(ch)).str();
  }
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return s.size() > kMax ? out + "..." : out;
}

static Expected<int64_t> defaultOpset(const pb::ModelProto &m,
                                      const std::string &file) {
  int64_t opset = -1;
  for (const auto &imp : m.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
  if (opset < 0)
    return makeErrorF("'{0}': the model imports no opset of the default onnx "
                      "domain",
                      file);
  if (opset < kMinOpset || opset > kMaxOpset)
    return makeErrorF("'{0}': the model uses opset {1} of the default onnx "
                      "domain; memfit reads opsets {2} to {3}",
                      file, opset, kMinOpset, kMaxOpset);
  return opset;
}

static std::string joinNames(const std::vector<std::string> &names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i ? ", " : "") + names[i];
  return s;
}

/// Marks the nodes whose outputs reach the model output; the others are
/// dead code and are neither checked for support nor translated.
static void findLive(const pb::GraphProto &graph, std::vector<bool> &live,
                     std::unordered_set<std::string> &needed) {
  live.assign(graph.node_size(), false);
  needed.insert(graph.output(0).name());
  for (int k = graph.node_size() - 1; k >= 0; --k) {
    const pb::NodeProto &n = graph.node(k);
    bool used = llvm::any_of(n.output(), [&](const std::string &o) {
      return !o.empty() && needed.count(o);
    });
    if (!used)
      continue;
    live[k] = true;
    for (const std::string &in : n.input())
      if (!in.empty())
        needed.insert(in);
  }
}

/// The PyTorch code that usually writes `op`, for messages about it: " (...
/// writes it)" or "".
static std::string_view pytorchIdiom(std::string_view op) {
  for (const RefusedIdiom &i : refusedIdioms())
    if (i.opType == op)
      return i.idiom;
  return "";
}

static Error checkSupported(const pb::GraphProto &graph,
                            const std::vector<bool> &live,
                            const std::string &file) {
  const auto &supported = supportedOnnxOps();
  std::vector<std::string> nodes;
  for (int k = 0; k < graph.node_size(); ++k) {
    if (!live[k])
      continue;
    const pb::NodeProto &n = graph.node(k);
    bool defaultDomain = n.domain().empty() || n.domain() == "ai.onnx";
    if (defaultDomain &&
        std::binary_search(supported.begin(), supported.end(), n.op_type()))
      continue;
    std::string name =
        n.name().empty() ? "#" + std::to_string(k) : quoteName(n.name());
    std::string op = escapeName(n.op_type());
    if (!defaultDomain)
      op = escapeName(n.domain()) + "::" + op;
    nodes.push_back(
        llvm::formatv("node {0} ({1}): unsupported operator "
                      "{1}{2}",
                      name, op, defaultDomain ? pytorchIdiom(n.op_type()) : "")
            .str());
  }
  if (nodes.empty())
    return Error::success();
  // The forms each operator takes are too long for a message.
  constexpr const char *kTable =
      "(the forms of each: docs/operators.md, or `memfit operators`)";
  if (nodes.size() == 1)
    return makeErrorF("'{0}': {1}; memfit supports {2} {3}", file, nodes[0],
                      joinNames(supported), kTable);
  std::string list;
  for (const std::string &n : nodes)
    list += "\n  " + n;
  return makeErrorF("'{0}': {1} nodes use operators memfit does not "
                    "support:{2}\nmemfit supports {3} {4}",
                    file, nodes.size(), list, joinNames(supported), kTable);
}

static Expected<Graph> importModel(pb::ModelProto &model,
                                   const std::string &file,
                                   const std::string &modelDir,
                                   const ImportOptions &opts) {
  if (opts.batch < 0)
    return makeErrorF("'{0}': batch size {1} is not positive", file,
                      opts.batch);
  auto opset = defaultOpset(model, file);
  if (!opset)
    return opset.takeError();
  rewriteSplitSequences(*model.mutable_graph());
  const pb::GraphProto &graph = model.graph();
  if (graph.output_size() != 1) {
    std::vector<std::string> names;
    for (const auto &o : graph.output())
      names.push_back(quoteName(o.name()));
    return makeErrorF("'{0}': the model has {1} outputs{2}{3}; memfit trains "
                      "a model with exactly one output (add the loss outside "
                      "the model)",
                      file, graph.output_size(), names.empty() ? "" : ": ",
                      joinNames(names));
  }
  std::vector<bool> live;
  std::unordered_set<std::string> needed;
  findLive(graph, live, needed);
  if (Error e = checkSupported(graph, live, file))
    return e;

  ExternalData ext;
  if (Error e = resolveExternalData(model, file, modelDir, ext))
    return e;
  // Past opset 17 the ONNX library knows neither the schemas nor their
  // shape rules: memfit's own checks stand in for its checker, and the
  // shapes are memfit's alone.
  const bool libraryKnows = *opset <= kMaxCheckedOpset;
  if (libraryKnows) {
    // IR versions 9 to 11 add element types memfit refuses anyway (float8,
    // 4-bit integers); ONNX 1.12's checker stops at 8.
    const int64_t ir = model.ir_version();
    if (ir > kMaxCheckedIrVersion)
      model.set_ir_version(kMaxCheckedIrVersion);
    try {
      pb::checker::check_model(model);
    } catch (const std::exception &e) {
      model.set_ir_version(ir);
      return makeErrorF("'{0}': the onnx checker rejects the model: {1}", file,
                        sanitizeMessage(e.what()));
    }
    model.set_ir_version(ir);
  } else if (Error e = checkNewerModel(graph, live, file, *opset)) {
    return e;
  }

  // Translation validates every live node in memfit's own terms before ONNX
  // shape inference sees it: the inference functions of ONNX 1.12 trust
  // their inputs and crash on some malformed nodes the checker accepts.
  // A graph that counts up to a symbolic batch (an arange over it: the
  // masks of transformers 4.5x and 5 index each sample) is read again at
  // the batch being planned, as its fixed-batch export would be written;
  // the reshapes and masks that then hold that number are the batch's.
  std::optional<ImportNotes> notesBefore;
  if (opts.notes)
    notesBefore = *opts.notes;
  Importer im(model, file, ext, opts, live, needed);
  im.opset = *opset;
  auto g = im.run();
  if (!g && im.countedBatch && im.modelBatch == 0 && opts.batch > 0) {
    Error first = g.takeError();
    if (opts.notes)
      *opts.notes = *notesBefore;
    Importer traced(model, file, ext, opts, live, std::move(needed));
    traced.opset = *opset;
    traced.traceBatch = true;
    g = traced.run();
    if (!g)
      // Both: the symbolic reading's error names what needs the batch as a
      // number, the traced one what stops the graph even then.
      return llvm::joinErrors(
          std::move(first),
          llvm::joinErrors(
              makeErrorF("'{0}': the graph computes with its symbolic batch "
                         "as a number (an arange over it, as transformers' "
                         "per-sample masks do, or a constant laid out per "
                         "sample); read at batch {1}, as its fixed-batch "
                         "export would be written, it fails too:",
                         file, opts.batch),
              g.takeError()));
    llvm::consumeError(std::move(first));
    if (opts.notes)
      opts.notes->tracedBatch = opts.batch;
  }
  if (!g)
    return g.takeError();
  if (!libraryKnows)
    return g;

  // Inference then runs on the translated nodes only, without the model's
  // own value_info (hints that a malformed model could make inconsistent).
  pb::GraphProto *mg = model.mutable_graph();
  google::protobuf::RepeatedPtrField<pb::NodeProto> kept;
  for (int k = 0; k < mg->node_size(); ++k)
    if (live[k])
      kept.Add()->Swap(mg->mutable_node(k));
  mg->mutable_node()->Swap(&kept);
  mg->clear_value_info();
  try {
    pb::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1,
                                      /*data_prop=*/true);
    pb::shape_inference::InferShapes(model, pb::OpSchemaRegistry::Instance(),
                                     options);
  } catch (const std::exception &e) {
    return makeErrorF("'{0}': onnx shape inference fails: {1}", file,
                      sanitizeMessage(e.what()));
  }
  if (Error e = im.compareWithInference(*g))
    return e;
  return g;
}

//===----------------------------------------------------------------------===//
// Importer::run
//===----------------------------------------------------------------------===//

Importer::Importer(pb::ModelProto &model, const std::string &file,
                   const ExternalData &ext, const ImportOptions &opts,
                   std::vector<bool> live,
                   std::unordered_set<std::string> needed)
    : model(model), file(file), ext(ext), opts(opts), live(std::move(live)),
      needed(std::move(needed)) {
  const pb::GraphProto &graph = model.graph();
  for (int k = 0; k < graph.node_size(); ++k)
    nodeIndex[&graph.node(k)] = k;
}

Error Importer::compareWithInference(const Graph &graph) {
  std::unordered_map<std::string, std::vector<int64_t>> inferred;
  auto take = [&](const pb::ValueInfoProto &vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
      return;
    std::vector<int64_t> dims;
    for (const auto &d : vi.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() && d.dim_value() > 0 ? d.dim_value()
                                                            : -1);
    inferred[vi.name()] = std::move(dims);
  };
  for (const auto &vi : model.graph().value_info())
    take(vi);
  for (const auto &vi : model.graph().output())
    take(vi);
  for (ValueId id = 0; id < static_cast<ValueId>(graph.values.size()); ++id) {
    const Value &v = graph.values[id];
    auto it = inferred.find(v.name);
    if (v.producer == kNoId || it == inferred.end() || inferenceDiverged[id])
      continue;
    const std::vector<int64_t> &inf = it->second;
    bool same = inf.size() == v.dims.size();
    for (size_t i = 0; same && i < inf.size(); ++i)
      if (inf[i] > 0 && inf[i] != v.dims[i] &&
          ((int32_t)i != v.batchAxis || batchComparable))
        same = false;
    if (same)
      continue;
    std::string infStr = "[";
    for (size_t i = 0; i < inf.size(); ++i)
      infStr += (i ? ", " : "") + (inf[i] > 0 ? std::to_string(inf[i]) : "?");
    const Op &op = graph.ops[v.producer];
    return failFile(llvm::formatv(
        "node {0} ({1}): output {2} has shape {3} (batch {4}) but onnx shape "
        "inference gives {5}]",
        quoteName(op.name), escapeName(op.onnxOp), quoteName(v.name),
        dimsStr(v.dims), graph.batch, infStr));
  }
  return Error::success();
}

// --constants: the user's word that these initializers (and weights
// declared as graph inputs) are buffers. Checked here, where the names are
// the file's, so that a pattern matching nothing is an error naming some.
Error Importer::markConstants() {
  if (opts.constants.empty())
    return Error::success();
  llvm::Regex re(opts.constants, llvm::Regex::NoFlags);
  std::string why;
  if (!re.isValid(why))
    return failFile(llvm::formatv("invalid --constants '{0}': {1} (a POSIX "
                                  "extended regular expression, as grep -E "
                                  "reads)",
                                  opts.constants, why));
  const pb::GraphProto &graph = model.graph();
  std::vector<std::string> names;
  for (const pb::TensorProto &t : graph.initializer())
    names.push_back(t.name());
  // Graph inputs without data but the first (the data input) are weights.
  bool data = false;
  for (const pb::ValueInfoProto &vi : graph.input()) {
    if (sources.count(vi.name()))
      continue;
    if (data)
      names.push_back(vi.name());
    data = true;
  }
  int64_t hits = 0;
  for (const std::string &name : names)
    if (re.match(name)) {
      buffers.insert(name);
      ++hits;
    }
  if (hits > 0)
    return Error::success();
  std::string some;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 4); ++i)
    some += (i ? ", " : "") + quoteName(names[i]);
  return failFile(llvm::formatv("--constants '{0}' matches no initializer of "
                                "the model (its {1} initializers and "
                                "declared weights are named {2}{3})",
                                opts.constants, names.size(), some,
                                names.size() > 4 ? ", ..." : ""));
}

Error Importer::setUpInputs() {
  const pb::GraphProto &graph = model.graph();
  buffers = torchBuffers(graph);
  std::unordered_set<std::string> initNames;
  for (const pb::TensorProto &t : graph.initializer()) {
    sources[t.name()].init = &t;
    initNames.insert(t.name());
  }
  if (Error err = markConstants())
    return err;
  const pb::ValueInfoProto *data = nullptr;
  for (const pb::ValueInfoProto &vi : graph.input()) {
    if (initNames.count(vi.name()))
      continue;
    if (!data)
      data = &vi;
    else
      sources[vi.name()].declared = &vi;
  }
  if (!data)
    return failFile("the model has no data input (every graph input has an "
                    "initializer)");
  dataInputName = data->name();
  std::string name = quoteName(data->name());
  if (!data->type().has_tensor_type())
    return failFile("data input " + name + " is not a tensor");
  const auto &tt = data->type().tensor_type();
  bool ids = tt.elem_type() == pb::TensorProto::INT64 ||
             tt.elem_type() == pb::TensorProto::INT32;
  if (tt.elem_type() != pb::TensorProto::FLOAT && !ids)
    return failFile(llvm::formatv("data input {0} has element type {1}; "
                                  "memfit trains on float32 data or int64 or "
                                  "int32 token ids",
                                  name, dataTypeName(tt.elem_type())));
  if (!tt.has_shape() || tt.shape().dim_size() == 0)
    return failFile("data input " + name +
                    " has no shape; memfit needs its rank and every "
                    "dimension but the batch");
  std::vector<int64_t> dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    bool fixed = d.has_dim_value() && d.dim_value() > 0;
    if (i == 0) {
      modelBatch = fixed ? d.dim_value() : traceBatch ? opts.batch : 0;
      if (opts.batch > 0)
        dims.push_back(opts.batch);
      else if (fixed)
        dims.push_back(d.dim_value());
      else
        return failFile(llvm::formatv(
            "data input {0} has a symbolic batch dimension ({1}); give a "
            "batch size",
            name, d.has_dim_param() ? quoteName(d.dim_param()) : "unnamed"));
      continue;
    }
    if (!fixed)
      return failFile(llvm::formatv(
          "dimension {0} of data input {1} is {2}; only the batch (dimension "
          "0) may be symbolic",
          i, name,
          d.has_dim_param() ? "symbolic (" + quoteName(d.dim_param()) + ")"
                            : std::string("unknown")));
    dims.push_back(d.dim_value());
  }
  if (!checkedProduct(dims))
    return failFile("data input " + name + " is too large");
  g.batch = dims[0];
  batchComparable =
      modelBatch > 0 && (opts.batch == 0 || opts.batch == modelBatch);
  Value v;
  v.name = data->name();
  v.kind = ValueKind::Input;
  v.dims = std::move(dims);
  v.batched = true;
  // Token ids travel as int32 whatever the file's width (the trainer
  // checks each against the vocabulary).
  v.dtype = ids ? DType::I32 : DType::F32;
  g.input = g.addValue(std::move(v));
  values[data->name()] = g.input;
  inferenceDiverged.push_back(false);
  return Error::success();
}

Expected<Graph> Importer::run() {
  if (Error e = setUpInputs())
    return e;
  const pb::GraphProto &graph = model.graph();
  for (int k = 0; k < graph.node_size(); ++k)
    if (live[k])
      for (const std::string &in : graph.node(k).input())
        readers[in].push_back(k);
  findFusions();
  // Large folded constants (a long context's T x T mask and each step that
  // builds it, 256 MB apiece at T = 8192) are let go once their last
  // reader (the last of `readers`, listed in node order) is translated
  // instead of staying to the end. A fusion reads
  // across its nodes, so what its nodes read stays.
  std::unordered_set<std::string> fusionReads;
  for (int k = 0; k < graph.node_size(); ++k)
    if (live[k] && (fusedAway[k] || fusions.count(k)))
      for (const std::string &in : graph.node(k).input())
        fusionReads.insert(in);
  auto releaseAfter = [&](const pb::NodeProto &n, int k) {
    for (const std::string &in : n.input()) {
      auto c = consts.find(in);
      if (c == consts.end() || c->second->numel() < kReleasedConstElements ||
          readers[in].back() != k || fusionReads.count(in))
        continue;
      consts.erase(c);
    }
  };
  // Every node that cannot be imported is reported at once; a node that
  // reads what one of them would have computed is left out of the list
  // (its failure would only echo the first).
  std::unordered_set<std::string> failedValues;
  std::vector<std::string> failures;
  for (int k = 0; k < graph.node_size(); ++k) {
    if (!live[k] || fusedAway[k])
      continue;
    const pb::NodeProto &n = graph.node(k);
    bool downstream = llvm::any_of(n.input(), [&](const std::string &in) {
      return failedValues.count(in) > 0;
    });
    Error e = Error::success();
    if (!downstream) {
      auto f = fusions.find(k);
      e = f != fusions.end() ? translateFusion(n, f->second) : translate(n);
    }
    if (!downstream && !e) {
      releaseAfter(n, k);
      continue;
    }
    if (e)
      failures.push_back(toString(std::move(e)) +
                         std::string(pytorchIdiom(n.op_type())));
    for (const std::string &out : n.output())
      failedValues.insert(out);
  }
  if (failures.size() == 1)
    return makeError(failures[0]);
  if (!failures.empty()) {
    // Each failure starts with the file's name; it is said once.
    const std::string prefix = "'" + file + "': ";
    std::string list;
    for (const std::string &f : failures)
      list +=
          "\n  " +
          (llvm::StringRef(f).startswith(prefix) ? f.substr(prefix.size()) : f);
    return failFile(llvm::formatv("{0} nodes cannot be imported (nodes that "
                                  "read their results are left out):{1}",
                                  failures.size(), list));
  }

  const std::string &outName = graph.output(0).name();
  auto out = values.find(outName);
  if (out == values.end())
    return failFile("the model output " + quoteName(outName) +
                    " is a constant; memfit trains a model whose output is "
                    "computed from its data input");
  if (out->second == g.input)
    return failFile("the model output " + quoteName(outName) +
                    " is the data input itself; there is nothing to train");
  g.output = out->second;
  // Graph inputs without data other than the data input must be weights.
  for (const pb::ValueInfoProto &vi : graph.input()) {
    auto src = sources.find(vi.name());
    if (src != sources.end() && src->second.declared &&
        !usedDeclared.count(src->second.declared))
      return failFile(llvm::formatv(
          "graph input {0} has no initializer and is not used as a weight; "
          "memfit takes exactly one data input ({1}, the first graph input "
          "without an initializer); labels are not part of the model",
          quoteName(vi.name()), quoteName(dataInputName)));
  }
  g.name = graph.name();
  if (opts.notes)
    for (uint64_t h : contentOrder)
      if (weightsByContent[h].size() > 1)
        opts.notes->identicalWeights.push_back(weightsByContent[h]);
  if (auto bad = verifyGraph(g))
    return makeInternalError("'" + llvm::Twine(file) +
                             "': the imported graph is invalid: " + *bad);
  return std::move(g);
}

} // namespace onnximport

/// ImportOptions::frozenRows on the embedding lookups of `g`.
static Error freezeRows(Graph &g, const std::string &file,
                        const ImportOptions &opts) {
  for (const auto &[name, row] : opts.frozenRows) {
    int lookups = 0;
    for (Op &op : g.ops) {
      const Value &table = g.values[op.inputs[0]];
      if (op.kind != OpKind::Embedding || op.inputs.size() < 2 ||
          table.kind != ValueKind::Weight || table.name != name)
        continue;
      if (row < 0 || row >= table.dims[0])
        return makeError(llvm::formatv("'{0}': --freeze-rows {1}:{2}: the "
                                       "table has rows 0 to {3}",
                                       file, quoteName(name), row,
                                       table.dims[0] - 1));
      op.attrs.frozenRow = row;
      ++lookups;
    }
    if (lookups == 0)
      return makeError(llvm::formatv(
          "'{0}': --freeze-rows {1}:{2}: no Gather looks up rows of a "
          "weight of that name",
          file, quoteName(name), row));
  }
  return Error::success();
}

/// The graph-level changes the options ask for: fusions, frozen rows.
static Expected<Graph> withFusions(Expected<Graph> g, const std::string &file,
                                   const ImportOptions &opts) {
  if (!g)
    return g;
  if (Error e = freezeRows(*g, file, opts))
    return std::move(e);
  if (opts.fuseAttention)
    *g = fuseAttention(*g);
  return g;
}

Expected<Graph> importOnnxFile(const std::string &path,
                               const ImportOptions &opts) {
  auto model = std::make_unique<onnximport::pb::ModelProto>();
  if (Error e = onnximport::parseModelFile(path, *model))
    return e;
  std::string dir = std::string(llvm::sys::path::parent_path(path));
  if (dir.empty())
    dir = ".";
  return withFusions(onnximport::importModel(*model, path, dir, opts), path,
                     opts);
}

Expected<Graph> importOnnxBytes(const std::string &bytes,
                                const std::string &displayName,
                                const ImportOptions &opts) {
  auto model = std::make_unique<onnximport::pb::ModelProto>();
  if (Error e = onnximport::parseModelBytes(bytes, displayName, *model))
    return e;
  return withFusions(onnximport::importModel(*model, displayName, "", opts),
                     displayName, opts);
}

} // namespace memfit
