//===- GatherND.cpp - Gathers at constant indices as a Gather -------------===//
//
// torch.export writes advanced indexing at fixed positions as GatherND with
// constant indices: Falcon's fused query-key-value split (`qkv[..., i]`
// after a transpose), Swin's relative position table looked up by a
// constant index. With batch_dims 0 and indices [..., k] that is a Gather
// along axis 0 of the data with its first k axes merged into one: the
// importer rewrites the node as such (a Reshape when k > 1, then Gather of
// the linear indices), so the Gather's own paths (a lookup in a weight, its
// gradient adding the rows back; a selection along an axis of an
// activation) translate it. The batch cannot be among the axes indexed.
// GatherElements of a value without a batch at constant indices becomes a
// Gather the same way, of its elements as rows of one.
//
//===----------------------------------------------------------------------===//
#include "compiler/onnx/Importer.h"

#include "llvm/Support/FormatVariadic.h"

namespace memfit::onnximport {

using llvm::Error;

namespace {

/// A Gather along axis 0: rows of the data, as the lookups read them.
void setAxisZero(pb::NodeProto &gather) {
  pb::AttributeProto *axis = gather.add_attribute();
  axis->set_name("axis");
  axis->set_type(pb::AttributeProto::INT);
  axis->set_i(0);
}

} // namespace

bool Importer::rewritesGatherND(const pb::NodeProto &n) const {
  if (n.op_type() != "GatherND" || n.input_size() != 2 ||
      !isConstant(n.input(1)))
    return false;
  // A parameter read directly is a value too (its rows train); a constant
  // folds.
  auto src = sources.find(n.input(0));
  bool param = !consts.count(n.input(0)) && src != sources.end() &&
               src->second.init &&
               src->second.init->data_type() == pb::TensorProto::FLOAT &&
               !buffers.count(n.input(0));
  return !isConstant(n.input(0)) || param;
}

Error Importer::translateGatherND(const pb::NodeProto &n) {
  auto batchDims = attrInt(n, "batch_dims", 0);
  if (!batchDims)
    return batchDims.takeError();
  if (*batchDims != 0)
    return fail(n, "has batch_dims " + std::to_string(*batchDims) +
                       "; memfit supports GatherND with batch_dims 0");
  auto idx = constant(n, 1);
  if (!idx)
    return idx.takeError();
  const ConstTensor &t = **idx;
  // A weight's transpose is kept aside for the matrix products that read
  // it as W^T; gathered from (LeViT's and EfficientFormer's attention
  // biases, table[:, idxs] as torch.export writes it), it is a value.
  if (transposedWeights.count(n.input(0)))
    if (auto lifted = activation(n, 0); !lifted)
      return lifted.takeError();
  bool batched = false;
  auto data = dimsOf(n, n.input(0), batched);
  if (!data)
    return data.takeError();
  if (t.isFloat() || !t.batch.empty() || t.batchAxis >= 0 || t.dims.empty())
    return fail(n, "needs integer indices of rank 1 or more that are not "
                   "the batch size");
  const int64_t k = t.dims.back();
  const auto rank = static_cast<int64_t>(data->size());
  if (k < 1 || k > rank)
    return fail(
        n,
        llvm::formatv("indexes {0} axes of data of rank {1}", k, rank).str());
  auto it = values.find(n.input(0));
  int64_t batchAt = it != values.end() && g.values[it->second].batched
                        ? g.values[it->second].batchAxis
                        : -1;
  if (batchAt >= 0 && batchAt < k)
    return fail(n, "indexes the batch's axis; memfit supports GatherND on "
                   "axes other than the batch's");
  // The linear index of each k-tuple over the first k axes.
  ConstTensor lin;
  lin.type = pb::TensorProto::INT64;
  lin.dims.assign(t.dims.begin(), t.dims.end() - 1);
  for (int64_t e = 0; e < t.numel(); e += k) {
    int64_t at = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = t.ints[e + j], size = (*data)[j];
      if (v < -size || v >= size)
        return fail(n, llvm::formatv("index {0} is out of range for axis {1} "
                                     "of extent {2}",
                                     v, j, size)
                           .str());
      at = at * size + (v < 0 ? v + size : v);
    }
    lin.ints.push_back(at);
  }
  const std::string &out = n.output(0);
  std::string src = n.input(0);
  if (k > 1) {
    ConstTensor shape;
    shape.type = pb::TensorProto::INT64;
    shape.dims = {rank - k + 1};
    int64_t merged = 1;
    for (int64_t j = 0; j < k; ++j)
      merged *= (*data)[j];
    shape.ints.push_back(merged);
    shape.ints.insert(shape.ints.end(), data->begin() + k, data->end());
    bindConstant(out + "#shape", std::move(shape));
    if (Error e = translate(liftedNode(n, "Reshape", {src, out + "#shape"},
                                       out + "#merged", "#merged")))
      return e;
    src = out + "#merged";
  }
  bindConstant(out + "#indices", std::move(lin));
  pb::NodeProto &gather =
      liftedNode(n, "Gather", {src, out + "#indices"}, out, "");
  setAxisZero(gather);
  return translate(gather);
}

bool Importer::rewritesGatherElements(const pb::NodeProto &n) const {
  if (n.op_type() != "GatherElements" || n.input_size() != 2 ||
      !isConstant(n.input(1)))
    return false;
  auto it = values.find(n.input(0));
  return it != values.end() && !g.values[it->second].batched;
}

pb::NodeProto &Importer::liftedNode(const pb::NodeProto &n,
                                    const std::string &op,
                                    std::initializer_list<std::string> ins,
                                    const std::string &out,
                                    const std::string &suffix) {
  pb::NodeProto &r = liftedNodes.emplace_back();
  r.set_op_type(op);
  r.set_name(n.name() + suffix);
  for (const std::string &in : ins)
    r.add_input(in);
  r.add_output(out);
  nodeIndex[&r] = nodeIndex.at(&n);
  return r;
}

Error Importer::translateGatherElements(const pb::NodeProto &n) {
  auto axisAttr = attrInt(n, "axis", 0);
  auto idx = constant(n, 1);
  if (!axisAttr || !idx)
    return llvm::joinErrors(axisAttr.takeError(), idx.takeError());
  const ConstTensor &t = **idx;
  const std::vector<int64_t> data = g.values[values.at(n.input(0))].dims;
  const auto rank = static_cast<int64_t>(data.size());
  const int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (t.isFloat() || !t.batch.empty() || t.batchAxis >= 0 ||
      static_cast<int64_t>(t.dims.size()) != rank || axis < 0 || axis >= rank)
    return fail(n, "needs integer indices of the data's rank (" +
                       std::to_string(rank) +
                       ") that are not the batch size, and an axis in range");
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && t.dims[k] > data[k])
      return fail(n, "indices of shape " + dimsStr(t.dims) +
                         " exceed the data's " + dimsStr(data) +
                         " on an axis not gathered");
  // Each index's element of the data, in row-major order.
  std::vector<int64_t> at(rank, 0), stride(rank, 1);
  for (int64_t k = rank - 1; k > 0; --k)
    stride[k - 1] = stride[k] * data[k];
  ConstTensor lin;
  lin.type = pb::TensorProto::INT64;
  lin.dims = t.dims;
  for (int64_t e = 0; e < t.numel(); ++e) {
    int64_t v = t.ints[e], size = data[axis];
    if (v < -size || v >= size)
      return fail(n, llvm::formatv("index {0} is out of range for axis {1} "
                                   "of extent {2}",
                                   v, axis, size)
                         .str());
    int64_t flat = 0;
    for (int64_t k = 0; k < rank; ++k)
      flat += (k == axis ? (v < 0 ? v + size : v) : at[k]) * stride[k];
    lin.ints.push_back(flat);
    for (int64_t k = rank; k-- > 0;) {
      if (++at[k] < t.dims[k])
        break;
      at[k] = 0;
    }
  }
  const std::string &out = n.output(0);
  int64_t numel = 1;
  for (int64_t d : data)
    numel *= d;
  ConstTensor column, shape;
  column.type = shape.type = pb::TensorProto::INT64;
  column.dims = {2};
  column.ints = {numel, 1};
  shape.dims = {rank};
  shape.ints = t.dims;
  bindConstant(out + "#column", std::move(column));
  bindConstant(out + "#indices", std::move(lin));
  bindConstant(out + "#shape", std::move(shape));
  if (Error e =
          translate(liftedNode(n, "Reshape", {n.input(0), out + "#column"},
                               out + "#elements", "#elements")))
    return e;
  pb::NodeProto &gather = liftedNode(
      n, "Gather", {out + "#elements", out + "#indices"}, out + "#picked", "");
  setAxisZero(gather);
  if (Error e = translate(gather))
    return e;
  return translate(liftedNode(n, "Reshape", {out + "#picked", out + "#shape"},
                              out, "#shape"));
}

} // namespace memfit::onnximport
