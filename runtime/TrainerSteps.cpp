//===- TrainerSteps.cpp - The steps of a run, shared by its two drivers
//----===//
#include "runtime/TrainerSteps.h"
#include "runtime/Comm.h"
#include "runtime/IterationGraph.h"
#include "runtime/LrSchedule.h"
#include "runtime/kernels/Softmax.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace memfit::rt {

void initWeights(Exec &x, const Options &o, const OnnxWeights &model) {
  std::mt19937_64 rng(o.seed);
  std::vector<float> buf;
  for (int32_t id = 0; id < (int32_t)x.weightInfo().size(); ++id) {
    const WeightInfo &w = x.weightInfo()[id];
    buf.assign(w.count, 0.0f);
    const char *source = w.dataName ? w.dataName : w.onnxName;
    if (w.data) {
      buf.assign(w.data, w.data + w.count);
    } else if (const std::vector<float> *data = model.find(source)) {
      if ((int64_t)data->size() != w.count)
        die(o.model + ": initializer '" + std::string(source) + "' has " +
            std::to_string(data->size()) + " values, expected " +
            std::to_string(w.count));
      buf = *data;
    } else if (w.init == Init::HeNormal) {
      std::normal_distribution<float> nd(
          0.0f, std::sqrt(2.0f / std::max<int64_t>(1, w.fanIn)));
      for (float &v : buf)
        v = nd(rng);
    } else if (w.init == Init::GlorotUniform) {
      float a = std::sqrt(6.0f / std::max<int64_t>(1, w.fanIn + w.fanOut));
      std::uniform_real_distribution<float> ud(-a, a);
      for (float &v : buf)
        v = ud(rng);
    } else if (w.init == Init::Ones) {
      std::fill(buf.begin(), buf.end(), 1.0f);
    } else if (w.init == Init::FromModel) {
      die(o.model + ": no initializer named '" + std::string(source) + "'");
    }
    x.writeWeight(id, buf.data());
  }
}

void selectNoDecay(Exec &x, const Options &o) {
  if (o.noDecay.empty())
    return;
  const std::vector<WeightInfo> &ws = x.weightInfo();
  const bool byRank = o.noDecay == "auto";
  std::regex re;
  if (!byRank) {
    try {
      re = std::regex(o.noDecay, std::regex::extended);
    } catch (const std::regex_error &e) {
      die("--no-decay: '" + o.noDecay +
          "' is not a regular expression: " + e.what());
    }
  }
  x.decayOff.assign(ws.size(), 0);
  int64_t off = 0, trained = 0;
  for (size_t id = 0; id < ws.size(); ++id) {
    if (!ws[id].trainable)
      continue;
    ++trained;
    if (byRank && ws[id].rank < 0)
      die("--no-decay auto: this trainer's program does not state its "
          "weights' ranks; recompile it with this memfit");
    const bool exempt =
        byRank ? ws[id].rank < 2 : std::regex_search(ws[id].onnxName, re);
    x.decayOff[id] = exempt ? 1 : 0;
    off += exempt;
  }
  if (off == 0)
    die("--no-decay '" + o.noDecay + "' matches none of the " +
        std::to_string(trained) + " trained weights");
  if (!o.quiet)
    std::printf("weight decay: none for %lld of %lld trained weights "
                "(--no-decay %s)\n",
                (long long)off, (long long)trained, o.noDecay.c_str());
}

double labelCount(Exec &x, Comm &comm, int32_t buffer) {
  const ProgramInfo &p = x.info();
  if (p.mseLoss)
    return 0;
  const int64_t mine = kernels::countedLabels(
      p.batch * p.labelPerSample,
      static_cast<const int32_t *>(x.hostLabels(buffer)), p.ignoreIndex);
  const double all = p.ranks > 1 ? comm.sum(double(mine)) : double(mine);
  return all / double(p.ranks);
}

void setUpRun(Exec &x, Comm &comm, const Options &o, const OnnxWeights &model) {
  x.comm = &comm;
  x.lr = o.lr;
  x.momentum = o.momentum;
  x.weightDecay = o.weightDecay;
  x.beta1 = o.beta1;
  x.beta2 = o.beta2;
  x.eps = o.eps;
  x.seed = o.seed;
  selectNoDecay(x, o);
  x.openNvme(o.nvme);
  initWeights(x, o, model);
}

void prepareIteration(Exec &x, Comm &comm, int32_t buffer, const LoopState &st,
                      bool scaled, const LrSchedule *schedule) {
  x.useBatch(buffer);
  x.lossCount = labelCount(x, comm, buffer);
  x.iteration = st.iteration;
  // Updates applied, with this one (a skipped update is not counted, as
  // torch's optimizer state does not see it).
  x.step = st.appliedSteps + 1;
  x.firstIteration = st.appliedSteps == 0;
  x.lossScale = scaled ? st.scaler.scale : 1.0f;
  // A function of the step alone: a resumed run recomputes it.
  if (schedule)
    x.lr = lrAt(*schedule, static_cast<int64_t>(st.iteration));
}

bool issueIteration(Exec &x, const Program &program, bool scaled, float clip,
                    float &norm, IterationGraph *dump) {
  const ProgramInfo &p = program.info;
  x.beginIteration();
  x.graph = dump;
  for (int64_t k = 0; k < p.numSubBatches; ++k) {
    x.subBatchIndex = k;
    x.firstSample = k * p.subBatch;
    x.n = std::min(p.subBatch, p.batch - x.firstSample);
    if (dump)
      dump->beginPart(k, x.n);
    x.issue(static_cast<int32_t>(k), program.round);
    if (dump)
      dump->endPart();
    x.endRound();
  }
  x.waitCollectives();
  const bool apply = !scaled || x.unscaleGradients();
  if (apply && clip > 0)
    norm = x.clipGradients(clip);
  if (apply) {
    if (dump)
      dump->beginPart(-1, 0);
    x.issue(-1, program.update);
    if (dump)
      dump->endPart();
    x.gatherWeights();
  }
  x.graph = nullptr;
  return apply;
}

} // namespace memfit::rt
