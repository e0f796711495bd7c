//===- Emitter.h - The trainer emitter (internal) ---------------*- C++ -*-===//
//
// The state behind emitTrainer() (Emit.h), shared by its implementation
// files: Emit.cpp (main, CMakeLists), EmitRound.cpp (a round's functions
// and files) and EmitRun.cpp (one call per task run, with its operands'
// pointers). Not a public interface.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_EMITTER_H
#define MEMFIT_CODEGEN_EMITTER_H

#include "codegen/Emit.h"
#include "compiler/ops/OpDef.h"

#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace memfit::emit {

inline const char *const kStreams[] = {"Compute", "CopyOut", "CopyIn"};

class Emitter {
public:
  Emitter(const TaskGraph &tg, const Plan &plan, const EmitOptions &opts)
      : tg(tg), g(*tg.graph), plan(plan), opts(opts) {}

  llvm::Expected<std::vector<GeneratedFile>> run();

  // What a task's operands resolve through (EmitRun.cpp's TaskOperands).
  const TaskGraph &taskGraph() const { return tg; }
  /// The pointer expression of block `b` in the residencies `res`.
  std::string ptr(BlockId b, const std::map<BlockId, ResidencyId> &res);
  /// Whether task `t`'s write of `b` adds to it (round instruction index).
  std::string accFlag(const Task &t, BlockId b, size_t index) const;

private:
  llvm::Error prepare();
  /// The round as functions `fn`_K in files `filePrefix`N.cpp (EmitRound.cpp),
  /// appended to `files`; their names to `names`.
  llvm::Error emitRound(const std::string &fn, const std::string &filePrefix,
                        std::vector<GeneratedFile> &files,
                        std::vector<std::string> &names);
  /// The start-up check's row of every distinct convolution call of the
  /// round; `subBatch` > 0 states the sizes it runs at (else the
  /// program's).
  void convRows(std::vector<std::string> &rows, int64_t subBatch = 0,
                int64_t lastSubBatch = 0) const;
  llvm::Expected<std::string> emitRun(const Instr &in, size_t index);
  /// Update tasks at [begin, end) of `list` that run back to back on the
  /// compute stream: how many from begin (0: list[begin] is no update).
  size_t updateRun(const std::vector<Instr> &list, size_t begin) const;
  /// The update tasks of list[begin, begin + count) as one group call.
  std::string emitUpdateGroup(const std::vector<Instr> &list, size_t begin,
                              size_t count) const;
  std::string resName(ResidencyId r) const { return resNames[r]; }
  /// The HomeTensor a copy of homed block `b` names.
  std::string homeTensor(BlockId b);
  std::string params(OpId op) const { return "P" + std::to_string(op); }
  std::string header() const;
  std::string mainFile() const;
  std::string cmakeFile() const;

  const TaskGraph &tg;
  const Graph &g;
  const Plan &plan;
  EmitOptions opts;
  std::vector<int32_t> weightId; // per value, index into weights
  std::vector<ValueId> weights;  // resident tensors
  std::vector<int32_t> slotOf;   // per block, host slot (-1 none)
  std::vector<BlockId> slots;
  std::vector<std::string> resNames; // identifier per residency
  std::vector<int32_t> lastAccess;   // per residency: round instr index
  std::vector<int> lastStream;
  std::vector<OpParamsText> opText;
  std::string internalError;
  /// The evaluation round's convolution rows (convRows), for main.cpp.
  std::vector<std::string> evalConvRows;
  std::string curTask; // for internal errors
  /// Per round instruction index: for accumulating writes, whether an
  /// earlier task in the round wrote the same block.
  std::map<std::pair<size_t, BlockId>, bool> writtenBefore;
};

} // namespace memfit::emit

#endif
