//===- PolicyRules.cpp - A scheduling policy as a table of rules ----------===//
#include "passes/schedule/PolicyRules.h"

namespace memfit::sched {

PolicyRules rulesFor(Policy p) {
  PolicyRules r;
  switch (p) {
  case Policy::Ideal:
    r.unbounded = true;
    r.algo = PolicyRules::AlgoChoice::Fastest;
    r.prefetchesAhead = false;
    break;
  case Policy::VdnnAll:
  case Policy::VdnnConv:
    r.algo = PolicyRules::AlgoChoice::FastestThatFits;
    r.layerOffload = p == Policy::VdnnAll
                         ? PolicyRules::LayerOffload::AllLayers
                         : PolicyRules::LayerOffload::ConvLayers;
    r.evicts = false;
    r.prefetchesAhead = false;
    break;
  case Policy::Modnn:
    r.keepsNextTaskBlocks = true;
    break;
  case Policy::Memfit:
    r.pricesLatePrefetch = true;
    r.drop = PolicyRules::Drop::WhenCheaper;
    r.offloadsEarly = true;
    break;
  case Policy::Optimal:
    // The solver's offloads replace memfit's early ones; evictions stay
    // memfit's, for what the program leaves out (fragmentation, workspaces).
    r.pricesLatePrefetch = true;
    r.drop = PolicyRules::Drop::WhenCheaper;
    break;
  case Policy::ChenSqrt:
    r.evictsRecomputableOrCopiedOnly = true;
    r.drop = PolicyRules::Drop::Always;
    break;
  case Policy::SuperNeurons:
    r.evictsRecomputableOrCopiedOnly = true;
    r.drop = PolicyRules::Drop::NonConv;
    break;
  }
  return r;
}

} // namespace memfit::sched
