//===- Registry.cpp - Every operator definition, by kind ------------------===//
#include "compiler/ops/Families.h"
#include "compiler/support/Diagnostics.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace memfit {
namespace {

std::vector<OpDef> build() {
  std::vector<OpDef> defs;
  ops::registerConv(defs);
  ops::registerPool(defs);
  ops::registerActivation(defs);
  ops::registerBatchNorm(defs);
  ops::registerLRN(defs);
  ops::registerDropout(defs);
  ops::registerGemm(defs);
  ops::registerBinary(defs);
  ops::registerSum(defs);
  ops::registerConcat(defs);
  ops::registerView(defs);
  ops::registerPad(defs);
  ops::registerSoftmax(defs);
  ops::registerBatchMatMul(defs);
  ops::registerTransformer(defs);
  ops::registerLayout(defs);
  ops::registerResize(defs);
  ops::registerAttention(defs);
  ops::registerIntProgram(defs);
  // Indexed by kind: a kind defined twice or not at all is a bug caught
  // here, on the first lookup, in every build.
  std::vector<OpDef> byKind;
  for (OpDef &d : defs) {
    auto k = static_cast<size_t>(d.kind);
    if (byKind.size() <= k)
      byKind.resize(k + 1, OpDef{OpKind(0), ""});
    if (!byKind[k].name.empty()) {
      llvm::errs() << "memfit: operator kind " << k << " defined twice\n";
      std::abort();
    }
    byKind[k] = std::move(d);
  }
  for (size_t k = 0; k < byKind.size(); ++k)
    if (byKind[k].name.empty()) {
      llvm::errs() << "memfit: operator kind " << k << " has no definition\n";
      std::abort();
    }
  return byKind;
}

} // namespace

const std::vector<OpDef> &allOpDefs() {
  static const std::vector<OpDef> defs = build();
  return defs;
}

const OpDef &opDef(OpKind kind) {
  const auto &defs = allOpDefs();
  auto k = static_cast<size_t>(kind);
  assert(k < defs.size() && "an OpKind without a definition");
  return defs[k];
}

const OpDef *opDefForOnnx(llvm::StringRef onnxType) {
  for (const OpDef &d : allOpDefs())
    for (std::string_view t : d.onnxTypes)
      if (onnxType == llvm::StringRef(t.data(), t.size()))
        return &d;
  return nullptr;
}

std::string_view opKindName(OpKind k) { return opDef(k).name; }

llvm::Error unsupportedByRuntime(const Op &op, const llvm::Twine &why) {
  return makeErrorF("node {0} ({1}): the runtime cannot run it: {2}",
                    quoteName(op.name), op.onnxOp, why.str());
}

std::string dimsStr(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string f32(float v) {
  // A masked fill writes -inf; C++ has no literal for it.
  if (std::isinf(v))
    return v < 0 ? "(-__builtin_inff())" : "__builtin_inff()";
  if (std::isnan(v))
    return "__builtin_nanf(\"\")";
  std::string s = llvm::formatv("{0:e9}", v).str();
  return s + "f";
}

namespace ops {

void otherOperandReads(const GradOperands &o, std::vector<BlockId> &reads) {
  for (size_t i = 0; i < o.op.inputs.size(); ++i)
    if (i < 2 && std::find(o.gradInputs.begin(), o.gradInputs.end(), 1 - i) !=
                     o.gradInputs.end())
      reads.push_back(o.inputs[i]);
}

void dataOperandReads(const GradOperands &o, std::vector<BlockId> &reads) {
  for (size_t i = 0; i < o.op.inputs.size(); ++i)
    if (!o.isWeight(i))
      reads.push_back(o.inputs[i]);
}

llvm::Error noWeightGrad(const Op &op) {
  return makeErrorF("node {0} ({1}): weight gradients of this operator are "
                    "not supported by the runtime",
                    quoteName(op.name), op.onnxOp);
}

void printList(llvm::raw_ostream &os, const char *key,
               const std::vector<int64_t> &v) {
  os << ' ' << key << '=';
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? "," : "") << v[i];
}

void printFloat(llvm::raw_ostream &os, const char *key, float v) {
  os << ' ' << key << '=' << llvm::format("%.9g", static_cast<double>(v));
}

bool chw(const Value &v, int64_t &c, int64_t &h, int64_t &w) {
  if (v.dims.size() != 4)
    return false;
  c = v.dims[1];
  h = v.dims[2];
  w = v.dims[3];
  return true;
}

} // namespace ops
} // namespace memfit
