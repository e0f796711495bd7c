//===- SliceArgs.cpp - Slice's and Split's operands, read once ------------===//
//
// The one reading of Slice's starts, ends, axes and steps and of Split's
// axis and sizes, for the operators (Layout.cpp) and the constant folder
// (compiler/onnx).
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/SliceArgs.h"

#include "compiler/ops/Families.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace memfit {

llvm::Expected<SliceArgs> sliceArgs(OnnxNode &node) {
  SliceArgs a;
  // A bound as an integer list, noting elements that are the batch.
  auto bound = [&](int i, std::vector<int64_t> &out) -> llvm::Error {
    auto c = node.intConstant(i);
    if (!c)
      return c.takeError();
    if (c->isFloat || c->dims.size() > 1)
      return node.fail("operand " + std::to_string(i) +
                       " must be a 1-D integer tensor");
    for (int64_t k = 0; k < c->numel(); ++k)
      a.batchBound |= c->isBatch(k);
    out = c->ints;
    return llvm::Error::success();
  };
  if (node.opset() >= 10) {
    if (llvm::Error e = bound(1, a.starts))
      return std::move(e);
    if (llvm::Error e = bound(2, a.ends))
      return std::move(e);
    for (int i : {3, 4})
      if (node.hasInput(i)) {
        auto v = node.intVector(i);
        if (!v)
          return v.takeError();
        (i == 3 ? a.axes : a.steps) = *v;
      }
  } else {
    auto s = node.attrInts("starts"), e = node.attrInts("ends"),
         x = node.attrInts("axes");
    if (llvm::Error err = ops::firstError(s, e, x))
      return std::move(err);
    a.starts = s->value_or(std::vector<int64_t>());
    a.ends = e->value_or(std::vector<int64_t>());
    a.axes = x->value_or(std::vector<int64_t>());
  }
  if (a.axes.empty())
    for (size_t i = 0; i < a.starts.size(); ++i)
      a.axes.push_back(static_cast<int64_t>(i));
  if (a.steps.empty())
    a.steps.assign(a.starts.size(), 1);
  if (a.ends.size() != a.starts.size() || a.axes.size() != a.starts.size() ||
      a.steps.size() != a.starts.size())
    return node.fail("starts, ends, axes and steps differ in length");
  return a;
}

llvm::Expected<SplitArgs> splitArgs(OnnxNode &node,
                                    const std::vector<int64_t> &dims) {
  auto axisAttr = node.attrInt("axis", 0);
  if (!axisAttr)
    return axisAttr.takeError();
  auto rank = static_cast<int64_t>(dims.size());
  SplitArgs a;
  a.axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (a.axis < 0 || a.axis >= rank)
    return node.fail(llvm::formatv("splits axis {0} of a tensor of rank {1}",
                                   *axisAttr, rank));
  const int64_t extent = dims[a.axis];
  std::vector<int64_t> &sizes = a.sizes;
  if (node.opset() >= 13 && node.hasInput(1)) {
    auto v = node.intVector(1);
    if (!v)
      return v.takeError();
    sizes = *v;
  } else if (node.opset() < 13) {
    auto v = node.attrInts("split");
    if (!v)
      return v.takeError();
    sizes = v->value_or(std::vector<int64_t>());
  }
  int outs = node.numOutputs();
  auto numOutputs = node.attrInt("num_outputs", 0);
  if (!numOutputs)
    return numOutputs.takeError();
  if (*numOutputs != 0) {
    if (!sizes.empty() || *numOutputs != outs || outs <= 0)
      return node.fail(llvm::formatv("num_outputs {0} with {1} outputs{2}",
                                     *numOutputs, outs,
                                     sizes.empty() ? "" : " and split sizes"));
    int64_t part = (extent + outs - 1) / outs;
    for (int i = 0; i < outs; ++i)
      sizes.push_back(
          std::max<int64_t>(0, std::min<int64_t>(part, extent - part * i)));
  }
  if (sizes.empty()) {
    if (outs == 0 || extent % outs)
      return node.fail(llvm::formatv("cannot split axis {0} of size {1} into "
                                     "{2} equal parts",
                                     a.axis, extent, outs));
    sizes.assign(outs, extent / outs);
  }
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 0)
      return node.fail("split sizes " + dimsStr(sizes) +
                       " hold a negative size");
    if (__builtin_add_overflow(total, v, &total))
      return node.fail("split sizes " + dimsStr(sizes) + " overflow");
  }
  if (static_cast<int>(sizes.size()) != outs || total != extent)
    return node.fail("split sizes " + dimsStr(sizes) + " do not cover axis " +
                     std::to_string(a.axis) + " of size " +
                     std::to_string(extent) + " in " + std::to_string(outs) +
                     " outputs");
  return a;
}

} // namespace memfit
