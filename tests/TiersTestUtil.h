//===- TiersTestUtil.h - Zoo models planned across memory tiers -*- C++ -*-===//
#ifndef MEMFIT_TESTS_TIERSTESTUTIL_H
#define MEMFIT_TESTS_TIERSTESTUTIL_H

#include "PlanTestUtil.h"

#include "codegen/Emit.h"

#include <string>
#include <vector>

namespace memfit::test {

/// How many times `text` occurs in the generated files.
inline int64_t occurrences(const std::vector<GeneratedFile> &files,
                           const std::string &text) {
  int64_t n = 0;
  for (const GeneratedFile &f : files)
    for (size_t at = f.contents.find(text); at != std::string::npos;
         at = f.contents.find(text, at + 1))
      ++n;
  return n;
}

inline TrainingConfig adamw(Precision precision = Precision::FP32,
                            double clip = 0) {
  TrainingConfig cfg;
  cfg.optimizer = OptimizerKind::AdamW;
  cfg.precision = precision;
  cfg.clipGradNorm = clip;
  return cfg;
}

/// A zoo model planned under budgets in bytes, on a device whose host is
/// stated (the H100 SXM's: a DGX H100's share per GPU).
struct HostPlanned : Planned {
  HostPlanned(const std::string &name, int64_t batch,
              const std::string &device = "h100-sxm",
              Precision precision = Precision::FP32, double clip = 0)
      : Planned(name, batch, device, adamw(precision, clip)) {}
  llvm::Expected<PlanOutcome> planBytes(int64_t budget, int64_t hostBudget,
                                        int64_t forced = 0,
                                        int64_t homeBytesAtLeast = -1,
                                        int64_t nvmeBudget = 0,
                                        bool homeKeepsCopies = false) {
    PlanRequest req;
    req.batch = graph.batch;
    req.budget = budget;
    req.hostBudget = hostBudget;
    req.nvmeBudget = nvmeBudget;
    req.forcedSubBatch = forced;
    req.homeBytesAtLeast = homeBytesAtLeast;
    req.homeKeepsCopies = homeKeepsCopies;
    return planTraining(
        tg, [&](int64_t b) -> const CostTable & { return nvmeTable(b); }, req);
  }
  /// The device's tables with an NVMe drive of these rates (bytes/s; the
  /// built-in devices state none).
  double nvmeRead = 0, nvmeWrite = 0;
  /// > 0: the host-to-device and device-to-host links' rate (bytes/s).
  double link = 0;
  const CostTable &nvmeTable(int64_t b) {
    table(b);
    CostTable &t = tables[b];
    t.nvmeReadBytesPerSecond = nvmeRead;
    t.nvmeWriteBytesPerSecond = nvmeWrite;
    if (link > 0)
      t.h2dBytesPerSecond = t.d2hBytesPerSecond = link;
    return t;
  }
};

} // namespace memfit::test

#endif
