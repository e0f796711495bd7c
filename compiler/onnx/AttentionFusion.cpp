//===- AttentionFusion.cpp - Scaled dot-product attention as one op -------===//
//
// Guarantees: each subgraph
//   BatchMatMul(Q, K^T) [Mul or Div by a constant scalar] [Where or Add of a
//   constant mask] Softmax(last axis) [NanTo 0] [Dropout] BatchMatMul(., V)
// whose intermediates feed nothing else becomes one Attention op computing
// the same function (runtime/kernels/Attention.h); a Transpose that only
// makes K^T for it is absorbed. Anything that merely resembles it (softmax
// over another axis, a mask or scale computed from data, a shared
// intermediate, heads wider than 256) is left as it is. The result is a
// fresh graph: values renumbered densely, producers and consumers rebuilt.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/GraphRebuild.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/Families.h"

#include <map>
#include <optional>
#include <tuple>
#include <unordered_set>

namespace memfit {
namespace {

constexpr int64_t kMaxWidth = 256; // runtime's kMaxAttentionWidth

/// A mask that is a rule of s - t (AttentionParams' band).
struct Band {
  int64_t lo = 0, hi = 0;
  float added = 0;   // what the masked scores add (an additive mask)
  bool none = false; // masks nothing
};

struct Match {
  std::vector<OpId> absorbed; // every op the Attention replaces
  Op attention;
};

class Matcher {
public:
  explicit Matcher(const Graph &g) : g(g) {}

  std::optional<Match> at(OpId pv) const {
    const Op &product = g.ops[pv];
    if (product.kind != OpKind::BatchMatMul)
      return std::nullopt;
    Match m;
    m.absorbed.push_back(pv);
    OpAttrs a;
    a.alpha = 1.0f;
    ValueId p = product.inputs[0], v = product.inputs[1];
    OpId op = soleProducer(p);
    if (op != kNoId && g.ops[op].kind == OpKind::Dropout) {
      a.attnDropout = true;
      a.ratio = g.ops[op].attrs.ratio;
      a.dropoutKey = op;
      m.absorbed.push_back(op);
      op = soleProducer(g.ops[op].inputs[0]);
    }
    if (op != kNoId && g.ops[op].kind == OpKind::NanTo &&
        g.ops[op].attrs.alpha == 0.0f) {
      a.nanToZero = true;
      m.absorbed.push_back(op);
      op = soleProducer(g.ops[op].inputs[0]);
    }
    if (op == kNoId || g.ops[op].kind != OpKind::Softmax)
      return std::nullopt;
    const Value &probs = g.values[g.ops[op].outputs[0]];
    if (g.ops[op].attrs.axis != (int64_t)probs.dims.size() - 1)
      return std::nullopt;
    m.absorbed.push_back(op);
    op = soleProducer(g.ops[op].inputs[0]);
    // The mask, then the scale, either optional.
    ValueId mask = kNoId;
    if (op != kNoId &&
        (g.ops[op].kind == OpKind::Where || g.ops[op].kind == OpKind::Add)) {
      const Op &mo = g.ops[op];
      int data = -1;
      if (mo.kind == OpKind::Where) {
        data = 0;
        a.maskMode = 2;
        a.padValue = mo.attrs.padValue;
        a.fillWhere = mo.attrs.fillWhere;
      } else {
        a.maskMode = 1;
        data = isConstant(mo.inputs[0]) ? 1 : 0;
      }
      if (mo.inputs.size() != 2 || !isConstant(mo.inputs[1 - data]))
        return std::nullopt;
      mask = mo.inputs[1 - data];
      m.absorbed.push_back(op);
      op = soleProducer(mo.inputs[data]);
    }
    if (op != kNoId &&
        (g.ops[op].kind == OpKind::Mul || g.ops[op].kind == OpKind::Div)) {
      const Op &so = g.ops[op];
      int data = so.kind == OpKind::Mul && isScalar(so.inputs[0]) ? 1 : 0;
      ValueId c = so.inputs[1 - data];
      if (so.inputs.size() != 2 || !isScalar(c))
        return std::nullopt;
      float k = g.values[c].data[0];
      a.alpha = so.kind == OpKind::Mul ? k : 1.0f / k;
      m.absorbed.push_back(op);
      op = soleProducer(so.inputs[data]);
    }
    if (op == kNoId || g.ops[op].kind != OpKind::BatchMatMul)
      return std::nullopt;
    m.absorbed.push_back(op);
    ValueId q = g.ops[op].inputs[0], kt = g.ops[op].inputs[1], k = kt;
    a.transB = true;
    OpId tr = soleProducer(kt);
    if (tr != kNoId && g.ops[tr].kind == OpKind::Transpose &&
        swapsLastTwo(g.ops[tr].attrs.perm)) {
      k = g.ops[tr].inputs[0];
      a.transB = false;
      m.absorbed.push_back(tr);
    }
    if (!shapesFit(q, k, v, a.transB, product.outputs[0]) ||
        (mask != kNoId && !maskFits(mask, g.ops[op].outputs[0])))
      return std::nullopt;
    m.attention.kind = OpKind::Attention;
    m.attention.name = product.name;
    m.attention.onnxOp = "Attention";
    m.attention.inputs = {q, k, v};
    if (mask != kNoId && !asBand(mask, g.ops[op].outputs[0], a))
      m.attention.inputs.push_back(mask);
    m.attention.outputs = {product.outputs[0]};
    m.attention.attrs = a;
    return m;
  }

private:
  const Graph &g;
  /// What asBand found per mask, mode, fill side and scores' T and S
  /// (many layers share one mask).
  using BandKey = std::tuple<ValueId, int32_t, bool, int64_t, int64_t>;
  mutable std::map<BandKey, std::optional<Band>> bands;

  /// The op producing `v` when `v` is an activation read by exactly one op
  /// and not the model's output.
  OpId soleProducer(ValueId v) const {
    const Value &x = g.values[v];
    if (x.kind != ValueKind::Activation || x.consumers.size() != 1 ||
        v == g.output)
      return kNoId;
    return x.producer;
  }
  bool isConstant(ValueId v) const {
    const Value &x = g.values[v];
    return x.kind == ValueKind::Weight && !x.trainable;
  }
  bool isScalar(ValueId v) const {
    return isConstant(v) && g.values[v].elementsPerSample() == 1 &&
           g.values[v].data.size() == 1;
  }
  static bool swapsLastTwo(const std::vector<int64_t> &perm) {
    size_t r = perm.size();
    if (r < 3)
      return false;
    for (size_t i = 0; i + 2 < r; ++i)
      if (perm[i] != (int64_t)i)
        return false;
    return perm[r - 2] == (int64_t)r - 1 && perm[r - 1] == (int64_t)r - 2;
  }
  bool canonicalRank(const Value &x, size_t r) const {
    return x.batched && x.dims.size() == r && x.batchAxis == 0 &&
           x.batchOuter == 1;
  }
  bool shapesFit(ValueId q, ValueId k, ValueId v, bool kT, ValueId o) const {
    if (q == k || q == v || k == v)
      return false;
    const Value &Q = g.values[q], &K = g.values[k], &V = g.values[v],
                &O = g.values[o];
    size_t r = Q.dims.size();
    if (!canonicalRank(Q, r) || !canonicalRank(K, r) || !canonicalRank(V, r) ||
        !canonicalRank(O, r))
      return false;
    int64_t t = Q.dims[r - 2], d = Q.dims[r - 1];
    int64_t s = kT ? K.dims[r - 1] : K.dims[r - 2];
    int64_t kd = kT ? K.dims[r - 2] : K.dims[r - 1];
    int64_t dv = V.dims[r - 1];
    if (kd != d || V.dims[r - 2] != s || d > kMaxWidth || dv > kMaxWidth)
      return false;
    int64_t heads = Q.elementsPerSample() / (t * d);
    int64_t kHeads = K.elementsPerSample() / (s * d);
    int64_t vHeads = V.elementsPerSample() / (s * dv);
    return O.elementsPerSample() == heads * t * dv && kHeads == vHeads &&
           (kHeads == heads || kHeads == 1);
  }
  /// Whether the constant mask of attention `a` masks every score of the
  /// band rule and no other, every query row keeping a key, and the masked
  /// scores alike (one added value, or the fill); if so `a` takes the rule
  /// in its place. A mask that masks nothing is no mask.
  bool asBand(ValueId mask, ValueId scores, OpAttrs &a) const {
    const std::vector<int64_t> &sd = g.values[scores].dims;
    auto [at, fresh] = bands.try_emplace(
        BandKey{mask, a.maskMode, a.fillWhere, sd[sd.size() - 2], sd.back()});
    if (fresh)
      at->second = bandOf(g.values[mask], g.values[scores], a);
    if (!at->second)
      return false;
    const Band &b = *at->second;
    if (b.none) {
      a.maskMode = 0;
      return true;
    }
    a.maskBand = true;
    a.bandLo = b.lo;
    a.bandHi = b.hi;
    if (a.maskMode == 1)
      a.padValue = b.added;
    return true;
  }
  static std::optional<Band> bandOf(const Value &m, const Value &scores,
                                    const OpAttrs &a) {
    size_t r = scores.dims.size();
    const int64_t t = scores.dims[r - 2], s = scores.dims[r - 1];
    const int64_t size = m.elementsPerSample(), plane = t * s;
    if (m.batched || (int64_t)m.data.size() != size ||
        (size >= plane ? size % plane : plane % size) != 0)
      return std::nullopt;
    auto masked = [&](float v) {
      return a.maskMode == 1 ? v != 0.0f : (v != 0.0f) == a.fillWhere;
    };
    Band b;
    b.lo = -t; // no bound: s - t >= 1 - t
    b.hi = s;  // no bound: s - t <= s - 1
    bool loFixed = false, hiFixed = false, anyMasked = false;
    // Rows whose run reaches a side's last key bound that side only from
    // one direction: the band must reach at least as far.
    int64_t hiNeed = -t, loNeed = s;
    for (int64_t p = 0; p < std::max<int64_t>(size / plane, 1); ++p)
      for (int64_t tt = 0; tt < t; ++tt) {
        const int64_t row = (p * t + tt) * s;
        int64_t first = -1, last = -1;
        for (int64_t ss = 0; ss < s; ++ss) {
          float v = m.data[(row + ss) % size];
          if (!masked(v)) {
            if (last >= 0 && last != ss - 1)
              return std::nullopt; // a second run: not a band
            first = first < 0 ? ss : first;
            last = ss;
            continue;
          }
          if (a.maskMode == 1 && anyMasked && v != b.added)
            return std::nullopt;
          b.added = v;
          anyMasked = true;
        }
        if (first < 0)
          return std::nullopt; // a row with no key
        if (last < s - 1) {
          if (hiFixed && b.hi != last - tt)
            return std::nullopt;
          b.hi = last - tt;
          hiFixed = true;
        } else {
          hiNeed = std::max(hiNeed, s - 1 - tt);
        }
        if (first > 0) {
          if (loFixed && b.lo != first - tt)
            return std::nullopt;
          b.lo = first - tt;
          loFixed = true;
        } else {
          loNeed = std::min(loNeed, -tt);
        }
      }
    if ((hiFixed && b.hi < hiNeed) || (loFixed && b.lo > loNeed))
      return std::nullopt;
    b.none = !anyMasked;
    return b;
  }
  /// The mask repeats along the trailing axes of the scores' samples.
  bool maskFits(ValueId mask, ValueId scores) const {
    const Value &S = g.values[scores];
    std::vector<int64_t> per(S.dims.begin() + 1, S.dims.end());
    std::vector<int64_t> md = g.values[mask].dims;
    if (md.size() == S.dims.size())
      md.erase(md.begin());
    int64_t bSize = 0, inner = 0;
    return ops::broadcastRun(per, md, bSize, inner) && inner == 1;
  }
};

} // namespace

namespace {

/// The replacement Attention op per op id, and the ops each absorbs; at most
/// `limit` sites (all when negative).
struct Sites {
  std::vector<std::optional<Op>> replacement;
  std::vector<bool> gone;
  int64_t count = 0;
};

Sites findSites(const Graph &in, int64_t limit) {
  Matcher matcher(in);
  Sites sites;
  std::vector<std::optional<Op>> &replacement = sites.replacement;
  std::vector<bool> &gone = sites.gone;
  replacement.resize(in.ops.size());
  gone.assign(in.ops.size(), false);
  for (OpId i = 0; i < (OpId)in.ops.size(); ++i) {
    if (limit >= 0 && sites.count == limit)
      break;
    auto m = matcher.at(i);
    if (!m)
      continue;
    bool free = true;
    for (OpId a : m->absorbed)
      free = free && !gone[a];
    if (!free)
      continue;
    for (OpId a : m->absorbed)
      gone[a] = true;
    replacement[i] = m->attention;
    ++sites.count;
  }
  return sites;
}

} // namespace

int64_t countAttention(const Graph &g) { return findSites(g, -1).count; }

Graph fuseAttention(const Graph &in, int64_t limit) {
  Sites sites = findSites(in, limit);
  if (sites.count == 0)
    return in;
  const std::vector<std::optional<Op>> &replacement = sites.replacement;
  const std::vector<bool> &gone = sites.gone;

  // Rebuild with the values the kept ops still use, in their old order.
  GraphRebuild rebuild(in);
  Graph &out = rebuild.graph();
  for (OpId i = 0; i < (OpId)in.ops.size(); ++i) {
    if (gone[i] && !replacement[i])
      continue;
    Op op = rebuild.remapped(replacement[i] ? *replacement[i] : in.ops[i]);
    if (replacement[i]) {
      // One log-sum-exp per query row: O's dims without the last axis.
      const Value &o = out.values[op.outputs[0]];
      Value lse = o;
      lse.name = o.name + " (log-sum-exp)";
      lse.dims.pop_back();
      lse.producer = kNoId;
      lse.consumers.clear();
      op.outputs.push_back(out.addValue(std::move(lse)));
    }
    out.addOp(std::move(op));
  }
  return std::move(rebuild).finish();
}

} // namespace memfit
