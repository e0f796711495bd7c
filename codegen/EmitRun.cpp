//===- EmitRun.cpp - One trainer call per task run
//-------------------------===//
#include "codegen/Emitter.h"

#include "codegen/Names.h"
#include "compiler/ir/TaskGraph.h"
#include "compiler/support/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>
#include <sstream>

namespace memfit::emit {

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
      internalError = "codegen needs " + quoteName(blk.name) +
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
      // Average pooling's backward reads only dY (Autodiff lists no other
      // operand), so x and y may be gone: VO passes nullptr then.
      line = formatv("x.poolBackward({0}, {1}, {2}, {3}, {4}, {5})", P, VO(x0),
                     VO(y), D(y), DW(x0), A(x0));
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

} // namespace memfit::emit
