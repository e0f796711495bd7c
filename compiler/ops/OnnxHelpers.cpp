//===- OnnxHelpers.cpp - What the ONNX translations share -----------------===//
//
// Sliding windows (Conv, MaxPool, AveragePool): ONNX's attributes resolved
// and checked once, so shapes never depend on what ONNX shape inference
// managed to infer.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

#include <algorithm>
#include <limits>

namespace memfit::ops {

llvm::Expected<Window> window(OnnxNode &node, const std::vector<int64_t> &in,
                              const std::vector<int64_t> &kernel,
                              bool ceilMode) {
  size_t s = in.size();
  auto strides = node.attrInts("strides");
  auto pads = node.attrInts("pads");
  auto dilations = node.attrInts("dilations");
  auto autoPad = node.attrString("auto_pad", "NOTSET");
  if (llvm::Error e = firstError(strides, pads, dilations, autoPad))
    return e;
  Window w;
  w.strides = strides->value_or(std::vector<int64_t>(s, 1));
  w.dilations = dilations->value_or(std::vector<int64_t>(s, 1));
  w.pads = pads->value_or(std::vector<int64_t>(2 * s, 0));
  if (w.strides.size() != s || w.dilations.size() != s ||
      w.pads.size() != 2 * s || kernel.size() != s)
    return node.fail(llvm::formatv("kernel, strides, dilations and pads must "
                                   "have {0} entries ({1} for pads), one per "
                                   "spatial axis",
                                   s, 2 * s));
  for (size_t i = 0; i < s; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1 ||
        w.pads[i] < 0 || w.pads[s + i] < 0 || kernel[i] > kMaxWindow ||
        w.dilations[i] > kMaxWindow || w.strides[i] > kMaxWindow ||
        w.pads[i] > kMaxWindow || w.pads[s + i] > kMaxWindow)
      return node.fail("has an invalid kernel, stride, dilation or pad");
  const std::string &mode = *autoPad;
  bool same = mode == "SAME_UPPER" || mode == "SAME_LOWER";
  if (!same && mode != "VALID" && mode != "NOTSET" && !mode.empty())
    return node.fail("auto_pad " + quoteName(mode) +
                     " is not one of "
                     "NOTSET, VALID, "
                     "SAME_UPPER, SAME_LOWER");
  bool explicitPads = mode == "NOTSET" || mode.empty();
  if (!explicitPads && llvm::any_of(w.pads, [](int64_t p) { return p != 0; }))
    return node.fail("gives both pads and auto_pad " + mode);
  for (size_t i = 0; i < s; ++i) {
    int64_t eff = (kernel[i] - 1) * w.dilations[i] + 1, st = w.strides[i];
    int64_t &pb = w.pads[i], &pe = w.pads[s + i];
    if (same) {
      int64_t out = (in[i] + st - 1) / st;
      int64_t total = std::max<int64_t>(0, (out - 1) * st + eff - in[i]);
      pb = mode == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
      w.out.push_back(out);
      continue;
    }
    int64_t span = in[i] + pb + pe - eff;
    if (span < 0)
      return node.fail(llvm::formatv("window of extent {0} on axis {1} is "
                                     "larger than the padded input ({2})",
                                     eff, i + 2, in[i] + pb + pe));
    int64_t out = span / st + 1;
    if (ceilMode) {
      out = (span + st - 1) / st + 1;
      if ((out - 1) * st >= in[i] + pb) {
        --out;
        w.inferenceDiffers = true;
      }
    }
    w.out.push_back(out);
  }
  return w;
}

/// Spatial dims of an N x C x D1 x ... activation.
llvm::Expected<std::vector<int64_t>>
spatialInput(OnnxNode &node, const std::vector<int64_t> &xd) {
  if (xd.size() < 3)
    return node.fail("input of shape " + dimsStr(xd) +
                     " must be N x C x D1 x ... with at least one "
                     "spatial axis");
  return std::vector<int64_t>(xd.begin() + 2, xd.end());
}

//===----------------------------------------------------------------------===//
// Conv and pooling
//===----------------------------------------------------------------------===//

} // namespace memfit::ops
