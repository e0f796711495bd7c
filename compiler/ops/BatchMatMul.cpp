//===- BatchMatMul.cpp - Batched matrix products and Einsum ---------------===//
//
// Products of two operands per sample (Q K^T, attention times V, MatMul of
// two activations, and Einsum equations that are such products), one of
// them possibly without a batch: a weight read as a value, or a value
// computed from weights, shared by every sample, its gradient summed over
// them.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

#include <cctype>
#include <map>
#include <optional>

namespace memfit::ops {

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

} // namespace

void registerBatchMatMul(std::vector<OpDef> &defs) {
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
           "Einsum of two operands whose equation (with `->`, no ellipsis, no "
           "letter twice in a term) is a batched matrix product: a batched "
           "operand (the batch outermost on axis 0) has the batch's letter "
           "first, and so does the output; letters of both operands and the "
           "output are batch axes of the products, letters of both operands "
           "only are summed, the others free (`bhid,bhjd->bhij`); groups of "
           "several summed or free letters are merged by views "
           "(`td,dnh->tnh`). An operand may be a weight or a value computed "
           "from weights, without a batch: shared by every sample "
           "(`binh,tnh->bnit`). Transposes order the operands and result. "
           "MatMul of two activations becomes this op too.",
       .gradient = "both operands (one without a batch: summed over the "
                   "samples)"});
}

} // namespace memfit::ops
