//===- OperatorTable.cpp - docs/operators.md from the importer's tables ---===//
#include "compiler/onnx/OperatorTable.h"

#include "compiler/onnx/Importer.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OpDef.h"
#include "compiler/ops/RuntimeKinds.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <string>
#include <vector>

namespace memfit {

llvm::ArrayRef<ImporterOp> importerOps() {
  static const ImporterOp ops[] = {
      {"ArgMax",
       "On integers computed from the token ids only, along the last axis "
       "(`axis`, `keepdims`, `select_last_index`): a step of an integer "
       "program, one value per row, not of a value that needs another "
       "(transformers' sequence classification on decoders: each sequence's "
       "last token before its padding, `argmax(ids == pad) - 1`). On float "
       "activations it is refused."},
      {"Cast",
       "On constants, folded (any numeric type). On an activation, only to "
       "`FLOAT` (the identity: activations are float32; the precision of "
       "training is `--precision`); a cast to another type is refused unless "
       "what it feeds is a mask (`Equal`, `Not`, `Where`). On token ids, a "
       "step of an integer program."},
      {"CastLike",
       "Of a float value (an activation, or a value computed from weights) "
       "cast like a float32 tensor: the identity (torch.export casts a "
       "weight like the activation it meets).",
       "passes through"},
      {"GatherND",
       "Of an activation or a value computed from weights at constant "
       "indices, `batch_dims` 0 (torch.export's advanced indexing: "
       "`qkv[..., i]`, a relative position table at constant pairs): a "
       "Gather along axis 0 with the indexed axes merged by a Reshape first; "
       "the batch's axis cannot be indexed.",
       "Gather's: the rows added back into the value (and the weight it "
       "comes from)"},
      {"Identity", "Always: its output is its input's value (no copy).",
       "passes through"},
      {"RandomUniformLike",
       "Only inside drop path, `x / keep * floor(keep + rand_like(m))` with "
       "`m` one element per sample (stochastic depth) or of `x`'s shape "
       "(dropout), or torch.export's in-place dropout, `x * ((rand_like(m) "
       "< keep) / keep)`: the pattern becomes one Dropout operator, whose "
       "numbers "
       "memfit draws (the same distribution, not torch's generator). "
       "Anywhere else it is refused."},
  };
  return ops;
}

llvm::ArrayRef<RefusedIdiom> refusedIdioms() {
  static const RefusedIdiom idioms[] = {
      {"ArgMax", " (torch.argmax: memfit runs it on integers computed from "
                 "the token ids, as transformers' sequence classification on "
                 "decoders finds each sequence's last token)"},
      {"CumSum", " (torch.cumsum: position ids from token ids, as RoBERTa "
                 "computes them)"},
      {"Einsum", " (torch.einsum)"},
      {"GridSample", " (F.grid_sample)"},
      {"GroupNormalization", " (nn.GroupNorm)"},
      {"If", " (Python control flow that torch.jit.script kept)"},
      {"InstanceNormalization", " (nn.InstanceNorm2d)"},
      {"Loop", " (a Python loop that torch.jit.script kept)"},
      {"NonZero", " (boolean-mask indexing, x[mask], or torch.nonzero)"},
      {"ReduceL2", " (x.norm(dim=...) or F.normalize: ConvNeXt V2's global "
                   "response norm, Swin V2's cosine attention)"},
      {"Resize", " (F.interpolate or nn.Upsample)"},
      {"Scan", " (a recurrent loop that torch.jit.script kept)"},
      {"ScatterElements", " (in-place index assignment, x[idx] = v, or "
                          "torch.scatter)"},
      {"ScatterND", " (in-place index assignment, x[idx] = v)"},
      {"TopK", " (torch.topk: mixture-of-experts routing, sampling)"},
      {"Unique", " (torch.unique)"},
  };
  return idioms;
}

namespace {

/// Everything the page says of one ONNX op type.
struct Row {
  std::vector<const OpDef *> defs;
  /// onlyFolds: folded and nothing else on constants and data alike (an
  /// intStep still evaluates it on token ids).
  bool folds = false, onlyFolds = false, intStep = false;
  const ImporterOp *importer = nullptr;
};

std::string_view layoutWords(OpDef::BatchLayout l) {
  switch (l) {
  case OpDef::BatchLayout::AxisZero:
    return "the batch alone on axis 0";
  case OpDef::BatchLayout::Any:
    return "the batch on any axis, or merged into one";
  case OpDef::BatchLayout::SampleMajor:
    return "each sample's elements together";
  }
  return "";
}

/// A table cell: the documentation strings promise no '|' or newline, and
/// an empty cell would read as a gap in the table.
std::string cell(std::string_view s) {
  assert(s.find('|') == std::string_view::npos &&
         s.find('\n') == std::string_view::npos &&
         "an OpDef's documentation breaks the table");
  return s.empty() ? std::string("-") : std::string(s);
}

std::map<std::string, Row> collectRows() {
  std::map<std::string, Row> rows;
  for (const OpDef &d : allOpDefs())
    for (std::string_view t : d.onnxTypes)
      rows[std::string(t)].defs.push_back(&d);
  for (const std::string &t : onnximport::foldOpTypes()) {
    Row &r = rows[t];
    r.folds = true;
    r.onlyFolds = onnximport::isFoldOnlyOp(t);
  }
  for (auto k = uint8_t(0); k <= uint8_t(ops::RtIntOp::CumSumExclusive); ++k) {
    std::string_view onnx = ops::runtimeKind(static_cast<ops::RtIntOp>(k)).onnx;
    if (!onnx.empty())
      rows[std::string(onnx)].intStep = true;
  }
  for (const ImporterOp &op : importerOps())
    rows[std::string(op.opType)].importer = &op;
  // A fold rule that may decline (not all operands constant) with no
  // operator to fall back on folds only, whatever the rule says.
  for (auto &[type, r] : rows)
    r.onlyFolds |= r.folds && r.defs.empty() && !r.importer;
  return rows;
}

std::string howRun(const std::string &type, const Row &r) {
  std::vector<std::string> ways;
  for (const OpDef *d : r.defs)
    ways.push_back(llvm::formatv("operator `{0}` ({1}{2}{3})", d->name,
                                 layoutWords(d->batchLayout),
                                 onnximport::computesOnWeights(type)
                                     ? "; on values computed from weights too"
                                     : "",
                                 d->lowerPrecision ? "; 16-bit under bf16 and "
                                                     "fp16, as torch.autocast"
                                                   : "")
                       .str());
  if (r.onlyFolds)
    ways.push_back("folded at import");
  else if (r.folds)
    ways.push_back("folded at import when every operand is a constant");
  if (r.intStep)
    ways.push_back("a step of an integer program on the token ids");
  if (r.importer)
    ways.push_back("the importer");
  std::string s;
  for (size_t i = 0; i < ways.size(); ++i)
    s += (i ? "; " : "") + ways[i];
  return s;
}

std::string gradientOf(const Row &r) {
  std::string s;
  for (const OpDef *d : r.defs)
    s += (s.empty() ? "" : "; ") + cell(d->gradient);
  if (s.empty())
    s = r.importer && !r.importer->gradient.empty()
            ? std::string(r.importer->gradient)
            : "none (no trainable value flows through it)";
  return s;
}

/// What a type the folder alone computes takes: its operands known at
/// import, which onnx-import.md's "Folding shape arithmetic" details.
std::string foldOnlyForms(const std::string &type, const Row &r) {
  if (type == "Constant")
    return "A literal: `value`, `value_float(s)`, `value_int(s)`.";
  std::string s = type == "Shape"
                      ? "Of any value: it reads only the dims (with `start` "
                        "and `end`), the batch's as a symbol that stays the "
                        "batch through the arithmetic after it."
                      : "Every operand known at import: a constant, an "
                        "initializer that is not a parameter, or shape "
                        "arithmetic (the batch and sequence extents are "
                        "known at plan time)";
  if (type != "Shape")
    s += r.intStep ? ", or computed from the token ids." : ".";
  return s;
}

std::string formsOf(const std::string &type, const Row &r) {
  std::string s;
  for (const OpDef *d : r.defs)
    s += (s.empty() ? "" : " ") + cell(d->forms);
  if (r.importer)
    s += (s.empty() ? "" : " ") + std::string(r.importer->forms);
  if (r.onlyFolds)
    s += std::string(s.empty() ? "" : " ") + foldOnlyForms(type, r);
  return s.empty() ? "-" : s;
}

} // namespace

void printOperatorTable(llvm::raw_ostream &os) {
  std::map<std::string, Row> rows = collectRows();
  os << "# Operators\n\n"
     << "Generated by `memfit operators` from the operator definitions "
        "(compiler/ops/), the constant folder's rules "
        "(compiler/onnx/Fold*.cpp) "
        "and the integer-program steps (runtime/kernels/IntOps.def); "
        "`tests/cli/operators.sh` fails when this page differs from what the "
        "command prints. Regenerate it with `memfit operators > "
        "docs/operators.md`.\n\n"
     << llvm::formatv(
            "memfit reads models of opsets {0} to {1} of the default ONNX "
            "domain (`ai.onnx`); a node of any other domain is refused. Only "
            "nodes whose outputs reach the model's output are checked. An "
            "import that fails lists every node it refuses at once, each with "
            "its reason.\n\n",
            onnximport::kMinOpset, onnximport::kMaxOpset)
     << "In the forms, operands keep their ONNX order; an *activation* is "
        "a value computed from the data input, a *weight* an initializer, a "
        "graph input without data or a float constant (a parameter unless "
        "`--constants` says it is a buffer), a *constant* a value known at "
        "import.\n\n"
     << "How memfit runs a node:\n\n"
        "- **operator**: a task of the training graph with a forward and, "
        "where the gradient column says, a backward; planned, offloaded and "
        "recomputed like any other, one kernel source for the CUDA trainer "
        "and the CPU emulation. The parenthesis after its name says where it "
        "lets the batch lie in its operands (a value whose batch lies "
        "elsewhere is refused, naming it). \"On values computed from "
        "weights too\": a parameter, or a computation on parameters, may be "
        "its input (read as its value, without a batch, and trained through "
        "it); other operators take such a value only where their forms say, "
        "and refuse it elsewhere naming the weights.\n"
        "- **folded**: computed once at import on constants (initializers "
        "that are not parameters, `Constant` nodes, shapes; with the batch "
        "and sequence extents known at plan time); no task, no gradient.\n"
        "- **integer program**: index arithmetic on the token ids (position "
        "ids, masks), evaluated per batch by one forward-only integer task; "
        "no gradient.\n"
        "- **the importer**: taken apart while importing (an alias, or part "
        "of a pattern that becomes one operator).\n\n"
     << "| ONNX op | how memfit runs it | gradient | forms and limits |\n"
     << "|---|---|---|---|\n";
  for (const auto &[type, r] : rows)
    os << "| `" << type << "` | " << howRun(type, r) << " | " << gradientOf(r)
       << " | " << formsOf(type, r) << " |\n";

  os << "\n## Operators without an ONNX op type of their own\n\n"
     << "The importer builds these from patterns of several nodes.\n\n"
     << "| memfit operator | gradient | what makes it |\n"
     << "|---|---|---|\n";
  for (const OpDef &d : allOpDefs())
    if (d.onnxTypes.empty())
      os << "| `" << d.name << "` | " << cell(d.gradient) << " | "
         << cell(d.forms) << " |\n";

  os << "\n## Refused\n\n"
     << "Any op type not listed above is refused. These are the ones models "
        "most often contain, with the PyTorch code that usually writes "
        "them:\n\n"
     << "| ONNX op | usually written by |\n"
     << "|---|---|\n";
  for (const RefusedIdiom &i : refusedIdioms()) {
    if (rows.count(std::string(i.opType)))
      continue; // accepted in some form: its row above says which
    std::string_view idiom = i.idiom;
    // " (torch.topk: ...)" -> "torch.topk: ..."
    if (idiom.size() >= 3 && idiom.substr(0, 2) == " (" && idiom.back() == ')')
      idiom = idiom.substr(2, idiom.size() - 3);
    os << "| `" << i.opType << "` | " << idiom << " |\n";
  }
}

} // namespace memfit
