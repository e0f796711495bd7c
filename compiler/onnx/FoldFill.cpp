//===- FoldFill.cpp - Folding constants that fill a shape at import ------===//
//
// Range, ConstantOfShape, Expand, Tile and Pad of constants: exporters
// build position ids, masks and broadcast tables with them. They are evaluated
// here into constants like the rest of the shape arithmetic
// (FoldShapes.cpp), keeping the batch symbolic where an operand carries it.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Fold.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

namespace {

class FillFolder : FoldBase {
public:
  using FoldBase::FoldBase;

  /// start, start + delta, ... below limit (above it for a negative delta).
  Expected<ConstTensor> range() {
    auto s = input(0), l = input(1), d = input(2);
    if (Error e = llvm::joinErrors(
            llvm::joinErrors(s ? Error::success() : s.takeError(),
                             l ? Error::success() : l.takeError()),
            d ? Error::success() : d.takeError()))
      return std::move(e);
    for (const ConstTensor *t : {&*s, &*l, &*d}) {
      if (t->numel() != 1 || !t->isBatch(0))
        continue;
      im.countedBatch = true;
      return im.fail(n, "counts up to the batch size (an arange over the "
                        "batch: transformers' masks index each sample), "
                        "which memfit keeps symbolic");
    }
    for (const ConstTensor *t : {&*s, &*l, &*d})
      if (t->numel() != 1 || t->isFloat() != s->isFloat())
        return im.fail(n, "folds only scalar bounds of one type that are not "
                          "the batch size");
    if (s->isFloat()) { // rotary embeddings' frequencies
      float start = s->floats[0], limit = l->floats[0], delta = d->floats[0];
      if (!(delta != 0) || !std::isfinite(start) || !std::isfinite(limit))
        return im.fail(n, "has a zero or invalid step or bounds");
      double count = std::ceil((double(limit) - start) / delta);
      if (count > double(kMaxFoldElements))
        return im.fail(n, "folds into too many elements");
      ConstTensor out;
      out.type = s->type;
      for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
        out.floats.push_back(start + static_cast<float>(i) * delta);
      out.dims = {static_cast<int64_t>(out.floats.size())};
      return out;
    }
    int64_t start = s->ints[0], limit = l->ints[0], delta = d->ints[0];
    if (delta == 0)
      return im.fail(n, "has a zero step");
    ConstTensor out;
    out.type = s->type;
    for (int64_t v = start; delta > 0 ? v < limit : v > limit; v += delta) {
      if ((int64_t)out.ints.size() >= kMaxFoldElements)
        return im.fail(n, "folds into too many elements");
      out.ints.push_back(v);
    }
    out.dims = {static_cast<int64_t>(out.ints.size())};
    return out;
  }

  /// A tensor of the given shape filled with the `value` attribute (0.0f).
  Expected<ConstTensor> constantOfShape() {
    auto c = im.constant(n, 0);
    if (!c)
      return c.takeError();
    const ConstTensor &sv = **c;
    if (sv.isFloat() || sv.dims.size() > 1)
      return im.fail(n, "operand 0 must be a 1-D integer tensor");
    // A shape that holds the batch (ones(N, T), the attention mask of a
    // model called without one) is filled the same along it: stored with
    // extent 1 there, which broadcasts over the batch as it is used.
    ConstTensor out;
    std::vector<int64_t> shape = sv.ints;
    for (int64_t k = 0; k < sv.numel(); ++k)
      if (sv.isBatch(k)) {
        if (out.batchAxis >= 0)
          return im.fail(n, "fills a shape " + sv.str() +
                                " that holds the batch on two axes");
        out.batchAxis = static_cast<int32_t>(k);
        shape[k] = 1;
      }
    if (Error e = checkSize(shape))
      return std::move(e);
    out.type = pb::TensorProto::FLOAT;
    out.dims = shape;
    float fv = 0;
    int64_t iv = 0;
    if (const pb::AttributeProto *a = im.attr(n, "value")) {
      if (!a->has_t())
        return im.fail(n, "attribute 'value' must be a tensor");
      auto t = readConstant(a->t(), im.ext, im.file);
      if (!t)
        return t.takeError();
      if (t->numel() != 1)
        return im.fail(n, "attribute 'value' must hold one element");
      out.type = t->type;
      if (t->isFloat())
        fv = t->floats[0];
      else
        iv = t->ints[0];
    }
    int64_t numel = prod(shape, 0, shape.size());
    if (out.isFloat())
      out.floats.assign(numel, fv);
    else
      out.ints.assign(numel, iv);
    return out;
  }

  /// Expand of a constant (numpy broadcasting to the shape).
  /// A constant expanded over the batch (Hugging Face's token-type and mask
  /// buffers, `.expand(batch, T)`) keeps a size-1 axis there: the ops that
  /// read it broadcast it over the samples, at any batch size.
  Expected<ConstTensor> expand() {
    auto t = input(0);
    auto target = input(1);
    if (!t || !target)
      return llvm::joinErrors(t ? Error::success() : t.takeError(),
                              target ? Error::success() : target.takeError());
    if (target->isFloat() || target->dims.size() > 1)
      return im.fail(n, "the shape must be a 1-D integer tensor");
    std::optional<std::vector<int64_t>> shape = target->ints;
    // Expanded over the batch: filled over it (ConstTensor::batchAxis).
    int32_t filled = -1;
    for (int64_t k = 0; k < target->numel(); ++k) {
      if (!target->isBatch(k))
        continue;
      int64_t at = k + static_cast<int64_t>(t->dims.size()) - target->numel();
      if (at >= 0 && t->dims[at] != 1)
        return im.fail(n, "expands a constant along the batch's axis where "
                          "it is not 1");
      (*shape)[k] = 1;
      filled = static_cast<int32_t>(
          k + std::max<int64_t>(0, static_cast<int64_t>(t->dims.size()) -
                                       target->numel()));
    }
    size_t rank = std::max(t->dims.size(), shape->size());
    std::vector<int64_t> td(rank - t->dims.size(), 1), dims;
    td.insert(td.end(), t->dims.begin(), t->dims.end());
    std::vector<int64_t> sd(rank - shape->size(), 1);
    sd.insert(sd.end(), shape->begin(), shape->end());
    for (size_t i = 0; i < rank; ++i) {
      if (td[i] != sd[i] && td[i] != 1 && sd[i] != 1)
        return im.fail(n, "cannot expand " + dimsStr(t->dims) + " to " +
                              dimsStr(*shape));
      dims.push_back(td[i] == 1 ? sd[i] : td[i]);
    }
    if (Error e = checkSize(dims))
      return std::move(e);
    // Nothing broadcast (a mask "expanded" to its own shape, or over the
    // batch, which stays 1): the elements in order, copied whole.
    if (td == dims) {
      ConstTensor out = *t;
      out.dims = dims;
      out.batchAxis = filled;
      return out;
    }
    ConstTensor out;
    out.type = t->type;
    out.dims = dims;
    out.batchAxis = filled;
    int64_t numel = prod(dims, 0, rank);
    reserveElems(out, numel);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t k = 0; k < numel; ++k) {
      int64_t src = 0, rem = k;
      for (size_t i = rank; i-- > 0;) {
        int64_t c = rem % dims[i];
        rem /= dims[i];
        idx[i] = td[i] == 1 ? 0 : c;
      }
      for (size_t i = 0; i < rank; ++i)
        src = src * td[i] + idx[i];
      appendElem(out, *t, src);
    }
    return out;
  }

  /// Tile of a constant (a causal mask repeated for each sample). A repeat
  /// that is the batch over an axis of extent 1 leaves it 1: the constant
  /// is then filled over the batch there (ConstTensor::batchAxis).
  Expected<ConstTensor> tile() {
    auto t = input(0);
    auto reps = input(1);
    if (!t || !reps)
      return llvm::joinErrors(t ? Error::success() : t.takeError(),
                              reps ? Error::success() : reps.takeError());
    auto rank = static_cast<int64_t>(t->dims.size());
    if (reps->isFloat() || reps->dims.size() != 1 || reps->numel() != rank)
      return im.fail(n, "repeats must be a 1-D integer tensor with one "
                        "element per axis");
    std::vector<int64_t> dims(rank);
    int32_t filled = -1;
    for (int64_t i = 0; i < rank; ++i) {
      int64_t r = reps->ints[i];
      if (reps->isBatch(i)) {
        // Repeated rows ([heads, 1, T] to [N * heads, 1, T], BLOOM's
        // ALiBi) are each sample's own: the graph is read again at the
        // batch being planned, where they are a constant of that many.
        if (t->dims[i] != 1)
          im.countedBatch = true;
        if (t->dims[i] != 1 || filled >= 0)
          return im.fail(n, "repeats a constant the batch's number of times "
                            "along an axis of extent " +
                                std::to_string(t->dims[i]) +
                                "; memfit supports that only along one "
                                "axis of extent 1");
        filled = static_cast<int32_t>(i);
        r = 1;
      }
      if (r < 1)
        return im.fail(n, "repeats must be positive");
      dims[i] = t->dims[i] * r;
    }
    if (Error e = checkSize(dims))
      return std::move(e);
    // Every repeat 1 (a mask tiled over the batch, which stays 1): the
    // elements in order, copied whole.
    if (dims == t->dims) {
      ConstTensor out = *t;
      out.batchAxis = filled;
      return out;
    }
    ConstTensor out;
    out.type = t->type;
    out.dims = dims;
    out.batchAxis = filled;
    reserveElems(out, prod(dims, 0, rank));
    std::vector<int64_t> idx(rank, 0);
    for (int64_t k = 0, numel = prod(dims, 0, rank); k < numel; ++k) {
      int64_t src = 0, rem = k;
      for (int64_t i = rank; i-- > 0;) {
        idx[i] = (rem % dims[i]) % t->dims[i];
        rem /= dims[i];
      }
      for (int64_t i = 0; i < rank; ++i)
        src = src * t->dims[i] + idx[i];
      appendElem(out, *t, src);
    }
    return out;
  }

  /// Pad of a constant with a constant (Funnel's mask of ones padded with
  /// a zero row and column, F.pad of new_ones).
  Expected<ConstTensor> pad() {
    auto t = input(0), pads = input(1);
    auto mode = im.attrString(n, "mode", "constant");
    if (!t || !pads || !mode)
      return llvm::joinErrors(
          llvm::joinErrors(t ? Error::success() : t.takeError(),
                           pads ? Error::success() : pads.takeError()),
          mode ? Error::success() : mode.takeError());
    if (*mode != "constant")
      return im.fail(n, "folds only mode 'constant' of a constant");
    const auto rank = static_cast<int64_t>(t->dims.size());
    if (t->batchAxis >= 0 || !t->batch.empty() || !pads->batch.empty() ||
        pads->isFloat())
      return im.fail(n, "folds only integer pads of a constant that does "
                        "not hold the batch");
    std::vector<int64_t> axes;
    if (im.hasInput(n, 3)) {
      auto a = input(3);
      if (!a)
        return a.takeError();
      for (int64_t v : a->ints)
        axes.push_back(v < 0 ? v + rank : v);
    } else {
      for (int64_t k = 0; k < rank; ++k)
        axes.push_back(k);
    }
    const auto count = static_cast<int64_t>(axes.size());
    if (pads->numel() != 2 * count)
      return im.fail(n, "needs two pads for each axis padded");
    std::vector<int64_t> before(rank, 0), dims = t->dims;
    for (int64_t k = 0; k < count; ++k) {
      int64_t a = axes[k], lo = pads->ints[k], hi = pads->ints[k + count];
      if (a < 0 || a >= rank || lo < 0 || hi < 0)
        return im.fail(n, "folds only non-negative pads of axes in range");
      if (lo > kMaxFoldElements || hi > kMaxFoldElements)
        return im.fail(n, "folds into too many elements");
      before[a] = lo;
      dims[a] += lo + hi;
    }
    if (Error e = checkSize(dims))
      return std::move(e);
    ConstTensor fill;
    if (im.hasInput(n, 2)) {
      auto c = input(2);
      if (!c)
        return c.takeError();
      if (c->numel() != 1 || !c->batch.empty())
        return im.fail(n, "needs a scalar constant_value");
      fill = *c;
    }
    ConstTensor out;
    out.type = t->type;
    out.dims = dims;
    std::vector<int64_t> at(rank, 0);
    for (int64_t e = 0, numel = prod(dims, 0, rank); e < numel; ++e) {
      int64_t src = 0;
      bool inside = true;
      for (int64_t k = 0; k < rank; ++k) {
        int64_t i = at[k] - before[k];
        inside = inside && i >= 0 && i < t->dims[k];
        src = src * t->dims[k] + i;
      }
      if (inside)
        appendElem(out, *t, src);
      else if (out.isFloat())
        out.floats.push_back(fill.numel() == 0 ? 0.0f
                             : fill.isFloat()  ? fill.floats[0]
                                               : float(fill.ints[0]));
      else
        out.ints.push_back(fill.numel() == 0 ? 0
                           : fill.isFloat()  ? int64_t(fill.floats[0])
                                             : fill.ints[0]);
      for (int64_t k = rank; k-- > 0;) {
        if (++at[k] < dims[k])
          break;
        at[k] = 0;
      }
    }
    return out;
  }
};

template <Expected<ConstTensor> (FillFolder::*Fold)()>
Expected<ConstTensor> viaFillFolder(Importer &im, const pb::NodeProto &n) {
  return (FillFolder(im, n).*Fold)();
}

} // namespace

llvm::ArrayRef<FoldRule> fillFoldRules() {
  static const FoldRule rules[] = {
      {"Range", true, viaFillFolder<&FillFolder::range>},
      {"ConstantOfShape", true, viaFillFolder<&FillFolder::constantOfShape>},
      {"Expand", false, viaFillFolder<&FillFolder::expand>},
      {"Tile", false, viaFillFolder<&FillFolder::tile>},
      {"Pad", false, viaFillFolder<&FillFolder::pad>},
  };
  return rules;
}

} // namespace memfit::onnximport
