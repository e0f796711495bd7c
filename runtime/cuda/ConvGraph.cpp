//===- ConvGraph.cpp - CUDA backend: convolutions on cuDNN's graph API ----===//
//
// Through the legacy API, cuDNN 9 runs NCHW 16-bit convolutions far below
// the GPU's speed: ResNet-50's 1x1 convolutions take 340-470 us a call in
// bf16 on an H100 with every legacy algorithm, where the engines of the
// graph API (those PyTorch calls, measured on the same GPU) take 40-60 us.
// The start-up tuning (Conv.cpp) therefore also times a few graph-API plans
// of each call, within the workspace the plan gave the call, and runs the
// fastest where it beats the legacy algorithm: the same convolution, never
// a byte more memory.
//
// The plans are cuDNN's heuristics (mode A, then its fallback list), at most
// kMaxPlans built, with the numerics the program's precision allows: fp32
// programs drop engines noted TENSOR_CORE (TF32), which the reference
// arithmetic and the profiles exclude (the legacy calls use FMA math);
// every program drops engines that down-convert inputs or reduce in reduced
// precision. Accumulating calls (beta 1) stay on the legacy API: a graph's
// convolution writes its output.
//
// Built through cuDNN's frontend headers (nvidia-cudnn-frontend), which call
// the backend API in libcudnn; their own run-time compiled engines bring
// in libnvrtc (runtime/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Impl.h"

#include <string>
#include <vector>

#if MEMFIT_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

namespace memfit::rt {

namespace fe = cudnn_frontend;

struct cuda::ConvGraph {
  fe::graph::Graph graph;
  std::shared_ptr<fe::graph::Tensor_attributes> a, b, out;
  /// False where cuDNN's graph API has nothing for the call; kept so that
  /// calls of the same shape do not ask again.
  bool usable = false;
  std::vector<ConvTiming> timings;
};

void cuda::ConvGraphDelete::operator()(ConvGraph *g) const { delete g; }

namespace {

/// Plans built and timed per call: cuDNN's heuristics rank well enough that
/// the fastest is almost always among the first few, and each built plan
/// may compile a kernel at run time.
constexpr int64_t kMaxPlans = 6;
/// Runs of each plan timed, after one untimed (which loads its kernel).
constexpr int kTimedRuns = 3;

fe::DataType_t feType(cuda::Store s) {
  switch (s) {
  case cuda::Store::BF16:
    return fe::DataType_t::BFLOAT16;
  case cuda::Store::FP16:
    return fe::DataType_t::HALF;
  default:
    return fe::DataType_t::FLOAT;
  }
}

std::vector<int64_t> packed(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i)
    s[i - 1] = s[i] * dims[i];
  return s;
}

std::shared_ptr<fe::graph::Tensor_attributes>
input(fe::graph::Graph &g, const char *name, const std::vector<int64_t> &dims) {
  return g.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_dim(dims).set_stride(
          packed(dims)));
}

/// The three directions' attributes are one set of fields on three types.
template <typename Attributes>
Attributes convAttributes(const char *name, const ConvParams &p) {
  return Attributes()
      .set_name(name)
      .set_padding({p.padTop, p.padLeft})
      .set_stride({p.sh, p.sw})
      .set_dilation({p.dh, p.dw});
}

/// The graph of one direction, its plans queried and filtered; not usable
/// where cuDNN's graph API has nothing for it (the legacy API then runs it).
std::unique_ptr<cuda::ConvGraph, cuda::ConvGraphDelete>
buildGraph(const Exec &x, const Exec::Impl &im, const ConvParams &p, int64_t n,
           cuda::Store store, int32_t dir, int64_t have) {
  std::unique_ptr<cuda::ConvGraph, cuda::ConvGraphDelete> cg(
      new cuda::ConvGraph);
  fe::graph::Graph &g = cg->graph;
  g.set_io_data_type(feType(store))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> xd{n, p.cin, p.hin, p.win},
      yd{n, p.cout, p.hout, p.wout}, wd{p.cout, p.cin / p.group, p.kh, p.kw};
  namespace fg = fe::graph;
  switch (dir) {
  case ConvFwd:
    cg->a = input(g, "x", xd);
    cg->b = input(g, "w", wd);
    cg->out = g.conv_fprop(
        cg->a, cg->b, convAttributes<fg::Conv_fprop_attributes>("fprop", p));
    cg->out->set_dim(yd).set_stride(packed(yd));
    break;
  case ConvBwdData:
    cg->a = input(g, "dy", yd);
    cg->b = input(g, "w", wd);
    cg->out = g.conv_dgrad(
        cg->a, cg->b, convAttributes<fg::Conv_dgrad_attributes>("dgrad", p));
    cg->out->set_dim(xd).set_stride(packed(xd));
    break;
  default:
    cg->a = input(g, "x", xd);
    cg->b = input(g, "dy", yd);
    cg->out = g.conv_wgrad(
        cg->b, cg->a, convAttributes<fg::Conv_wgrad_attributes>("wgrad", p));
    cg->out->set_dim(wd).set_stride(packed(wd));
  }
  cg->out->set_output(true);
  if (!g.validate().is_good() || !g.build_operation_graph(im.cudnn).is_good() ||
      !g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})
           .is_good())
    return cg;
  std::vector<fe::NumericalNote_t> barred{
      fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
      fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION};
  if (x.info().precision == Precision::FP32)
    barred.push_back(fe::NumericalNote_t::TENSOR_CORE);
  g.deselect_numeric_notes(barred).deselect_workspace_greater_than(have);
  cg->usable = g.check_support().is_good();
  return cg;
}

} // namespace

std::vector<ConvTiming> cuda::timeConvGraph(Exec &x, Exec::Impl &im,
                                            ConvEntry &e, const ConvParams &p,
                                            int64_t n, Store store, int32_t dir,
                                            int64_t have, ConvGraph *&graph) {
  graph = nullptr;
  auto known = e.graphs.find({dir, have});
  if (known != e.graphs.end()) { // a call of the same shape asked before
    graph = known->second->usable ? known->second.get() : nullptr;
    return known->second->timings;
  }
  const ConvScratch s = convScratch(x, im, p, n, store, have);
  if (!s)
    return {};
  auto &slot = e.graphs[{dir, have}];
  slot = buildGraph(x, im, p, n, store, dir, have);
  if (!slot->usable)
    return {};
  graph = slot.get();
  fe::graph::Graph &g = slot->graph;
  void *a = dir == ConvBwdData ? s.y : s.x;
  void *b = dir == ConvBwdFilter ? s.y : s.w;
  void *o = dir == ConvFwd ? s.y : dir == ConvBwdData ? s.x : s.w;
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void *>
      pack{{slot->a, a}, {slot->b, b}, {slot->out, o}};
  cudaEvent_t start, stop;
  check(x, cudaEventCreate(&start), "cudaEventCreate");
  check(x, cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<ConvTiming> out;
  const int64_t count = g.get_execution_plan_count();
  int64_t built = 0;
  for (int64_t i = 0; i < count && built < kMaxPlans; ++i) {
    if (!g.build_plan_at_index(i).is_good())
      continue;
    ++built;
    int64_t need = 0;
    if (!g.get_workspace_size_plan_at_index(i, need).is_good() || need > have)
      continue;
    // One untimed run loads the plan's kernel; a plan that fails at run
    // time is skipped, as cudnnFind skips an algorithm that fails.
    if (!g.execute_plan_at_index(im.cudnn, pack, s.work, i).is_good() ||
        cudaStreamSynchronize(im.compute()) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    check(x, cudaEventRecord(start, im.compute()), "cudaEventRecord");
    bool ran = true;
    for (int r = 0; r < kTimedRuns && ran; ++r)
      ran = g.execute_plan_at_index(im.cudnn, pack, s.work, i).is_good();
    check(x, cudaEventRecord(stop, im.compute()), "cudaEventRecord");
    check(x, cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(x, cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (!ran)
      continue;
    ConvTiming t;
    t.algo = static_cast<int32_t>(i);
    t.seconds = ms / 1000.0 / kTimedRuns;
    t.bytes = need;
    if (!g.get_plan_name_at_index(i, t.engine).is_good())
      t.engine = "plan " + std::to_string(i);
    out.push_back(std::move(t));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  slot->timings = out;
  return out;
}

void cuda::runConvGraph(const Exec &x, const Exec::Impl &im, const ConvGraph &g,
                        int32_t plan, const void *a, const void *b, void *out,
                        void *workspace) {
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void *>
      pack{{g.a, const_cast<void *>(a)},
           {g.b, const_cast<void *>(b)},
           {g.out, out}};
  auto st = g.graph.execute_plan_at_index(im.cudnn, pack, workspace, plan);
  if (!st.is_good())
    x.fatal("cuDNN graph-API convolution (plan " + std::to_string(plan) +
            "): " + st.get_message());
}

} // namespace memfit::rt

#else // built without the frontend (CMake warned): the legacy API only

namespace memfit::rt {

struct cuda::ConvGraph {};

void cuda::ConvGraphDelete::operator()(ConvGraph *g) const { delete g; }

std::vector<ConvTiming> cuda::timeConvGraph(Exec &, Exec::Impl &, ConvEntry &,
                                            const ConvParams &, int64_t, Store,
                                            int32_t, int64_t,
                                            ConvGraph *&graph) {
  graph = nullptr;
  return {};
}

void cuda::runConvGraph(const Exec &x, const Exec::Impl &, const ConvGraph &,
                        int32_t, const void *, const void *, void *, void *) {
  x.fatal("a graph-API convolution in a runtime built without cuDNN's "
          "frontend");
}

} // namespace memfit::rt

#endif
