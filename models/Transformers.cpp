//===- Transformers.cpp - GPT-2 and Llama-style decoders ------------------===//
//
// Guarantees: the decoders are written in the ONNX operator forms PyTorch's
// exporter (opset 17, training mode) gives their Hugging Face modules, so
// memfit's importer reads them as it reads such exports, fuses attention
// where it fuses it there, and the weights carry Hugging Face's state-dict
// names and shapes (GPT-2's Conv1D weights are [in, out], Llama's Linear
// weights [out, in], read through a Transpose). Constants (reshape targets,
// the causal mask, rotary frequencies) are Constant nodes and index
// arithmetic folded at import, never stored tables, so a model's file stays
// small whatever the sequence length. No dropout: Llama has none, and GPT-2
// is written as fine-tuning runs it deterministically.
//
//===----------------------------------------------------------------------===//
#include "models/Families.h"

#include "llvm/ADT/Twine.h"

#include <cmath>
#include <limits>

namespace memfit::zoo {

namespace {

using llvm::StringRef;
using llvm::Twine;

/// Shared pieces of one decoder: its sizes and the constants every layer
/// reads, built once.
class Decoder {
public:
  Decoder(GraphBuilder &b, int64_t width, int64_t heads)
      : b(b), t(b.seqLen()), width(width), heads(heads),
        headDim(width / heads) {}

  GraphBuilder &b;
  const int64_t t, width, heads, headDim;

  Val i64(StringRef name, std::vector<int64_t> v) {
    int64_t n = static_cast<int64_t>(v.size());
    return b.constInts(name, {n}, std::move(v));
  }
  Val scalarF(StringRef name, float v) { return b.constFloats(name, {}, {v}); }

  /// Positions 0..T-1 (Range, folded at import) and the causal mask
  /// key <= query over them, as exporters compute both.
  void positions() {
    Val zero = b.constInts("const.zero", {}, {0});
    Val len = b.constInts("const.seq_len", {}, {t});
    Val one = b.constInts("const.one", {}, {1});
    pos = b.node("Range", "positions", {zero, len, one}, {t});
    Val ax0 = i64("const.axis0", {0}), ax1 = i64("const.axis1", {1});
    Val rows = b.node("Unsqueeze", "mask.query", {pos, ax1}, {t, 1});
    Val cols = b.node("Unsqueeze", "mask.key", {pos, ax0}, {1, t});
    mask = b.node("LessOrEqual", "mask.causal", {cols, rows}, {t, t});
    negInf = scalarF("const.neg_inf", -std::numeric_limits<float>::infinity());
    scale =
        scalarF("const.sqrt_head_dim", std::sqrt(static_cast<float>(headDim)));
  }

  /// x [T, a*b] as [a, T, b] heads: Reshape then Transpose.
  Val splitHeads(const Twine &name, Val x, int64_t n) {
    Val target = i64((name + ".shape").str(), {0, t, n, headDim});
    Val r =
        b.node("Reshape", (name + ".view").str(), {x, target}, {t, n, headDim});
    return b.node("Transpose", (name + ".heads").str(), {r}, {n, t, headDim},
                  {NodeAttr::is("perm", {0, 2, 1, 3})});
  }

  /// softmax(q k^T / sqrt(d) + causal) v for q [H, T, d], k [H, T, d], v,
  /// merged back to [T, H*d].
  Val attention(const Twine &p, Val q, Val k, Val v) {
    Val kt = b.node("Transpose", (p + ".key_t").str(), {k}, {heads, headDim, t},
                    {NodeAttr::is("perm", {0, 1, 3, 2})});
    Val s = b.node("MatMul", (p + ".scores").str(), {q, kt}, {heads, t, t});
    s = b.node("Div", (p + ".scaled").str(), {s, scale}, {heads, t, t});
    s = b.node("Where", (p + ".masked").str(), {mask, s, negInf},
               {heads, t, t});
    s = b.node("Softmax", (p + ".probs").str(), {s}, {heads, t, t},
               {NodeAttr::i("axis", -1)});
    Val y =
        b.node("MatMul", (p + ".context").str(), {s, v}, {heads, t, headDim});
    y = b.node("Transpose", (p + ".merge").str(), {y}, {t, heads, headDim},
               {NodeAttr::is("perm", {0, 2, 1, 3})});
    Val target = i64((p + ".merge.shape").str(), {0, t, width});
    return b.node("Reshape", (p + ".merged").str(), {y, target}, {t, width});
  }

  /// x @ W for a weight stored [in, out] (GPT-2's Conv1D), plus its bias.
  Val conv1d(StringRef module, Val x, int64_t in, int64_t out) {
    Val w = b.param((module + ".weight").str(), {in, out},
                    WeightFill::GlorotUniform, in, out);
    Val bias = b.param((module + ".bias").str(), {out}, WeightFill::Zeros);
    Val y = b.node("MatMul", module, {x, w}, {t, out});
    return b.node("Add", (module + ".add_bias").str(), {y, bias}, {t, out});
  }

  /// x @ W^T for a weight stored [out, in] (nn.Linear without bias), the
  /// transpose as PyTorch's training-mode export writes it.
  Val linear(StringRef module, Val x, int64_t in, int64_t out) {
    Val w = b.param((module + ".weight").str(), {out, in},
                    WeightFill::GlorotUniform, in, out);
    Val wt = b.node("Transpose", (module + ".weight_t").str(), {w}, {in, out},
                    {NodeAttr::is("perm", {1, 0})});
    return b.node("MatMul", module, {x, wt}, {t, out});
  }

  Val pos{}, mask{}, negInf{}, scale{};
};

// --- GPT-2 ---

Val layerNorm(Decoder &d, StringRef module, Val x) {
  GraphBuilder &b = d.b;
  Val w = b.param((module + ".weight").str(), {d.width}, WeightFill::Ones);
  Val bias = b.param((module + ".bias").str(), {d.width}, WeightFill::Zeros);
  return b.node("LayerNormalization", module, {x, w, bias}, {d.t, d.width},
                {NodeAttr::i("axis", -1), NodeAttr::fl("epsilon", 1e-5f)});
}

/// gelu_new, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in the
/// nodes torch exports for gelu(approximate='tanh').
Val geluTanh(Decoder &d, StringRef p, Val x, int64_t n, Val c) {
  GraphBuilder &b = d.b;
  std::vector<int64_t> s = {d.t, n};
  Val sq = b.node("Mul", (p + ".sq").str(), {x, x}, s);
  Val cube = b.node("Mul", (p + ".cube").str(), {x, sq}, s);
  Val k = b.node("Mul", (p + ".cube_k").str(), {cube, c}, s);
  Val inner = b.node("Add", (p + ".inner").str(), {x, k}, s);
  Val k2 = d.scalarF((p + ".sqrt_2_over_pi").str(), 0.7978845608f);
  Val arg = b.node("Mul", (p + ".arg").str(), {inner, k2}, s);
  Val th = b.node("Tanh", (p + ".tanh").str(), {arg}, s);
  Val one = d.scalarF((p + ".one").str(), 1.0f);
  Val plus = b.node("Add", (p + ".plus_one").str(), {th, one}, s);
  Val prod = b.node("Mul", (p + ".times_x").str(), {x, plus}, s);
  Val half = d.scalarF((p + ".half").str(), 0.5f);
  return b.node("Mul", p, {prod, half}, s);
}

Val gpt2Block(Decoder &d, int64_t i, Val x) {
  GraphBuilder &b = d.b;
  std::string p = "transformer.h." + std::to_string(i);
  int64_t w = d.width, t = d.t;
  Val h = layerNorm(d, p + ".ln_1", x);
  Val qkv = d.conv1d(p + ".attn.c_attn", h, w, 3 * w);
  Val axis = d.i64(p + ".attn.split.axis", {2});
  Val parts[3];
  const char *names[] = {"query", "key", "value"};
  for (int64_t j = 0; j < 3; ++j) {
    Val from = d.i64(p + ".attn." + names[j] + ".start", {j * w});
    Val to = d.i64(p + ".attn." + names[j] + ".end", {(j + 1) * w});
    Val s =
        b.node("Slice", p + ".attn." + names[j], {qkv, from, to, axis}, {t, w});
    parts[j] = d.splitHeads(p + ".attn." + names[j], s, d.heads);
  }
  Val y = d.attention(p + ".attn", parts[0], parts[1], parts[2]);
  y = d.conv1d(p + ".attn.c_proj", y, w, w);
  x = b.node("Add", p + ".attn_residual", {x, y}, {t, w});
  h = layerNorm(d, p + ".ln_2", x);
  h = d.conv1d(p + ".mlp.c_fc", h, w, 4 * w);
  Val c = d.scalarF(p + ".mlp.gelu.k", 0.044715f);
  h = geluTanh(d, p + ".mlp.gelu", h, 4 * w, c);
  h = d.conv1d(p + ".mlp.c_proj", h, 4 * w, w);
  return b.node("Add", p + ".mlp_residual", {x, h}, {t, w});
}

// --- Llama ---

/// x / sqrt(mean(x^2) + eps) * weight, as Hugging Face's LlamaRMSNorm
/// exports (rsqrt as 1 / Sqrt, the weight multiplied last).
Val rmsNorm(Decoder &d, StringRef module, Val x, float eps) {
  GraphBuilder &b = d.b;
  std::vector<int64_t> s = {d.t, d.width}, r = {d.t, 1};
  Val two = d.scalarF((module + ".two").str(), 2.0f);
  Val sq = b.node("Pow", (module + ".pow").str(), {x, two}, s);
  Val mean = b.node("ReduceMean", (module + ".mean").str(), {sq}, r,
                    {NodeAttr::is("axes", {-1}), NodeAttr::i("keepdims", 1)});
  Val e = d.scalarF((module + ".eps").str(), eps);
  Val var = b.node("Add", (module + ".add_eps").str(), {mean, e}, r);
  Val root = b.node("Sqrt", (module + ".sqrt").str(), {var}, r);
  Val one = d.scalarF((module + ".one").str(), 1.0f);
  Val inv = b.node("Div", (module + ".rsqrt").str(), {one, root}, r);
  Val normed = b.node("Mul", (module + ".normed").str(), {x, inv}, s);
  Val w = b.param((module + ".weight").str(), {d.width}, WeightFill::Ones);
  return b.node("Mul", module, {w, normed}, s);
}

/// The rotary tables cos and sin of positions times inverse frequencies,
/// [T, head_dim], computed in the graph (folded at import).
struct Rotary {
  Val cos, sin;
  Val lo, mid, end, last; // the Slice bounds of rotate_half
};

Rotary rotaryTables(Decoder &d, float theta) {
  GraphBuilder &b = d.b;
  int64_t half = d.headDim / 2;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i)
    inv[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) /
                                        static_cast<float>(d.headDim));
  Val invFreq = b.constFloats("rotary.inv_freq", {half}, std::move(inv));
  Val posF = b.node("Cast", "rotary.positions", {d.pos}, {d.t},
                    {NodeAttr::i("to", onnx::TensorProto::FLOAT)});
  Val col = b.node("Unsqueeze", "rotary.positions.column",
                   {posF, d.i64("rotary.axis1", {1})}, {d.t, 1});
  Val freqs = b.node("Mul", "rotary.freqs", {col, invFreq}, {d.t, half});
  Val emb = b.node("Concat", "rotary.emb", {freqs, freqs}, {d.t, d.headDim},
                   {NodeAttr::i("axis", -1)});
  Rotary r;
  r.cos = b.node("Cos", "rotary.cos", {emb}, {d.t, d.headDim});
  r.sin = b.node("Sin", "rotary.sin", {emb}, {d.t, d.headDim});
  r.lo = d.i64("rotary.start", {0});
  r.mid = d.i64("rotary.half", {half});
  r.end = d.i64("rotary.end", {d.headDim});
  r.last = d.i64("rotary.axis", {3});
  return r;
}

/// x * cos + rotate_half(x) * sin for x [n, T, d]; rotate_half(x) is
/// concat(-x[..., d/2:], x[..., :d/2]).
Val applyRotary(Decoder &d, const Rotary &r, const std::string &p, Val x,
                int64_t n) {
  GraphBuilder &b = d.b;
  std::vector<int64_t> s = {n, d.t, d.headDim}, h = {n, d.t, d.headDim / 2};
  Val x1 = b.node("Slice", p + ".x1", {x, r.lo, r.mid, r.last}, h);
  Val x2 = b.node("Slice", p + ".x2", {x, r.mid, r.end, r.last}, h);
  Val neg = b.node("Neg", p + ".neg_x2", {x2}, h);
  Val rot = b.node("Concat", p + ".rotate_half", {neg, x1}, s,
                   {NodeAttr::i("axis", -1)});
  Val a = b.node("Mul", p + ".cos", {x, r.cos}, s);
  Val c = b.node("Mul", p + ".sin", {rot, r.sin}, s);
  return b.node("Add", p + ".rotated", {a, c}, s);
}

/// Hugging Face's repeat_kv: [kv, T, d] to [heads, T, d], each key/value
/// head shared by heads/kv query heads (Unsqueeze, Expand, Reshape).
Val repeatKv(Decoder &d, const std::string &p, Val x, int64_t kv) {
  GraphBuilder &b = d.b;
  int64_t rep = d.heads / kv;
  if (rep == 1)
    return x;
  Val u = b.node("Unsqueeze", p + ".unsqueeze", {x, d.i64(p + ".axis", {2})},
                 {kv, 1, d.t, d.headDim});
  Val e = b.node("Expand", p + ".expand",
                 {u, d.i64(p + ".expand.shape", {1, kv, rep, 1, 1})},
                 {kv, rep, d.t, d.headDim});
  return b.node("Reshape", p + ".repeated",
                {e, d.i64(p + ".repeated.shape", {0, d.heads, d.t, d.headDim})},
                {d.heads, d.t, d.headDim});
}

Val llamaBlock(Decoder &d, const LlamaConfig &c, const Rotary &r, int64_t i,
               Val x) {
  GraphBuilder &b = d.b;
  std::string p = "model.layers." + std::to_string(i);
  std::string a = p + ".self_attn";
  int64_t w = d.width, t = d.t, kvWidth = c.kvHeads * d.headDim;
  Val h = rmsNorm(d, p + ".input_layernorm", x, c.rmsEps);
  Val q = d.splitHeads(a + ".q", d.linear(a + ".q_proj", h, w, w), d.heads);
  Val k =
      d.splitHeads(a + ".k", d.linear(a + ".k_proj", h, w, kvWidth), c.kvHeads);
  Val v =
      d.splitHeads(a + ".v", d.linear(a + ".v_proj", h, w, kvWidth), c.kvHeads);
  q = applyRotary(d, r, a + ".q", q, d.heads);
  k = applyRotary(d, r, a + ".k", k, c.kvHeads);
  k = repeatKv(d, a + ".k", k, c.kvHeads);
  v = repeatKv(d, a + ".v", v, c.kvHeads);
  Val y = d.attention(a, q, k, v);
  y = d.linear(a + ".o_proj", y, w, w);
  x = b.node("Add", p + ".attn_residual", {x, y}, {t, w});
  h = rmsNorm(d, p + ".post_attention_layernorm", x, c.rmsEps);
  std::string m = p + ".mlp";
  Val gate = d.linear(m + ".gate_proj", h, w, c.ffn);
  Val up = d.linear(m + ".up_proj", h, w, c.ffn);
  Val sig = b.node("Sigmoid", m + ".sigmoid", {gate}, {t, c.ffn});
  Val silu = b.node("Mul", m + ".silu", {gate, sig}, {t, c.ffn});
  Val prod = b.node("Mul", m + ".gated", {silu, up}, {t, c.ffn});
  Val down = d.linear(m + ".down_proj", prod, c.ffn, w);
  return b.node("Add", p + ".mlp_residual", {x, down}, {t, w});
}

} // namespace

Val buildGpt2(GraphBuilder &b, const Gpt2Config &config) {
  Gpt2Config c = config;
  c.vocab = b.vocab(c.vocab);
  c.layers = b.layers(c.layers);
  b.setOpset(17); // LayerNormalization
  Decoder d(b, c.width, c.heads);
  Val ids = b.tokenInput();
  d.positions();
  Val wte = b.param("transformer.wte.weight", {c.vocab, c.width},
                    WeightFill::GlorotUniform, c.vocab, c.width);
  Val wpe = b.param("transformer.wpe.weight", {c.positions, c.width},
                    WeightFill::GlorotUniform, c.positions, c.width);
  Val tok = b.node("Gather", "transformer.wte", {wte, ids}, {d.t, c.width});
  Val pos = b.node("Gather", "transformer.wpe", {wpe, d.pos}, {d.t, c.width});
  Val x = b.node("Add", "transformer.embed", {tok, pos}, {d.t, c.width});
  for (int64_t i = 0; i < c.layers; ++i)
    x = gpt2Block(d, i, x);
  x = layerNorm(d, "transformer.ln_f", x);
  // The LM head is the token embedding transposed (tied), one weight.
  Val head = b.node("Transpose", "lm_head.weight_t", {wte}, {c.width, c.vocab},
                    {NodeAttr::is("perm", {1, 0})});
  return b.node("MatMul", "lm_head", {x, head}, {d.t, c.vocab});
}

Val buildLlama(GraphBuilder &b, const LlamaConfig &config) {
  LlamaConfig c = config;
  c.vocab = b.vocab(c.vocab);
  c.layers = b.layers(c.layers);
  Decoder d(b, c.width, c.heads);
  Val ids = b.tokenInput();
  d.positions();
  Rotary r = rotaryTables(d, c.ropeTheta);
  Val table = b.param("model.embed_tokens.weight", {c.vocab, c.width},
                      WeightFill::GlorotUniform, c.vocab, c.width);
  Val x = b.node("Gather", "model.embed_tokens", {table, ids}, {d.t, c.width});
  for (int64_t i = 0; i < c.layers; ++i)
    x = llamaBlock(d, c, r, i, x);
  x = rmsNorm(d, "model.norm", x, c.rmsEps);
  return d.linear("lm_head", x, c.width, c.vocab);
}

} // namespace memfit::zoo
