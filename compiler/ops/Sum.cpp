//===- Sum.cpp - Sum of any number of same-shape activations --------------===//
#include "compiler/ops/Families.h"

#include <set>

namespace memfit::ops {
namespace {

// --- ONNX translation ---

llvm::Error importSum(OnnxNode &node) {
  std::vector<ValueId> inputs;
  for (int i = 0; i < node.numInputs(); ++i) {
    auto x = node.activation(i);
    if (!x)
      return x.takeError();
    inputs.push_back(*x);
  }
  if (inputs.empty())
    return node.fail("has no operands");
  std::vector<int64_t> xd = dimsOfValue(node, inputs[0]);
  for (ValueId v : inputs)
    if (dimsOfValue(node, v) != xd)
      return node.fail("operands differ in shape (" + dimsStr(xd) + " and " +
                       dimsStr(dimsOfValue(node, v)) +
                       "); memfit supports Sum of same-shape "
                       "activations");
  if (inputs.size() == 1) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  return node.emit(OpKind::Sum, inputs, {{node.outputName(0), xd}}).takeError();
}

OpWork work(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {kind == TaskKind::Forward
              ? double(std::max<size_t>(op.inputs.size(), 2) - 1) * out
              : out};
}

/// A copy of the first operand and an accumulation of each other; the
/// backward copies (or adds) dY into each operand's gradient.
llvm::Expected<EmittedCall> emit(EmitContext &x) {
  const Op &op = x.op;
  ValueId y = op.outputs[0];
  int64_t perSample = x.graph.value(op.inputs[0]).elementsPerSample();
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward: {
    std::string s = formatv("x.copy({0}, {1}, {2});", perSample,
                            x.value(op.inputs[0]), x.value(y));
    for (size_t i = 1; i < op.inputs.size(); ++i)
      s += formatv("\n  x.accumulateInto({0}, {1}, {2});", perSample,
                   x.value(op.inputs[i]), x.value(y))
               .str();
    return EmittedCall{s.substr(0, s.size() - 1)};
  }
  case TaskKind::BackwardData: {
    std::string s;
    std::set<ValueId> seen;
    for (ValueId v : op.inputs) {
      if (!x.writesGrad(v))
        continue;
      bool acc = x.accumulates(v) != "false" || seen.count(v);
      s += formatv("x.{0}({1}, {2}, {3});\n  ", acc ? "accumulateInto" : "copy",
                   perSample, x.grad(y), x.grad(v))
               .str();
      seen.insert(v);
    }
    return EmittedCall{s.substr(0, s.size() - 4)};
  }
  default:
    return noWeightGrad(op);
  }
}

} // namespace

void registerSum(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::Sum,
       .name = "Sum",
       .onnxTypes = {"Sum"},
       .importOnnx = importSum,
       .batchLayout = OpDef::BatchLayout::Any,
       .work = work,
       .emit = emit,
       .forms = "Activations of one shape (no broadcasting) whose batches lie "
                "on the same axis; weights and constants are refused. A single "
                "operand passes through.",
       .gradient = "every operand"});
}

} // namespace memfit::ops
