//===- ComputeOps.cpp - Translating compute operators ---------------------===//
//
// Convolution, pooling, normalization, dense layers and activations. Each
// translator reads its operands through the Importer (which enforces their
// roles), fills OpAttrs completely (window attributes are resolved: auto_pad
// becomes explicit pads, absent strides and dilations become 1) and computes
// the output dims itself, so shapes never depend on what ONNX shape
// inference managed to infer.
//
// Training semantics: BatchNormalization in inference form becomes a
// training BatchNorm (scale and bias trainable, running mean and variance
// non-trainable state); Dropout is kept when the model trains with it and
// disappears where it is a no-op.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

namespace {

/// Takes the error out of any failed Expected among `es`.
template <typename... Ts> Error firstError(Expected<Ts> &...es) {
  Error err = Error::success();
  ((err =
        es ? std::move(err) : llvm::joinErrors(std::move(err), es.takeError())),
   ...);
  return err;
}

std::vector<int64_t> dimsOfValue(const Importer &im, ValueId v) {
  return im.g.values[v].dims;
}

//===----------------------------------------------------------------------===//
// Sliding windows (Conv, MaxPool, AveragePool)
//===----------------------------------------------------------------------===//

/// Bound on kernel extents, strides, dilations and pads: far beyond any
/// real model, small enough that window arithmetic cannot overflow.
constexpr int64_t kMaxWindow = int64_t(1) << 24;

struct Window {
  std::vector<int64_t> strides, pads, dilations, out;
  /// ONNX 1.12 shape inference sizes ceil-mode pools without dropping a
  /// last window that would start in the end padding; PyTorch (and later
  /// ONNX) drop it. memfit follows PyTorch and skips that comparison.
  bool inferenceDiffers = false;
};

Expected<Window> window(Importer &im, const pb::NodeProto &n,
                        const std::vector<int64_t> &in,
                        const std::vector<int64_t> &kernel, bool ceilMode) {
  size_t s = in.size();
  auto strides = im.attrInts(n, "strides");
  auto pads = im.attrInts(n, "pads");
  auto dilations = im.attrInts(n, "dilations");
  auto autoPad = im.attrString(n, "auto_pad", "NOTSET");
  if (Error e = firstError(strides, pads, dilations, autoPad))
    return e;
  Window w;
  w.strides = strides->value_or(std::vector<int64_t>(s, 1));
  w.dilations = dilations->value_or(std::vector<int64_t>(s, 1));
  w.pads = pads->value_or(std::vector<int64_t>(2 * s, 0));
  if (w.strides.size() != s || w.dilations.size() != s ||
      w.pads.size() != 2 * s || kernel.size() != s)
    return im.fail(n, llvm::formatv("kernel, strides, dilations and pads must "
                                    "have {0} entries ({1} for pads), one per "
                                    "spatial axis",
                                    s, 2 * s));
  for (size_t i = 0; i < s; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1 ||
        w.pads[i] < 0 || w.pads[s + i] < 0 || kernel[i] > kMaxWindow ||
        w.dilations[i] > kMaxWindow || w.strides[i] > kMaxWindow ||
        w.pads[i] > kMaxWindow || w.pads[s + i] > kMaxWindow)
      return im.fail(n, "has an invalid kernel, stride, dilation or pad");
  const std::string &mode = *autoPad;
  bool same = mode == "SAME_UPPER" || mode == "SAME_LOWER";
  if (!same && mode != "VALID" && mode != "NOTSET" && !mode.empty())
    return im.fail(n, "auto_pad " + quoteName(mode) +
                          " is not one of "
                          "NOTSET, VALID, "
                          "SAME_UPPER, SAME_LOWER");
  bool explicitPads = mode == "NOTSET" || mode.empty();
  if (!explicitPads && llvm::any_of(w.pads, [](int64_t p) { return p != 0; }))
    return im.fail(n, "gives both pads and auto_pad " + mode);
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
      return im.fail(n, llvm::formatv("window of extent {0} on axis {1} is "
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
Expected<std::vector<int64_t>> spatialInput(Importer &im,
                                            const pb::NodeProto &n,
                                            const std::vector<int64_t> &xd) {
  if (xd.size() < 3)
    return im.fail(n, "input of shape " + dimsStr(xd) +
                          " must be N x C x D1 x ... with at least one "
                          "spatial axis");
  return std::vector<int64_t>(xd.begin() + 2, xd.end());
}

//===----------------------------------------------------------------------===//
// Conv and pooling
//===----------------------------------------------------------------------===//

Error importConv(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto w = im.weight(n, 1, WeightInit::HeNormal, true);
  auto group = im.attrInt(n, "group", 1);
  auto kattr = im.attrInts(n, "kernel_shape");
  if (Error e = firstError(x, w, group, kattr))
    return e;
  std::vector<ValueId> inputs = {*x, *w};
  if (im.hasInput(n, 2)) {
    auto b = im.weight(n, 2, WeightInit::Zeros, true);
    if (!b)
      return b.takeError();
    inputs.push_back(*b);
  }
  std::vector<int64_t> xd = dimsOfValue(im, *x), wd = dimsOfValue(im, *w);
  auto in = spatialInput(im, n, xd);
  if (!in)
    return in.takeError();
  if (wd.size() != xd.size())
    return im.fail(n, "weight of shape " + dimsStr(wd) +
                          " does not match the input of shape " + dimsStr(xd));
  int64_t m = wd[0];
  if (*group < 1 || xd[1] != wd[1] * *group || m % *group != 0)
    return im.fail(n, llvm::formatv("input channels {0}, weight shape {1} "
                                    "and group {2} do not agree",
                                    xd[1], dimsStr(wd), *group));
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  if (*kattr && **kattr != kernel)
    return im.fail(n, "kernel_shape " + dimsStr(**kattr) +
                          " does not match the weight of shape " + dimsStr(wd));
  if (inputs.size() == 3 && dimsOfValue(im, inputs[2]) != std::vector{m})
    return im.fail(n, "bias of shape " + dimsStr(dimsOfValue(im, inputs[2])) +
                          llvm::formatv(" must be [{0}]", m).str());
  auto win = window(im, n, *in, kernel, false);
  if (!win)
    return win.takeError();
  OpAttrs a;
  a.kernel = kernel;
  a.strides = win->strides;
  a.pads = win->pads;
  a.dilations = win->dilations;
  a.group = *group;
  std::vector<int64_t> out = {xd[0], m};
  out.insert(out.end(), win->out.begin(), win->out.end());
  return im.emit(n, OpKind::Conv, inputs, {{n.output(0), out}}, a).takeError();
}

Error importPool(Importer &im, const pb::NodeProto &n) {
  bool isMax = n.op_type() == "MaxPool";
  auto x = im.activation(n, 0);
  auto kernel = im.attrInts(n, "kernel_shape");
  auto ceilMode = im.attrInt(n, "ceil_mode", 0);
  auto countPad = im.attrInt(n, "count_include_pad", 0);
  if (Error e = firstError(x, kernel, ceilMode, countPad))
    return e;
  if (!*kernel)
    return im.fail(n, "has no kernel_shape");
  if (isMax && im.outputUsed(n, 1))
    return im.fail(n, "the Indices output is used; memfit supports only the "
                      "first output of MaxPool");
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  auto in = spatialInput(im, n, xd);
  if (!in)
    return in.takeError();
  auto win = window(im, n, *in, **kernel, *ceilMode != 0);
  if (!win)
    return win.takeError();
  OpAttrs a;
  a.kernel = **kernel;
  a.strides = win->strides;
  a.pads = win->pads;
  a.dilations = win->dilations;
  a.ceilMode = *ceilMode != 0;
  a.countIncludePad = !isMax && *countPad != 0;
  std::vector<int64_t> out = {xd[0], xd[1]};
  out.insert(out.end(), win->out.begin(), win->out.end());
  return im
      .emit(n, isMax ? OpKind::MaxPool : OpKind::AveragePool, {*x},
            {{n.output(0), out}}, a, win->inferenceDiffers)
      .takeError();
}

std::vector<int64_t> globalPooled(const std::vector<int64_t> &xd) {
  std::vector<int64_t> out(xd.size(), 1);
  out[0] = xd[0];
  out[1] = xd[1];
  return out;
}

Error importGlobalAveragePool(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  if (!x)
    return x.takeError();
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  if (auto in = spatialInput(im, n, xd); !in)
    return in.takeError();
  return im
      .emit(n, OpKind::GlobalAveragePool, {*x},
            {{n.output(0), globalPooled(xd)}})
      .takeError();
}

/// ReduceMean over exactly the spatial axes is a global average pool; with
/// keepdims=0 the pooled N x C x 1 x ... is then reshaped to N x C.
Error importReduceMean(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto axes = im.attrInts(n, "axes");
  auto keep = im.attrInt(n, "keepdims", 1);
  if (Error e = firstError(x, axes, keep))
    return e;
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  auto rank = static_cast<int64_t>(xd.size());
  std::vector<int64_t> norm;
  for (int64_t a : axes->value_or(std::vector<int64_t>()))
    norm.push_back(a < 0 ? a + rank : a);
  std::sort(norm.begin(), norm.end());
  norm.erase(std::unique(norm.begin(), norm.end()), norm.end());
  std::vector<int64_t> spatial;
  for (int64_t a = 2; a < rank; ++a)
    spatial.push_back(a);
  if (rank < 3 || norm != spatial)
    return im.fail(n, "reduces over axes " +
                          (*axes ? dimsStr(**axes) : std::string("(all)")) +
                          " of shape " + dimsStr(xd) +
                          "; memfit supports ReduceMean only over all spatial "
                          "axes (a global average pool)");
  std::vector<int64_t> pooled = globalPooled(xd);
  if (*keep)
    return im.emit(n, OpKind::GlobalAveragePool, {*x}, {{n.output(0), pooled}})
        .takeError();
  std::string mid = n.output(0) + "#pooled";
  auto gap = im.emit(n, OpKind::GlobalAveragePool, {*x}, {{mid, pooled}});
  if (!gap)
    return gap.takeError();
  OpAttrs a;
  a.shape = {xd[0], xd[1]};
  std::string name = n.name().empty() ? std::string() : n.name() + "#flatten";
  return im
      .emit(n, OpKind::Reshape, {im.g.ops[*gap].outputs[0]},
            {{n.output(0), a.shape}}, a, false, name)
      .takeError();
}

//===----------------------------------------------------------------------===//
// Normalization and Dropout
//===----------------------------------------------------------------------===//

Error importBatchNorm(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto scale = im.weight(n, 1, WeightInit::Ones, true);
  auto bias = im.weight(n, 2, WeightInit::Zeros, true);
  auto mean = im.weight(n, 3, WeightInit::Zeros, false);
  auto var = im.weight(n, 4, WeightInit::Ones, false);
  auto eps = im.attrFloat(n, "epsilon", 1e-5f);
  auto momentum = im.attrFloat(n, "momentum", 0.9f);
  auto spatial = im.attrInt(n, "spatial", 1);
  if (Error e = firstError(x, scale, bias, mean, var, eps, momentum, spatial))
    return e;
  if (*spatial == 0)
    return im.fail(n, "spatial=0 (per-activation statistics) is not "
                      "supported");
  for (int i = 1; i < n.output_size(); ++i)
    if (im.outputUsed(n, i))
      return im.fail(
          n, llvm::formatv("output {0} (running or saved statistics) is "
                           "used; memfit keeps the statistics inside the "
                           "BatchNorm op",
                           i));
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  if (xd.size() < 2)
    return im.fail(n, "input of shape " + dimsStr(xd) + " has no channel axis");
  for (ValueId p : {*scale, *bias, *mean, *var})
    if (dimsOfValue(im, p) != std::vector<int64_t>{xd[1]})
      return im.fail(n, "parameter " + quoteName(im.g.values[p].name) +
                            " of shape " + dimsStr(dimsOfValue(im, p)) +
                            llvm::formatv(" must be [{0}]", xd[1]).str());
  OpAttrs a;
  a.epsilon = *eps;
  a.momentum = *momentum;
  return im
      .emit(n, OpKind::BatchNorm, {*x, *scale, *bias, *mean, *var},
            {{n.output(0), xd}}, a)
      .takeError();
}

Error importLRN(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto size = im.attrInt(n, "size", 0);
  auto alpha = im.attrFloat(n, "alpha", 1e-4f);
  auto beta = im.attrFloat(n, "beta", 0.75f);
  auto bias = im.attrFloat(n, "bias", 1.0f);
  if (Error e = firstError(x, size, alpha, beta, bias))
    return e;
  if (*size < 1)
    return im.fail(n, "size must be a positive integer");
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  if (auto in = spatialInput(im, n, xd); !in)
    return in.takeError();
  OpAttrs a;
  a.size = *size;
  a.alpha = *alpha;
  a.beta = *beta;
  a.bias = *bias;
  return im.emit(n, OpKind::LRN, {*x}, {{n.output(0), xd}}, a).takeError();
}

/// Opset 12 and later say whether Dropout trains (training_mode); without
/// it, or with it false, the node is the identity and disappears. Before
/// opset 12 the node stands for the network's dropout layer, applied in
/// training, so it is kept.
Error importDropout(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  if (!x)
    return x.takeError();
  float ratio = 0.5f;
  bool training = true;
  if (im.opset >= 12) {
    if (im.hasInput(n, 1)) {
      auto r = im.scalarFloat(n, 1);
      if (!r)
        return r.takeError();
      ratio = *r;
    }
    training = false;
    if (im.hasInput(n, 2)) {
      auto t = im.constant(n, 2);
      if (!t)
        return t.takeError();
      if ((*t)->isFloat() || (*t)->numel() != 1)
        return im.fail(n, "training_mode must be a boolean scalar");
      training = (*t)->ints[0] != 0;
    }
  } else {
    auto r = im.attrFloat(n, "ratio", 0.5f);
    if (!r)
      return r.takeError();
    ratio = *r;
  }
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return im.fail(n, llvm::formatv("ratio {0} is not in [0, 1)", ratio));
  if (im.outputUsed(n, 1))
    return im.fail(n, "the mask output is used; memfit supports only the "
                      "first output of Dropout");
  if (!training || ratio == 0.0f) {
    im.alias(n.output(0), n.input(0));
    return Error::success();
  }
  OpAttrs a;
  a.ratio = ratio;
  return im
      .emit(n, OpKind::Dropout, {*x}, {{n.output(0), dimsOfValue(im, *x)}}, a)
      .takeError();
}

//===----------------------------------------------------------------------===//
// Dense layers
//===----------------------------------------------------------------------===//

Error importGemm(Importer &im, const pb::NodeProto &n) {
  auto a = im.activation(n, 0);
  auto b = im.weight(n, 1, WeightInit::GlorotUniform, true);
  auto alpha = im.attrFloat(n, "alpha", 1.0f);
  auto beta = im.attrFloat(n, "beta", 1.0f);
  auto transA = im.attrInt(n, "transA", 0);
  auto transB = im.attrInt(n, "transB", 0);
  if (Error e = firstError(a, b, alpha, beta, transA, transB))
    return e;
  std::vector<ValueId> inputs = {*a, *b};
  if (im.hasInput(n, 2)) {
    auto c = im.weight(n, 2, WeightInit::Zeros, true);
    if (!c)
      return c.takeError();
    inputs.push_back(*c);
  }
  std::vector<int64_t> ad = dimsOfValue(im, *a), bd = dimsOfValue(im, *b);
  if (ad.size() != 2 || bd.size() != 2)
    return im.fail(n, "operands of shapes " + dimsStr(ad) + " and " +
                          dimsStr(bd) + " must both be matrices");
  if (*transA)
    return im.fail(n, "transA=1 would move the batch off axis 0 of A");
  int64_t k = *transB ? bd[1] : bd[0], cols = *transB ? bd[0] : bd[1];
  if (k != ad[1])
    return im.fail(n, "A of shape " + dimsStr(ad) + " and B of shape " +
                          dimsStr(bd) + (*transB ? " (transposed)" : "") +
                          " do not multiply");
  if (inputs.size() == 3) {
    std::vector<int64_t> cd = dimsOfValue(im, inputs[2]);
    while (!cd.empty() && cd.front() == 1)
      cd.erase(cd.begin());
    if (cd.size() > 1 || (cd.size() == 1 && cd[0] != cols))
      return im.fail(n, "bias C of shape " +
                            dimsStr(dimsOfValue(im, inputs[2])) +
                            llvm::formatv(" must broadcast per output "
                                          "feature ([{0}] or [1, {0}])",
                                          cols)
                                .str());
  }
  OpAttrs at;
  at.alpha = *alpha;
  at.beta = *beta;
  at.transA = false;
  at.transB = *transB != 0;
  return im.emit(n, OpKind::Gemm, inputs, {{n.output(0), {ad[0], cols}}}, at)
      .takeError();
}

Error importMatMul(Importer &im, const pb::NodeProto &n) {
  auto a = im.activation(n, 0);
  auto b = im.weight(n, 1, WeightInit::GlorotUniform, true);
  if (Error e = firstError(a, b))
    return e;
  std::vector<int64_t> ad = dimsOfValue(im, *a), bd = dimsOfValue(im, *b);
  if (ad.size() < 2 || bd.size() != 2 || ad.back() != bd[0])
    return im.fail(n, "activation of shape " + dimsStr(ad) +
                          " and weight of shape " + dimsStr(bd) +
                          " do not multiply (memfit supports N x ... x K "
                          "times a K x M weight)");
  std::vector<int64_t> out = ad;
  out.back() = bd[1];
  return im.emit(n, OpKind::MatMul, {*a, *b}, {{n.output(0), out}}).takeError();
}

//===----------------------------------------------------------------------===//
// Activations and Softmax
//===----------------------------------------------------------------------===//

Error importUnary(Importer &im, const pb::NodeProto &n) {
  static const std::map<std::string, OpKind> kinds = {
      {"Relu", OpKind::Relu},
      {"Sigmoid", OpKind::Sigmoid},
      {"Tanh", OpKind::Tanh},
      {"LeakyRelu", OpKind::LeakyRelu}};
  auto x = im.activation(n, 0);
  auto alpha = im.attrFloat(n, "alpha", 0.01f);
  if (Error e = firstError(x, alpha))
    return e;
  OpAttrs a;
  if (n.op_type() == "LeakyRelu")
    a.alpha = *alpha;
  return im
      .emit(n, kinds.at(n.op_type()), {*x},
            {{n.output(0), dimsOfValue(im, *x)}}, a)
      .takeError();
}

Error importClip(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  if (!x)
    return x.takeError();
  float lo = std::numeric_limits<float>::lowest();
  float hi = std::numeric_limits<float>::max();
  if (im.opset >= 11) {
    for (int i : {1, 2}) {
      if (!im.hasInput(n, i))
        continue;
      auto v = im.scalarFloat(n, i);
      if (!v)
        return v.takeError();
      (i == 1 ? lo : hi) = *v;
    }
  } else {
    auto mn = im.attrFloat(n, "min", lo);
    auto mx = im.attrFloat(n, "max", hi);
    if (Error e = firstError(mn, mx))
      return e;
    lo = *mn;
    hi = *mx;
  }
  OpAttrs a;
  a.minValue = lo;
  a.maxValue = hi;
  return im.emit(n, OpKind::Clip, {*x}, {{n.output(0), dimsOfValue(im, *x)}}, a)
      .takeError();
}

Error importSoftmax(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto axisAttr = im.attrInt(n, "axis", im.opset >= 13 ? -1 : 1);
  if (Error e = firstError(x, axisAttr))
    return e;
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis >= rank)
    return im.fail(n, llvm::formatv("axis {0} is out of range for shape {1}",
                                    *axisAttr, dimsStr(xd)));
  if (axis == 0)
    return im.fail(n, "normalizes across the batch (axis 0); memfit keeps "
                      "samples independent");
  int64_t trailing = 1;
  for (int64_t i = axis + 1; i < rank; ++i)
    trailing *= xd[i];
  if (im.opset < 13 && trailing != 1)
    return im.fail(n, "before opset 13 normalizes over all axes from axis " +
                          std::to_string(axis) +
                          " on; memfit supports that only when the axes "
                          "after it have size 1");
  OpAttrs a;
  a.axis = axis;
  OpKind kind = n.op_type() == "Softmax" ? OpKind::Softmax : OpKind::LogSoftmax;
  return im.emit(n, kind, {*x}, {{n.output(0), xd}}, a).takeError();
}

} // namespace

void addComputeTranslators(std::map<std::string, TranslateFn> &t) {
  t["Conv"] = importConv;
  t["MaxPool"] = importPool;
  t["AveragePool"] = importPool;
  t["GlobalAveragePool"] = importGlobalAveragePool;
  t["ReduceMean"] = importReduceMean;
  t["BatchNormalization"] = importBatchNorm;
  t["LRN"] = importLRN;
  t["Dropout"] = importDropout;
  t["Gemm"] = importGemm;
  t["MatMul"] = importMatMul;
  t["Relu"] = importUnary;
  t["LeakyRelu"] = importUnary;
  t["Sigmoid"] = importUnary;
  t["Tanh"] = importUnary;
  t["Clip"] = importClip;
  t["Softmax"] = importSoftmax;
  t["LogSoftmax"] = importSoftmax;
}

const std::map<std::string, TranslateFn> &translators() {
  static const std::map<std::string, TranslateFn> table = [] {
    std::map<std::string, TranslateFn> t;
    addComputeTranslators(t);
    addShapeTranslators(t);
    return t;
  }();
  return table;
}

} // namespace memfit::onnximport
