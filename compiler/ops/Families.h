//===- Families.h - What the operator families share ------------*- C++ -*-===//
//
// Internal to compiler/ops: each family file defines its OpDef entries in a
// register function that Registry.cpp calls, and uses these helpers for
// signatures and runtime parameter literals.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_OPS_FAMILIES_H
#define MEMFIT_COMPILER_OPS_FAMILIES_H

#include "compiler/ops/OnnxNode.h"
#include "compiler/ops/OpDef.h"
#include "compiler/support/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <string>
#include <vector>

namespace memfit::ops {

void registerConv(std::vector<OpDef> &defs);
void registerPool(std::vector<OpDef> &defs);
void registerActivation(std::vector<OpDef> &defs);
void registerBatchNorm(std::vector<OpDef> &defs);
void registerLRN(std::vector<OpDef> &defs);
void registerDropout(std::vector<OpDef> &defs);
void registerGemm(std::vector<OpDef> &defs);
void registerBinary(std::vector<OpDef> &defs);
void registerSum(std::vector<OpDef> &defs);
void registerConcat(std::vector<OpDef> &defs);
void registerView(std::vector<OpDef> &defs);
void registerPad(std::vector<OpDef> &defs);
void registerSoftmax(std::vector<OpDef> &defs);
void registerBatchMatMul(std::vector<OpDef> &defs);
void registerTransformer(std::vector<OpDef> &defs);
void registerLayout(std::vector<OpDef> &defs);
void registerResize(std::vector<OpDef> &defs);
void registerAttention(std::vector<OpDef> &defs);
void registerIntProgram(std::vector<OpDef> &defs);

/// MatMul of two activations (Transformer.cpp).
llvm::Error importBatchMatMul(OnnxNode &node);
llvm::Error importScatterND(OnnxNode &node);
/// Expand of a weight over the batch, a lookup (Transformer.cpp).
llvm::Error importExpandWeight(OnnxNode &node);
/// Gather of an activation by a constant scalar index, or by every index
/// of its axis in order (Layout.cpp).
llvm::Error importIndexSelect(OnnxNode &node);
/// Reshape of activation `x` to the target `t` (View.cpp): of a batched
/// value, following its batch; of a value computed from weights, to any
/// target of its size.
llvm::Error importReshapeTo(OnnxNode &node, ValueId x, const IntConstant &t);

/// Whether `small` (right-aligned, numpy style) broadcasts into `big` along
/// one contiguous run of big's axes; sets the run's element count and the
/// elements after it (BinaryParams' bSize and inner).
bool broadcastRun(const std::vector<int64_t> &big, std::vector<int64_t> small,
                  int64_t &bSize, int64_t &inner);

// --- autodiff rules shared by the products (Conv, Gemm, MatMul, Mul) ---
/// d(x * w)/dx = w: BP-data of operand i (of the first two) reads the
/// other one.
void otherOperandReads(const GradOperands &o, std::vector<BlockId> &reads);
/// d(x * w)/dw = x: BP-weight reads the data operands.
void dataOperandReads(const GradOperands &o, std::vector<BlockId> &reads);

/// The error of a BP-weight task for an op whose weights the runtime
/// cannot differentiate.
llvm::Error noWeightGrad(const Op &op);

// --- ONNX translation (OnnxHelpers.cpp) ---

/// Takes the error out of any failed Expected among `es`.
template <typename... Ts> llvm::Error firstError(llvm::Expected<Ts> &...es) {
  llvm::Error err = llvm::Error::success();
  ((err =
        es ? std::move(err) : llvm::joinErrors(std::move(err), es.takeError())),
   ...);
  return err;
}

inline std::vector<int64_t> dimsOfValue(const OnnxNode &node, ValueId v) {
  return node.graph().values[v].dims;
}

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

/// The window of a Conv or pooling node over spatial input dims `in`:
/// attributes resolved (auto_pad made explicit pads, absent strides and
/// dilations 1), checked, and the output dims.
llvm::Expected<Window> window(OnnxNode &node, const std::vector<int64_t> &in,
                              const std::vector<int64_t> &kernel,
                              bool ceilMode);
/// The input of a windowed op: an NCHW-style activation with spatial axes.
llvm::Expected<std::vector<int64_t>>
spatialInput(OnnxNode &node, const std::vector<int64_t> &xd);

// --- signatures ---
void printList(llvm::raw_ostream &os, const char *key,
               const std::vector<int64_t> &v);
/// Floats print in a fixed, locale-independent form.
void printFloat(llvm::raw_ostream &os, const char *key, float v);

// --- runtime parameters ---
/// dims of a 4-D batched value as c, h, w.
bool chw(const Value &v, int64_t &c, int64_t &h, int64_t &w);
/// v[i], or `fallback` when v is shorter.
inline int64_t at(const std::vector<int64_t> &v, size_t i, int64_t fallback) {
  return v.size() > i ? v[i] : fallback;
}
/// The product of d[from, to) (1 where empty).
inline int64_t product(const std::vector<int64_t> &d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i)
    p *= d[i];
  return p;
}
/// Elements of a value per sample (all of it when not batched).
inline double elems(const Value &v, int64_t b) {
  return double(v.elementsPerSample()) * (v.batched ? double(b) : 1.0);
}

} // namespace memfit::ops

#endif
