//===- Transformer.cpp - Attention products, LayerNorm, masks, embeddings -===//
//
// The operators transformers add: batched products of two activations
// (Q K^T, attention times V, also written as Einsum), layer normalization over
// the last axes, a masked fill with a constant mask (Where), and embedding
// lookups (Gather of a weight table by token ids or by constant positions).
// LayerNorm's backward recomputes the row statistics from X instead of saving
// them.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

#include <cctype>
#include <map>
#include <optional>

namespace memfit::ops {

namespace {
int64_t product(const std::vector<int64_t> &d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i)
    p *= d[i];
  return p;
}
} // namespace

// --- BatchMatMul ---

namespace {

/// a x b as batched matrix products into `out`. A value computed from
/// weights has no batch axis: it multiplies every sample's products alike
/// (BatchMatMulParams' aShared, bShared).
llvm::Error emitBatchMatMul(OnnxNode &node, ValueId a, ValueId b,
                            const std::string &outName,
                            std::string opName = {}) {
  std::vector<int64_t> ad = dimsOfValue(node, a), bd = dimsOfValue(node, b);
  const Value &va = node.graph().values[a], &vb = node.graph().values[b];
  // The products' leading axes, after the batch's.
  size_t fa = va.batched ? 1 : 0, fb = vb.batched ? 1 : 0;
  bool ok = ad.size() >= 2 + fa && bd.size() >= 2 + fb &&
            ad.back() == bd[bd.size() - 2] && ad.size() - fa == bd.size() - fb;
  std::vector<int64_t> leadA, leadB;
  if (ok) {
    leadA.assign(ad.begin() + fa, ad.end() - 2);
    leadB.assign(bd.begin() + fb, bd.end() - 2);
    // One operand shared by all products of a sample (its leading axes 1).
    int64_t la = product(leadA, 0, leadA.size()),
            lb = product(leadB, 0, leadB.size());
    ok = leadA == leadB || la == 1 || lb == 1;
  }
  // The products of a sample must be contiguous: the batch outermost.
  for (const Value *v : {&va, &vb})
    ok = ok && (!v->batched || (v->batchAxis == 0 && v->batchOuter == 1));
  auto label = [&](const Value &v, const std::vector<int64_t> &d) {
    return quoteName(v.name) + " of shape " + dimsStr(d) +
           (v.batched ? "" : " (computed from weights: no batch)");
  };
  if (!ok)
    return node.fail(
        "multiplies " + label(va, ad) + " by " + label(vb, bd) +
        ", which do not multiply as batched matrices (memfit supports [N, "
        "..., M, K] x [N, ..., K, P] with equal leading axes, or leading "
        "axes of 1 on one side; a value computed from weights has no N)");
  const std::vector<int64_t> &lead =
      product(leadA, 0, leadA.size()) == 1 ? leadB : leadA;
  std::vector<int64_t> out;
  if (va.batched || vb.batched)
    out.push_back(va.batched ? ad[0] : bd[0]);
  out.insert(out.end(), lead.begin(), lead.end());
  out.push_back(ad[ad.size() - 2]);
  out.push_back(bd.back());
  return node
      .emit(OpKind::BatchMatMul, {a, b}, {{outName, out}}, {}, false,
            std::move(opName))
      .takeError();
}

/// Transposes `x` by `perm` (the batch's axis 0 stays first) into a value
/// named `name`; `x` itself when perm is the identity.
llvm::Expected<ValueId> emitPermuted(OnnxNode &node, ValueId x,
                                     const std::vector<int64_t> &perm,
                                     const std::string &name,
                                     std::string opName) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity)
    return x;
  const Value &v = node.graph().values[x];
  OutSpec o{name, {}, 0, v.batchOuter, v.batchInner};
  for (int64_t p : perm)
    o.dims.push_back(v.dims[p]);
  OpAttrs attrs;
  attrs.perm = perm;
  auto op =
      node.emit(OpKind::Transpose, {x}, {o}, attrs, true, std::move(opName));
  if (!op)
    return op.takeError();
  return node.graph().ops[*op].outputs[0];
}

struct EinsumTerms {
  std::string a, b, out;
};

/// "bhid, bhjd -> bhij" as its three letter strings; nullopt for forms
/// memfit does not read (ellipses, one or three operands, no output).
std::optional<EinsumTerms> parseEinsum(const std::string &eq) {
  std::string s;
  for (char c : eq)
    if (c != ' ')
      s += c;
  size_t arrow = s.find("->"), comma = s.find(',');
  if (arrow == std::string::npos || comma == std::string::npos ||
      comma > arrow || s.find(',', comma + 1) != std::string::npos)
    return std::nullopt;
  EinsumTerms t{s.substr(0, comma), s.substr(comma + 1, arrow - comma - 1),
                s.substr(arrow + 2)};
  for (const std::string *term : {&t.a, &t.b, &t.out})
    for (size_t i = 0; i < term->size(); ++i)
      if (!std::isalpha(static_cast<unsigned char>((*term)[i])) ||
          term->find((*term)[i], i + 1) != std::string::npos)
        return std::nullopt;
  return t;
}

} // namespace

llvm::Error importBatchMatMul(OnnxNode &node) {
  auto a = node.activation(0), b = node.activation(1);
  if (llvm::Error e = firstError(a, b))
    return e;
  return emitBatchMatMul(node, *a, *b, node.outputName(0));
}

/// Einsum of two operands that is a batched matrix product (attention
/// written as einsum, MaxViT's "BGHID,BGHJD->BGHIJ", Funnel's relative
/// attention "binh,tnh->bnit" with a table computed from weights). A
/// batched operand's first letter is the sample's, first in the output too;
/// of the other letters, those in both operands and the output are batch
/// axes of the products, those in both operands only are summed (K), those
/// in one operand and the output are its free axes (M, N). Transposes bring
/// the operands to [batch..., M..., K...] and [batch..., K..., N...], views
/// merge groups of several letters, and the product goes back to the
/// output's order; each step is omitted where it changes nothing.
llvm::Error importEinsum(OnnxNode &node) {
  auto eq = node.attrString("equation", "");
  if (!eq)
    return eq.takeError();
  if (node.numInputs() != 2)
    return node.fail("has " + std::to_string(node.numInputs()) +
                     " operands; memfit supports Einsum of two operands");
  auto a = node.activation(0), b = node.activation(1);
  if (llvm::Error e = firstError(a, b))
    return e;
  auto terms = parseEinsum(*eq);
  std::vector<int64_t> ad = dimsOfValue(node, *a), bd = dimsOfValue(node, *b);
  const bool aBatched = node.graph().values[*a].batched,
             bBatched = node.graph().values[*b].batched;
  std::string sample, batch, m, k, n;
  bool ok =
      terms && terms->a.size() == ad.size() && terms->b.size() == bd.size();
  if (ok && (aBatched || bBatched)) {
    sample = aBatched ? terms->a.substr(0, 1) : terms->b.substr(0, 1);
    ok = terms->out.substr(0, 1) == sample &&
         (!bBatched || terms->b.substr(0, 1) == sample) &&
         (aBatched || terms->a.find(sample[0]) == std::string::npos) &&
         (bBatched || terms->b.find(sample[0]) == std::string::npos);
  }
  auto in = [](const std::string &t, char c) {
    return t.find(c) != std::string::npos;
  };
  if (ok) {
    for (char c : terms->out) {
      if (!sample.empty() && c == sample[0])
        continue;
      bool inA = in(terms->a, c), inB = in(terms->b, c);
      ok = ok && (inA || inB);
      (inA && inB ? batch : inA ? m : n) += c;
    }
    for (char c : terms->a)
      if (!in(terms->out, c)) {
        ok = ok && in(terms->b, c);
        k += c;
      }
    for (char c : terms->b)
      ok = ok && (in(terms->out, c) || in(terms->a, c));
  }
  ok = ok && !k.empty() && !m.empty() && !n.empty();
  for (size_t i = 0; ok && i < terms->a.size(); ++i) {
    size_t j = terms->b.find(terms->a[i]);
    ok = j == std::string::npos || bd[j] == ad[i];
  }
  if (!ok)
    return node.fail(
        "equation " + quoteName(*eq) + " on operands of shapes " + dimsStr(ad) +
        " and " + dimsStr(bd) +
        " is not a batched matrix product; memfit supports two-operand "
        "equations with the batch's letter first in each operand that has "
        "it and in the output, at least one summed letter and one free "
        "letter per operand");
  auto perm = [](const std::string &from, const std::string &to) {
    std::vector<int64_t> p;
    for (char c : to)
      p.push_back(static_cast<int64_t>(from.find(c)));
    return p;
  };
  // The extent of each letter.
  std::map<char, int64_t> extent;
  for (size_t i = 0; i < ad.size(); ++i)
    extent[terms->a[i]] = ad[i];
  for (size_t i = 0; i < bd.size(); ++i)
    extent[terms->b[i]] = bd[i];
  auto dimsOf = [&](const std::string &letters) {
    std::vector<int64_t> d;
    for (char c : letters)
      d.push_back(extent[c]);
    return d;
  };
  auto merged = [&](const std::string &letters) {
    int64_t p = 1;
    for (char c : letters)
      p *= extent[c];
    return p;
  };
  std::string base = node.outputName(0);
  // `x` (letters `from`) as [lead..., first, second] with each group merged.
  auto arrange = [&](ValueId x, const std::string &from,
                     const std::string &lead, const std::string &first,
                     const std::string &second,
                     int operand) -> llvm::Expected<ValueId> {
    std::string tag = " (operand " + std::to_string(operand);
    auto p = emitPermuted(
        node, x, perm(from, lead + first + second),
        base + tag + (operand ? " as [batch, K, N])" : " as [batch, M, K])"),
        node.name() + tag + " transposed)");
    if (!p || (first.size() == 1 && second.size() == 1))
      return p;
    OpAttrs view;
    view.shape = dimsOf(lead);
    view.shape.push_back(merged(first));
    view.shape.push_back(merged(second));
    auto op = node.emit(OpKind::Reshape, {*p},
                        {{base + tag + " as a matrix)", view.shape}}, view,
                        false, node.name() + tag + " as a matrix)");
    if (!op)
      return op.takeError();
    return node.graph().ops[*op].outputs[0];
  };
  auto pa = arrange(*a, terms->a, (aBatched ? sample : "") + batch, m, k, 0);
  if (!pa)
    return pa.takeError();
  auto pb = arrange(*b, terms->b, (bBatched ? sample : "") + batch, k, n, 1);
  if (!pb)
    return pb.takeError();
  std::string product = sample + batch + m + n;
  bool views = m.size() > 1 || n.size() > 1;
  bool direct = product == terms->out && !views;
  std::string productName = direct ? base : base + " (as [batch, M, N])";
  if (llvm::Error e =
          emitBatchMatMul(node, *pa, *pb, productName,
                          direct ? std::string() : node.name() + " (product)"))
    return e;
  if (direct)
    return llvm::Error::success();
  ValueId y = node.graph().ops.back().outputs[0];
  if (views) {
    // The merged free axes apart again.
    bool last = product == terms->out;
    OpAttrs view;
    view.shape = node.graph().values[y].dims;
    view.shape.resize(view.shape.size() - 2);
    for (int64_t e : dimsOf(m + n))
      view.shape.push_back(e);
    std::string name = last ? base : base + " (as [batch, M..., N...])";
    auto op = node.emit(OpKind::Reshape, {y}, {{name, view.shape}}, view, false,
                        node.name() + (last ? "" : " (view)"));
    if (!op || last)
      return op.takeError();
    y = node.graph().ops[*op].outputs[0];
  }
  auto out =
      emitPermuted(node, y, perm(product, terms->out), base, node.name());
  return out.takeError();
}

namespace {

struct Bmm {
  int64_t batch, m, k, cols, aBatch, bBatch;
};

Bmm bmmShape(const Graph &g, const Op &op) {
  const Value &a = g.value(op.inputs[0]), &b = g.value(op.inputs[1]);
  const Value &y = g.value(op.outputs[0]);
  size_t r = a.dims.size();
  int64_t m = a.dims[r - 2], k = a.dims[r - 1], cols = b.dims.back();
  // Products per sample, the heads merged with the batch included.
  return {y.elementsPerSample() / (m * cols),
          m,
          k,
          cols,
          a.elementsPerSample() / (m * k),
          b.elementsPerSample() / (k * cols)};
}

void bmmDataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  auto writes = [&](size_t i) {
    return std::find(o.gradInputs.begin(), o.gradInputs.end(), i) !=
           o.gradInputs.end();
  };
  if (writes(1))
    reads.push_back(o.inputs[0]);
  if (writes(0))
    reads.push_back(o.inputs[1]);
}

OpWork bmmWork(const Graph &g, const Op &op, TaskKind kind, int gradsWritten,
               int64_t b) {
  Bmm s = bmmShape(g, op);
  double one = 2.0 * double(s.batch * s.m * s.k * s.cols) * double(b);
  if (kind == TaskKind::BackwardData)
    return {one * gradsWritten, gradsWritten};
  return {one, 1};
}

llvm::Expected<OpParamsText> bmmParams(const Graph &g, const Op &op) {
  Bmm s = bmmShape(g, op);
  const Value &a = g.value(op.inputs[0]), &b = g.value(op.inputs[1]);
  // One operand without a batch beside one with it: the same for every
  // sample.
  std::string shared = a.batched == b.batched ? ""
                       : a.batched            ? ", .bShared = true"
                                              : ", .aShared = true";
  return OpParamsText{
      "BatchMatMulParams",
      llvm::formatv("{{.batch = {0}, .m = {1}, .k = {2}, .cols = {3}, "
                    ".aBatch = {4}, .bBatch = {5}{6}}",
                    s.batch, s.m, s.k, s.cols, s.aBatch, s.bBatch, shared)
          .str()};
}

llvm::Expected<EmittedCall> bmmEmit(EmitContext &x) {
  ValueId a = x.op.inputs[0], b = x.op.inputs[1], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.batchMatMulForward({0}, {1}, {2}, {3})",
                               x.params, x.value(a), x.value(b), x.value(y))
                           .str()};
  case TaskKind::BackwardData: {
    std::string accB = a == b ? "true" : x.accumulates(b);
    return EmittedCall{
        formatv("x.batchMatMulBackward({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                "{7})",
                x.params, x.valueIfRead(a), x.valueIfRead(b), x.grad(y),
                x.gradIfWritten(a), a == b ? "nullptr" : x.gradIfWritten(b),
                x.accumulates(a), accB)
            .str()};
  }
  default:
    return noWeightGrad(x.op);
  }
}

// --- LayerNorm ---

llvm::Error importLayerNorm(OnnxNode &node) {
  auto x = node.activation(0);
  auto scale = node.weight(1, WeightInit::Ones, true);
  auto axisAttr = node.attrInt("axis", -1);
  auto eps = node.attrFloat("epsilon", 1e-5f);
  if (llvm::Error e = firstError(x, scale, axisAttr, eps))
    return e;
  for (int i = 1; i < node.numOutputs(); ++i)
    if (node.outputUsed(i))
      return node.fail("uses the saved mean or inverse standard deviation; "
                       "memfit supports only the normalized output");
  std::vector<ValueId> inputs = {*x, *scale};
  if (node.hasInput(2)) {
    auto bias = node.weight(2, WeightInit::Zeros, true);
    if (!bias)
      return bias.takeError();
    inputs.push_back(*bias);
  }
  std::vector<int64_t> xd = dimsOfValue(node, *x);
  auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis <= node.graph().values[*x].batchAxis || axis >= rank)
    return node.fail(llvm::formatv("axis {0} on shape {1} would normalize "
                                   "across the batch or nothing",
                                   *axisAttr, dimsStr(xd)));
  int64_t d = product(xd, axis, xd.size());
  for (size_t i = 1; i < inputs.size(); ++i)
    if (node.graph().values[inputs[i]].elementsPerSample() != d)
      return node.fail("scale and bias must have the " + std::to_string(d) +
                       " elements of the normalized axes");
  OpAttrs a;
  a.axis = axis;
  a.epsilon = *eps;
  return node.emit(OpKind::LayerNorm, inputs, {{node.outputName(0), xd}}, a)
      .takeError();
}

void lnDataReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
  reads.push_back(o.inputs[1]);
}

void lnWeightReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[0]);
}

OpWork lnWork(const Graph &g, const Op &op, TaskKind kind, int, int64_t b) {
  double out = elems(g.value(op.outputs[0]), b);
  return {(kind == TaskKind::Forward ? 8 : 12) * out};
}

llvm::Expected<OpParamsText> lnParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  int64_t d = product(x.dims, op.attrs.axis, x.dims.size());
  return OpParamsText{"LayerNormParams",
                      llvm::formatv("{{.rows = {0}, .d = {1}, .epsilon = {2}}",
                                    x.elementsPerSample() / d, d,
                                    f32(op.attrs.epsilon))
                          .str()};
}

llvm::Expected<EmittedCall> lnEmit(EmitContext &x) {
  const Op &op = x.op;
  ValueId in = op.inputs[0], scale = op.inputs[1], y = op.outputs[0];
  ValueId bias = op.inputs.size() > 2 ? op.inputs[2] : kNoId;
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.layerNormForward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.value(in), x.value(scale),
                               bias == kNoId ? "nullptr" : x.value(bias),
                               x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{
        formatv("x.layerNormBackwardData({0}, {1}, {2}, {3}, {4}, {5})",
                x.params, x.value(in), x.value(scale), x.grad(y),
                x.gradIfWritten(in), x.accumulates(in))
            .str()};
  default: {
    ValueId w = x.writesGrad(scale) ? scale : bias;
    return EmittedCall{
        formatv("x.layerNormBackwardWeight({0}, {1}, {2}, {3}, {4}, {5})",
                x.params, x.value(in), x.grad(y), x.gradIfWritten(scale),
                bias == kNoId ? "nullptr" : x.gradIfWritten(bias),
                x.accumulates(w))
            .str()};
  }
  }
}

// --- Where: a masked fill ---

/// Where(cond, c, x) or Where(cond, x, c) with a constant condition and a
/// scalar constant c: torch's masked_fill with a registered mask.
namespace {

/// Where's condition as the mask operand of a fill of `x`, checked to
/// broadcast over it; `mask` may become one sample's.
llvm::Error whereMask(OnnxNode &node, ValueId x, ValueId &mask,
                      bool perSample) {
  std::vector<int64_t> xd = dimsOfValue(node, x), md = dimsOfValue(node, mask);
  if (perSample &&
      (!node.graph().values[mask].batched || md.size() != xd.size()))
    return node.fail("the condition " + quoteName(node.inputName(0)) +
                     " of shape " + dimsStr(md) +
                     " is computed, but not per sample of " + dimsStr(xd) +
                     "; memfit supports a computed condition with the "
                     "batch's axis and the activation's rank");
  int64_t bSize, inner;
  // A value computed from weights (T5's position bias chosen by a mask)
  // has no batch: every axis is its own.
  const bool xBatched = node.graph().values[x].batched;
  std::vector<int64_t> per(xd.begin() + (xBatched ? 1 : 0), xd.end());
  std::vector<int64_t> mper = md;
  if (!xBatched) {
    while (mper.size() > per.size() && mper.front() == 1)
      mper.erase(mper.begin());
  } else if (perSample) {
    mper.erase(mper.begin());
  } else if (mper.size() == xd.size()) {
    // A fixed-batch graph's mask written for each sample alike: one
    // sample's (BLOOM's causal mask in transformers 4, read at the planned
    // batch).
    if (mper[0] != 1)
      if (auto one = node.oneSampleConstant(mask)) {
        mask = *one;
        md = mper = dimsOfValue(node, mask);
      }
    if (mper[0] != 1)
      return node.fail("the condition varies along the batch; memfit supports "
                       "a mask shared by all samples");
    mper.erase(mper.begin());
  }
  if (!broadcastRun(per, mper, bSize, inner))
    return node.fail("condition of shape " + dimsStr(md) +
                     " does not broadcast over the activation of shape " +
                     dimsStr(xd) + " along one contiguous run of axes");
  return llvm::Error::success();
}

} // namespace

llvm::Error importWhere(OnnxNode &node) {
  bool act1 = node.isActivation(node.inputName(1)),
       act2 = node.isActivation(node.inputName(2));
  // The condition is a constant, or a mask per sample computed from the
  // token ids (masked_fill(ids == pad, ...): an integer program's value).
  bool perSample = node.isActivation(node.inputName(0));
  if (!act1 && !act2)
    return node.fail("memfit supports Where only as a masked fill or a "
                     "choice between two activations: a condition (a "
                     "constant, or computed from the token ids) choosing "
                     "between an activation and a scalar constant or "
                     "another activation of its shape");
  auto mask = perSample ? node.activation(0) : node.constantWeight(0);
  if (!mask)
    return mask.takeError();
  if (act1 && act2) {
    // A choice between two activations (Funnel's token-type scores): each
    // kept where chosen and 0 elsewhere, then added; exact, since the other
    // side adds a 0 (and a fill, not a product, so nothing else of it
    // reaches the sum). Each side's gradient is the output's where chosen.
    auto a = node.activation(1), b = node.activation(2);
    if (llvm::Error e = firstError(a, b))
      return e;
    std::vector<int64_t> ad = dimsOfValue(node, *a), bd = dimsOfValue(node, *b);
    if (ad != bd ||
        node.graph().values[*a].batched != node.graph().values[*b].batched)
      return node.fail("chooses between activations of shapes " + dimsStr(ad) +
                       " and " + dimsStr(bd) +
                       "; memfit supports a choice between two of one shape");
    if (llvm::Error e = whereMask(node, *a, *mask, perSample))
      return e;
    const std::string out = node.outputName(0);
    std::vector<ValueId> kept;
    for (int side : {1, 2}) {
      OpAttrs keep;
      keep.fillWhere = side == 2; // fill 0 where the other side is chosen
      keep.padValue = 0.0f;
      auto op = node.emit(
          OpKind::Where, {side == 1 ? *a : *b, *mask},
          {{out + (side == 1 ? " (where true)" : " (where false)"), ad}}, keep,
          false, node.name() + (side == 1 ? " (true)" : " (false)"));
      if (!op)
        return op.takeError();
      kept.push_back(node.graph().ops[*op].outputs[0]);
    }
    return node.emit(OpKind::Add, kept, {{out, ad}}).takeError();
  }
  int xi = act1 ? 1 : 2;
  auto x = node.activation(xi);
  auto value = node.scalarFloat(xi == 1 ? 2 : 1);
  if (llvm::Error e = firstError(x, value))
    return e;
  if (llvm::Error e = whereMask(node, *x, *mask, perSample))
    return e;
  OpAttrs a;
  a.fillWhere = xi == 2;
  a.padValue = *value;
  return node
      .emit(OpKind::Where, {*x, *mask},
            {{node.outputName(0), dimsOfValue(node, *x)}}, a)
      .takeError();
}

void whereReads(const GradOperands &o, std::vector<BlockId> &reads) {
  reads.push_back(o.inputs[1]);
}

OpWork oneFlop(const Graph &g, const Op &op, TaskKind, int, int64_t b) {
  return {elems(g.value(op.outputs[0]), b)};
}

llvm::Expected<OpParamsText> whereParams(const Graph &g, const Op &op) {
  const Value &x = g.value(op.inputs[0]);
  std::vector<int64_t> per(x.dims.begin() + 1, x.dims.end());
  const Value &m = g.value(op.inputs[1]);
  std::vector<int64_t> md = m.dims;
  if (md.size() == x.dims.size())
    md.erase(md.begin());
  int64_t bSize, inner;
  if (!broadcastRun(per, md, bSize, inner))
    return unsupportedByRuntime(op, "the mask does not broadcast");
  return OpParamsText{
      "WhereParams",
      llvm::formatv("{{.perSample = {0}, .maskSize = {1}, .inner = {2}, "
                    ".value = {3}, .fillWhere = {4}{5}}",
                    x.elementsPerSample(), bSize, inner, f32(op.attrs.padValue),
                    op.attrs.fillWhere ? "true" : "false",
                    m.batched ? ", .maskBatched = true" : "")
          .str()};
}

llvm::Expected<EmittedCall> whereEmit(EmitContext &x) {
  ValueId in = x.op.inputs[0], mask = x.op.inputs[1], y = x.op.outputs[0];
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.whereForward({0}, {1}, {2}, {3})", x.params,
                               x.value(mask), x.value(in), x.value(y))
                           .str()};
  case TaskKind::BackwardData:
    return EmittedCall{formatv("x.whereBackward({0}, {1}, {2}, {3}, {4})",
                               x.params, x.value(mask), x.grad(y),
                               x.gradIfWritten(in), x.accumulates(in))
                           .str()};
  default:
    return noWeightGrad(x.op);
  }
}

// --- Embedding: Gather of a weight table ---

/// Rows of a value without a batch looked up at constant indices (Swin
/// V2's position-bias table, computed by an MLP, gathered by the relative
/// position index): a lookup in that value, whose gradient adds the rows
/// back (BP-data).
llvm::Error importGatherOfValue(OnnxNode &node, ValueId table) {
  auto axis = node.attrInt("axis", 0);
  if (!axis)
    return axis.takeError();
  std::vector<int64_t> td = dimsOfValue(node, table);
  if (*axis != 0 || td.size() != 2)
    return node.fail("memfit supports Gather of a value computed from "
                     "weights as a lookup of rows (axis 0) of a 2-D value");
  auto idx = node.constantWeight(1);
  if (!idx)
    return idx.takeError();
  if (auto one = node.oneSampleConstant(*idx))
    idx = *one;
  std::vector<int64_t> out = dimsOfValue(node, *idx);
  out.push_back(td[1]);
  OutSpec o{node.outputName(0), out};
  o.unbatched = true;
  return node.emit(OpKind::Embedding, {table, *idx}, {o}).takeError();
}

llvm::Error importGather(OnnxNode &node) {
  if (node.isActivation(node.inputName(0))) {
    auto x = node.activation(0);
    if (!x)
      return x.takeError();
    if (!node.graph().values[*x].batched && !node.isIndices(1) &&
        !node.isActivation(node.inputName(1)))
      return importGatherOfValue(node, *x);
    return importIndexSelect(node);
  }
  auto table = node.weight(0, WeightInit::HeNormal, true);
  auto axis = node.attrInt("axis", 0);
  if (llvm::Error e = firstError(table, axis))
    return e;
  std::vector<int64_t> td = dimsOfValue(node, *table);
  if (*axis != 0 || td.size() != 2)
    return node.fail("memfit supports Gather of a weight only as an embedding "
                     "lookup: rows (axis 0) of a 2-D table");
  bool ids = node.isIndices(1);
  auto idx = ids ? node.indices(1) : node.constantWeight(1);
  if (!idx)
    return idx.takeError();
  // Positions a fixed-batch graph wrote for each sample alike ([B, T]
  // rows of one arange) are one sample's: the lookup broadcasts.
  if (!ids)
    if (auto one = node.oneSampleConstant(*idx))
      idx = *one;
  // Fixed positions (a position table, a relative position bias gathered
  // by a constant index) are a value computed from the weight, without a
  // batch: the rows once, whatever the sub-batch.
  std::vector<int64_t> out = dimsOfValue(node, *idx);
  out.push_back(td[1]);
  OutSpec o{node.outputName(0), out};
  o.unbatched = !ids;
  return node.emit(OpKind::Embedding, {*table, *idx}, {o}).takeError();
}

void embeddingReads(const GradOperands &o, std::vector<BlockId> &reads) {
  if (o.inputs.size() > 1)
    reads.push_back(o.inputs[1]);
}

OpWork embeddingWork(const Graph &g, const Op &op, TaskKind kind, int,
                     int64_t b) {
  return {kind == TaskKind::Forward ? 0 : elems(g.value(op.outputs[0]), b)};
}

llvm::Expected<OpParamsText> embeddingParams(const Graph &g, const Op &op) {
  const Value &t = g.value(op.inputs[0]), &y = g.value(op.outputs[0]);
  if (!y.batched && op.inputs.size() == 1) // a weight read as a value
    return OpParamsText{"EmbeddingParams",
                        llvm::formatv("{{.rows = 1, .d = {0}, .vocab = 1}",
                                      t.elementsPerSample())
                            .str()};
  int64_t d = t.elementsPerSample() / t.dims[0];
  std::string frozen =
      op.attrs.frozenRow >= 0
          ? llvm::formatv(", .frozenRow = {0}", op.attrs.frozenRow).str()
          : "";
  return OpParamsText{"EmbeddingParams",
                      llvm::formatv("{{.rows = {0}, .d = {1}, .vocab = {2}{3}}",
                                    y.elementsPerSample() / d, d, t.dims[0],
                                    frozen)
                          .str()};
}

llvm::Expected<EmittedCall> embeddingEmit(EmitContext &x) {
  ValueId table = x.op.inputs[0], y = x.op.outputs[0];
  ValueId idx = x.op.inputs.size() > 1 ? x.op.inputs[1] : kNoId;
  bool fixed = idx != kNoId && x.graph.value(idx).kind == ValueKind::Weight;
  // Neither: every row is the table's first (a broadcast over the batch).
  std::string ids = idx == kNoId || fixed ? "nullptr" : x.value(idx);
  std::string fixedIds = fixed ? x.value(idx) : "nullptr";
  using llvm::formatv;
  switch (x.task.kind) {
  case TaskKind::Forward:
    return EmittedCall{formatv("x.embeddingForward({0}, {1}, {2}, {3}, {4})",
                               x.params, ids, fixedIds, x.value(table),
                               x.value(y))
                           .str()};
  case TaskKind::BackwardWeight:
    return EmittedCall{
        formatv("x.embeddingBackward({0}, {1}, {2}, {3}, {4}, {5})", x.params,
                ids, fixedIds, x.grad(y), x.gradIfWritten(table),
                x.accumulates(table))
            .str()};
  case TaskKind::BackwardData: // a lookup in a value (importGatherOfValue)
    return EmittedCall{
        formatv("x.embeddingBackward({0}, {1}, {2}, {3}, {4}, {5})", x.params,
                ids, fixedIds, x.grad(y), x.gradIfWritten(table),
                x.accumulates(table))
            .str()};
  default:
    return unsupportedByRuntime(x.op, "token ids have no gradient");
  }
}

} // namespace

/// A weight broadcast over the batch (ViT's class token expanded to
/// [N, 1, D]): a lookup of its one row for every sample.
llvm::Error importExpandWeight(OnnxNode &node) {
  auto w = node.weight(0, WeightInit::Zeros, true);
  auto shape = node.intConstant(1);
  if (llvm::Error e = firstError(w, shape))
    return e;
  std::vector<int64_t> wd = dimsOfValue(node, *w);
  const IntConstant &s = *shape;
  // A target that broadcasts into the weight's own shape leaves it as it
  // is (torch's x.repeat writes Expand(w, ones) before its Tile).
  bool same = !s.isFloat && s.numel() <= static_cast<int64_t>(wd.size());
  for (int64_t i = 0; same && i < s.numel(); ++i) {
    int64_t have = wd[wd.size() - s.numel() + i];
    same = !s.isBatch(i) && (s.ints[i] == 1 || s.ints[i] == have);
  }
  if (same) {
    node.alias(node.outputName(0), node.inputName(0));
    return llvm::Error::success();
  }
  bool ok = !s.isFloat && s.numel() >= 1 && s.isBatch(0) &&
            s.ints[0] == node.graph().batch &&
            wd.size() <= static_cast<size_t>(s.numel());
  std::vector<int64_t> out{node.graph().batch};
  for (int64_t i = 1; ok && i < s.numel(); ++i) {
    int64_t wi = i - (s.numel() - static_cast<int64_t>(wd.size()));
    int64_t have = wi >= 0 ? wd[wi] : 1;
    ok = !s.isBatch(i) && (s.ints[i] == have || s.ints[i] == 1);
    out.push_back(have);
  }
  ok = ok && (wd.size() < static_cast<size_t>(s.numel()) || wd[0] == 1);
  if (!ok)
    return node.fail("expands the weight of shape " + dimsStr(wd) + " to " +
                     s.str() +
                     "; memfit supports Expand of a weight only over the "
                     "batch, to [N, ...its shape]");
  return node.emit(OpKind::Embedding, {*w}, {{node.outputName(0), out}})
      .takeError();
}

void registerTransformer(std::vector<OpDef> &defs) {
  defs.push_back(
      {.kind = OpKind::BatchMatMul,
       .name = "BatchMatMul",
       .onnxTypes = {"Einsum"},
       .importOnnx = importEinsum,
       .batchLayout = OpDef::BatchLayout::Any,
       .dataGradReads = bmmDataReads,
       .lowerPrecision = true,
       .costClass = CostClass::Gemm,
       .tensorCores = true,
       .work = bmmWork,
       .params = bmmParams,
       .emit = bmmEmit,
       .forms =
           "Einsum of two activations, each with the batch outermost on axis "
           "0, whose equation (with `->`, no ellipsis, no letter twice in a "
           "term) is a batched matrix product: letters of both operands and "
           "the output are batch axes, the batch's letter first in both "
           "operands; one letter summed, one free letter per operand "
           "(`bhid,bhjd->bhij`); Transposes order the operands and result. "
           "MatMul of two activations becomes this op too.",
       .gradient = "both operands"});
  defs.push_back(
      {.kind = OpKind::LayerNorm,
       .name = "LayerNormalization",
       .onnxTypes = {"LayerNormalization"},
       .importOnnx = importLayerNorm,
       .batchLayout = OpDef::BatchLayout::Any,
       .dataGradReads = lnDataReads,
       .weightGradReads = lnWeightReads,
       .costClass = CostClass::Normalization,
       .work = lnWork,
       .params = lnParams,
       .emit = lnEmit,
       .forms = "X an activation; `axis` (default -1) after the batch's axis; "
                "`epsilon`; Scale and optional B weights (initializers, graph "
                "inputs without data, or float constants, then not trained) "
                "with as many elements as the normalized axes; the Mean and "
                "InvStdDev outputs must be unused. ReduceMean, Sub, Pow, "
                "ReduceMean, Add, Sqrt, Div, Mul, Add over the last axis with "
                "weights as scale and bias (torch's export before opset 17) is "
                "also recognized as this op.",
       .gradient = "X, Scale and B (the statistics recomputed from X)"});
  defs.push_back(
      {.kind = OpKind::Where,
       .name = "Where",
       .onnxTypes = {"Where"},
       .importOnnx = importWhere,
       .mayRunInPlace = true,
       .dataGradReads = whereReads,
       .work = oneFlop,
       .params = whereParams,
       .emit = whereEmit,
       .forms = "A masked fill: one of X and Y an activation with the batch "
                "alone on axis 0, the other a float32 scalar constant; the "
                "condition a constant of any type shared by all samples "
                "(extent 1 on the batch's axis), or a mask computed from the "
                "token ids of the activation's rank (`masked_fill(ids == pad, "
                "...)`), broadcast along one contiguous run of axes. A choice "
                "between two activations of one shape (Funnel's token-type "
                "scores) is two fills with 0 added; on constants alone it "
                "folds.",
       .gradient = "the activation (zero where the fill is taken); none for "
                   "the condition"});
  defs.push_back(
      {.kind = OpKind::Embedding,
       .name = "Gather",
       .onnxTypes = {"Gather"},
       .importOnnx = importGather,
       // Gather of an activation, on any layout, is a Slice; the
       // embedding's own operands (a table, ids) have no batch
       // axis to move.
       .batchLayout = OpDef::BatchLayout::Any,
       .dataGradReads = embeddingReads,
       .weightGradReads = embeddingReads,
       .costClass = CostClass::Copy,
       .work = embeddingWork,
       .params = embeddingParams,
       .emit = embeddingEmit,
       .forms =
           "A float32 2-D weight table, `axis` 0, indexed by token ids (or "
           "integer programs on them, such as position ids): an embedding; or "
           "by constant indices (a position table): rows looked up once, a "
           "value without a batch. An activation at a scalar or one-element "
           "constant index on an axis other than the batch's (`x[:, i]`): a "
           "Slice. An activation at every index of an axis in order (the "
           "flatten torch.export writes for `as_strided`): a Reshape. A 2-D "
           "value computed from weights at constant indices on axis 0: a "
           "lookup. Constants fold.",
       .gradient =
           "the table (a scatter-add of the rows read; `--freeze-rows` keeps a "
           "row's gradient zero) or the value computed from weights; an index "
           "selection: its input; never the indices"});
}

} // namespace memfit::ops
