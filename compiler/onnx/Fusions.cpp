//===- Fusions.cpp - Operators exporters spell out in pieces --------------===//
//
// PyTorch exports GELU (before ONNX opset 20) as Div, Erf, Add, Mul, Mul,
// or its tanh approximation as eight nodes, and LayerNorm before opset 17 as
// ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add. Translated node
// by node they would keep every intermediate alive for the backward (and
// torch.export guards attention's softmax with Where(IsNaN(p), 0, p)); found
// here before translation, each becomes the one operator it is (Gelu,
// LayerNorm, NanTo), whose backward reads only its input. torch.onnx writes
// Mish as Mul(x, Tanh(Softplus(x))) and LogSigmoid (which ONNX lacks) as
// Log(Sigmoid(x)); fused, each is one kernel in the numerically stable
// form PyTorch computes. Drop path and torch.export's decomposed in-place
// dropout are one Dropout. A pattern matches
// only where its intermediates feed nothing else and its constants are exactly
// the exporter's, so what the model computes is unchanged.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_set>

namespace memfit::onnximport {

namespace {

class Matcher {
public:
  Matcher(const pb::GraphProto &g,
          const std::unordered_map<std::string, std::vector<int>> &readers,
          const std::vector<bool> &live)
      : g(g), readers(readers), live(live) {
    for (int k = 0; k < g.node_size(); ++k)
      for (const std::string &o : g.node(k).output())
        producer[o] = k;
    for (const pb::TensorProto &t : g.initializer())
      inits[t.name()] = &t;
    // Graph inputs without data after the data input (the first) are
    // weights too (export_params=False).
    bool data = true;
    for (const pb::ValueInfoProto &vi : g.input()) {
      if (inits.count(vi.name()))
        continue;
      if (!data)
        declared.insert(vi.name());
      data = false;
    }
  }

  const pb::NodeProto &node(int k) const { return g.node(k); }
  bool is(int k, const char *op) const {
    return k >= 0 && live[k] && g.node(k).op_type() == op;
  }
  /// The one live node reading `name`, or -1.
  int soleReader(const std::string &name) const {
    auto it = readers.find(name);
    if (it == readers.end() || it->second.size() != 1)
      return -1;
    return it->second[0];
  }
  int producerOf(const std::string &name) const {
    auto it = producer.find(name);
    return it == producer.end() ? -1 : it->second;
  }
  /// The float scalar a Constant node or an initializer holds.
  std::optional<float> scalar(const std::string &name) const {
    const pb::TensorProto *t = nullptr;
    int p = producerOf(name);
    if (p >= 0 && g.node(p).op_type() == "Constant") {
      for (const auto &a : g.node(p).attribute()) {
        if (a.name() == "value" && a.has_t())
          t = &a.t();
        if (a.name() == "value_float" && a.type() == pb::AttributeProto::FLOAT)
          return a.f();
      }
    } else if (p >= 0 && g.node(p).op_type() == "CastLike") {
      // A literal cast like the tensor it meets (torch.export's p_cast).
      return scalar(g.node(p).input(0));
    } else if (auto it = inits.find(name); it != inits.end()) {
      t = it->second;
    }
    if (!t || t->data_type() != pb::TensorProto::FLOAT)
      return std::nullopt;
    int64_t n = 1;
    for (int64_t d : t->dims())
      n *= d;
    if (n != 1)
      return std::nullopt;
    if (t->float_data_size() == 1)
      return t->float_data(0);
    if (t->raw_data().size() == 4) {
      float v;
      std::memcpy(&v, t->raw_data().data(), 4);
      return v;
    }
    return std::nullopt;
  }
  bool isScalar(const std::string &name, float want) const {
    auto v = scalar(name);
    return v && std::fabs(*v - want) <= 1e-6f * std::fabs(want);
  }
  /// For a two-operand node reading `self`: the other operand's name, or
  /// empty when `self` is not an operand.
  std::string other(int k, const std::string &self) const {
    const pb::NodeProto &n = g.node(k);
    if (n.input_size() != 2)
      return {};
    if (n.input(0) == self)
      return n.input(1);
    if (n.input(1) == self)
      return n.input(0);
    return {};
  }
  /// A stored weight, or one declared as a graph input without data.
  bool isWeight(const std::string &name) const {
    return inits.count(name) || declared.count(name);
  }
  const std::vector<int> &readersOf(const std::string &name) const {
    static const std::vector<int> none;
    auto it = readers.find(name);
    return it == readers.end() ? none : it->second;
  }

private:
  const pb::GraphProto &g;
  const std::unordered_map<std::string, std::vector<int>> &readers;
  const std::vector<bool> &live;
  std::unordered_map<std::string, int> producer;
  std::unordered_map<std::string, const pb::TensorProto *> inits;
  std::unordered_set<std::string> declared;
};

/// 0.5 * x * (1 + erf(x / sqrt(2))) around the Erf node `e`.
std::optional<Fusion> erfGelu(const Matcher &m, int e,
                              std::vector<int> &nodes) {
  int d = m.producerOf(m.node(e).input(0));
  if (!(m.is(d, "Div") || m.is(d, "Mul")) ||
      m.soleReader(m.node(e).input(0)) != e)
    return std::nullopt;
  std::string x = m.node(d).input(0);
  bool div = m.node(d).op_type() == "Div";
  if (!m.isScalar(m.node(d).input(1), div ? float(M_SQRT2) : float(M_SQRT1_2)))
    return std::nullopt;
  int a = m.soleReader(m.node(e).output(0));
  if (!m.is(a, "Add") || !m.isScalar(m.other(a, m.node(e).output(0)), 1.0f))
    return std::nullopt;
  // The two products in either order: (x * t) * 0.5 (torch.onnx's
  // TorchScript exporter) or x * (0.5 * t) (its dynamo exporter).
  int m1 = m.soleReader(m.node(a).output(0));
  if (!m.is(m1, "Mul"))
    return std::nullopt;
  std::string first = m.other(m1, m.node(a).output(0));
  bool halfFirst = m.isScalar(first, 0.5f);
  if (first != x && !halfFirst)
    return std::nullopt;
  int m2 = m.soleReader(m.node(m1).output(0));
  if (!m.is(m2, "Mul"))
    return std::nullopt;
  std::string second = m.other(m2, m.node(m1).output(0));
  if (!(halfFirst ? second == x : m.isScalar(second, 0.5f)))
    return std::nullopt;
  nodes = {d, e, a, m1, m2};
  return Fusion{.kind = OpKind::Gelu, .x = x};
}

/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) around the Tanh
/// node `t`, as torch exports gelu(approximate='tanh').
std::optional<Fusion> tanhGelu(const Matcher &m, int t,
                               std::vector<int> &nodes) {
  const std::string &in = m.node(t).input(0);
  int m5 = m.producerOf(in);
  if (!m.is(m5, "Mul") || m.soleReader(in) != t)
    return std::nullopt;
  std::string a1out;
  for (int i = 0; i < 2; ++i)
    if (m.isScalar(m.node(m5).input(i), 0.7978846f))
      a1out = m.node(m5).input(1 - i);
  int a1 = m.producerOf(a1out);
  if (!m.is(a1, "Add") || m.soleReader(a1out) != m5)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    std::string x = m.node(a1).input(i), m4out = m.node(a1).input(1 - i);
    int m4 = m.producerOf(m4out);
    if (!m.is(m4, "Mul") || m.soleReader(m4out) != a1)
      continue;
    std::string cube;
    for (int j = 0; j < 2; ++j)
      if (m.isScalar(m.node(m4).input(j), 0.044715f))
        cube = m.node(m4).input(1 - j);
    int m3 = m.producerOf(cube);
    if (!m.is(m3, "Mul") || m.soleReader(cube) != m4)
      continue;
    std::string sq = m.other(m3, x);
    int m2 = m.producerOf(sq);
    if (!m.is(m2, "Mul") || m.soleReader(sq) != m3 ||
        m.node(m2).input(0) != x || m.node(m2).input(1) != x)
      continue;
    int a2 = m.soleReader(m.node(t).output(0));
    if (!m.is(a2, "Add") || !m.isScalar(m.other(a2, m.node(t).output(0)), 1.0f))
      return std::nullopt;
    int m6 = m.soleReader(m.node(a2).output(0));
    if (!m.is(m6, "Mul") || m.other(m6, m.node(a2).output(0)) != x)
      return std::nullopt;
    int m7 = m.soleReader(m.node(m6).output(0));
    if (!m.is(m7, "Mul") ||
        !m.isScalar(m.other(m7, m.node(m6).output(0)), 0.5f))
      return std::nullopt;
    nodes = {m2, m3, m4, a1, m5, t, a2, m6, m7};
    return Fusion{.kind = OpKind::Gelu, .x = x, .tanhApprox = true};
  }
  return std::nullopt;
}

bool lastAxisMean(const Matcher &m, int k) {
  if (!m.is(k, "ReduceMean") || m.node(k).input_size() != 1)
    return false;
  bool axes = false, keep = true;
  for (const auto &a : m.node(k).attribute()) {
    if (a.name() == "axes")
      axes = a.ints_size() == 1 && a.ints(0) == -1;
    if (a.name() == "keepdims")
      keep = a.i() != 0;
  }
  return axes && keep;
}

/// (x - mean) / sqrt(var + eps) * w + b over the last axis, starting at the
/// first ReduceMean `r1`.
std::optional<Fusion> layerNorm(const Matcher &m, int r1,
                                std::vector<int> &nodes) {
  if (!lastAxisMean(m, r1))
    return std::nullopt;
  std::string x = m.node(r1).input(0), mean = m.node(r1).output(0);
  int s = m.soleReader(mean);
  if (!m.is(s, "Sub") || m.node(s).input(0) != x || m.node(s).input(1) != mean)
    return std::nullopt;
  std::string dev = m.node(s).output(0);
  // `dev` feeds exactly the square and the division.
  int pw = -1, dv = -1;
  for (int k : m.readersOf(dev)) {
    if (m.is(k, "Pow") && m.node(k).input(0) == dev &&
        m.isScalar(m.node(k).input(1), 2.0f))
      pw = k;
    else if (m.is(k, "Div") && m.node(k).input(0) == dev)
      dv = k;
    else
      return std::nullopt;
  }
  if (pw < 0 || dv < 0 || m.readersOf(dev).size() != 2)
    return std::nullopt;
  int r2 = m.soleReader(m.node(pw).output(0));
  if (!lastAxisMean(m, r2))
    return std::nullopt;
  int ad = m.soleReader(m.node(r2).output(0));
  if (!m.is(ad, "Add"))
    return std::nullopt;
  auto eps = m.scalar(m.other(ad, m.node(r2).output(0)));
  int sq = m.soleReader(m.node(ad).output(0));
  if (!eps || !m.is(sq, "Sqrt") || m.soleReader(m.node(sq).output(0)) != dv ||
      m.node(dv).input(1) != m.node(sq).output(0))
    return std::nullopt;
  int mu = m.soleReader(m.node(dv).output(0));
  if (!m.is(mu, "Mul"))
    return std::nullopt;
  std::string w = m.other(mu, m.node(dv).output(0));
  int ab = m.soleReader(m.node(mu).output(0));
  if (!m.isWeight(w) || !m.is(ab, "Add"))
    return std::nullopt;
  std::string b = m.other(ab, m.node(mu).output(0));
  if (!m.isWeight(b))
    return std::nullopt;
  nodes = {r1, s, pw, r2, ad, sq, dv, mu, ab};
  return Fusion{.kind = OpKind::LayerNorm,
                .x = x,
                .scale = w,
                .bias = b,
                .epsilon = *eps};
}

/// Where(IsNaN(x), c, x) around the IsNaN node `k`: x with its NaNs
/// replaced by the scalar c (torch.export's guard on attention softmax).
std::optional<Fusion> nanTo(const Matcher &m, int k, std::vector<int> &nodes) {
  const pb::NodeProto &isNan = m.node(k);
  if (isNan.input_size() != 1)
    return std::nullopt;
  int w = m.soleReader(isNan.output(0));
  if (!m.is(w, "Where") || m.node(w).input_size() != 3 ||
      m.node(w).input(0) != isNan.output(0) ||
      m.node(w).input(2) != isNan.input(0))
    return std::nullopt;
  auto fill = m.scalar(m.node(w).input(1));
  if (!fill)
    return std::nullopt;
  nodes = {k, w};
  return Fusion{.kind = OpKind::NanTo, .x = isNan.input(0), .epsilon = *fill};
}

/// x * tanh(softplus(x)) around the Softplus node `k`.
std::optional<Fusion> mish(const Matcher &m, int k, std::vector<int> &nodes) {
  const pb::NodeProto &sp = m.node(k);
  if (sp.input_size() != 1)
    return std::nullopt;
  int t = m.soleReader(sp.output(0));
  if (!m.is(t, "Tanh"))
    return std::nullopt;
  int mul = m.soleReader(m.node(t).output(0));
  if (!m.is(mul, "Mul") || m.other(mul, m.node(t).output(0)) != sp.input(0))
    return std::nullopt;
  nodes = {k, t, mul};
  return Fusion{.kind = OpKind::Mish, .x = sp.input(0)};
}

/// log(sigmoid(x)) around the Sigmoid node `k`.
std::optional<Fusion> logSigmoid(const Matcher &m, int k,
                                 std::vector<int> &nodes) {
  const pb::NodeProto &s = m.node(k);
  int l = m.soleReader(s.output(0));
  if (s.input_size() != 1 || !m.is(l, "Log"))
    return std::nullopt;
  nodes = {k, l};
  return Fusion{.kind = OpKind::LogSigmoid, .x = s.input(0)};
}

/// x / keep * floor(keep + rand_like(m)) around the RandomUniformLike node
/// `k`: with m one element per sample ([N, 1, ...]) Hugging Face's
/// drop_path (stochastic depth, BEiT, Swin, ConvNeXt), a dropout whose one
/// draw keeps or drops the whole sample; with m of x's shape, dropout
/// (translateFusion tells them apart by m's dims). memfit draws its own
/// numbers, as for Dropout: the same distribution, not torch's generator.
std::optional<Fusion> dropPath(const Matcher &m, int k,
                               std::vector<int> &nodes) {
  const pb::NodeProto &r = m.node(k);
  int a = m.soleReader(r.output(0));
  if (!m.is(a, "Add"))
    return std::nullopt;
  auto keep = m.scalar(m.other(a, r.output(0)));
  if (!keep || !(*keep > 0.0f && *keep <= 1.0f))
    return std::nullopt;
  int f = m.soleReader(m.node(a).output(0));
  if (!m.is(f, "Floor"))
    return std::nullopt;
  int mul = m.soleReader(m.node(f).output(0));
  if (!m.is(mul, "Mul"))
    return std::nullopt;
  std::string scaled = m.other(mul, m.node(f).output(0));
  int d = m.producerOf(scaled);
  if (!m.is(d, "Div") || m.soleReader(scaled) != mul ||
      !m.isScalar(m.node(d).input(1), *keep))
    return std::nullopt;
  nodes = {k, a, f, d, mul};
  return Fusion{.kind = OpKind::Dropout,
                .x = m.node(d).input(0),
                .ratio = 1.0f - *keep,
                .like = r.input(0)};
}

/// x * (bernoulli(keep) / keep) as torch.export decomposes an in-place
/// dropout (nn.Dropout(inplace=True), MobileViT's classifier):
/// rand_like(m) < keep, cast to float, divided by keep, times x. The same
/// dropout as dropPath's second form.
std::optional<Fusion> bernoulliDropout(const Matcher &m, int k,
                                       std::vector<int> &nodes) {
  const pb::NodeProto &r = m.node(k);
  // The numbers are read by the Less and by the CastLike that gives keep
  // their type.
  int lt = -1;
  for (int reader : m.readersOf(r.output(0))) {
    if (m.is(reader, "Less") && m.node(reader).input(0) == r.output(0) &&
        lt < 0)
      lt = reader;
    else if (!(m.is(reader, "CastLike") &&
               m.node(reader).input(1) == r.output(0)))
      return std::nullopt;
  }
  if (lt < 0)
    return std::nullopt;
  auto keep = m.scalar(m.node(lt).input(1));
  if (!keep || !(*keep > 0.0f && *keep <= 1.0f))
    return std::nullopt;
  int c = m.soleReader(m.node(lt).output(0));
  if (!m.is(c, "CastLike") && !m.is(c, "Cast"))
    return std::nullopt;
  int d = m.soleReader(m.node(c).output(0));
  if (!m.is(d, "Div") || m.node(d).input(0) != m.node(c).output(0) ||
      !m.isScalar(m.node(d).input(1), *keep))
    return std::nullopt;
  int mul = m.soleReader(m.node(d).output(0));
  if (!m.is(mul, "Mul"))
    return std::nullopt;
  std::string x = m.other(mul, m.node(d).output(0));
  if (x.empty())
    return std::nullopt;
  nodes = {k, lt, c, d, mul};
  return Fusion{.kind = OpKind::Dropout,
                .x = x,
                .ratio = 1.0f - *keep,
                .like = r.input(0)};
}

} // namespace

void Importer::findFusions() {
  const pb::GraphProto &graph = model.graph();
  Matcher m(graph, readers, live);
  fusedAway.assign(graph.node_size(), false);
  for (int k = 0; k < graph.node_size(); ++k) {
    if (!live[k] || fusedAway[k])
      continue;
    const std::string &op = graph.node(k).op_type();
    std::vector<int> nodes;
    std::optional<Fusion> f;
    if (op == "Erf")
      f = erfGelu(m, k, nodes);
    else if (op == "Tanh")
      f = tanhGelu(m, k, nodes);
    else if (op == "ReduceMean")
      f = layerNorm(m, k, nodes);
    else if (op == "IsNaN")
      f = nanTo(m, k, nodes);
    else if (op == "Softplus")
      f = mish(m, k, nodes);
    else if (op == "Sigmoid")
      f = logSigmoid(m, k, nodes);
    else if (op == "RandomUniformLike") {
      f = dropPath(m, k, nodes);
      if (!f)
        f = bernoulliDropout(m, k, nodes);
    }
    if (!f)
      continue;
    for (int n : nodes)
      fusedAway[n] = true;
    // The last node of the pattern computes the fused op's output.
    int last = *std::max_element(nodes.begin(), nodes.end());
    fusedAway[last] = false;
    fusions[last] = *f;
  }
}

} // namespace memfit::onnximport
