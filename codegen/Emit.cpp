//===- Emit.cpp - The trainer program from a Plan -------------------------===//
#include "codegen/Emit.h"

#include "codegen/Names.h"
#include "codegen/OpParams.h"
#include "compiler/Diagnostics.h"
#include "passes/Liveness.h"

#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>
#include <sstream>

namespace memfit {
namespace {

const char *kStreams[] = {"Compute", "CopyOut", "CopyIn"};

class Emitter {
public:
  Emitter(const TaskGraph &tg, const Plan &plan, const EmitOptions &opts)
      : tg(tg), g(*tg.graph), plan(plan), opts(opts) {}

  llvm::Expected<std::vector<GeneratedFile>> run();

private:
  llvm::Error prepare();
  llvm::Expected<std::string> emitRun(const Instr &in, size_t index);
  std::string ptr(BlockId b, const std::map<BlockId, ResidencyId> &res);
  std::string resName(ResidencyId r) const { return resNames[r]; }
  std::string params(OpId op) const { return "P" + std::to_string(op); }
  std::string accFlag(const Task &t, BlockId b, size_t index) const;
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
  std::string curTask; // for internal errors
  /// Per round instruction index: for accumulating writes, whether an
  /// earlier task in the round wrote the same block.
  std::map<std::pair<size_t, BlockId>, bool> writtenBefore;
};

llvm::Error Emitter::prepare() {
  weightId.assign(g.values.size(), -1);
  for (ValueId w : g.weights()) {
    weightId[w] = static_cast<int32_t>(weights.size());
    weights.push_back(w);
  }
  slotOf.assign(tg.blocks.size(), -1);
  for (const Instr &in : plan.round)
    if (in.kind == InstrKind::CopyOut || in.kind == InstrKind::CopyIn) {
      BlockId b = plan.residencies[in.residency].block;
      if (b == tg.inputBlock || b == tg.labelBlock || slotOf[b] >= 0)
        continue;
      slotOf[b] = static_cast<int32_t>(slots.size());
      slots.push_back(b);
    }
  for (ResidencyId r = 0; r < (ResidencyId)plan.residencies.size(); ++r)
    resNames.push_back(identifierFrom("r" + std::to_string(r) + "_",
                                      tg.blocks[plan.residencies[r].block].name,
                                      24));
  lastAccess.assign(plan.residencies.size(), -1);
  lastStream.assign(plan.residencies.size(), 0);
  std::set<BlockId> written;
  for (size_t i = 0; i < plan.round.size(); ++i) {
    const Instr &in = plan.round[i];
    auto touch = [&](ResidencyId r) {
      if (r >= 0) {
        lastAccess[r] = static_cast<int32_t>(i);
        lastStream[r] = static_cast<int>(in.stream);
      }
    };
    if (in.kind == InstrKind::Run) {
      for (ResidencyId r : in.operands)
        touch(r);
      const Task &t = tg.tasks[in.task];
      if (!in.recompute)
        for (BlockId b : t.writes) {
          BlockId s = storageOf(tg, b);
          writtenBefore[{i, s}] = written.count(s) > 0;
          written.insert(s);
        }
    } else if (in.kind == InstrKind::CopyOut || in.kind == InstrKind::CopyIn) {
      touch(in.residency);
    }
  }
  opText.resize(g.ops.size());
  for (OpId o = 0; o < (OpId)g.ops.size(); ++o) {
    auto p = opParams(g, o);
    if (!p)
      return p.takeError();
    opText[o] = *p;
  }
  return llvm::Error::success();
}

std::string Emitter::ptr(BlockId b, const std::map<BlockId, ResidencyId> &res) {
  const Block &blk = tg.blocks[b];
  switch (blk.kind) {
  case BlockKind::Weight:
    return llvm::formatv("x.weight({0})", weightId[blk.value]).str();
  case BlockKind::WeightGrad:
    return llvm::formatv("x.grad({0})", weightId[blk.value]).str();
  case BlockKind::Momentum:
    return llvm::formatv("x.momentumBuf({0})", weightId[blk.value]).str();
  case BlockKind::LossValue:
    return "x.lossValue()";
  default:
    break;
  }
  auto it = res.find(storageOf(tg, b));
  if (it == res.end()) {
    // Codegen asked for a block the task does not list: a bug here, not in
    // the plan. The compile fails rather than emit a wrong pointer.
    if (internalError.empty())
      internalError = "internal: codegen needs " + quoteName(blk.name) +
                      ", which is not an operand of task " + quoteName(curTask);
    return "nullptr";
  }
  std::string p = "x.arena(" + resName(it->second) + ")";
  if (blk.kind == BlockKind::Label && tg.loss == LossKind::SoftmaxCrossEntropy)
    p = "x.arenaInt(" + resName(it->second) + ")";
  return p;
}

std::string Emitter::accFlag(const Task &t, BlockId b, size_t index) const {
  BlockId s = storageOf(tg, b);
  auto it = writtenBefore.find({index, s});
  bool before = it != writtenBefore.end() && it->second;
  if (tg.blocks[s].kind == BlockKind::WeightGrad)
    return before ? "true" : "x.accumulateWeights()";
  return before ? "true" : "false";
}

llvm::Expected<std::string> Emitter::emitRun(const Instr &in, size_t index) {
  const Task &t = tg.tasks[in.task];
  curTask = t.name;
  std::map<BlockId, ResidencyId> res;
  size_t k = 0;
  for (const auto *list : {&t.reads, &t.writes})
    for (BlockId b : *list) {
      if (in.operands[k] >= 0)
        res[storageOf(tg, b)] = in.operands[k];
      ++k;
    }
  std::string out = "  x.setTask(" + stringLiteral(t.name) + ");\n";
  if (t.kind == TaskKind::Update) {
    BlockId w = t.reads[0];
    return out +
           llvm::formatv("  x.sgd({0});\n", weightId[tg.blocks[w].value]).str();
  }
  if (t.kind == TaskKind::Loss) {
    std::string d = t.writes.size() > 1 ? ptr(t.writes[1], res) : "nullptr";
    return out + llvm::formatv("  x.loss({0}, {1}, x.lossValue(), {2});\n",
                               ptr(t.reads[0], res), ptr(t.reads[1], res), d)
                     .str();
  }
  const Op &op = g.ops[t.op];
  const Value &xv = g.values[op.inputs[0]];
  auto V = [&](ValueId v) { return ptr(tg.valueBlock[v], res); };
  // An operand the kernel may skip (Add/Sub backward reads only dY): a
  // pointer when the task reads the block, else nullptr.
  auto VO = [&](ValueId v) {
    BlockId b = tg.valueBlock[v];
    bool read = b >= 0 && (isWeightSide(tg.blocks[b].kind) ||
                           res.count(storageOf(tg, b)));
    return read ? ptr(b, res) : std::string("nullptr");
  };
  auto D = [&](ValueId v) {
    return tg.gradBlock[v] >= 0 ? ptr(tg.gradBlock[v], res) : "nullptr";
  };
  auto hasGradWrite = [&](ValueId v) {
    BlockId gb = tg.gradBlock[v];
    return gb >= 0 &&
           std::find(t.writes.begin(), t.writes.end(), gb) != t.writes.end();
  };
  auto DW = [&](ValueId v) { return hasGradWrite(v) ? D(v) : "nullptr"; };
  auto A = [&](ValueId v) {
    return hasGradWrite(v) ? accFlag(t, tg.gradBlock[v], index) : "false";
  };
  ValueId y = op.outputs[0];
  std::string P = params(t.op);
  std::string ws =
      llvm::formatv("{0}, {1}", in.workspaceOffset, in.workspaceBytes).str();
  // Conv and Gemm take an optional bias as their third operand.
  auto bias = [&]() {
    return op.inputs.size() > 2 ? V(op.inputs[2]) : std::string("nullptr");
  };
  auto biasGrad = [&]() {
    return op.inputs.size() > 2 ? DW(op.inputs[2]) : "nullptr";
  };
  int64_t per = xv.elementsPerSample();
  std::string line;
  using llvm::formatv;
  switch (t.kind) {
  case TaskKind::Forward:
    switch (op.kind) {
    case OpKind::Conv:
      line =
          formatv("x.convForward({0}, {1}, {2}, {3}, {4}, {5}, {6})", P,
                  in.algo, V(op.inputs[0]), V(op.inputs[1]), bias(), V(y), ws);
      break;
    case OpKind::Relu:
    case OpKind::LeakyRelu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Clip:
      line = formatv("x.actForward({0}, {1}, {2}, {3})", P, per,
                     V(op.inputs[0]), V(y));
      break;
    case OpKind::MaxPool:
    case OpKind::AveragePool:
      line = formatv("x.poolForward({0}, {1}, {2})", P, V(op.inputs[0]), V(y));
      break;
    case OpKind::GlobalAveragePool:
      line = formatv("x.gapForward({0}, {1}, {2}, {3})", xv.dims[1],
                     per / xv.dims[1], V(op.inputs[0]), V(y));
      break;
    case OpKind::BatchNorm:
      if (in.recompute) // the saved statistics, running ones untouched
        line = formatv("x.bnApply({0}, {1}, {2}, {3}, {4}, {5})", P,
                       V(op.inputs[0]), V(op.inputs[1]), V(op.inputs[2]),
                       ptr(t.writes[1], res), V(y));
      else
        line = formatv("x.bnForward({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                       "true)",
                       P, V(op.inputs[0]), V(op.inputs[1]), V(op.inputs[2]),
                       V(op.inputs[3]), V(op.inputs[4]), V(y),
                       ptr(t.writes[1], res));
      break;
    case OpKind::LRN:
      line = formatv("x.lrnForward({0}, {1}, {2})", P, V(op.inputs[0]), V(y));
      break;
    case OpKind::Dropout:
      line = formatv("x.dropoutForward({0}, {1}, {2}, {3})", P, t.op,
                     V(op.inputs[0]), V(y));
      break;
    case OpKind::Gemm:
    case OpKind::MatMul:
      line = formatv("x.gemmForward({0}, {1}, {2}, {3}, {4})", P,
                     V(op.inputs[0]), V(op.inputs[1]), bias(), V(y));
      break;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
      line = formatv("x.binaryForward({0}, {1}, {2}, {3})", P, V(op.inputs[0]),
                     V(op.inputs[1]), V(y));
      break;
    case OpKind::Sum: {
      std::string s =
          formatv("x.copy({0}, {1}, {2});", per, V(op.inputs[0]), V(y));
      for (size_t i = 1; i < op.inputs.size(); ++i)
        s += formatv("\n  x.accumulateInto({0}, {1}, {2});", per,
                     V(op.inputs[i]), V(y))
                 .str();
      line = s.substr(0, s.size() - 1);
      break;
    }
    case OpKind::Concat: {
      std::string parts, ins;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        parts += (i ? ", " : "") + std::to_string(perSample(g, op.inputs[i]));
        ins += (i ? ", " : "") + V(op.inputs[i]);
      }
      line = formatv("{{ static const int64_t parts[] = {{{0}}; const float "
                     "*in[] = {{{1}}; x.concatForward({2}, parts, in, {3}); }",
                     parts, ins, op.inputs.size(), V(y));
      break;
    }
    case OpKind::Flatten:
    case OpKind::Reshape:
      return out + "  // a view: the output shares its input's bytes\n";
    case OpKind::Pad:
      line = formatv("x.padForward({0}, {1}, {2})", P, V(op.inputs[0]), V(y));
      break;
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
      line = formatv("x.softmaxForward({0}, {1}, {2}, {3})", xv.dims[1],
                     op.kind == OpKind::LogSoftmax ? "true" : "false",
                     V(op.inputs[0]), V(y));
      break;
    }
    break;
  case TaskKind::BackwardData: {
    ValueId x0 = op.inputs[0];
    switch (op.kind) {
    case OpKind::Conv:
      line = formatv("x.convBackwardData({0}, {1}, {2}, {3}, {4}, {5}, {6})", P,
                     in.algo, V(op.inputs[1]), D(y), DW(x0), A(x0), ws);
      break;
    case OpKind::Relu:
    case OpKind::LeakyRelu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Clip:
      line = formatv("x.actBackward({0}, {1}, {2}, {3}, {4}, {5})", P, per,
                     V(y), D(y), DW(x0), A(x0));
      break;
    case OpKind::MaxPool:
    case OpKind::AveragePool:
      line = formatv("x.poolBackward({0}, {1}, {2}, {3}, {4}, {5})", P, V(x0),
                     V(y), D(y), DW(x0), A(x0));
      break;
    case OpKind::GlobalAveragePool:
      line = formatv("x.gapBackward({0}, {1}, {2}, {3}, {4})", xv.dims[1],
                     per / xv.dims[1], D(y), DW(x0), A(x0));
      break;
    case OpKind::BatchNorm:
      line = formatv("x.bnBackwardData({0}, {1}, {2}, {3}, {4}, {5}, {6})", P,
                     V(x0), V(op.inputs[1]), ptr(t.reads[2], res), D(y), DW(x0),
                     A(x0));
      break;
    case OpKind::LRN:
      line = formatv("x.lrnBackward({0}, {1}, {2}, {3}, {4}, {5})", P, V(x0),
                     V(y), D(y), DW(x0), A(x0));
      break;
    case OpKind::Dropout:
      line = formatv("x.dropoutBackward({0}, {1}, {2}, {3}, {4})", P, t.op,
                     D(y), DW(x0), A(x0));
      break;
    case OpKind::Gemm:
    case OpKind::MatMul:
      line = formatv("x.gemmBackwardData({0}, {1}, {2}, {3}, {4})", P,
                     V(op.inputs[1]), D(y), DW(x0), A(x0));
      break;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul: {
      ValueId b = op.inputs[1];
      bool bData = g.values[b].kind != ValueKind::Weight;
      std::string accB = bData ? A(b) : "false";
      if (b == x0)
        accB = "true"; // both operands are one value: the second adds
      line = formatv("x.binaryBackward({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                     "{7})",
                     P, VO(x0), VO(b), D(y), DW(x0), bData ? DW(b) : "nullptr",
                     A(x0), accB);
      break;
    }
    case OpKind::Sum: {
      std::string s;
      std::set<ValueId> seen;
      for (ValueId v : op.inputs) {
        if (!hasGradWrite(v))
          continue;
        bool acc = A(v) != "false" || seen.count(v);
        s += formatv("x.{0}({1}, {2}, {3});\n  ",
                     acc ? "accumulateInto" : "copy", per, D(y), D(v))
                 .str();
        seen.insert(v);
      }
      line = s.substr(0, s.size() - 4);
      break;
    }
    case OpKind::Concat: {
      std::string parts, ds, accs;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        ValueId v = op.inputs[i];
        parts += (i ? ", " : "") + std::to_string(perSample(g, v));
        ds += (i ? ", " : "") + std::string(DW(v));
        accs += (i ? ", " : "") + A(v);
      }
      line = formatv("{{ static const int64_t parts[] = {{{0}}; float *d[] = "
                     "{{{1}}; const bool acc[] = {{{2}}; "
                     "x.concatBackward({3}, parts, {4}, d, acc); }",
                     parts, ds, accs, op.inputs.size(), D(y));
      break;
    }
    case OpKind::Flatten:
    case OpKind::Reshape:
      if (storageOf(tg, tg.gradBlock[y]) == storageOf(tg, tg.gradBlock[x0]))
        return out + "  // a view: the gradient already is the input's\n";
      line = formatv("x.{0}({1}, {2}, {3})",
                     A(x0) == "false" ? "copy" : "accumulateInto", per, D(y),
                     DW(x0));
      break;
    case OpKind::Pad:
      line =
          formatv("x.padBackward({0}, {1}, {2}, {3})", P, D(y), DW(x0), A(x0));
      break;
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
      line =
          formatv("x.softmaxBackward({0}, {1}, {2}, {3}, {4}, {5})", xv.dims[1],
                  op.kind == OpKind::LogSoftmax ? "true" : "false", V(y), D(y),
                  DW(x0), A(x0));
      break;
    }
    break;
  }
  case TaskKind::BackwardWeight: {
    ValueId x0 = op.inputs[0];
    switch (op.kind) {
    case OpKind::Conv:
      line = formatv("x.convBackwardFilter({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                     "{7})",
                     P, in.algo, V(x0), D(y), DW(op.inputs[1]), biasGrad(),
                     A(op.inputs[1]), ws);
      break;
    case OpKind::Gemm:
    case OpKind::MatMul:
      line =
          formatv("x.gemmBackwardWeight({0}, {1}, {2}, {3}, {4}, {5})", P,
                  V(x0), D(y), DW(op.inputs[1]), biasGrad(), A(op.inputs[1]));
      break;
    case OpKind::BatchNorm:
      line = formatv("x.bnBackwardWeight({0}, {1}, {2}, {3}, {4}, {5}, {6})", P,
                     V(x0), ptr(t.reads[1], res), D(y), DW(op.inputs[1]),
                     DW(op.inputs[2]), A(op.inputs[1]));
      break;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
      line = formatv("x.binaryBackward({0}, {1}, {2}, {3}, nullptr, {4}, "
                     "false, {5})",
                     P, VO(x0), VO(op.inputs[1]), D(y), DW(op.inputs[1]),
                     A(op.inputs[1]));
      break;
    default:
      return makeErrorF("node {0} ({1}): weight gradients of this operator are "
                        "not supported by the runtime",
                        quoteName(op.name), op.onnxOp);
    }
    break;
  }
  default:
    break;
  }
  return out + "  " + line + ";\n";
}

std::string Emitter::header() const {
  return "// Generated by memfit from model " + commentText(g.name) +
         ". Do not edit: recompile the model instead.\n";
}

std::string Emitter::mainFile() const {
  std::ostringstream os;
  os << header();
  os << "// Plan: policy " << plan.policy << ", batch " << plan.batch << " as "
     << plan.numSubBatches << " sub-batches of " << plan.subBatch << ", arena "
     << plan.arenaBytes << " bytes + resident " << plan.residentBytes
     << " bytes (budget " << plan.budget << ").\n";
  os << "#include \"trainer.h\"\n\nusing namespace memfit::rt;\n\n";
  os << "#ifndef MEMFIT_MODEL_PATH\n#define MEMFIT_MODEL_PATH \"model.onnx\"\n"
        "#endif\n\n";
  for (size_t k = 0; k < weights.size(); ++k) {
    const Value &v = g.values[weights[k]];
    if (!v.dataName.empty() || v.data.empty() || v.trainable)
      continue;
    os << "static const float kConst" << k << "[] = {";
    for (size_t e = 0; e < v.data.size(); ++e)
      os << (e ? ", " : "") << llvm::formatv("{0:e9}f", v.data[e]).str();
    os << "};\n";
  }
  os << "static const WeightInfo kWeights[] = {\n";
  for (const ValueId &w : weights) {
    const Value &v = g.values[w];
    int64_t fanIn = 1, fanOut = 1;
    if (v.dims.size() >= 2) {
      int64_t rf = 1;
      for (size_t i = 2; i < v.dims.size(); ++i)
        rf *= v.dims[i];
      // Conv [out, in/g, kh, kw], Gemm transB [out, in]: fan-in from dim 1.
      fanIn = v.dims[1] * rf;
      fanOut = v.dims[0] * rf;
    }
    const char *init = v.init == WeightInit::HeNormal        ? "HeNormal"
                       : v.init == WeightInit::GlorotUniform ? "GlorotUniform"
                       : v.init == WeightInit::Zeros         ? "Zeros"
                       : v.init == WeightInit::Ones          ? "Ones"
                                                             : "FromModel";
    std::string dataName =
        v.dataName.empty() ? "nullptr" : stringLiteral(v.dataName);
    // Constants folded from the graph have no initializer: their values
    // are compiled in.
    std::string data = "nullptr";
    if (v.dataName.empty() && !v.data.empty() && !v.trainable)
      data = "kConst" + std::to_string(&w - weights.data());
    os << "    {" << stringLiteral(v.name) << ", " << dataName << ", " << data
       << ", " << v.elementsPerSample() << ", " << fanIn << ", " << fanOut
       << ", Init::" << init << ", " << (v.trainable ? "true" : "false")
       << "},\n";
  }
  os << "};\n\n";
  os << "static const HostSlot kSlots[] = {\n";
  for (BlockId b : slots)
    os << "    {" << tg.blocks[b].a << ", " << tg.blocks[b].c << "}, // "
       << commentText(tg.blocks[b].name) << "\n";
  if (slots.empty())
    os << "    {0, 0}, // none: nothing is offloaded\n";
  os << "};\n\n";
  const Value &in = g.values[g.input];
  const Value &outV = g.values[g.output];
  int64_t classes = outV.dims.size() == 2 ? outV.dims[1] : 0;
  for (const Task &t : tg.tasks)
    if (t.kind == TaskKind::Loss) {
      const Value &lv = g.values[tg.blocks[t.reads[0]].value];
      classes = lv.dims.size() == 2 ? lv.dims[1] : classes;
    }
  bool mse = tg.loss == LossKind::MSE;
  os << "static const Program kProgram = {\n"
     << "    {" << stringLiteral(g.name) << ", " << plan.batch << ", "
     << plan.subBatch << ", " << plan.numSubBatches << ", " << plan.arenaBytes
     << ", " << plan.numEvents << ", " << in.elementsPerSample() << ", "
     << (mse ? tg.blocks[tg.labelBlock].a / 4 : 1) << ", "
     << (mse ? "true" : "false") << ", " << classes << ", "
     << (tg.useMomentum ? "true" : "false") << ", " << weights.size() << ", "
     << slots.size() << "},\n"
     << "    MEMFIT_MODEL_PATH, kWeights, kSlots, memfit_round, memfit_update};"
        "\n\n";
  os << "int main(int argc, char **argv) {\n"
     << "  return trainerMain(argc, argv, kProgram);\n}\n";
  return os.str();
}

std::string Emitter::cmakeFile() const {
  std::ostringstream os;
  os << "# Generated by memfit. Builds the trainer against memfit's runtime.\n"
        "#   cmake -S . -B build [-DMEMFIT_BACKEND=cpu] && cmake --build "
        "build\n"
        "cmake_minimum_required(VERSION 3.20)\n"
        "project(memfit_trainer LANGUAGES C CXX)\n"
        "set(CMAKE_CXX_STANDARD 20)\n"
        "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
        "if(NOT CMAKE_BUILD_TYPE)\n  set(CMAKE_BUILD_TYPE Release)\nendif()\n"
        "set(MEMFIT_BACKEND cuda CACHE STRING \"cuda or cpu (emulation)\")\n"
        "set(MEMFIT_RUNTIME_DIR "
     << stringLiteral(opts.memfitBuildDir)
     << " CACHE PATH \"memfit's build directory\")\n"
        "include(${MEMFIT_RUNTIME_DIR}/memfit-runtime.cmake)\n"
        "file(GLOB TRAINER_SOURCES CONFIGURE_DEPENDS "
        "${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)\n"
        "add_executable(trainer ${TRAINER_SOURCES})\n"
        "target_compile_definitions(trainer PRIVATE "
        "MEMFIT_MODEL_PATH=\"${CMAKE_CURRENT_SOURCE_DIR}/"
     << opts.modelFile
     << "\")\n"
        "if(MEMFIT_BACKEND STREQUAL \"cpu\")\n"
        "  target_link_libraries(trainer PRIVATE memfit::memfit_runtime_emu)\n"
        "elseif(MEMFIT_BACKEND STREQUAL \"cuda\")\n"
        "  if(NOT TARGET memfit::memfit_runtime_cuda)\n"
        "    message(FATAL_ERROR \"memfit was built without CUDA; use "
        "-DMEMFIT_BACKEND=cpu\")\n"
        "  endif()\n"
        "  target_link_libraries(trainer PRIVATE memfit::memfit_runtime_cuda)\n"
        "else()\n"
        "  message(FATAL_ERROR \"MEMFIT_BACKEND must be cuda or cpu\")\n"
        "endif()\n";
  return os.str();
}

llvm::Expected<std::vector<GeneratedFile>> Emitter::run() {
  if (auto err = prepare())
    return err;
  std::vector<GeneratedFile> files;
  // The round, split into functions and files.
  std::vector<std::string> bodies;
  std::vector<std::set<ResidencyId>> usedRes;
  std::vector<std::set<OpId>> usedOps;
  std::string cur;
  std::set<ResidencyId> curRes;
  std::set<OpId> curOps;
  int count = 0;
  auto flush = [&]() {
    bodies.push_back(cur);
    usedRes.push_back(curRes);
    usedOps.push_back(curOps);
    cur.clear();
    curRes.clear();
    curOps.clear();
    count = 0;
  };
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
      cur += llvm::formatv("  x.copyOut({0}, {1}); // offload {2}\n",
                           useRes(in.residency), slotOf[b],
                           commentText(tg.blocks[b].name))
                 .str();
      break;
    }
    case InstrKind::CopyIn: {
      BlockId b = plan.residencies[in.residency].block;
      if (b == tg.inputBlock)
        cur += "  x.loadInput(" + useRes(in.residency) + ");\n";
      else if (b == tg.labelBlock)
        cur += "  x.loadLabels(" + useRes(in.residency) + ");\n";
      else
        cur +=
            llvm::formatv("  x.copyIn({0}, {1}); // prefetch {2}\n", slotOf[b],
                          useRes(in.residency), commentText(tg.blocks[b].name))
                .str();
      break;
    }
    case InstrKind::Record:
      cur += llvm::formatv("  x.record({0}, {1});\n", s, in.event).str();
      break;
    case InstrKind::Wait:
      cur += llvm::formatv("  x.wait({0}, {1});\n", s, in.event).str();
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
    if (++count >= opts.instrsPerFunction)
      flush();
  }
  if (!cur.empty() || bodies.empty())
    flush();

  std::string th = header();
  th += "#pragma once\n#include \"runtime/Exec.h\"\n\n";
  for (size_t f = 0; f < bodies.size(); ++f)
    th += "void memfit_round_" + std::to_string(f) + "(memfit::rt::Exec &x);\n";
  th += "void memfit_round(memfit::rt::Exec &x);\n"
        "void memfit_update(memfit::rt::Exec &x);\n";
  files.push_back({"src/trainer.h", th});

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
      os << "void memfit_round_" << f << "(Exec &x) {\n"
         << bodies[f] << "}\n\n";
    files.push_back(
        {llvm::formatv("src/round_{0}.cpp", start / perFile).str(), os.str()});
  }

  std::ostringstream os;
  os << header() << "#include \"trainer.h\"\n\nusing namespace memfit::rt;\n\n";
  os << "// One sub-batch: " << plan.round.size() << " instructions.\n";
  os << "void memfit_round(Exec &x) {\n";
  for (size_t f = 0; f < bodies.size(); ++f)
    os << "  memfit_round_" << f << "(x);\n";
  os << "}\n\n// Once per batch, after every sub-batch.\n";
  os << "void memfit_update(Exec &x) {\n";
  for (size_t i = 0; i < plan.update.size(); ++i) {
    auto line = emitRun(plan.update[i], i);
    if (!line)
      return line.takeError();
    os << *line;
  }
  os << "}\n";
  files.push_back({"src/schedule.cpp", os.str()});
  if (!internalError.empty())
    return makeError(internalError);
  files.push_back({"src/main.cpp", mainFile()});
  files.push_back({"CMakeLists.txt", cmakeFile()});
  return files;
}

} // namespace

llvm::Expected<std::vector<GeneratedFile>>
emitTrainer(const TaskGraph &tg, const Plan &plan, const EmitOptions &opts) {
  return Emitter(tg, plan, opts).run();
}

} // namespace memfit
