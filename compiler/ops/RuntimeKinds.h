//===- RuntimeKinds.h - The runtime's kinds, as the compiler sees them -*- C++
//-*-===//
//
// The activation and binary kinds the runtime executes, generated from the
// lists runtime/Kernels.h generates its enums from (runtime/kernels/*.def):
// the compiler spells each kind in generated code (`ActKind::Name`) and
// derives each definition's backward reads from the same entry, so neither
// side keeps a copy that could drift. compiler/ops may include those .def
// files and nothing else of runtime/ (tests/layering.py).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_OPS_RUNTIMEKINDS_H
#define MEMFIT_COMPILER_OPS_RUNTIMEKINDS_H

#include <cstdint>

namespace memfit::ops {

/// What a derivative reads besides dY (the .def files' Reads column).
enum class GradReads : uint8_t { Output, Input, Nothing, Operands };

/// runtime::ActKind, entry for entry.
enum class RtAct : uint8_t {
#define MEMFIT_ACTIVATION(kind, reads) kind,
#include "runtime/kernels/Activations.def"
};

/// runtime::BinaryKind, entry for entry.
enum class RtBinary : uint8_t {
#define MEMFIT_BINARY(kind, reads) kind,
#include "runtime/kernels/Binary.def"
};

/// runtime::IntOpKind, entry for entry.
enum class RtIntOp : uint8_t {
#define MEMFIT_INT_OP(kind, operands, onnx) kind,
#include "runtime/kernels/IntOps.def"
};

/// An integer instruction as generated code spells it, how many operands
/// it reads, and the ONNX op type it evaluates ("" for none).
struct RtIntOpInfo {
  const char *name;
  int operands;
  const char *onnx;
};
constexpr RtIntOpInfo runtimeKind(RtIntOp k) {
  switch (k) {
#define MEMFIT_INT_OP(kind, operands, onnx)                                    \
  case RtIntOp::kind:                                                          \
    return {#kind, operands, onnx};
#include "runtime/kernels/IntOps.def"
  }
  return {"", 0, ""};
}

struct RtKindInfo {
  const char *name; // as generated code spells the enumerator
  GradReads reads;
};

constexpr RtKindInfo runtimeKind(RtAct k) {
  switch (k) {
#define MEMFIT_ACTIVATION(kind, reads)                                         \
  case RtAct::kind:                                                            \
    return {#kind, GradReads::reads};
#include "runtime/kernels/Activations.def"
  }
  return {"", GradReads::Nothing}; // not reached: every kind has its case
}

constexpr RtKindInfo runtimeKind(RtBinary k) {
  switch (k) {
#define MEMFIT_BINARY(kind, reads)                                             \
  case RtBinary::kind:                                                         \
    return {#kind, GradReads::reads};
#include "runtime/kernels/Binary.def"
  }
  return {"", GradReads::Nothing};
}

} // namespace memfit::ops

#endif
