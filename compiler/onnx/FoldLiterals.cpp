//===- FoldLiterals.cpp - Literal, mask and position arithmetic -----------===//
//
// Exporters compute masks (comparisons of positions, Trilu), literals
// (1/sqrt(d) in double, GELU's constants) and rotary tables (float Range,
// Cos, Sin, Pow) in the graph. They never involve the batch, which they
// refuse; the results are constants like any other.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Fold.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace memfit::onnximport {
namespace {

using llvm::Error;
using llvm::Expected;

class LiteralFolder : FoldBase {
public:
  using FoldBase::FoldBase;

  using Fn = double (*)(double, double);

  /// One or two operands broadcast numpy style (Min and Max take any number,
  /// folded pairwise); comparisons and logic give bools, the others the
  /// first operand's type. Masks and position arithmetic, without the
  /// batch.
  Expected<ConstTensor> elementwise(Fn f, bool keepType) {
    auto first = input(0);
    if (!first)
      return first.takeError();
    int count = std::max(1, n.input_size());
    if (count == 1)
      return combine(*first, *first, f, keepType);
    std::optional<ConstTensor> acc; // what the operands so far combine to
    for (int i = 1; i < count; ++i) {
      auto b = input(i);
      if (!b)
        return b.takeError();
      auto next = combine(acc ? *acc : *first, *b, f, keepType);
      if (!next)
        return next.takeError();
      acc = std::move(*next);
    }
    return std::move(*acc);
  }

  Expected<ConstTensor> combine(const ConstTensor &a, const ConstTensor &b,
                                Fn f, bool keepType) {
    if (!a.batch.empty() || !b.batch.empty())
      return im.fail(n, "computes with the batch size; memfit keeps the "
                        "batch symbolic and cannot fold this arithmetic");
    auto shape = Broadcast::of(im, n, a.dims, b.dims);
    if (!shape)
      return shape.takeError();
    ConstTensor out;
    out.type = !keepType                    ? int32_t(pb::TensorProto::BOOL)
               : a.isFloat() || b.isFloat() ? int32_t(pb::TensorProto::FLOAT)
                                            : a.type;
    out.dims = shape->dims;
    reserveElems(out, prod(out.dims, 0, out.dims.size()));
    Error e = shape->forEach([&](int64_t ia, int64_t ib) {
      double x = a.isFloat() ? a.floats[ia] : double(a.ints[ia]);
      double y = b.isFloat() ? b.floats[ib] : double(b.ints[ib]);
      double r = f(x, y);
      if (out.isFloat())
        out.floats.push_back(static_cast<float>(r));
      else
        out.ints.push_back(static_cast<int64_t>(r));
      return Error::success();
    });
    if (e)
      return std::move(e);
    return out;
  }

  /// The upper (or lower) triangle of the last two axes from diagonal k.
  Expected<ConstTensor> trilu() {
    auto t = input(0);
    if (!t)
      return t.takeError();
    int64_t k = 0;
    if (n.input_size() > 1 && !n.input(1).empty()) {
      auto kv = im.intVector(n, 1);
      if (!kv)
        return kv.takeError();
      if (kv->size() != 1)
        return im.fail(n, "k must hold one number");
      k = (*kv)[0];
    }
    auto upper = im.attrInt(n, "upper", 1);
    if (!upper)
      return upper.takeError();
    if (t->dims.size() < 2 || !t->batch.empty())
      return im.fail(n, "folds only constants of rank 2 or more");
    int64_t rows = t->dims[t->dims.size() - 2], cols = t->dims.back();
    ConstTensor out = std::move(*t);
    for (int64_t e = 0; e < out.numel(); ++e) {
      int64_t c = e % cols, r = (e / cols) % rows;
      bool keep = *upper ? c - r >= k : c - r <= k;
      if (keep)
        continue;
      if (out.isFloat())
        out.floats[e] = 0;
      else
        out.ints[e] = 0;
    }
    return out;
  }

  /// out[i][j] = data[index[i][j]][j] along `axis` (any rank).
  Expected<ConstTensor> gatherElements() {
    auto d = input(0), idx = input(1);
    auto axisAttr = im.attrInt(n, "axis", 0);
    if (!d || !idx || !axisAttr)
      return llvm::joinErrors(
          llvm::joinErrors(d ? Error::success() : d.takeError(),
                           idx ? Error::success() : idx.takeError()),
          axisAttr ? Error::success() : axisAttr.takeError());
    auto rank = static_cast<int64_t>(d->dims.size());
    int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
    if (axis < 0 || axis >= rank || idx->isFloat() ||
        static_cast<int64_t>(idx->dims.size()) != rank || !idx->batch.empty() ||
        !d->batch.empty())
      return im.fail(n, "gathers along an invalid axis or with invalid "
                        "indices");
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && idx->dims[i] > d->dims[i])
        return im.fail(n, "indices of shape " + dimsStr(idx->dims) +
                              " exceed the data of shape " + dimsStr(d->dims));
    ConstTensor out;
    out.type = d->type;
    out.dims = idx->dims;
    std::vector<int64_t> at(rank, 0);
    for (int64_t e = 0; e < idx->numel(); ++e) {
      int64_t j = idx->ints[e], size = d->dims[axis];
      if (j < -size || j >= size)
        return im.fail(n, "index " + std::to_string(j) + " is out of range");
      int64_t src = 0;
      for (int64_t i = 0; i < rank; ++i)
        src = src * d->dims[i] + (i == axis ? (j < 0 ? j + size : j) : at[i]);
      appendElem(out, *d, src);
      for (int64_t i = rank; i-- > 0;) {
        if (++at[i] < idx->dims[i])
          break;
        at[i] = 0;
      }
    }
    finish(out);
    return out;
  }

  /// Literal arithmetic computed in the graph: attention's scale
  /// 1/sqrt(d), rotary embeddings' cos and sin tables.
  Expected<ConstTensor> floatUnary(const std::string &op) {
    auto a = input(0);
    if (!a)
      return a.takeError();
    if (!a->isFloat())
      return im.fail(n, "computes on an integer constant");
    ConstTensor out = *a;
    // In float, as the exporting framework computed them (T5's and
    // DeBERTa's position buckets truncate a log to an integer).
    for (float &v : out.floats)
      v = op == "Sqrt"  ? std::sqrt(v)
          : op == "Cos" ? std::cos(v)
          : op == "Sin" ? std::sin(v)
          : op == "Log" ? std::log(v)
          : op == "Exp" ? std::exp(v)
                        : 1.0f / v;
    return out;
  }

  /// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
  /// ReduceL2, ReduceSumSquare and ReduceLogSumExp of a constant (a mask's
  /// row counts, a table's norm), in double, in the constant's type
  /// (integers: an integer mean truncates, as ONNX's).
  Expected<ConstTensor> reduce() {
    auto t = input(0);
    if (!t)
      return t.takeError();
    llvm::StringRef op = n.op_type();
    auto keep = im.attrInt(n, "keepdims", 1);
    auto noop = im.attrInt(n, "noop_with_empty_axes", 0);
    auto axesAttr = im.attrInts(n, "axes");
    if (!keep || !noop || !axesAttr)
      return llvm::joinErrors(
          llvm::joinErrors(keep ? Error::success() : keep.takeError(),
                           noop ? Error::success() : noop.takeError()),
          axesAttr ? Error::success() : axesAttr.takeError());
    std::vector<int64_t> axes = axesAttr->value_or(std::vector<int64_t>());
    if (im.hasInput(n, 1)) {
      auto v = im.intVector(n, 1);
      if (!v)
        return v.takeError();
      axes = *v;
    }
    auto rank = static_cast<int64_t>(t->dims.size());
    if (!t->batch.empty() || t->batchAxis >= 0)
      return im.fail(n, "reduces a constant that holds the batch");
    if (axes.empty() && *noop)
      return std::move(*t);
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) {
      int64_t x = a < 0 ? a + rank : a;
      if (x < 0 || x >= rank)
        return im.fail(n, "axis " + std::to_string(a) + " is out of range");
      reduced[x] = true;
    }
    ConstTensor out;
    out.type = t->type;
    std::vector<int64_t> kept(rank);
    for (int64_t i = 0; i < rank; ++i) {
      kept[i] = reduced[i] ? 1 : t->dims[i];
      if (!reduced[i] || *keep)
        out.dims.push_back(kept[i]);
    }
    int64_t count = prod(kept, 0, rank),
            per = t->numel() / std::max<int64_t>(count, 1);
    std::vector<double> acc(count, op == "ReduceProd" ? 1.0 : 0.0);
    std::vector<bool> seen(count, false);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t e = 0; e < t->numel(); ++e) {
      int64_t k = 0;
      for (int64_t i = 0; i < rank; ++i)
        k = k * kept[i] + (reduced[i] ? 0 : idx[i]);
      double v = t->isFloat() ? double(t->floats[e]) : double(t->ints[e]);
      double &a = acc[k];
      if (op == "ReduceL1")
        v = std::fabs(v);
      else if (op == "ReduceL2" || op == "ReduceSumSquare")
        v *= v;
      if (op == "ReduceLogSumExp") {
        // A running log-sum-exp, shifted by the larger term.
        double hi = std::max(a, v), lo = std::min(a, v);
        a = !seen[k]          ? v
            : lo == -INFINITY ? hi
                              : hi + std::log1p(std::exp(lo - hi));
      } else if (op == "ReduceMax")
        a = seen[k] ? std::max(a, v) : v;
      else if (op == "ReduceMin")
        a = seen[k] ? std::min(a, v) : v;
      else if (op == "ReduceProd")
        a *= v;
      else
        a += v;
      seen[k] = true;
      for (int64_t i = rank; i-- > 0;) {
        if (++idx[i] < t->dims[i])
          break;
        idx[i] = 0;
      }
    }
    for (double &a : acc)
      if (op == "ReduceMean")
        a /= double(per);
      else if (op == "ReduceL2")
        a = std::sqrt(a);
    for (double a : acc) {
      if (out.isFloat())
        out.floats.push_back(float(a));
      else
        out.ints.push_back(int64_t(a));
    }
    return out;
  }

  /// Running sums along `axis` (positions from an attention mask).
  Expected<ConstTensor> cumSum() {
    auto t = input(0);
    auto axisV = im.intVector(n, 1);
    auto exclusive = im.attrInt(n, "exclusive", 0);
    auto reverse = im.attrInt(n, "reverse", 0);
    if (!t || !axisV || !exclusive || !reverse)
      return llvm::joinErrors(
          llvm::joinErrors(t ? Error::success() : t.takeError(),
                           axisV ? Error::success() : axisV.takeError()),
          llvm::joinErrors(exclusive ? Error::success() : exclusive.takeError(),
                           reverse ? Error::success() : reverse.takeError()));
    auto rank = static_cast<int64_t>(t->dims.size());
    if (axisV->size() != 1 || !t->batch.empty() || *exclusive || *reverse)
      return im.fail(n, "folds only an inclusive forward running sum");
    int64_t axis = (*axisV)[0] < 0 ? (*axisV)[0] + rank : (*axisV)[0];
    if (axis < 0 || axis >= rank)
      return im.fail(n, "axis out of range");
    int64_t inner = prod(t->dims, axis + 1, rank), len = t->dims[axis];
    ConstTensor out = std::move(*t);
    for (int64_t e = 0; e < out.numel(); ++e) {
      if ((e / inner) % len == 0)
        continue;
      if (out.isFloat())
        out.floats[e] += out.floats[e - inner];
      else
        out.ints[e] += out.ints[e - inner];
    }
    return out;
  }

  /// Gathers slices of data by index tuples on the last axis of indices
  /// (batch_dims 0).
  Expected<ConstTensor> gatherND() {
    auto d = input(0), idx = input(1);
    auto batchDims = im.attrInt(n, "batch_dims", 0);
    if (!d || !idx || !batchDims)
      return llvm::joinErrors(
          llvm::joinErrors(d ? Error::success() : d.takeError(),
                           idx ? Error::success() : idx.takeError()),
          batchDims ? Error::success() : batchDims.takeError());
    if (*batchDims != 0 || idx->isFloat() || idx->dims.empty() ||
        !d->batch.empty() || !idx->batch.empty())
      return im.fail(n, "folds only integer indices with batch_dims 0");
    auto rank = static_cast<int64_t>(d->dims.size());
    int64_t k = idx->dims.back();
    if (k < 1 || k > rank)
      return im.fail(n, "index tuples longer than the data's rank");
    int64_t slice = prod(d->dims, k, rank);
    ConstTensor out;
    out.type = d->type;
    out.dims.assign(idx->dims.begin(), idx->dims.end() - 1);
    out.dims.insert(out.dims.end(), d->dims.begin() + k, d->dims.end());
    if (Error e = checkSize(out.dims))
      return std::move(e);
    for (int64_t t = 0; t < idx->numel() / k; ++t) {
      int64_t at = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t i = idx->ints[t * k + j], size = d->dims[j];
        if (i < -size || i >= size)
          return im.fail(n, "index " + std::to_string(i) + " is out of range");
        at = at * size + (i < 0 ? i + size : i);
      }
      for (int64_t e = 0; e < slice; ++e)
        appendElem(out, *d, at * slice + e);
    }
    finish(out);
    return out;
  }

  /// Matrix products of float constants, numpy style for rank >= 2 (the
  /// leading axes broadcast): a rotary table's inv_freq times the
  /// positions.
  Expected<ConstTensor> matMul() {
    auto a = input(0);
    auto b = input(1);
    if (!a || !b)
      return llvm::joinErrors(a ? Error::success() : a.takeError(),
                              b ? Error::success() : b.takeError());
    size_t ra = a->dims.size(), rb = b->dims.size();
    if (!a->isFloat() || !b->isFloat() || ra < 2 || rb < 2 ||
        a->dims[ra - 1] != b->dims[rb - 2])
      return im.fail(n, "folds a matrix product of constants of shapes " +
                            dimsStr(a->dims) + " and " + dimsStr(b->dims) +
                            "; memfit folds float ones of rank 2 and up");
    int64_t m = a->dims[ra - 2], k = a->dims[ra - 1], p = b->dims[rb - 1];
    std::vector<int64_t> la(a->dims.begin(), a->dims.end() - 2),
        lb(b->dims.begin(), b->dims.end() - 2);
    auto lead = Broadcast::of(im, n, la, lb);
    if (!lead)
      return lead.takeError();
    std::vector<int64_t> dims = lead->dims;
    dims.push_back(m);
    dims.push_back(p);
    if (Error e = checkFoldSize(im, n, dims))
      return std::move(e);
    ConstTensor out;
    out.type = pb::TensorProto::FLOAT;
    out.dims = dims;
    if (Error e = lead->forEach([&](int64_t ia, int64_t ib) {
          const float *x = a->floats.data() + ia * m * k;
          const float *y = b->floats.data() + ib * k * p;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < p; ++j) {
              double acc = 0;
              for (int64_t t = 0; t < k; ++t)
                acc += double(x[i * k + t]) * double(y[t * p + j]);
              out.floats.push_back(static_cast<float>(acc));
            }
          return Error::success();
        }))
      return std::move(e);
    return out;
  }

  /// Permutes axes (F.pad's pad list is reordered this way in the graph).
  Expected<ConstTensor> transpose() {
    auto t = input(0);
    if (!t)
      return t.takeError();
    auto rank = static_cast<int64_t>(t->dims.size());
    auto p = im.attrInts(n, "perm");
    if (!p)
      return p.takeError();
    std::vector<int64_t> perm;
    if (*p)
      perm = **p;
    else
      for (int64_t i = rank; i-- > 0;)
        perm.push_back(i);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i)
      if (sorted[i] != i || static_cast<int64_t>(perm.size()) != rank)
        return im.fail(n, "perm is not a permutation of the operand's " +
                              std::to_string(rank) + " axes");
    ConstTensor out;
    out.type = t->type;
    for (int64_t p : perm)
      out.dims.push_back(t->dims[p]);
    std::vector<int64_t> stride(rank, 1), at(rank, 0);
    for (int64_t i = rank - 1; i > 0; --i)
      stride[i - 1] = stride[i] * t->dims[i];
    for (int64_t e = 0; e < t->numel(); ++e) {
      int64_t src = 0;
      for (int64_t i = 0; i < rank; ++i)
        src += at[i] * stride[perm[i]];
      appendElem(out, *t, src);
      for (int64_t i = rank; i-- > 0;) {
        if (++at[i] < out.dims[i])
          break;
        at[i] = 0;
      }
    }
    finish(out);
    return out;
  }

  /// Writes slices of updates into a copy of data at index tuples (Swin's
  /// shifted-window masks are built this way); later writes win, as ONNX
  /// leaves duplicate indices undefined without a reduction.
  Expected<ConstTensor> scatterND() {
    auto d = input(0), idx = input(1), upd = input(2);
    auto reduction = im.attrString(n, "reduction", "none");
    if (!d || !idx || !upd || !reduction)
      return llvm::joinErrors(
          llvm::joinErrors(d ? Error::success() : d.takeError(),
                           idx ? Error::success() : idx.takeError()),
          llvm::joinErrors(upd ? Error::success() : upd.takeError(),
                           reduction ? Error::success()
                                     : reduction.takeError()));
    if (*reduction != "none" || idx->isFloat() || idx->dims.empty() ||
        !d->batch.empty() || !idx->batch.empty() || !upd->batch.empty() ||
        d->isFloat() != upd->isFloat())
      return im.fail(n, "folds only integer indices without a reduction "
                        "into data and updates of one type");
    auto rank = static_cast<int64_t>(d->dims.size());
    int64_t k = idx->dims.back();
    if (k < 1 || k > rank)
      return im.fail(n, "index tuples longer than the data's rank");
    std::vector<int64_t> updDims(idx->dims.begin(), idx->dims.end() - 1);
    updDims.insert(updDims.end(), d->dims.begin() + k, d->dims.end());
    if (upd->dims != updDims)
      return im.fail(n, "updates of shape " + dimsStr(upd->dims) +
                            " where the indices need " + dimsStr(updDims));
    int64_t slice = prod(d->dims, k, rank);
    ConstTensor out = std::move(*d);
    for (int64_t t = 0; t < idx->numel() / k; ++t) {
      int64_t at = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t i = idx->ints[t * k + j], size = out.dims[j];
        if (i < -size || i >= size)
          return im.fail(n, "index " + std::to_string(i) + " is out of range");
        at = at * size + (i < 0 ? i + size : i);
      }
      for (int64_t e = 0; e < slice; ++e) {
        if (out.isFloat())
          out.floats[at * slice + e] = upd->floats[t * slice + e];
        else
          out.ints[at * slice + e] = upd->ints[t * slice + e];
      }
    }
    return out;
  }
};

double less(double a, double b) { return a < b; }
double lessOrEqual(double a, double b) { return a <= b; }
double greater(double a, double b) { return a > b; }
double greaterOrEqual(double a, double b) { return a >= b; }
double logicalAnd(double a, double b) { return a != 0 && b != 0; }
double logicalOr(double a, double b) { return a != 0 || b != 0; }
double logicalXor(double a, double b) { return (a != 0) != (b != 0); }
double negate(double a, double) { return -a; }
double absolute(double a, double) { return a < 0 ? -a : a; }
double minimum(double a, double b) { return a < b ? a : b; }
double maximum(double a, double b) { return a < b ? b : a; }
double power(double a, double b) { return std::pow(a, b); }
double sign(double a, double) { return (a > 0) - (a < 0); }
double ceiling(double a, double) { return std::ceil(a); }
double flooring(double a, double) { return std::floor(a); }
// ONNX's Round takes halves to even, as nearbyint does in the default
// rounding mode.
double rounding(double a, double) { return std::nearbyint(a); }

/// Comparisons and logic give bools (`KeepType` false), the others the
/// operands' type.
template <LiteralFolder::Fn F, bool KeepType>
Expected<ConstTensor> foldElementwise(Importer &im, const pb::NodeProto &n) {
  return LiteralFolder(im, n).elementwise(F, KeepType);
}

template <Expected<ConstTensor> (LiteralFolder::*Fold)()>
Expected<ConstTensor> viaLiteralFolder(Importer &im, const pb::NodeProto &n) {
  return (LiteralFolder(im, n).*Fold)();
}

template <const char *Op>
Expected<ConstTensor> foldFloatUnary(Importer &im, const pb::NodeProto &n) {
  return LiteralFolder(im, n).floatUnary(Op);
}

constexpr char kSqrt[] = "Sqrt", kReciprocal[] = "Reciprocal", kCos[] = "Cos",
               kSin[] = "Sin", kLog[] = "Log", kExp[] = "Exp";

} // namespace

llvm::ArrayRef<FoldRule> literalFoldRules() {
  static const FoldRule rules[] = {
      {"Less", true, foldElementwise<less, false>},
      {"LessOrEqual", true, foldElementwise<lessOrEqual, false>},
      {"Greater", true, foldElementwise<greater, false>},
      {"GreaterOrEqual", true, foldElementwise<greaterOrEqual, false>},
      {"And", true, foldElementwise<logicalAnd, false>},
      {"Or", true, foldElementwise<logicalOr, false>},
      {"Xor", true, foldElementwise<logicalXor, false>},
      {"Abs", false, foldElementwise<absolute, true>},
      {"Min", false, foldElementwise<minimum, true>},
      {"Max", false, foldElementwise<maximum, true>},
      {"Trilu", true, viaLiteralFolder<&LiteralFolder::trilu>},
      {"GatherElements", true,
       viaLiteralFolder<&LiteralFolder::gatherElements>},
      {"ScatterND", false, viaLiteralFolder<&LiteralFolder::scatterND>},
      {"Sqrt", false, foldFloatUnary<kSqrt>},
      {"Neg", false, foldElementwise<negate, true>},
      {"Reciprocal", false, foldFloatUnary<kReciprocal>},
      {"Cos", false, foldFloatUnary<kCos>},
      {"Sin", false, foldFloatUnary<kSin>},
      {"Log", false, foldFloatUnary<kLog>},
      {"Exp", false, foldFloatUnary<kExp>},
      {"Sign", true, foldElementwise<sign, true>},
      {"Ceil", true, foldElementwise<ceiling, true>},
      {"Floor", true, foldElementwise<flooring, true>},
      {"Round", true, foldElementwise<rounding, true>},
      {"CumSum", false, viaLiteralFolder<&LiteralFolder::cumSum>},
      {"ReduceSum", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceMean", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceMax", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceMin", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceProd", true, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceL1", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceL2", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceSumSquare", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"ReduceLogSumExp", false, viaLiteralFolder<&LiteralFolder::reduce>},
      {"GatherND", false, viaLiteralFolder<&LiteralFolder::gatherND>},
      {"Pow", false, foldElementwise<power, true>},
      {"Transpose", false, viaLiteralFolder<&LiteralFolder::transpose>},
      {"MatMul", false, viaLiteralFolder<&LiteralFolder::matMul>},
  };
  return rules;
}

} // namespace memfit::onnximport
