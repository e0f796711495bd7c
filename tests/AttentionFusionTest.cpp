//===- AttentionFusionTest.cpp - Which subgraphs become one Attention op --===//
#include "compiler/cost/DeviceSpec.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/ops/OpDef.h"
#include "tests/GraphLiteral.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace memfit;
using memfit::test::GraphLiteral;

namespace {

/// Per sample: 2 heads, 4 queries and keys, width 8. softmax(0.35 * Q K^T,
/// causal -inf fill) V, then a Relu; `change` alters one piece first.
struct Attn {
  GraphLiteral l{3};
  ValueId x, q, k, v, scale, mask, scores, scaled, masked, probs, out;
  OpAttrs softmax, fill, perm;
  Attn() {
    x = l.input("x", {2, 4, 8});
    q = l.op(OpKind::Relu, "q", {x}, {2, 4, 8});
    k = l.op(OpKind::Sigmoid, "k", {x}, {2, 4, 8});
    v = l.op(OpKind::Tanh, "v", {x}, {2, 4, 8});
    scale = l.weight("scale", {1}, false);
    l.g.values[scale].data = {0.35f};
    mask = l.weight("mask", {4, 4}, false);
    for (int t = 0; t < 4; ++t)
      for (int s = 0; s < 4; ++s)
        l.g.values[mask].data.push_back(s <= t);
    softmax.axis = 3;
    fill.fillWhere = false;
    fill.padValue = -INFINITY;
    perm.perm = {0, 1, 3, 2};
  }
  /// Builds the chain from the scores on; returns the graph.
  Graph build(ValueId maskW, int64_t axis = 3, bool extraUse = false) {
    ValueId kt = l.op(OpKind::Transpose, "kt", {k}, {2, 8, 4}, perm);
    scores = l.op(OpKind::BatchMatMul, "scores", {q, kt}, {2, 4, 4});
    scaled = l.op(OpKind::Mul, "scaled", {scores, scale}, {2, 4, 4});
    masked = l.op(OpKind::Where, "masked", {scaled, maskW}, {2, 4, 4}, fill);
    OpAttrs sm = softmax;
    sm.axis = axis;
    probs = l.op(OpKind::Softmax, "probs", {masked}, {2, 4, 4}, sm);
    out = l.op(OpKind::BatchMatMul, "context", {probs, v}, {2, 4, 8});
    ValueId y = l.op(OpKind::Relu, "y", {out}, {2, 4, 8});
    if (extraUse)
      l.op(OpKind::Add, "sum",
           {y, l.op(OpKind::Relu, "p2", {probs}, {2, 4, 4})}, {2, 4, 8});
    return l.g;
  }
};

std::vector<OpKind> kinds(const Graph &g) {
  std::vector<OpKind> k;
  for (const Op &op : g.ops)
    k.push_back(op.kind);
  return k;
}

} // namespace

TEST_CASE("causal attention becomes one operator", "[fusion]") {
  Attn a;
  Graph g = fuseAttention(a.build(a.mask));
  REQUIRE(!verifyGraph(g));
  // The transpose making K^T, the scores, scale, mask, softmax and product
  // are one op; Q, K, V and the final Relu stay.
  CHECK(kinds(g) == std::vector<OpKind>{OpKind::Relu, OpKind::Sigmoid,
                                        OpKind::Tanh, OpKind::Attention,
                                        OpKind::Relu});
  const Op &att = g.ops[3];
  CHECK(att.attrs.alpha == 0.35f);
  CHECK(att.attrs.maskMode == 2);
  CHECK(!att.attrs.fillWhere);
  CHECK(std::isinf(att.attrs.padValue));
  CHECK(!att.attrs.transB); // K itself, read untransposed
  // The causal mask is a rule of the kernel (keys up to the query's own
  // position), not an operand: no constant of T x S is left.
  CHECK(att.attrs.maskBand);
  CHECK(att.attrs.bandHi == 0);
  CHECK(att.attrs.bandLo == -4); // no lower bound
  REQUIRE(att.inputs.size() == 3);
  CHECK(g.values[att.inputs[0]].name == "q_out");
  CHECK(g.values[att.inputs[1]].name == "k_out");
  CHECK(g.values[att.inputs[2]].name == "v_out");
  for (const Value &v : g.values)
    CHECK(v.name != "mask");
  // O keeps its value; one log-sum-exp per query row.
  REQUIRE(att.outputs.size() == 2);
  CHECK(g.values[att.outputs[0]].name == "context_out");
  CHECK(g.values[att.outputs[1]].dims == std::vector<int64_t>{3, 2, 4});
  // The scores and probabilities are gone from the graph.
  for (const Value &v : g.values)
    CHECK(v.dims != std::vector<int64_t>{3, 2, 4, 4});
}

TEST_CASE("a limit fuses the first attentions only", "[fusion]") {
  // Two attentions over the same Q, K and V, one after the other.
  Attn a;
  a.build(a.mask);
  Graph in = a.build(a.mask);
  REQUIRE(!verifyGraph(in));
  CHECK(countAttention(in) == 2);
  auto count = [](const Graph &g, OpKind k) {
    return std::count_if(g.ops.begin(), g.ops.end(),
                         [&](const Op &op) { return op.kind == k; });
  };
  Graph one = fuseAttention(in, 1);
  REQUIRE(!verifyGraph(one));
  CHECK(count(one, OpKind::Attention) == 1);
  CHECK(count(one, OpKind::Softmax) == 1);
  // The one fused is the first: it comes before the remaining softmax.
  auto at = [&](OpKind k) {
    return std::find_if(one.ops.begin(), one.ops.end(),
                        [&](const Op &op) { return op.kind == k; }) -
           one.ops.begin();
  };
  CHECK(at(OpKind::Attention) < at(OpKind::Softmax));
  CHECK(count(fuseAttention(in, 0), OpKind::Attention) == 0);
  CHECK(count(fuseAttention(in), OpKind::Attention) == 2);
  CHECK(countAttention(one) == 1);
}

TEST_CASE("what only resembles attention is left alone", "[fusion]") {
  SECTION("softmax over another axis") {
    Attn a;
    Graph in = a.build(a.mask, 2);
    CHECK(kinds(fuseAttention(in)) == kinds(in));
  }
  SECTION("a mask that is a trained weight") {
    Attn a;
    ValueId trained = a.l.weight("bias", {4, 4}, true);
    Graph in = a.build(trained);
    CHECK(kinds(fuseAttention(in)) == kinds(in));
  }
  SECTION("a mask that varies along a leading axis only") {
    Attn a;
    ValueId perQuery = a.l.weight("rows", {4, 1}, false);
    a.l.g.values[perQuery].data = {1, 1, 0, 1};
    Graph in = a.build(perQuery);
    CHECK(kinds(fuseAttention(in)) == kinds(in));
  }
  SECTION("a scale computed from data") {
    Attn a;
    a.scale = a.l.op(OpKind::Relu, "s", {a.x}, {2, 4, 4});
    Graph in = a.build(a.mask);
    CHECK(kinds(fuseAttention(in)) == kinds(in));
  }
  SECTION("probabilities read elsewhere") {
    Attn a;
    Graph in = a.build(a.mask, 3, true);
    CHECK(kinds(fuseAttention(in)) == kinds(in));
  }
}

TEST_CASE("heads wider than 128 plan their kernels' local memory",
          "[fusion][attention]") {
  // Q, K, V [2 heads, 4 rows, width]: the CUDA kernels keep a row's state
  // in registers up to 128 and in 2 KiB of local memory a thread above,
  // which the driver reserves for every thread the GPU holds.
  auto localOf = [](int64_t d, int64_t dv) {
    GraphLiteral l{3};
    ValueId q = l.input("q", {2, 4, d}), k = l.input("k", {2, 4, d});
    ValueId v = l.input("v", {2, 4, dv});
    OpAttrs a;
    a.alpha = 0.5f;
    l.op(OpKind::Attention, "att", {q, k, v}, {2, 4, dv}, a);
    const Op &op = l.g.ops.back();
    return attentionLocalBytes(l.g, op);
  };
  CHECK(localOf(64, 64) == 0);
  CHECK(localOf(128, 96) == 0);
  CHECK(localOf(160, 64) == 2048);
  CHECK(localOf(64, 256) == 2048);
  // On an H200 (132 SMs of 2048 threads) that is 264 MiB beyond the
  // context's 1 KiB a thread; nothing on a device without SMs stated.
  DeviceSpec h200 = llvm::cantFail(builtinDevice("h200"));
  CHECK(h200.localMemoryReserveBytes(2048) == int64_t(264) << 20);
  CHECK(h200.localMemoryReserveBytes(1024) == 0);
  DeviceSpec bare;
  CHECK(bare.localMemoryReserveBytes(2048) == 0);
}

namespace {

/// The fused attention of Attn with a [4, 4] mask given row by row, added
/// (mode 1) or filled where 0 (mode 2).
Op fusedWith(const std::vector<float> &rows, int mode, float fill = -INFINITY,
             std::vector<int64_t> dims = {4, 4}) {
  Attn a;
  ValueId m = a.l.weight("m", dims, false);
  a.l.g.values[m].data = rows;
  a.fill.padValue = fill;
  Graph in = a.build(m);
  if (mode == 1) // the mask added instead of filled in
    for (Op &op : in.ops)
      if (op.kind == OpKind::Where) {
        op.kind = OpKind::Add;
        op.attrs = OpAttrs();
      }
  Graph g = fuseAttention(in);
  REQUIRE(!verifyGraph(g));
  for (const Op &op : g.ops)
    if (op.kind == OpKind::Attention)
      return op;
  FAIL("no attention fused");
  return {};
}

} // namespace

TEST_CASE("a mask that is a band of key minus query becomes a rule",
          "[fusion][attention]") {
  const float fmin = -3.4028234663852886e38f;
  SECTION("a window of two keys, filled where 0") {
    Op att = fusedWith({1, 0, 0, 0, //
                        1, 1, 0, 0, //
                        0, 1, 1, 0, //
                        0, 0, 1, 1},
                       2);
    CHECK(att.inputs.size() == 3);
    CHECK(att.attrs.maskBand);
    CHECK(att.attrs.bandLo == -1);
    CHECK(att.attrs.bandHi == 0);
  }
  SECTION("causal, finfo.min added: the added value is the fill") {
    Op att = fusedWith({0, fmin, fmin, fmin, //
                        0, 0, fmin, fmin,    //
                        0, 0, 0, fmin,       //
                        0, 0, 0, 0},
                       1);
    CHECK(att.inputs.size() == 3);
    CHECK(att.attrs.maskMode == 1);
    CHECK(att.attrs.maskBand);
    CHECK(att.attrs.bandHi == 0);
    CHECK(att.attrs.padValue == fmin);
  }
  SECTION("one key of look-ahead, the same for every head") {
    std::vector<float> rows = {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    std::vector<float> heads = rows;
    heads.insert(heads.end(), rows.begin(), rows.end());
    Op att = fusedWith(heads, 2, -INFINITY, {2, 4, 4});
    CHECK(att.inputs.size() == 3);
    CHECK(att.attrs.bandHi == 1);
    CHECK(att.attrs.bandLo == -4);
  }
  SECTION("an additive mask of zeros is no mask") {
    Op att = fusedWith(std::vector<float>(16, 0.0f), 1);
    CHECK(att.inputs.size() == 3);
    CHECK(att.attrs.maskMode == 0);
    CHECK(!att.attrs.maskBand);
  }
}

TEST_CASE("a mask that is not a band stays an operand", "[fusion][attention]") {
  auto keepsMask = [](const Op &att) {
    return att.inputs.size() == 4 && !att.attrs.maskBand;
  };
  // Two runs in a row.
  CHECK(keepsMask(fusedWith({1, 0, 1, 0, 1, 1, 0, 0, //
                             1, 1, 1, 0, 1, 1, 1, 1},
                            2)));
  // A row with no key (softmax of nothing: NaN, as written).
  CHECK(keepsMask(fusedWith({0, 0, 0, 0, 1, 1, 0, 0, //
                             1, 1, 1, 0, 1, 1, 1, 1},
                            2)));
  // Causal but for one row whose run ends a key early.
  CHECK(keepsMask(fusedWith({1, 0, 0, 0, 1, 0, 0, 0, //
                             1, 1, 1, 0, 1, 1, 1, 1},
                            2)));
  // Two different masked values added.
  CHECK(keepsMask(fusedWith({0, -1, -1, -1, 0, 0, -2, -2, //
                             0, 0, 0, -1, 0, 0, 0, 0},
                            1)));
  // Heads with different bands.
  std::vector<float> causal = {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1};
  std::vector<float> heads = causal;
  heads.insert(heads.end(), 16, 1.0f);
  CHECK(keepsMask(fusedWith(heads, 2, -INFINITY, {2, 4, 4})));
}

TEST_CASE("a causal band prices about half the scores", "[fusion][attention]") {
  // 2 heads, T = S = 1024, width 64: the kernels skip the key tiles past
  // each 64-row query tile's diagonal, 120 of 256 tiles.
  GraphLiteral l{1};
  ValueId q = l.input("q", {2, 1024, 64}), k = l.input("k", {2, 1024, 64});
  ValueId v = l.input("v", {2, 1024, 64});
  OpAttrs a;
  a.alpha = 0.125f;
  a.maskMode = 2;
  a.padValue = -INFINITY;
  l.op(OpKind::Attention, "att", {q, k, v}, {2, 1024, 64}, a);
  const OpDef &def = opDef(OpKind::Attention);
  auto flops = [&](const OpAttrs &attrs) {
    l.g.ops.back().attrs = attrs;
    return def.work(l.g, l.g.ops.back(), TaskKind::Forward, 0, 1).flops;
  };
  double full = flops(a);
  a.maskBand = true;
  a.bandLo = -1024;
  a.bandHi = 0;
  CHECK(flops(a) == Approx(full * 136.0 / 256.0));
  // A fill that leaves probabilities above 0 runs every tile.
  a.padValue = -1e4f;
  CHECK(flops(a) == Approx(full));
}
