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
  REQUIRE(att.inputs.size() == 4);
  CHECK(g.values[att.inputs[0]].name == "q_out");
  CHECK(g.values[att.inputs[1]].name == "k_out");
  CHECK(g.values[att.inputs[2]].name == "v_out");
  CHECK(g.values[att.inputs[3]].name == "mask");
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
