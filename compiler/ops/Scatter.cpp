//===- Scatter.cpp - ScatterND of activations as slices and a Concat ------===//
//
// torch.export writes an in-place assignment to a slice of an activation
// (`x[..., :k] *= m`, functionalized as slice_scatter) as ScatterND of the
// activation moved to the sliced axis first, at contiguous constant rows of
// that axis, with the new rows. memfit imports it as what it computes: the
// rows before and after the window sliced from the data, the updates
// between them, joined by a Concat on the activation with its batch
// outermost and moved back to the data's layout. Exact: every element is
// copied, and each gradient is the output's on the rows it supplied.
//
//===----------------------------------------------------------------------===//
#include "compiler/ops/Families.h"

namespace memfit::ops {

namespace {

/// `x` permuted by `perm` (the batch moving with its axis).
llvm::Expected<ValueId> permuted(OnnxNode &node, ValueId x,
                                 const std::vector<int64_t> &perm,
                                 const std::string &name,
                                 const std::string &opName) {
  const Value &v = node.graph().values[x];
  OutSpec o{name, {}, 0, v.batchOuter, v.batchInner};
  for (size_t i = 0; i < perm.size(); ++i) {
    o.dims.push_back(v.dims[perm[i]]);
    if (perm[i] == v.batchAxis)
      o.batchAxis = static_cast<int32_t>(i);
  }
  OpAttrs a;
  a.perm = perm;
  auto op = node.emit(OpKind::Transpose, {x}, {o}, a, false, opName);
  if (!op)
    return op.takeError();
  return node.graph().ops[*op].outputs[0];
}

} // namespace

llvm::Error importScatterND(OnnxNode &node) {
  auto reduction = node.attrString("reduction", "none");
  if (!reduction)
    return reduction.takeError();
  if (*reduction != "none")
    return node.fail("reduction " + quoteName(*reduction) +
                     " on activations; memfit supports ScatterND of an "
                     "activation only as an assignment (reduction none)");
  auto data = node.activation(0), updates = node.activation(2);
  auto indices = node.intConstant(1);
  if (llvm::Error e = firstError(data, updates, indices))
    return e;
  const Value &d = node.graph().values[*data],
              &u = node.graph().values[*updates];
  const std::vector<int64_t> dd = d.dims, ud = u.dims;
  const int64_t rank = static_cast<int64_t>(dd.size());
  const int64_t k = indices->dims.size() == 2 ? indices->dims[0] : 0;
  // Contiguous rows of axis 0, in order: a window [start, start + k).
  bool ok = indices->dims.size() == 2 && indices->dims[1] == 1 && k > 0 &&
            indices->numel() == k && rank >= 2 && ud.size() == dd.size() && ud[0] == k;
  int64_t start = 0;
  for (int64_t i = 0; ok && i < k; ++i) {
    int64_t r =
        indices->ints[i] < 0 ? indices->ints[i] + dd[0] : indices->ints[i];
    if (i == 0)
      start = r;
    ok = !indices->isBatch(i) && r == start + i && r >= 0 && r < dd[0];
  }
  for (int64_t i = 1; ok && i < rank; ++i)
    ok = ud[i] == dd[i];
  // Rows of axis 0 are not the batch's, and the batch lies alone on its
  // axis in both, so that the Concat can run with it outermost.
  ok = ok && d.batched && u.batched && d.batchAxis != 0 &&
       u.batchAxis == d.batchAxis && d.batchOuter == 1 && d.batchInner == 1 &&
       u.batchOuter == 1 && u.batchInner == 1;
  if (!ok)
    return node.fail(
        "writes updates of shape " + dimsStr(ud) + " into the activation " +
        quoteName(d.name) + " of shape " + dimsStr(dd) + " at indices " +
        indices->str() +
        "; memfit supports ScatterND of an activation as torch.export "
        "writes an assignment to a slice: indices [k, 1] of contiguous rows "
        "of axis 0, not the batch's, updates of the data's shape there");
  // To the batch outermost (the window's axis then second) and back.
  const int64_t b = d.batchAxis;
  std::vector<int64_t> toCanonical = {b}, back(rank);
  for (int64_t i = 0; i < rank; ++i)
    if (i != b)
      toCanonical.push_back(i);
  for (int64_t i = 0; i < rank; ++i)
    back[toCanonical[i]] = i;
  const std::string base = node.outputName(0), name = node.name();
  std::vector<ValueId> parts;
  auto rowsOfData = [&](int64_t from, int64_t to,
                        const char *tag) -> llvm::Error {
    if (from == to)
      return llvm::Error::success();
    OpAttrs a;
    a.starts.assign(rank, 0);
    a.extents = dd;
    a.starts[0] = from;
    a.extents[0] = to - from;
    OutSpec o{base + " (rows " + tag + ")", a.extents, d.batchAxis, 1, 1};
    auto op = node.emit(OpKind::Slice, {*data}, {o}, a, false,
                        name + " (rows " + tag + ")");
    if (!op)
      return op.takeError();
    auto p = permuted(node, node.graph().ops[*op].outputs[0], toCanonical,
                      o.name + " batch first", name + " (" + tag + ")");
    if (!p)
      return p.takeError();
    parts.push_back(*p);
    return llvm::Error::success();
  };
  if (llvm::Error e = rowsOfData(0, start, "before"))
    return e;
  auto p = permuted(node, *updates, toCanonical,
                    base + " (updates) batch first", name + " (updates)");
  if (!p)
    return p.takeError();
  parts.push_back(*p);
  if (llvm::Error e = rowsOfData(start + k, dd[0], "after"))
    return e;
  ValueId joined = parts[0];
  if (parts.size() > 1) {
    OpAttrs a;
    a.axis = 1;
    std::vector<int64_t> jd;
    for (int64_t i : toCanonical)
      jd.push_back(dd[i]);
    auto op = node.emit(OpKind::Concat, parts, {{base + " (batch first)", jd}},
                        a, false, name + " (joined)");
    if (!op)
      return op.takeError();
    joined = node.graph().ops[*op].outputs[0];
  }
  return permuted(node, joined, back, base, name).takeError();
}

} // namespace memfit::ops
