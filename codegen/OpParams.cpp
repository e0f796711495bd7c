//===- OpParams.cpp - Runtime parameter literals for an op ----------------===//
#include "codegen/OpParams.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

namespace memfit {
namespace {

std::string f32(float v) {
  std::string s = llvm::formatv("{0:e9}", v).str();
  return s + "f";
}

llvm::Error unsupported(const Op &op, const std::string &why) {
  return makeErrorF("node {0} ({1}): the runtime cannot run it: {2}",
                    quoteName(op.name), op.onnxOp, why);
}

/// dims of a 4-D batched value as c, h, w.
bool chw(const Value &v, int64_t &c, int64_t &h, int64_t &w) {
  if (v.dims.size() != 4)
    return false;
  c = v.dims[1];
  h = v.dims[2];
  w = v.dims[3];
  return true;
}

} // namespace

int64_t perSample(const Graph &g, ValueId v) {
  return g.values[v].elementsPerSample();
}

llvm::Expected<OpParamsText> opParams(const Graph &g, OpId id) {
  const Op &op = g.ops[id];
  const OpAttrs &a = op.attrs;
  const Value &x = g.values[op.inputs[0]];
  const Value &y = g.values[op.outputs[0]];
  auto pad = [&](size_t i) { return a.pads.size() > i ? a.pads[i] : 0; };
  auto at = [](const std::vector<int64_t> &v, size_t i, int64_t d) {
    return v.size() > i ? v[i] : d;
  };
  switch (op.kind) {
  case OpKind::Conv: {
    int64_t c, h, w, co, ho, wo;
    if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || a.kernel.size() != 2)
      return unsupported(op, "only 2-D convolutions (NCHW) are supported");
    return OpParamsText{
        "ConvParams",
        llvm::formatv("{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
                      "{10}, {11}, {12}, {13}, {14}}",
                      c, h, w, co, ho, wo, a.kernel[0], a.kernel[1],
                      at(a.strides, 0, 1), at(a.strides, 1, 1), pad(0), pad(1),
                      at(a.dilations, 0, 1), at(a.dilations, 1, 1), a.group)
            .str()};
  }
  case OpKind::MaxPool:
  case OpKind::AveragePool: {
    int64_t c, h, w, co, ho, wo;
    if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || a.kernel.size() != 2)
      return unsupported(op, "only 2-D pooling (NCHW) is supported");
    bool isMax = op.kind == OpKind::MaxPool;
    return OpParamsText{
        "PoolParams",
        llvm::formatv("{{PoolKind::{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                      "{8}, {9}, {10}, {11}, {12}, {13}, {14}}",
                      isMax ? "Max" : "Average", c, h, w, ho, wo, a.kernel[0],
                      a.kernel[1], at(a.strides, 0, 1), at(a.strides, 1, 1),
                      pad(0), pad(1), pad(2), pad(3),
                      a.countIncludePad ? "true" : "false")
            .str()};
  }
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Clip: {
    const char *k = op.kind == OpKind::Relu        ? "Relu"
                    : op.kind == OpKind::LeakyRelu ? "LeakyRelu"
                    : op.kind == OpKind::Sigmoid   ? "Sigmoid"
                    : op.kind == OpKind::Tanh      ? "Tanh"
                                                   : "Clip";
    return OpParamsText{"ActParams",
                        llvm::formatv("{{ActKind::{0}, {1}, {2}, {3}}", k,
                                      f32(a.alpha), f32(a.minValue),
                                      f32(a.maxValue))
                            .str()};
  }
  case OpKind::BatchNorm: {
    int64_t c = x.dims.size() > 1 ? x.dims[1] : 1;
    return OpParamsText{"BatchNormParams",
                        llvm::formatv("{{{0}, {1}, {2}, {3}}", c,
                                      x.elementsPerSample() / c, f32(a.epsilon),
                                      f32(a.momentum))
                            .str()};
  }
  case OpKind::LRN: {
    int64_t c = x.dims.size() > 1 ? x.dims[1] : 1;
    return OpParamsText{"LRNParams",
                        llvm::formatv("{{{0}, {1}, {2}, {3}, {4}, {5}}", c,
                                      x.elementsPerSample() / c, a.size,
                                      f32(a.alpha), f32(a.beta), f32(a.bias))
                            .str()};
  }
  case OpKind::Dropout:
    return OpParamsText{
        "DropoutParams",
        llvm::formatv("{{{0}, {1}}", x.elementsPerSample(), f32(a.ratio))
            .str()};
  case OpKind::Gemm:
  case OpKind::MatMul: {
    if (a.transA)
      return unsupported(op, "transA on the activations is not supported");
    if (x.dims.size() != 2 || y.dims.size() != 2)
      return unsupported(op, "expects [batch, features] operands");
    bool transB = op.kind == OpKind::Gemm && a.transB;
    float alpha = op.kind == OpKind::Gemm ? a.alpha : 1.0f;
    float beta = op.kind == OpKind::Gemm ? a.beta : 0.0f;
    return OpParamsText{"GemmParams",
                        llvm::formatv("{{{0}, {1}, {2}, {3}, {4}}", x.dims[1],
                                      y.dims[1], transB ? "true" : "false",
                                      f32(alpha), f32(beta))
                            .str()};
  }
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul: {
    if (op.inputs.size() != 2)
      return unsupported(op, "expects two operands");
    const Value &va = g.values[op.inputs[0]];
    const Value &vb = g.values[op.inputs[1]];
    if (!va.batched)
      return unsupported(op, "the first operand must be the activation");
    const char *k = op.kind == OpKind::Add   ? "Add"
                    : op.kind == OpKind::Sub ? "Sub"
                                             : "Mul";
    int64_t per = va.elementsPerSample();
    if (vb.batched) {
      if (vb.dims != va.dims)
        return unsupported(op, "batched operands must have the same shape");
      return OpParamsText{
          "BinaryParams",
          llvm::formatv("{{BinaryKind::{0}, {1}, true, {1}, 1}", k, per).str()};
    }
    // Right-align b's shape with a's per-sample shape and find the one
    // contiguous run of non-unit dims it broadcasts along.
    std::vector<int64_t> ad(va.dims.begin() + 1, va.dims.end());
    std::vector<int64_t> bd = vb.dims;
    while (!bd.empty() && bd.size() > ad.size() && bd.front() == 1)
      bd.erase(bd.begin());
    if (bd.size() > ad.size())
      return unsupported(op, "the broadcast operand has too many dims");
    bd.insert(bd.begin(), ad.size() - bd.size(), 1);
    int first = -1, last = -1;
    for (int i = 0; i < (int)bd.size(); ++i)
      if (bd[i] != 1) {
        if (bd[i] != ad[i])
          return unsupported(op, "operand shapes do not broadcast");
        if (first < 0)
          first = i;
        else if (last != i - 1)
          return unsupported(op, "the broadcast operand's dims must be "
                                 "contiguous");
        last = i;
      }
    int64_t bSize = 1, inner = 1;
    if (first >= 0) {
      for (int i = first; i <= last; ++i)
        bSize *= bd[i];
      for (int i = last + 1; i < (int)ad.size(); ++i)
        inner *= ad[i];
    }
    return OpParamsText{
        "BinaryParams",
        llvm::formatv("{{BinaryKind::{0}, {1}, false, {2}, {3}}", k, per, bSize,
                      inner)
            .str()};
  }
  case OpKind::Pad: {
    int64_t c, h, w, co, ho, wo;
    if (!chw(x, c, h, w) || !chw(y, co, ho, wo) || co != c)
      return unsupported(op, "only spatial padding of NCHW tensors");
    if (a.pads.size() != 8 || a.pads[0] || a.pads[1] || a.pads[4] || a.pads[5])
      return unsupported(op, "only spatial padding of NCHW tensors");
    return OpParamsText{
        "PadParams",
        llvm::formatv("{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}", c, h, w, ho,
                      wo, a.pads[2], a.pads[3], f32(a.padValue))
            .str()};
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    if (x.dims.size() != 2 || (a.axis != 1 && a.axis != -1))
      return unsupported(op, "softmax over axis 1 of [batch, features] only");
    return OpParamsText{"", ""};
  case OpKind::Concat:
    if (a.axis != 1)
      return unsupported(op, "concatenation along axis 1 only");
    return OpParamsText{"", ""};
  default:
    return OpParamsText{"", ""};
  }
}

} // namespace memfit
