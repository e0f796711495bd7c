//===- FoldShapes.cpp - Folding shape arithmetic at import ----------------===//
//
// Exporters compute reshape targets at run time: PyTorch writes
// x.view(x.size(0), -1) as Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
// These nodes are evaluated here into constants, so the graph keeps only the
// ops that compute on data. The batch size stays symbolic through folding:
// Shape of a batched value yields an element that *is* the batch (not the
// number it has today), so a reshape target built from it still follows the
// batch when a later pass evaluates the graph at another sub-batch.
// Arithmetic that would combine the batch with other numbers is refused
// (FoldArith.cpp) rather than folded into a number that is wrong at any
// other batch.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Fold.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <optional>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

namespace {

/// Normalizes a possibly negative axis against `rank`; false if out of range.
bool normAxis(int64_t &axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  return axis >= 0 && axis < rank;
}

class ShapeFolder : FoldBase {
public:
  using FoldBase::FoldBase;

  Expected<ConstTensor> constantNode() {
    for (const pb::AttributeProto &a : n.attribute()) {
      ConstTensor t;
      if (a.name() == "value") {
        return readConstant(a.t(), im.ext, im.file);
      } else if (a.name() == "value_float") {
        t.type = pb::TensorProto::FLOAT;
        t.floats = {a.f()};
      } else if (a.name() == "value_floats") {
        t.type = pb::TensorProto::FLOAT;
        t.floats.assign(a.floats().begin(), a.floats().end());
        t.dims = {a.floats_size()};
      } else if (a.name() == "value_int") {
        t.ints = {a.i()};
      } else if (a.name() == "value_ints") {
        t.ints.assign(a.ints().begin(), a.ints().end());
        t.dims = {a.ints_size()};
      } else {
        return im.fail(n, "attribute '" + escapeName(a.name()) +
                              "' is not supported");
      }
      return t;
    }
    return im.fail(n, "has no value");
  }

  Expected<ConstTensor> shape() {
    bool batched = false;
    auto dims = im.dimsOf(n, n.input(0), batched);
    if (!dims)
      return dims.takeError();
    auto rank = static_cast<int64_t>(dims->size());
    auto start = im.attrInt(n, "start", 0);
    auto end = im.attrInt(n, "end", rank);
    if (!start || !end)
      return llvm::joinErrors(start.takeError(), end.takeError());
    auto clampAxis = [&](int64_t a) {
      if (a < 0)
        a += rank;
      return std::clamp<int64_t>(a, 0, rank);
    };
    int64_t s = clampAxis(*start), e = clampAxis(*end);
    ConstTensor t;
    // A constant filled over the batch stores extent 1 there.
    int32_t filled = im.constBatchAxis(n.input(0));
    for (int64_t i = s; i < e; ++i) {
      bool isBatch =
          ((batched && i == im.batchAxisOf(n.input(0))) || i == filled) &&
          !im.traceBatch;
      t.ints.push_back(i == filled ? im.g.batch : (*dims)[i]);
      t.batch.push_back(isBatch);
    }
    t.dims = {static_cast<int64_t>(t.ints.size())};
    return t;
  }

  Expected<ConstTensor> gather() {
    auto data = input(0);
    auto idx = input(1);
    auto axisAttr = im.attrInt(n, "axis", 0);
    if (!data || !idx || !axisAttr)
      return llvm::joinErrors(
          llvm::joinErrors(data.takeError(), idx.takeError()),
          axisAttr.takeError());
    if (idx->isFloat() || !idx->batch.empty())
      return im.fail(n, "indices must be integer constants");
    int64_t axis = *axisAttr, rank = static_cast<int64_t>(data->dims.size());
    if (!normAxis(axis, rank))
      return im.fail(n, llvm::formatv("axis {0} is out of range for rank {1}",
                                      *axisAttr, rank));
    ConstTensor out;
    out.type = data->type;
    out.dims.assign(data->dims.begin(), data->dims.begin() + axis);
    out.dims.insert(out.dims.end(), idx->dims.begin(), idx->dims.end());
    out.dims.insert(out.dims.end(), data->dims.begin() + axis + 1,
                    data->dims.end());
    if (Error e = checkSize(out.dims))
      return e;
    reserveElems(out, prod(out.dims, 0, out.dims.size()));
    int64_t outer = prod(data->dims, 0, axis), extent = data->dims[axis];
    int64_t inner = prod(data->dims, axis + 1, data->dims.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < idx->numel(); ++j) {
        int64_t v = idx->ints[j];
        if (v < -extent || v >= extent)
          return im.fail(n, llvm::formatv("index {0} is out of range for "
                                          "an axis of size {1}",
                                          v, extent));
        if (v < 0)
          v += extent;
        for (int64_t k = 0; k < inner; ++k)
          appendElem(out, *data, (o * extent + v) * inner + k);
      }
    return out;
  }

  Expected<std::optional<std::vector<int64_t>>> axesOperand() {
    if (im.opset < 13)
      return im.attrInts(n, "axes");
    if (!im.hasInput(n, 1))
      return std::optional<std::vector<int64_t>>();
    auto v = im.intVector(n, 1);
    if (!v)
      return v.takeError();
    return std::optional<std::vector<int64_t>>(std::move(*v));
  }

  Expected<ConstTensor> squeeze() { return squeezeOrUnsqueeze(false); }

  /// The axes before `axis` merged, and those after (BART's decoder flattens
  /// its position ids).
  Expected<ConstTensor> flatten() {
    auto t = input(0);
    auto axis = im.attrInt(n, "axis", 1);
    if (!t || !axis)
      return llvm::joinErrors(t.takeError(), axis.takeError());
    auto rank = static_cast<int64_t>(t->dims.size());
    int64_t a = *axis < 0 ? *axis + rank : *axis;
    if (a < 0 || a > rank)
      return im.fail(
          n,
          llvm::formatv("axis {0} is invalid for rank {1}", *axis, rank).str());
    ConstTensor out = std::move(*t);
    out.dims = {prod(out.dims, 0, a), prod(out.dims, a, out.dims.size())};
    return out;
  }
  Expected<ConstTensor> unsqueeze() { return squeezeOrUnsqueeze(true); }

private:
  Expected<ConstTensor> squeezeOrUnsqueeze(bool unsqueeze) {
    auto t = input(0);
    if (!t)
      return t.takeError();
    auto axes = axesOperand();
    if (!axes)
      return axes.takeError();
    auto rank = static_cast<int64_t>(t->dims.size());
    std::vector<int64_t> dims;
    if (unsqueeze) {
      if (!*axes)
        return im.fail(n, "has no axes");
      int64_t outRank = rank + static_cast<int64_t>((*axes)->size());
      std::vector<bool> isNew(outRank, false);
      for (int64_t a : **axes) {
        int64_t ax = a;
        if (!normAxis(ax, outRank) || isNew[ax])
          return im.fail(n, llvm::formatv("axis {0} is invalid", a));
        isNew[ax] = true;
      }
      size_t next = 0;
      for (int64_t i = 0; i < outRank; ++i)
        dims.push_back(isNew[i] ? 1 : t->dims[next++]);
    } else {
      std::vector<bool> drop(rank, false);
      if (!*axes) {
        for (int64_t i = 0; i < rank; ++i)
          drop[i] = t->dims[i] == 1;
      } else {
        for (int64_t a : **axes) {
          int64_t ax = a;
          if (!normAxis(ax, rank) || t->dims[ax] != 1)
            return im.fail(n, llvm::formatv("cannot squeeze axis {0} of "
                                            "shape {1}",
                                            a, dimsStr(t->dims)));
          drop[ax] = true;
        }
      }
      for (int64_t i = 0; i < rank; ++i)
        if (!drop[i])
          dims.push_back(t->dims[i]);
    }
    ConstTensor out = *t;
    out.dims = std::move(dims);
    return out;
  }

public:
  Expected<ConstTensor> concat() {
    std::vector<ConstTensor> ins;
    for (int i = 0; i < n.input_size(); ++i) {
      auto t = input(i);
      if (!t)
        return t.takeError();
      ins.push_back(std::move(*t));
    }
    auto axisAttr = im.attrInt(n, "axis", 0);
    if (!axisAttr)
      return axisAttr.takeError();
    if (ins.empty())
      return im.fail(n, "has no operands");
    auto rank = static_cast<int64_t>(ins[0].dims.size());
    int64_t axis = *axisAttr;
    if (!normAxis(axis, rank))
      return im.fail(n, llvm::formatv("axis {0} is out of range for rank {1}",
                                      *axisAttr, rank));
    ConstTensor out;
    out.type = ins[0].type;
    out.dims = ins[0].dims;
    out.dims[axis] = 0;
    for (const ConstTensor &t : ins) {
      bool ok = t.type == out.type && t.dims.size() == out.dims.size();
      for (int64_t i = 0; ok && i < rank; ++i)
        ok = i == axis || t.dims[i] == out.dims[i];
      if (!ok)
        return im.fail(n, "operands have mismatched types or shapes");
      out.dims[axis] += t.dims[axis];
    }
    if (Error e = checkSize(out.dims))
      return e;
    int64_t outer = prod(out.dims, 0, axis);
    for (int64_t o = 0; o < outer; ++o)
      for (const ConstTensor &t : ins) {
        int64_t block = prod(t.dims, axis, t.dims.size());
        for (int64_t k = 0; k < block; ++k)
          appendElem(out, t, o * block + k);
      }
    return out;
  }

  Expected<ConstTensor> slice() {
    auto t = input(0);
    if (!t)
      return t.takeError();
    auto rank = static_cast<int64_t>(t->dims.size());
    auto args = sliceArgsOf(im, n);
    if (!args)
      return args.takeError();
    if (args->batchBound)
      return im.fail(n, "slices a constant at the batch size; memfit keeps "
                        "the batch symbolic and cannot fold this");
    const std::vector<int64_t> &starts = args->starts, &ends = args->ends,
                               &axes = args->axes, &steps = args->steps;
    std::vector<int64_t> first(rank, 0), step(rank, 1), dims = t->dims;
    std::vector<bool> seen(rank, false);
    for (size_t j = 0; j < starts.size(); ++j) {
      int64_t a = axes[j];
      if (!normAxis(a, rank) || seen[a] || steps[j] == 0)
        return im.fail(n, llvm::formatv("axis {0} or step {1} is invalid",
                                        axes[j], steps[j]));
      seen[a] = true;
      int64_t d = t->dims[a], s = starts[j], e = ends[j], st = steps[j];
      if (s < 0)
        s += d;
      if (e < 0)
        e += d;
      // |step| as unsigned: -INT64_MIN does not fit an int64_t.
      uint64_t mag =
          st > 0 ? static_cast<uint64_t>(st) : 0 - static_cast<uint64_t>(st);
      int64_t count = 0;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
        if (e > s)
          count =
              static_cast<int64_t>(static_cast<uint64_t>(e - s - 1) / mag) + 1;
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
        if (s > e)
          count =
              static_cast<int64_t>(static_cast<uint64_t>(s - e - 1) / mag) + 1;
      }
      first[a] = s;
      step[a] = st;
      dims[a] = count;
    }
    ConstTensor out;
    out.type = t->type;
    out.dims = dims;
    auto numel = checkedProduct(dims);
    if (!numel || *numel > kMaxFoldElements)
      return im.fail(n, "slices out more than memfit folds");
    reserveElems(out, *numel);
    std::vector<int64_t> idx(rank, 0), stride(rank, 1);
    for (int64_t i = rank - 2; i >= 0; --i)
      stride[i] = stride[i + 1] * t->dims[i + 1];
    for (int64_t k = 0; k < *numel; ++k) {
      int64_t src = 0;
      for (int64_t i = 0; i < rank; ++i)
        src += (first[i] + idx[i] * step[i]) * stride[i];
      appendElem(out, *t, src);
      for (int64_t i = rank - 1; i >= 0; --i) {
        if (++idx[i] < dims[i])
          break;
        idx[i] = 0;
      }
    }
    return out;
  }

  Expected<ConstTensor> reshape() {
    auto t = input(0);
    if (t && t->batchAxis == 0)
      return reshapeFilled(std::move(*t));
    auto shapeOp = im.intVector(n, 1);
    auto allowZero = im.attrInt(n, "allowzero", 0);
    if (!t || !shapeOp || !allowZero)
      return llvm::joinErrors(
          llvm::joinErrors(t.takeError(), shapeOp.takeError()),
          allowZero.takeError());
    std::vector<int64_t> dims = *shapeOp;
    int64_t known = 1, inferAt = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && !*allowZero) {
        if (i >= t->dims.size())
          return im.fail(n, "target shape copies a dimension the input lacks");
        dims[i] = t->dims[i];
      }
      if (dims[i] == -1 && inferAt < 0)
        inferAt = static_cast<int64_t>(i);
      else if (dims[i] < 0)
        return im.fail(n, "target shape " + dimsStr(*shapeOp) + " is invalid");
      else if (__builtin_mul_overflow(known, dims[i], &known))
        return im.fail(n, "target shape " + dimsStr(*shapeOp) + " overflows");
    }
    if (inferAt >= 0) {
      if (known == 0 || t->numel() % known != 0)
        return im.fail(n, "cannot reshape " + dimsStr(t->dims) + " to " +
                              dimsStr(*shapeOp));
      dims[inferAt] = t->numel() / known;
    }
    auto total = checkedProduct(dims);
    if (!total || *total != t->numel())
      return im.fail(n, "cannot reshape " + dimsStr(t->dims) + " to " +
                            dimsStr(*shapeOp));
    ConstTensor out = *t;
    out.dims = std::move(dims);
    return out;
  }

  /// A constant filled over the batch on axis 0 (DistilBERT's mask of
  /// ones, mask.view(N, 1, 1, T)) reshaped to a target that keeps the batch
  /// alone on axis 0: the stored extent 1 stays there.
  Expected<ConstTensor> reshapeFilled(ConstTensor t) {
    auto target = im.constant(n, 1);
    if (!target)
      return target.takeError();
    const ConstTensor &s = **target;
    std::vector<int64_t> dims;
    int64_t known = 1, inferAt = -1;
    bool ok = !s.isFloat() && s.dims.size() == 1 && s.numel() >= 1 &&
              (s.isBatch(0) || s.ints[0] == 0);
    for (int64_t i = 0; ok && i < s.numel(); ++i) {
      int64_t d = i == 0 ? 1 : s.ints[i];
      if (i > 0 && d == 0 && i < static_cast<int64_t>(t.dims.size()))
        d = t.dims[i];
      ok = i == 0 || !s.isBatch(i);
      if (d == -1 && inferAt < 0)
        inferAt = i;
      else if (d <= 0)
        ok = false;
      else
        known *= d;
      dims.push_back(d);
    }
    if (ok && inferAt >= 0) {
      ok = t.numel() % known == 0;
      dims[inferAt] = ok ? t.numel() / known : 1;
    }
    auto total = checkedProduct(dims);
    // Merged with other axes ([N, heads, T] to [N * heads, 1, T], BLOOM's
    // ALiBi in transformers 4): each sample's rows, known once the graph
    // is read at the planned batch.
    if (!ok || !total || *total != t.numel())
      im.countedBatch = true;
    if (!ok || !total || *total != t.numel())
      return im.fail(n, "reshapes a constant filled over the batch of shape " +
                            dimsStr(t.dims) + " (the batch stored as 1) to " +
                            s.str() +
                            "; memfit supports such reshapes that keep the "
                            "batch alone on axis 0");
    t.dims = std::move(dims);
    return t;
  }
};

template <Expected<ConstTensor> (ShapeFolder::*Fold)()>
Expected<ConstTensor> viaShapeFolder(Importer &im, const pb::NodeProto &n) {
  return (ShapeFolder(im, n).*Fold)();
}

} // namespace

llvm::ArrayRef<FoldRule> shapeFoldRules() {
  static const FoldRule rules[] = {
      {"Constant", true, viaShapeFolder<&ShapeFolder::constantNode>},
      {"Shape", true, viaShapeFolder<&ShapeFolder::shape>},
      {"Concat", false, viaShapeFolder<&ShapeFolder::concat>},
      {"Reshape", false, viaShapeFolder<&ShapeFolder::reshape>},
      {"Gather", false, viaShapeFolder<&ShapeFolder::gather>},
      {"Unsqueeze", false, viaShapeFolder<&ShapeFolder::unsqueeze>},
      {"Squeeze", false, viaShapeFolder<&ShapeFolder::squeeze>},
      {"Flatten", false, viaShapeFolder<&ShapeFolder::flatten>},
      {"Slice", false, viaShapeFolder<&ShapeFolder::slice>},
  };
  return rules;
}

} // namespace memfit::onnximport
