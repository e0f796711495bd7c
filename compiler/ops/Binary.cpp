//===- Binary.cpp - Add, Sub, Mul with broadcasting -----------------------===//
//
// The first operand is the activation; the second is an activation of the
// same shape, or a weight or constant broadcast along one contiguous run of
// the per-sample dims (per channel, per feature). A weight operand's
// gradient is the reduction of dY over the broadcast positions (a bias).
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

OpKind binaryKind(llvm::StringRef op) {
  return op == "Add" ? OpKind::Add : op == "Sub" ? OpKind::Sub : OpKind::Mul;
}

llvm::Error importBinary(OnnxNode &node) {
  if (node.numInputs() != 2)
    return node.fail("must have two operands");
  bool act0 = node.isActivation(node.inputName(0)),
       act1 = node.isActivation(node.inputName(1));
  OpKind kind = binaryKind(node.opType());
  if (act0 && act1) {
    ValueId x = *node.activation(0), y = *node.activation(1);
    std::vector<int64_t> xd = dimsOfValue(node, x), yd = dimsOfValue(node, y);
    if (xd != yd)
      return node.fail("combines activations of shapes " + dimsStr(xd) +
                       " and " + dimsStr(yd) +
                       "; memfit supports elementwise ops on activations "
                       "of the same shape");
    return node.emit(kind, {x, y}, {{node.outputName(0), xd}}).takeError();
  }
  if (!act0 && !act1)
    return node.activation(0).takeError();
  int xi = act0 ? 0 : 1;
  auto x = node.activation(xi);
  if (!x)
    return x.takeError();
  WeightInit init = kind == OpKind::Mul ? WeightInit::Ones : WeightInit::Zeros;
  auto w = node.weight(1 - xi, init, true);
  if (!w)
    return w.takeError();
  std::vector<int64_t> xd = dimsOfValue(node, *x), wd = dimsOfValue(node, *w);
  // Left-pad the weight's shape to the activation's rank (numpy
  // broadcasting), then it may vary only along the channel axis.
  bool ok = wd.size() <= xd.size();
  if (ok) {
    std::vector<int64_t> p(xd.size() - wd.size(), 1);
    p.insert(p.end(), wd.begin(), wd.end());
    for (size_t i = 0; i < p.size() && ok; ++i)
      ok = p[i] == 1 || (i == 1 && p[i] == xd[1]);
  }
  if (!ok && node.isDeclaredInput(node.inputName(1 - xi)))
    return node.extraDataInput(node.inputName(1 - xi));
  if (!ok)
    return node.fail("weight " + quoteName(node.graph().values[*w].name) +
                     " of shape " + dimsStr(wd) +
                     " does not broadcast per channel over the "
                     "activation of shape " +
                     dimsStr(xd) +
                     "; memfit supports scalar and per-channel weights");
  std::vector<ValueId> inputs =
      xi == 0 ? std::vector<ValueId>{*x, *w} : std::vector<ValueId>{*w, *x};
  return node.emit(kind, inputs, {{node.outputName(0), xd}}).takeError();
}

/// d(a*b)/da = b: each gradient reads the other operands.
void mulDataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  for (size_t i = 0; i < o.op.inputs.size(); ++i) {
    bool onlyGradOfSelf = o.gradInputs.size() == 1 && o.gradInputs[0] == i;
    if (!onlyGradOfSelf)
      reads.push_back(o.inputs[i]);
  }
}

/// Mul by a weight: the data operands, and with two weight operands,
/// d(w1*w2)/dw1 = w2.
void mulWeightReads(const GradOperands &o, std::vector<BlockId> &reads) {
  dataOperandReads(o, reads);
  if (o.gradWeights.size() > 1)
    reads.insert(reads.end(), o.gradWeightBlocks.begin(),
                 o.gradWeightBlocks.end());
}

OpWork addWork(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {kind == TaskKind::Forward
              ? double(std::max<size_t>(op.inputs.size(), 2) - 1) * out
              : out};
}

OpWork mulWork(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 1 : 2) * out};
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  if (op.inputs.size() != 2)
    return unsupportedByRuntime(op, "expects two operands");
  const Value &va = g.value(op.inputs[0]);
  const Value &vb = g.value(op.inputs[1]);
  if (!va.batched)
    return unsupportedByRuntime(op, "the first operand must be the activation");
  const char *k = op.kind == OpKind::Add   ? "Add"
                  : op.kind == OpKind::Sub ? "Sub"
                                           : "Mul";
  int64_t per = va.elementsPerSample();
  if (vb.batched) {
    if (vb.dims != va.dims)
      return unsupportedByRuntime(op,
                                  "batched operands must have the same shape");
    return OpParamsText{
        "BinaryParams",
        llvm::formatv("{{.kind = BinaryKind::{0}, .perSample = {1}, "
                      ".bBatched = true, .bSize = {1}, .inner = 1}",
                      k, per)
            .str()};
  }
  // Right-align b's shape with a's per-sample shape and find the one
  // contiguous run of non-unit dims it broadcasts along.
  std::vector<int64_t> ad(va.dims.begin() + 1, va.dims.end());
  std::vector<int64_t> bd = vb.dims;
  while (!bd.empty() && bd.size() > ad.size() && bd.front() == 1)
    bd.erase(bd.begin());
  if (bd.size() > ad.size())
    return unsupportedByRuntime(op, "the broadcast operand has too many dims");
  bd.insert(bd.begin(), ad.size() - bd.size(), 1);
  int first = -1, last = -1;
  for (int i = 0; i < (int)bd.size(); ++i)
    if (bd[i] != 1) {
      if (bd[i] != ad[i])
        return unsupportedByRuntime(op, "operand shapes do not broadcast");
      if (first < 0)
        first = i;
      else if (last != i - 1)
        return unsupportedByRuntime(op, "the broadcast operand's dims must be "
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
      llvm::formatv("{{.kind = BinaryKind::{0}, .perSample = {1}, "
                    ".bBatched = false, .bSize = {2}, "
                    ".inner = {3}}",
                    k, per, bSize, inner)
          .str()};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId a = op.inputs[0], b = op.inputs[1], y = op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.binaryForward({0}, {1}, {2}, {3})", x.params,
                               x.value(a), x.value(b), x.value(y))
                           .str()};
  case TaskKind::BackwardData: {
    bool bData = x.graph.value(b).kind != ValueKind::Weight;
    std::string accB = bData ? x.accumulates(b) : "false";
    if (b == a)
      accB = "true"; // both operands are one value: the second adds
    return EmittedCall{formatv("x.binaryBackward({0}, {1}, {2}, {3}, {4}, "
                               "{5}, {6}, {7})",
                               x.params, x.valueIfRead(a), x.valueIfRead(b),
                               x.grad(y), x.gradIfWritten(a),
                               bData ? x.gradIfWritten(b) : "nullptr",
                               x.accumulates(a), accB)
                           .str()};
  }
  default:
    return EmittedCall{formatv("x.binaryBackward({0}, {1}, {2}, {3}, nullptr, "
                               "{4}, false, {5})",
                               x.params, x.valueIfRead(a), x.valueIfRead(b),
                               x.grad(y), x.gradIfWritten(b), x.accumulates(b))
                           .str()};
  }
}

OpDef binary(OpKind kind, std::string_view name) {
  return {.kind = kind,
          .name = name,
          .onnxTypes = {name},
          .importOnnx = importBinary,
          .work = addWork,
          .params = params,
          .emit = emit};
}

} // namespace

void registerBinary(std::vector<OpDef> &defs) {
  defs.push_back(binary(OpKind::Add, "Add"));
  defs.push_back(binary(OpKind::Sub, "Sub"));
  OpDef mul = binary(OpKind::Mul, "Mul");
  mul.dataGradReads = mulDataReads;
  mul.weightGradReads = mulWeightReads;
  mul.work = mulWork;
  defs.push_back(std::move(mul));
}

} // namespace memfit::ops
