//===- EmitRound.cpp - A round's calls as functions and files -------------===//
//
// The instructions of one round in issue order, each a call on the Exec,
// with the release of every residency after its last use and the
// collectives of data parallelism after the instruction that makes their
// gradients final; split into functions and translation units so that very
// deep models build quickly. The training round and the evaluation round
// are both written here.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emitter.h"

#include "codegen/Names.h"
#include "compiler/ir/Buckets.h"
#include "compiler/ir/TaskGraph.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace memfit::emit {

/// The round's instructions as functions of at most instrsPerFunction
/// calls, functionsPerFile to a file `filePrefix`N.cpp, named `fn`_K.
llvm::Error Emitter::emitRound(const std::string &fn,
                               const std::string &filePrefix,
                               std::vector<GeneratedFile> &files,
                               std::vector<std::string> &names) {
  // The round, split into functions and files.
  std::vector<std::string> bodies;
  std::vector<std::set<ResidencyId>> usedRes;
  std::vector<std::set<OpId>> usedOps;
  std::string cur;
  std::set<ResidencyId> curRes;
  std::set<OpId> curOps;
  int count = 0;
  // In a batch split into chunks: the chunk the calls so far work on.
  int32_t chunk = -1;
  auto setChunk = [&](int32_t c) {
    if (c >= 0 && c != chunk) {
      cur += "  x.setChunk(" + std::to_string(c) + ");\n";
      chunk = c;
    }
  };
  auto flush = [&]() {
    bodies.push_back(cur);
    usedRes.push_back(curRes);
    usedOps.push_back(curOps);
    cur.clear();
    curRes.clear();
    curOps.clear();
    count = 0;
  };
  // Data parallelism: each gradient bucket's collective right after the
  // instruction that makes its last gradient final.
  std::map<size_t, std::vector<std::string>> bucketCalls;
  for (const GradientBucket &b : gradientBuckets(tg, plan)) {
    std::string ids;
    for (BlockId w : b.weights)
      ids += (ids.empty() ? "" : ", ") +
             std::to_string(weightId[tg.blocks[w].value]);
    size_t at =
        b.readyAfter >= 0 ? size_t(b.readyAfter) : plan.round.size() - 1;
    bucketCalls[at].push_back("  x.gradientsReady({" + ids + "});\n");
  }
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    const char *s = kStreams[static_cast<int>(in.stream)];
    auto useRes = [&](ResidencyId r) {
      curRes.insert(r);
      return resName(r);
    };
    switch (in.kind) {
    case InstrKind::Run: {
      const Task &t = tg.tasks[in.task];
      std::string note = "  // " + commentText(t.name);
      if (t.op >= 0)
        note += " -- ONNX node " + commentText(g.ops[t.op].name) + " (" +
                commentText(g.ops[t.op].onnxOp) + ")";
      if (in.recompute)
        note += ", recomputed";
      cur += note + "\n";
      setChunk(t.chunk);
      for (ResidencyId r : in.operands)
        if (r >= 0)
          curRes.insert(r);
      if (t.op >= 0)
        curOps.insert(t.op);
      auto line = emitRun(in, i);
      if (!line)
        return line.takeError();
      cur += *line;
      break;
    }
    case InstrKind::CopyOut: {
      BlockId b = plan.residencies[in.residency].block;
      if (tg.homeOf(b) == Tier::Host) {
        cur += llvm::formatv("  x.copyOutHome({0}, {1}, {2}); // home: {3}\n",
                             useRes(in.residency), homeTensor(b),
                             weightId[tg.blocks[b].value],
                             commentText(tg.blocks[b].name))
                   .str();
        break;
      }
      cur += llvm::formatv("  x.copyOut({0}, {1}); // offload {2}\n",
                           useRes(in.residency), slotOf[b],
                           commentText(tg.blocks[b].name))
                 .str();
      break;
    }
    case InstrKind::CopyIn: {
      BlockId b = plan.residencies[in.residency].block;
      if (isBatchData(tg.blocks[b].kind))
        setChunk(tg.blocks[b].chunk);
      if (tg.blocks[b].kind == BlockKind::Input)
        cur += "  x.loadInput(" + useRes(in.residency) + ");\n";
      else if (tg.blocks[b].kind == BlockKind::Label)
        cur += "  x.loadLabels(" + useRes(in.residency) + ");\n";
      else if (tg.homeOf(b) == Tier::Host)
        cur +=
            llvm::formatv("  x.copyInHome({0}, {1}, {2}); // from home: "
                          "{3}\n",
                          homeTensor(b), weightId[tg.blocks[b].value],
                          useRes(in.residency), commentText(tg.blocks[b].name))
                .str();
      else
        cur +=
            llvm::formatv("  x.copyIn({0}, {1}); // prefetch {2}\n", slotOf[b],
                          useRes(in.residency), commentText(tg.blocks[b].name))
                .str();
      break;
    }
    case InstrKind::Record:
      cur += llvm::formatv("  x.record({0}, {1});\n", s, in.event).str();
      // The host updates this event starts, in the last round.
      for (const Instr &up : plan.update)
        if (up.onHost && up.event == in.event)
          cur += llvm::formatv(
                     "  x.hostReady({0}, {1}); // {2}\n", s,
                     weightId[tg.blocks[tg.tasks[up.task].reads[0]].value],
                     commentText(tg.tasks[up.task].name))
                     .str();
      break;
    case InstrKind::Wait:
      cur += llvm::formatv("  x.wait({0}, {1});\n", s, in.event).str();
      break;
    case InstrKind::WaitHost:
      // The gradient pool's bytes of that update's gradient are free after.
      cur +=
          llvm::formatv("  x.waitHost({0}, {1}); // {2}\n", s,
                        weightId[tg.blocks[tg.tasks[in.task].reads[0]].value],
                        commentText(tg.tasks[in.task].name))
              .str();
      break;
    }
    // Release what this instruction touched for the last time.
    std::vector<ResidencyId> touched;
    if (in.kind == InstrKind::Run)
      touched = in.operands;
    else if (in.residency >= 0)
      touched = {in.residency};
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    // An input overwritten in place hands its bytes to the output: they are
    // not free.
    ResidencyId over = inPlaceInput(tg, plan, in);
    for (ResidencyId r : touched)
      if (r >= 0 && r != over && lastAccess[r] == (int32_t)i)
        cur += llvm::formatv("  x.release({0}, {1}, {2});\n",
                             kStreams[lastStream[r]], useRes(r),
                             plan.residencies[r].bytes)
                   .str();
    if (auto it = bucketCalls.find(i); it != bucketCalls.end())
      for (const std::string &call : it->second)
        cur += call;
    if (++count >= opts.instrsPerFunction)
      flush();
  }
  if (!cur.empty() || bodies.empty())
    flush();

  size_t perFile = static_cast<size_t>(std::max(1, opts.functionsPerFile));
  for (size_t start = 0; start < bodies.size(); start += perFile) {
    std::ostringstream os;
    os << header() << "#include \"trainer.h\"\n\nusing namespace memfit::rt;\n"
       << "\nnamespace {\n";
    std::set<ResidencyId> res;
    std::set<OpId> ops;
    size_t end = std::min(bodies.size(), start + perFile);
    for (size_t f = start; f < end; ++f) {
      res.insert(usedRes[f].begin(), usedRes[f].end());
      ops.insert(usedOps[f].begin(), usedOps[f].end());
    }
    os << "// Arena offsets, one per residency of a block.\n";
    for (ResidencyId r : res)
      os << "constexpr int64_t " << resName(r) << " = "
         << plan.residencies[r].offset << ";\n";
    os << "// Operator parameters.\n";
    for (OpId o : ops)
      if (!opText[o].type.empty())
        os << "const " << opText[o].type << " " << params(o) << " = "
           << opText[o].init << "; // " << commentText(g.ops[o].name) << "\n";
    os << "} // namespace\n\n";
    for (size_t f = start; f < end; ++f)
      os << "void " << fn << "_" << f << "(Exec &x) {\n"
         << bodies[f] << "}\n\n";
    files.push_back(
        {filePrefix + std::to_string(start / perFile) + ".cpp", os.str()});
  }

  for (size_t f = 0; f < bodies.size(); ++f)
    names.push_back(fn + "_" + std::to_string(f));
  return llvm::Error::success();
}

} // namespace memfit::emit
