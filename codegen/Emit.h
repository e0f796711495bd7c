//===- Emit.h - The trainer program from a Plan -----------------*- C++ -*-===//
//
// Writes a Plan as a static C++ program on runtime/Exec.h: every residency a
// named arena offset, every instruction one call in issue order, the round
// split over functions and translation units so that very deep models build
// quickly, and a CMakeLists.txt that builds it against memfit's runtime with
// -DMEMFIT_BACKEND=cuda (default) or cpu.
//
// Guarantees: reads only the Plan, the TaskGraph and the Graph; the same
// inputs give byte-identical files; names from the model appear only as
// sanitised identifier fragments and comment text (codegen/Names.h). An
// evaluation plan (EmitOptions::evaluation) becomes a second round,
// memfit_eval_round, in src/eval_round_*.cpp and src/evaluate.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_EMIT_H
#define MEMFIT_CODEGEN_EMIT_H

#include "compiler/ir/Plan.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace memfit {

/// The evaluation program beside the training one: memfit's forward-only
/// plan of a batch in the training plan's arena (both graphs of one model),
/// or, without one, why the trainer has none.
struct EvaluationPlan {
  const TaskGraph *tg = nullptr;
  const Plan *plan = nullptr;
  std::string why;
};

struct EmitOptions {
  std::string modelFile = "model.onnx"; // beside the sources, in OUTDIR
  std::string memfitBuildDir;           // where memfit-runtime.cmake lives
  /// Where the trainer keeps optimizer state the plan homes on NVMe (the
  /// trainer's --nvme overrides it).
  std::string nvmeDir;
  EvaluationPlan evaluation;
  int instrsPerFunction = 300;
  int functionsPerFile = 16;
};

struct GeneratedFile {
  std::string path; // relative to OUTDIR
  std::string contents;
};

llvm::Expected<std::vector<GeneratedFile>>
emitTrainer(const TaskGraph &tg, const Plan &plan, const EmitOptions &opts);

} // namespace memfit

#endif
