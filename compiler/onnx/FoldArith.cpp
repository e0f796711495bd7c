//===- FoldArith.cpp - Arithmetic, comparisons and casts on constants -----===//
//
// Shape vectors meet arithmetic (a head count times a head size, a sequence
// length minus one), comparisons (Equal against -1 picks the axis a
// reshape infers), selections and casts. Integer elements that are the
// symbolic batch stay the batch where the result is a multiple of it at
// every batch size; anything else computed from the batch is refused, not
// folded into a number that is wrong at another batch.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Fold.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

namespace memfit::onnximport {

using llvm::Error;
using llvm::Expected;

namespace {

class ArithFolder : FoldBase {
public:
  using FoldBase::FoldBase;

  /// Elementwise a == b as BOOL, broadcast numpy style (transformers'
  /// masks compare [N, T, 1] positions with [N, 1, T] ones).
  Expected<ConstTensor> equal() {
    auto a = input(0), b = input(1);
    if (!a || !b)
      return llvm::joinErrors(a.takeError(), b.takeError());
    auto shape = Broadcast::of(im, n, a->dims, b->dims);
    if (!shape)
      return shape.takeError();
    ConstTensor out;
    out.type = pb::TensorProto::BOOL;
    out.dims = shape->dims;
    Error e = shape->forEach([&](int64_t ka, int64_t kb) -> Error {
      if (a->isBatch(ka) || b->isBatch(kb)) {
        // The batch is positive: it differs from any number <= 0 (shape
        // arithmetic compares with -1), and a comparison with a positive
        // number would hold at some batch sizes only.
        if (a->isBatch(ka) && b->isBatch(kb)) {
          out.ints.push_back(a->ints[ka] == b->ints[kb] ? 1 : 0);
          return Error::success();
        }
        const ConstTensor &o = a->isBatch(ka) ? *b : *a;
        int64_t ok = a->isBatch(ka) ? kb : ka;
        if (o.isFloat() || o.ints[ok] > 0)
          return im.fail(n, "compares the batch size with a number");
        out.ints.push_back(0);
        return Error::success();
      }
      double x = a->isFloat() ? a->floats[ka] : double(a->ints[ka]);
      double y = b->isFloat() ? b->floats[kb] : double(b->ints[kb]);
      out.ints.push_back(x == y ? 1 : 0);
      return Error::success();
    });
    if (e)
      return std::move(e);
    return out;
  }

  /// cond ? a : b elementwise, the three broadcast numpy style (T5's
  /// position bias: a [1, 1, T, T] mask choosing between a table and a
  /// scalar), the batch marks following the chosen element.
  Expected<ConstTensor> where() {
    auto c = input(0), a = input(1), b = input(2);
    if (!c || !a || !b)
      return llvm::joinErrors(
          llvm::joinErrors(c ? Error::success() : c.takeError(),
                           a ? Error::success() : a.takeError()),
          b ? Error::success() : b.takeError());
    if (a->type != b->type || c->isFloat())
      return im.fail(n, "operands have unexpected element types");
    auto ab = Broadcast::of(im, n, a->dims, b->dims);
    if (!ab)
      return ab.takeError();
    auto all = Broadcast::of(im, n, c->dims, ab->dims);
    if (!all)
      return all.takeError();
    // Element k of the result pairs element kc of c with element kab of
    // a-and-b's broadcast, whose own pairs are listed in order.
    std::vector<std::pair<int64_t, int64_t>> pairs;
    if (Error e = ab->forEach([&](int64_t ia, int64_t ib) {
          pairs.emplace_back(ia, ib);
          return Error::success();
        }))
      return std::move(e);
    ConstTensor out;
    out.type = a->type;
    out.dims = all->dims;
    reserveElems(out, prod(out.dims, 0, out.dims.size()));
    Error e = all->forEach([&](int64_t kc, int64_t kab) {
      auto [ia, ib] = pairs[kab];
      if (c->ints[kc])
        appendElem(out, *a, ia);
      else
        appendElem(out, *b, ib);
      return Error::success();
    });
    if (e)
      return std::move(e);
    return out;
  }

  Expected<ConstTensor> logicalNot() {
    auto a = input(0);
    if (!a)
      return a.takeError();
    if (a->type != pb::TensorProto::BOOL)
      return im.fail(n, "negates a non-boolean constant");
    ConstTensor out = *a;
    for (int64_t &v : out.ints)
      v = v ? 0 : 1;
    return out;
  }

  Expected<ConstTensor> cast() {
    auto to = im.attrInt(n, "to", 0);
    if (!to)
      return to.takeError();
    return castTo(*to);
  }

  /// A constant cast to the type of operand 1 (torch.export graphs cast
  /// their literals like the data they meet).
  Expected<ConstTensor> castLike() {
    if (im.isConstant(n.input(1))) {
      auto like = input(1);
      if (!like)
        return like.takeError();
      return castTo(like->type);
    }
    return castTo(im.isIntegerActivation(n.input(1)) ? pb::TensorProto::INT64
                                                     : pb::TensorProto::FLOAT);
  }

private:
  Expected<ConstTensor> castTo(int64_t toType) {
    auto t = input(0);
    if (!t)
      return t.takeError();
    // Double literals fold as float32 (readConstant reads them so).
    const int64_t to =
        toType == pb::TensorProto::DOUBLE ? pb::TensorProto::FLOAT : toType;
    ConstTensor out;
    out.type = static_cast<int32_t>(to);
    out.dims = t->dims;
    reserveElems(out, t->numel());
    if (to == pb::TensorProto::FLOAT) {
      if (t->isFloat())
        return std::move(*t);
      for (int64_t k = 0; k < t->numel(); ++k) {
        if (t->isBatch(k))
          return im.fail(n, "casts the batch size to a float");
        out.floats.push_back(static_cast<float>(t->ints[k]));
      }
      return out;
    }
    if (to != pb::TensorProto::INT64 && to != pb::TensorProto::INT32 &&
        to != pb::TensorProto::BOOL)
      return im.fail(n, "casts a constant to " +
                            dataTypeName(static_cast<int32_t>(to)) +
                            ", which memfit does not fold");
    for (int64_t k = 0; k < t->numel(); ++k) {
      int64_t v = 0;
      if (t->isFloat()) {
        float f = t->floats[k];
        // A float no integer holds (T5's log of a zero distance, -inf, is
        // cast and then discarded by a Where) becomes what torch gives on
        // x86: the integer's minimum; to bool it is true.
        bool fits = std::isfinite(f) && std::fabs(f) < 2.1e9f;
        bool fits64 = std::isfinite(f) && std::fabs(f) < 9.2e18f;
        if (to == pb::TensorProto::BOOL)
          v = f != 0.0f;
        else if (to == pb::TensorProto::INT32)
          v = fits ? static_cast<int64_t>(f)
                   : std::numeric_limits<int32_t>::min();
        else
          v = fits64 ? static_cast<int64_t>(f)
                     : std::numeric_limits<int64_t>::min();
      } else {
        v = t->ints[k];
      }
      if (to == pb::TensorProto::BOOL) {
        if (t->isBatch(k))
          return im.fail(n, "casts the batch size to a bool");
        v = v != 0;
      } else if (to == pb::TensorProto::INT32 && !t->isFloat()) {
        v = static_cast<int32_t>(v);
      }
      out.ints.push_back(v);
      out.batch.push_back(t->isBatch(k));
    }
    return out;
  }

public:
  Expected<ConstTensor> binary(const std::string &op) {
    auto a = input(0);
    auto b = input(1);
    if (!a || !b)
      return llvm::joinErrors(a.takeError(), b.takeError());
    if (op == "Mod") {
      auto f = im.attrInt(n, "fmod", 0);
      if (!f)
        return f.takeError();
      fmod = *f != 0;
      if (a->isFloat() && !fmod)
        return im.fail(n, "Mod of floats needs fmod=1");
    }
    if (a->type != b->type)
      return im.fail(n, "operands have different element types");
    auto shape = Broadcast::of(im, n, a->dims, b->dims);
    if (!shape)
      return shape.takeError();
    ConstTensor out;
    out.type = a->type;
    out.dims = shape->dims;
    reserveElems(out, prod(out.dims, 0, out.dims.size()));
    Error e = shape->forEach([&](int64_t ia, int64_t ib) -> Error {
      if (out.isFloat()) {
        float x = a->floats[ia], y = b->floats[ib];
        out.floats.push_back(op == "Add"   ? x + y
                             : op == "Sub" ? x - y
                             : op == "Mul" ? x * y
                             : op == "Div" ? x / y
                                           : std::fmod(x, y));
        return Error::success();
      }
      auto r =
          intOp(op, a->ints[ia], a->isBatch(ia), b->ints[ib], b->isBatch(ib));
      if (!r)
        return r.takeError();
      out.ints.push_back(r->first);
      out.batch.push_back(r->second);
      return Error::success();
    });
    if (e)
      return std::move(e);
    return out;
  }

private:
  /// One integer element of a binary op, following the batch: an element
  /// marked as the batch stands for a multiple of it (N, or N * heads as
  /// nn.MultiheadAttention computes), so B+0, B-0, B*k, k*B and B/k (where
  /// k divides the multiple) keep it.
  Expected<std::pair<int64_t, bool>>
  intOp(const std::string &op, int64_t a, bool aBatch, int64_t b, bool bBatch) {
    if (aBatch || bBatch) {
      bool divides =
          op == "Div" && b > 0 && a % b == 0 && (a / b) % im.g.batch == 0;
      bool keeps = (aBatch && !bBatch &&
                    (((op == "Add" || op == "Sub") && b == 0) ||
                     (op == "Mul" && b > 0) || divides)) ||
                   (bBatch && !aBatch &&
                    ((op == "Add" && a == 0) || (op == "Mul" && a > 0)));
      if (!keeps)
        return im.fail(n, "computes with the batch size; memfit keeps the "
                          "batch symbolic and cannot fold this arithmetic");
      if (op == "Mul")
        return std::make_pair(a * b, true);
      if (op == "Div")
        return std::make_pair(a / b, true);
      return std::make_pair(aBatch ? a : b, true);
    }
    int64_t r = 0;
    bool overflow = false;
    if (op == "Add")
      overflow = __builtin_add_overflow(a, b, &r);
    else if (op == "Sub")
      overflow = __builtin_sub_overflow(a, b, &r);
    else if (op == "Mul")
      overflow = __builtin_mul_overflow(a, b, &r);
    else if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1))
      return im.fail(n, "divides by zero or overflows");
    else if (op == "Div")
      r = a / b;
    else // Mod: the sign of the divisor unless fmod (C's %)
      r = a % b != 0 && !fmod && ((a % b < 0) != (b < 0)) ? a % b + b : a % b;
    if (overflow)
      return im.fail(n, "overflows");
    return std::make_pair(r, false);
  }

  bool fmod = false; // Mod: C's remainder (else the divisor's sign)
};

template <Expected<ConstTensor> (ArithFolder::*Fold)()>
Expected<ConstTensor> viaArithFolder(Importer &im, const pb::NodeProto &n) {
  return (ArithFolder(im, n).*Fold)();
}

template <const char *Op>
Expected<ConstTensor> foldBinary(Importer &im, const pb::NodeProto &n) {
  return ArithFolder(im, n).binary(Op);
}

constexpr char kAdd[] = "Add", kSub[] = "Sub", kMul[] = "Mul", kDiv[] = "Div",
               kMod[] = "Mod";

} // namespace

llvm::ArrayRef<FoldRule> arithFoldRules() {
  static const FoldRule rules[] = {
      {"Equal", true, viaArithFolder<&ArithFolder::equal>},
      {"Not", true, viaArithFolder<&ArithFolder::logicalNot>},
      {"Add", false, foldBinary<kAdd>},
      {"Sub", false, foldBinary<kSub>},
      {"Mul", false, foldBinary<kMul>},
      {"Div", false, foldBinary<kDiv>},
      {"Mod", false, foldBinary<kMod>},
      {"Cast", false, viaArithFolder<&ArithFolder::cast>},
      {"CastLike", false, viaArithFolder<&ArithFolder::castLike>},
      {"Where", false, viaArithFolder<&ArithFolder::where>},
  };
  return rules;
}

} // namespace memfit::onnximport
