//===- Concat.cpp - Concatenation along the channels ----------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importConcat(OnnxNode &node) {
  std::vector<ValueId> inputs;
  int lastKept = -1;
  for (int i = 0; i < node.numInputs(); ++i) {
    if (node.isEmpty(i)) // adds nothing
      continue;
    auto x = node.activation(i);
    if (!x)
      return x.takeError();
    inputs.push_back(*x);
    lastKept = i;
  }
  auto axisAttr = node.attrInt("axis", 1);
  if (!axisAttr)
    return axisAttr.takeError();
  if (inputs.empty() && node.numInputs() > 0) {
    node.markEmpty(node.outputName(0));
    return llvm::Error::success();
  }
  if (inputs.empty())
    return node.fail("has no operands");
  // torch.cat of one tensor (a key/value cache that starts empty).
  if (inputs.size() == 1) {
    node.alias(node.outputName(0), node.inputName(lastKept));
    return llvm::Error::success();
  }
  std::vector<int64_t> out = dimsOfValue(node, inputs[0]);
  auto rank = static_cast<int64_t>(out.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis >= rank)
    return node.fail(llvm::formatv("axis {0} is out of range for rank {1}",
                                   *axisAttr, rank));
  // Values computed from weights join among themselves only: one without
  // a batch has none to pair with a batched one's samples.
  const Graph &g = node.graph();
  bool anyBatched = false, allBatched = true;
  for (ValueId v : inputs) {
    anyBatched = anyBatched || g.values[v].batched;
    allBatched = allBatched && g.values[v].batched;
  }
  if (anyBatched && !allBatched)
    return node.fail("concatenates values computed from the data input with "
                     "values computed from weights only; memfit concatenates "
                     "values of one kind");
  if (axis == 0 && anyBatched)
    return node.fail("concatenates along axis 0, which would move the batch "
                     "off axis 0");
  out[axis] = 0;
  for (ValueId v : inputs) {
    std::vector<int64_t> d = dimsOfValue(node, v);
    bool ok = d.size() == out.size();
    for (int64_t i = 0; ok && i < rank; ++i)
      ok = i == axis || d[i] == out[i];
    if (!ok)
      return node.fail("operand " + quoteName(node.graph().values[v].name) +
                       " of shape " + dimsStr(d) +
                       llvm::formatv(" does not match the others except "
                                     "on axis {0}",
                                     axis)
                           .str());
    if (__builtin_add_overflow(out[axis], d[axis], &out[axis]))
      return node.fail("output is too large");
  }
  OpAttrs a;
  a.axis = axis;
  return node.emit(OpKind::Concat, inputs, {{node.outputName(0), out}}, a)
      .takeError();
}

/// One strided copy per input, or per input gradient.
OpWork work(const Graph &, const Op &op, TaskKind kind, int gradsWritten,
            int64_t) {
  return {0, kind == TaskKind::Forward
                 ? std::max<int>(static_cast<int>(op.inputs.size()), 1)
                 : gradsWritten};
}

void signature(llvm::raw_ostream &os, const Op &op) {
  os << " axis=" << op.attrs.axis;
}

/// Rows per sample: the elements of the axes between the batch and the
/// concatenated one (1 along axis 1); without a batch, of the axes before
/// it (the whole value is the one sample).
int64_t rowsOf(const Graph &g, const Op &op) {
  const Value &y = g.value(op.outputs[0]);
  int64_t rows = 1;
  for (int64_t i = y.batched ? 1 : 0; i < op.attrs.axis; ++i)
    rows *= y.dims[i];
  return rows;
}

llvm::Expected<OpParamsText> params(const Graph &g, const Op &op) {
  const Value &y = g.value(op.outputs[0]);
  if (!y.canonical() || (op.attrs.axis < 1 && y.batched))
    return unsupportedByRuntime(op, "concatenation needs the batch alone on "
                                    "axis 0");
  return OpParamsText{};
}

llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId y = op.outputs[0];
  // Along a later axis each sample is `rows` rows, each the inputs' parts
  // side by side (rows, the last argument, is omitted when 1).
  int64_t rows = rowsOf(x.graph, op);
  std::string parts, rowsArg = rows == 1 ? "" : ", " + std::to_string(rows);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    parts +=
        (i ? ", " : "") +
        std::to_string(x.graph.value(op.inputs[i]).elementsPerSample() / rows);
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward: {
    std::string ins;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      ins += (i ? ", " : "") + x.value(op.inputs[i]);
    return EmittedCall{
        formatv("{{ static const int64_t parts[] = {{{0}}; const float "
                "*in[] = {{{1}}; x.concatForward({2}, parts, in, {3}{4}); }",
                parts, ins, op.inputs.size(), x.value(y), rowsArg)
            .str()};
  }
  case TaskKind::BackwardData: {
    std::string ds, accs;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      ValueId v = op.inputs[i];
      ds += (i ? ", " : "") + x.gradIfWritten(v);
      accs += (i ? ", " : "") + x.accumulates(v);
    }
    return EmittedCall{
        formatv("{{ static const int64_t parts[] = {{{0}}; float *d[] = "
                "{{{1}}; const bool acc[] = {{{2}}; "
                "x.concatBackward({3}, parts, {4}, d, acc{5}); }",
                parts, ds, accs, op.inputs.size(), x.grad(y), rowsArg)
            .str()};
  }
  default:
    return noWeightGrad(op);
  }
}

/// What importConcat accepts and refuses (OpDef::forms).
constexpr std::string_view kForms =
    "Operands computed from the data input, the batch alone on axis 0, equal "
    "except on `axis` (negative counts from the end), any axis but 0. Values "
    "computed from weights (a float parameter operand is read as its value) "
    "join only each other, on any axis. An empty operand (a Slice to nothing) "
    "is left out, and a single one is the output. Any other constant operand "
    "is refused; of constants Concat folds.";
/// What its backward differentiates (OpDef::gradient).
constexpr std::string_view kGradient = "every operand";

} // namespace

void registerConcat(std::vector<OpDef> &defs) {
  defs.push_back({.kind = OpKind::Concat,
                  .name = "Concat",
                  .onnxTypes = {"Concat"},
                  .importOnnx = importConcat,
                  .costClass = CostClass::Copy,
                  .work = work,
                  .signatureAttrs = signature,
                  .params = params,
                  .emit = emit,
                  .forms = kForms,
                  .gradient = kGradient});
}

} // namespace memfit::ops
