//===- LayoutOps.cpp - Elementwise and layout operators -------------------===//
//
// Add/Sub/Mul, Sum, Concat, Flatten, Reshape, Pad and Cast on activations.
// These are where the batch could leave axis 0 (a Reshape merging it, a
// Concat or Pad along it, a Flatten before it); each such case is refused
// with the node named. Elementwise ops take two activations of one shape,
// or an activation and a scalar or per-channel weight; operands keep their
// ONNX order (Sub(w, x) is w - x).
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include "llvm/Support/FormatVariadic.h"

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

namespace {

std::vector<int64_t> dimsOfValue(const Importer &im, ValueId v) {
  return im.g.values[v].dims;
}

OpKind binaryKind(const std::string &op) {
  return op == "Add" ? OpKind::Add : op == "Sub" ? OpKind::Sub : OpKind::Mul;
}

Error importBinary(Importer &im, const pb::NodeProto &n) {
  if (n.input_size() != 2)
    return im.fail(n, "must have two operands");
  bool act0 = im.isActivation(n.input(0)), act1 = im.isActivation(n.input(1));
  OpKind kind = binaryKind(n.op_type());
  if (act0 && act1) {
    ValueId x = *im.activation(n, 0), y = *im.activation(n, 1);
    std::vector<int64_t> xd = dimsOfValue(im, x), yd = dimsOfValue(im, y);
    if (xd != yd)
      return im.fail(n, "combines activations of shapes " + dimsStr(xd) +
                            " and " + dimsStr(yd) +
                            "; memfit supports elementwise ops on activations "
                            "of the same shape");
    return im.emit(n, kind, {x, y}, {{n.output(0), xd}}).takeError();
  }
  if (!act0 && !act1)
    return im.activation(n, 0).takeError();
  int xi = act0 ? 0 : 1;
  auto x = im.activation(n, xi);
  if (!x)
    return x.takeError();
  WeightInit init = kind == OpKind::Mul ? WeightInit::Ones : WeightInit::Zeros;
  auto w = im.weight(n, 1 - xi, init, true);
  if (!w)
    return w.takeError();
  std::vector<int64_t> xd = dimsOfValue(im, *x), wd = dimsOfValue(im, *w);
  // Left-pad the weight's shape to the activation's rank (numpy
  // broadcasting), then it may vary only along the channel axis.
  bool ok = wd.size() <= xd.size();
  if (ok) {
    std::vector<int64_t> p(xd.size() - wd.size(), 1);
    p.insert(p.end(), wd.begin(), wd.end());
    for (size_t i = 0; i < p.size() && ok; ++i)
      ok = p[i] == 1 || (i == 1 && p[i] == xd[1]);
  }
  if (!ok && im.isDeclaredInput(n.input(1 - xi)))
    return im.extraDataInput(n, n.input(1 - xi));
  if (!ok)
    return im.fail(n, "weight " + quoteName(im.g.values[*w].name) +
                          " of shape " + dimsStr(wd) +
                          " does not broadcast per channel over the "
                          "activation of shape " +
                          dimsStr(xd) +
                          "; memfit supports scalar and per-channel weights");
  std::vector<ValueId> inputs =
      xi == 0 ? std::vector<ValueId>{*x, *w} : std::vector<ValueId>{*w, *x};
  return im.emit(n, kind, inputs, {{n.output(0), xd}}).takeError();
}

Error importSum(Importer &im, const pb::NodeProto &n) {
  std::vector<ValueId> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    auto x = im.activation(n, i);
    if (!x)
      return x.takeError();
    inputs.push_back(*x);
  }
  if (inputs.empty())
    return im.fail(n, "has no operands");
  std::vector<int64_t> xd = dimsOfValue(im, inputs[0]);
  for (ValueId v : inputs)
    if (dimsOfValue(im, v) != xd)
      return im.fail(n, "operands differ in shape (" + dimsStr(xd) + " and " +
                            dimsStr(dimsOfValue(im, v)) +
                            "); memfit supports Sum of same-shape "
                            "activations");
  if (inputs.size() == 1) {
    im.alias(n.output(0), n.input(0));
    return Error::success();
  }
  return im.emit(n, OpKind::Sum, inputs, {{n.output(0), xd}}).takeError();
}

Error importConcat(Importer &im, const pb::NodeProto &n) {
  std::vector<ValueId> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    auto x = im.activation(n, i);
    if (!x)
      return x.takeError();
    inputs.push_back(*x);
  }
  auto axisAttr = im.attrInt(n, "axis", 1);
  if (!axisAttr)
    return axisAttr.takeError();
  if (inputs.empty())
    return im.fail(n, "has no operands");
  std::vector<int64_t> out = dimsOfValue(im, inputs[0]);
  auto rank = static_cast<int64_t>(out.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis >= rank)
    return im.fail(n, llvm::formatv("axis {0} is out of range for rank {1}",
                                    *axisAttr, rank));
  if (axis == 0)
    return im.fail(n, "concatenates along axis 0, which would move the batch "
                      "off axis 0");
  out[axis] = 0;
  for (ValueId v : inputs) {
    std::vector<int64_t> d = dimsOfValue(im, v);
    bool ok = d.size() == out.size();
    for (int64_t i = 0; ok && i < rank; ++i)
      ok = i == axis || d[i] == out[i];
    if (!ok)
      return im.fail(n, "operand " + quoteName(im.g.values[v].name) +
                            " of shape " + dimsStr(d) +
                            llvm::formatv(" does not match the others except "
                                          "on axis {0}",
                                          axis)
                                .str());
    if (__builtin_add_overflow(out[axis], d[axis], &out[axis]))
      return im.fail(n, "output is too large");
  }
  OpAttrs a;
  a.axis = axis;
  return im.emit(n, OpKind::Concat, inputs, {{n.output(0), out}}, a)
      .takeError();
}

Error importFlatten(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto axisAttr = im.attrInt(n, "axis", 1);
  if (!x || !axisAttr)
    return llvm::joinErrors(x.takeError(), axisAttr.takeError());
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis > rank)
    return im.fail(n, llvm::formatv("axis {0} is out of range for rank {1}",
                                    *axisAttr, rank));
  int64_t merged = 1, rest = 1;
  for (int64_t i = 1; i < rank; ++i)
    (i < axis ? merged : rest) *= xd[i];
  if (axis == 0 || merged != 1)
    return im.fail(n, llvm::formatv("axis {0} on shape {1} would merge the "
                                    "batch with other axes; memfit keeps the "
                                    "batch on axis 0",
                                    *axisAttr, dimsStr(xd)));
  OpAttrs a;
  a.axis = axis;
  return im.emit(n, OpKind::Flatten, {*x}, {{n.output(0), {xd[0], rest}}}, a)
      .takeError();
}

/// Resolves a reshape target for a batched input. Axis 0 of the output must
/// be the batch: the batch symbol (folded from Shape), 0 (copy), -1 when the
/// other axes hold exactly one sample, or a literal equal to the batch the
/// model was written with (fixed-batch exports spell the batch that way).
Error importReshape(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto target = im.constant(n, 1);
  auto allowZero = im.attrInt(n, "allowzero", 0);
  if (!x || !target || !allowZero)
    return llvm::joinErrors(llvm::joinErrors(x.takeError(), target.takeError()),
                            allowZero.takeError());
  const ConstTensor &t = **target;
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  if (t.isFloat() || t.dims.size() != 1 || t.numel() == 0)
    return im.fail(n, "target shape must be a non-empty 1-D integer tensor");
  auto moves = [&] {
    return im.fail(n, "target shape " + t.str() + " for input of shape " +
                          dimsStr(xd) +
                          " would move the batch off axis 0; memfit keeps "
                          "the batch on axis 0 of every value");
  };
  int64_t perSample = 1;
  for (size_t i = 1; i < xd.size(); ++i)
    perSample *= xd[i];
  std::vector<int64_t> out(t.ints.size(), 0);
  int64_t inferAt = -1;
  bool batchAt0 = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = t.ints[i];
    bool copy = v == 0 && !*allowZero;
    if (t.isBatch(i) || (i == 0 && copy) ||
        (i == 0 && im.modelBatch > 0 && v == im.modelBatch)) {
      if (i != 0)
        return moves();
      batchAt0 = true;
      out[0] = xd[0];
    } else if (copy) {
      if (i >= static_cast<int64_t>(xd.size()))
        return im.fail(n, "target shape " + t.str() +
                              " copies an axis the input lacks");
      out[i] = xd[i];
    } else if (v == -1 && inferAt < 0) {
      inferAt = i;
    } else if (v <= 0) {
      return im.fail(n, "target shape " + t.str() + " is invalid");
    } else {
      out[i] = v;
    }
  }
  int64_t rest = 1;
  for (int64_t i = 1; i < t.numel(); ++i)
    if (i != inferAt && __builtin_mul_overflow(rest, out[i], &rest))
      return im.fail(n, "target shape " + t.str() + " overflows");
  if (!batchAt0 && inferAt != 0)
    return moves();
  if (inferAt == 0 || inferAt < 0) {
    // Axis 0 holds B * perSample / rest elements; it is the batch only if
    // the other axes take exactly one sample.
    if (rest != perSample)
      return inferAt == 0 ? moves()
                          : im.fail(n, "cannot reshape " + dimsStr(xd) +
                                           " to " + t.str());
    out[0] = xd[0];
  } else {
    if (rest == 0 || perSample % rest != 0)
      return im.fail(n, "cannot reshape " + dimsStr(xd) + " to " + t.str());
    out[inferAt] = perSample / rest;
  }
  OpAttrs a;
  a.shape = out;
  return im.emit(n, OpKind::Reshape, {*x}, {{n.output(0), out}}, a).takeError();
}

Error importPad(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto mode = im.attrString(n, "mode", "constant");
  if (!x || !mode)
    return llvm::joinErrors(x.takeError(), mode.takeError());
  if (*mode != "constant")
    return im.fail(n, "mode " + quoteName(*mode) +
                          " is not supported; memfit supports constant "
                          "padding");
  std::vector<int64_t> pads;
  float value = 0.0f;
  if (im.opset >= 11) {
    auto p = im.intVector(n, 1);
    if (!p)
      return p.takeError();
    pads = std::move(*p);
    if (im.hasInput(n, 2)) {
      auto v = im.scalarFloat(n, 2);
      if (!v)
        return v.takeError();
      value = *v;
    }
  } else {
    auto p = im.attrInts(n, "pads");
    auto v = im.attrFloat(n, "value", 0.0f);
    if (!p || !v)
      return llvm::joinErrors(p.takeError(), v.takeError());
    pads = p->value_or(std::vector<int64_t>());
    value = *v;
  }
  std::vector<int64_t> xd = dimsOfValue(im, *x);
  size_t rank = xd.size();
  if (pads.size() != 2 * rank)
    return im.fail(n, llvm::formatv("has {0} pads; the input of rank {1} "
                                    "needs {2}",
                                    pads.size(), rank, 2 * rank));
  for (int64_t p : pads)
    if (p < 0 || p > (int64_t(1) << 40))
      return im.fail(n, "pads " + dimsStr(pads) +
                            " are invalid; memfit supports non-negative "
                            "padding (no cropping)");
  if (pads[0] != 0 || pads[rank] != 0)
    return im.fail(n, "pads the batch axis, which would change the batch");
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; })) {
    im.alias(n.output(0), n.input(0));
    return Error::success();
  }
  std::vector<int64_t> out = xd;
  for (size_t i = 0; i < rank; ++i)
    out[i] += pads[i] + pads[rank + i];
  OpAttrs a;
  a.pads = pads;
  a.padValue = value;
  return im.emit(n, OpKind::Pad, {*x}, {{n.output(0), out}}, a).takeError();
}

/// Activations are float32 throughout; casting one to float32 is the
/// identity, casting it to anything else is unsupported.
Error importCast(Importer &im, const pb::NodeProto &n) {
  auto x = im.activation(n, 0);
  auto to = im.attrInt(n, "to", 0);
  if (!x || !to)
    return llvm::joinErrors(x.takeError(), to.takeError());
  if (*to != pb::TensorProto::FLOAT)
    return im.fail(n, "casts an activation to " +
                          dataTypeName(static_cast<int32_t>(*to)) +
                          "; memfit computes in float32");
  im.alias(n.output(0), n.input(0));
  return Error::success();
}

} // namespace

void addShapeTranslators(std::map<std::string, TranslateFn> &t) {
  t["Add"] = importBinary;
  t["Sub"] = importBinary;
  t["Mul"] = importBinary;
  t["Sum"] = importSum;
  t["Concat"] = importConcat;
  t["Flatten"] = importFlatten;
  t["Reshape"] = importReshape;
  t["Pad"] = importPad;
  t["Cast"] = importCast;
}

} // namespace memfit::onnximport
