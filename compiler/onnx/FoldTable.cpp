//===- FoldTable.cpp - Which ONNX op types fold, and how ------------------===//
//
// The one table of constant folds: each op type appears once, with whether
// it only ever folds and the function that folds it. The importer asks it
// which nodes to fold, the folds run through it, and the list of supported
// op types reads it, so adding a fold is one entry in one file's part.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Fold.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>

namespace memfit::onnximport {
namespace {

const llvm::StringMap<const FoldRule *> &foldTable() {
  static const llvm::StringMap<const FoldRule *> table = [] {
    llvm::StringMap<const FoldRule *> t;
    for (llvm::ArrayRef<FoldRule> part : {shapeFoldRules(), fillFoldRules(),
                                          arithFoldRules(), literalFoldRules()})
      for (const FoldRule &r : part) {
        bool fresh = t.try_emplace(r.opType, &r).second;
        assert(fresh && "an op type folds in two places");
        (void)fresh;
      }
    return t;
  }();
  return table;
}

const FoldRule *foldRule(llvm::StringRef opType) {
  auto it = foldTable().find(opType);
  return it == foldTable().end() ? nullptr : it->second;
}

} // namespace

bool isFoldOnlyOp(llvm::StringRef opType) {
  const FoldRule *r = foldRule(opType);
  return r && r->onlyFolds;
}

/// Split folds outside the table: it has an output per part.
bool isFoldableOp(llvm::StringRef opType) {
  return foldRule(opType) || opType == "Split";
}

const std::vector<std::string> &foldOpTypes() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (llvm::ArrayRef<FoldRule> part : {shapeFoldRules(), fillFoldRules(),
                                          arithFoldRules(), literalFoldRules()})
      for (const FoldRule &r : part)
        v.emplace_back(r.opType);
    v.emplace_back("Split");
    return v;
  }();
  return ops;
}

/// Where the batch axis of a constant filled over the batch
/// (ConstTensor::batchAxis) lands in what `n` folds from it: elementwise
/// ops and Expand keep it (aligned from the right, extent 1 still), a
/// CumSum along another axis and a Reshape keeping it on axis 0 too,
/// Unsqueeze and
/// Squeeze move it, Shape reads it (ShapeFolder::shape). Anything else
/// would compute over the batch that is not stored: an error.
static llvm::Error placeBatchAxis(Importer &im, const pb::NodeProto &n,
                                  ConstTensor &out) {
  static const llvm::StringSet<> elementwise = {"Equal",      "Not",
                                                "Add",        "Sub",
                                                "Mul",        "Div",
                                                "Mod",        "Cast",
                                                "CastLike",   "Where",
                                                "Less",       "LessOrEqual",
                                                "Greater",    "GreaterOrEqual",
                                                "And",        "Or",
                                                "Xor",        "Abs",
                                                "Min",        "Max",
                                                "Sqrt",       "Neg",
                                                "Reciprocal", "Cos",
                                                "Sin",        "Log",
                                                "Exp",        "Sign",
                                                "Ceil",       "Floor",
                                                "Pow",        "Identity"};
  llvm::StringRef op = n.op_type();
  int32_t axis = -1;
  for (int i = 0; i < n.input_size(); ++i) {
    int32_t a = im.hasInput(n, i) ? im.constBatchAxis(n.input(i)) : -1;
    if (a < 0 || op == "Shape" || (op == "CastLike" && i == 1))
      continue;
    bool batched = false;
    auto dims = im.dimsOf(n, n.input(i), batched);
    if (!dims)
      return dims.takeError();
    int64_t at = -1;
    if (elementwise.contains(op) || op == "Expand" || op == "MatMul") {
      // Expand's shape holds the batch where the constant does (stored 1).
      at = a + static_cast<int64_t>(out.dims.size()) -
           static_cast<int64_t>(dims->size());
    } else if (op == "Slice" && i == 0) {
      // A window on other axes is the same for every sample; one that
      // keeps every sample (start 0, an end past the batch) too.
      auto args = sliceArgsOf(im, n);
      if (!args)
        return args.takeError();
      at = a;
      for (size_t j = 0; j < args->axes.size(); ++j) {
        int64_t x = args->axes[j] + (args->axes[j] < 0 ? dims->size() : 0);
        bool whole = args->starts[j] == 0 && args->steps[j] == 1 &&
                     (args->batchBound || args->ends[j] >= (int64_t(1) << 30));
        if (x == a && !whole)
          at = -1;
      }
    } else if (op == "Gather") {
      // Rows looked up by indices filled over the batch (positions of
      // each sample), or other axes of a table filled over it.
      auto ax = im.attrInt(n, "axis", 0);
      bool dataBatched = false;
      auto data = im.dimsOf(n, n.input(0), dataBatched);
      auto idx = im.dimsOf(n, n.input(1), dataBatched);
      if (!ax || !data || !idx)
        return llvm::joinErrors(
            llvm::joinErrors(ax.takeError(), data.takeError()),
            idx.takeError());
      int64_t g = *ax + (*ax < 0 ? static_cast<int64_t>(data->size()) : 0);
      auto ri = static_cast<int64_t>(idx->size());
      at = i == 1 ? g + a : a < g ? a : a > g ? a - 1 + ri : -1;
    } else if (op == "Transpose" && i == 0) {
      // Where the permutation puts it (EdgeNeXt's position encoding, built
      // on a mask per sample, permuted to channels first).
      // The fold checked that perm permutes 0 .. rank - 1; none reverses.
      auto perm = im.attrInts(n, "perm");
      if (!perm)
        return perm.takeError();
      const auto rank = static_cast<int64_t>(dims->size());
      if (!*perm)
        at = rank - 1 - a;
      else if (auto it = std::find((*perm)->begin(), (*perm)->end(), a);
               it != (*perm)->end())
        at = it - (*perm)->begin();
    } else if (op == "Reshape" && i == 0) {
      at = out.batchAxis; // ShapeFolder::reshapeFilled kept it on axis 0
    } else if (op == "Concat") {
      // Joined along another axis (transformers' position ids shifted by
      // one, [N, 1] beside [N, T]), the same for every sample still.
      auto ax = im.attrInt(n, "axis", 0);
      if (!ax)
        return ax.takeError();
      int64_t x = *ax + (*ax < 0 ? static_cast<int64_t>(dims->size()) : 0);
      at = x == a ? -1 : a;
    } else if (op == "CumSum" && i == 0) {
      // Sums along another axis are the same for every sample.
      auto c = im.constant(n, 1);
      if (!c)
        return c.takeError();
      int64_t x = (*c)->numel() == 1 && !(*c)->isFloat() ? (*c)->ints[0] : a;
      x += x < 0 ? static_cast<int64_t>(dims->size()) : 0;
      at = x == a ? -1 : a;
    } else if (op == "Unsqueeze" || op == "Squeeze") {
      std::vector<int64_t> axes;
      if (im.opset >= 13 && im.hasInput(n, 1)) {
        auto v = im.intVector(n, 1);
        if (!v)
          return v.takeError();
        axes = *v;
      } else if (auto attr = im.attrInts(n, "axes"); !attr) {
        return attr.takeError();
      } else {
        axes = attr->value_or(std::vector<int64_t>());
      }
      bool unsq = op == "Unsqueeze";
      auto rank = static_cast<int64_t>(unsq ? out.dims.size() : dims->size());
      std::vector<bool> marked(rank, false);
      for (int64_t x : axes)
        if (x + (x < 0 ? rank : 0) >= 0 && x + (x < 0 ? rank : 0) < rank)
          marked[x + (x < 0 ? rank : 0)] = true;
      if (!unsq && (axes.empty() || marked[a]))
        return im.fail(n, "squeezes the batch's axis of a constant filled "
                          "over the batch");
      // The k-th kept axis of the input is the k-th unmarked one of the
      // output (Unsqueeze), or of the input (Squeeze) counted in order.
      int64_t k = 0;
      for (int64_t j = 0; j < rank; ++j) {
        if (marked[j])
          continue;
        if (unsq ? k == a : j == a) {
          at = unsq ? j : k;
          break;
        }
        ++k;
      }
    }
    // A matrix product keeps it only among the axes it broadcasts.
    if (op == "MatMul" && at >= static_cast<int64_t>(out.dims.size()) - 2)
      at = -1;
    if (at < 0 || at >= static_cast<int64_t>(out.dims.size()) ||
        out.dims[at] != 1 || (axis >= 0 && axis != at))
      return im.fail(n, "computes " + escapeName(op.str()) +
                            " on a constant filled over the batch (" +
                            quoteName(n.input(i)) +
                            "); memfit follows such a constant through "
                            "elementwise ops, Expand, Slice, Gather, "
                            "Unsqueeze, Squeeze, Transpose, MatMul, Reshape "
                            "keeping it on axis 0, Concat and CumSum along "
                            "another axis and Shape");
    axis = static_cast<int32_t>(at);
  }
  out.batchAxis = axis >= 0 ? axis : out.batchAxis;
  return llvm::Error::success();
}

/// Split of a constant: each used output the slice of its part. A
/// constant filled over the batch keeps it where another axis is split.
static llvm::Error foldSplit(Importer &im, const pb::NodeProto &n) {
  auto x = im.constant(n, 0);
  if (!x)
    return x.takeError();
  const ConstTensor &t = **x;
  // Before the sizes: the batch's axis is stored with extent 1.
  auto rank = static_cast<int64_t>(t.dims.size());
  auto at = im.attrInt(n, "axis", 0);
  if (!at)
    return at.takeError();
  if (t.batchAxis >= 0 && (*at == t.batchAxis || *at + rank == t.batchAxis))
    return im.fail(n, "splits the batch's axis of a constant filled over the "
                      "batch");
  auto args = splitArgsOf(im, n, t.dims);
  if (!args)
    return args.takeError();
  const int64_t axis = args->axis;
  const int64_t outer = prod(t.dims, 0, axis), extent = t.dims[axis],
                inner = prod(t.dims, axis + 1, t.dims.size());
  int64_t start = 0;
  for (int i = 0; i < n.output_size(); ++i) {
    const int64_t size = args->sizes[i];
    if (!n.output(i).empty()) {
      ConstTensor part;
      part.type = t.type;
      part.dims = t.dims;
      part.dims[axis] = size;
      part.batchAxis = t.batchAxis;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < size * inner; ++k)
          appendElem(part, t, (o * extent + start) * inner + k);
      finish(part);
      im.bindConstant(n.output(i), std::move(part));
    }
    start += size;
  }
  return llvm::Error::success();
}

llvm::Error foldNode(Importer &im, const pb::NodeProto &n) {
  if (n.op_type() == "Split")
    return foldSplit(im, n);
  const FoldRule *rule = foldRule(n.op_type());
  if (!rule)
    return im.fail(n, "cannot be folded");
  llvm::Expected<ConstTensor> out = rule->fold(im, n);
  if (!out)
    return out.takeError();
  if (llvm::Error e = placeBatchAxis(im, n, *out))
    return e;
  if (out->numel() > kMaxFoldElements)
    return im.fail(n, llvm::formatv("folds into {0} elements; memfit folds "
                                    "constants of at most {1}",
                                    out->numel(), kMaxFoldElements));
  finish(*out);
  im.bindConstant(n.output(0), std::move(*out));
  return llvm::Error::success();
}

} // namespace memfit::onnximport
