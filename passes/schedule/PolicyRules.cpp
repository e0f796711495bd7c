//===- PolicyRules.cpp - The policy table ---------------------------------===//
#include "passes/schedule/PolicyRules.h"

#include <cassert>
#include <iterator>

namespace memfit {
namespace {

using sched::PolicyRules;

constexpr PolicyDef kPolicies[] = {
    {.policy = Policy::Ideal,
     .name = "ideal",
     .rules = {.unbounded = true,
               .algo = PolicyRules::AlgoChoice::Fastest,
               .prefetchesAhead = false},
     .candidates = FirstCandidates::WholeBatch},
    {.policy = Policy::VdnnAll,
     .name = "vdnn-all",
     .rules = {.algo = PolicyRules::AlgoChoice::FastestThatFits,
               .layerOffload = PolicyRules::LayerOffload::AllLayers,
               .evicts = false,
               .prefetchesAhead = false},
     .candidates = FirstCandidates::WholeBatch},
    {.policy = Policy::VdnnConv,
     .name = "vdnn-conv",
     .rules = {.algo = PolicyRules::AlgoChoice::FastestThatFits,
               .layerOffload = PolicyRules::LayerOffload::ConvLayers,
               .evicts = false,
               .prefetchesAhead = false},
     .candidates = FirstCandidates::WholeBatch},
    {.policy = Policy::Modnn,
     .name = "modnn",
     .rules = {.keepsNextTaskBlocks = true},
     .candidates = FirstCandidates::Eq3},
    {.policy = Policy::Memfit,
     .name = "memfit",
     .rules = {.pricesLatePrefetch = true,
               .drop = PolicyRules::Drop::WhenCheaper,
               .offloadsEarly = true},
     .candidates = FirstCandidates::Joint,
     .phases = {.chenAndChain = true, .polish = true, .chunks = true},
     .looksPastIdle = true},
    {.policy = Policy::ChenSqrt,
     .name = "chen-sqrt",
     .rules = {.evictsRecomputableOrCopiedOnly = true,
               .drop = PolicyRules::Drop::Always},
     .candidates = FirstCandidates::ChenSegments},
    {.policy = Policy::SuperNeurons,
     .name = "superneurons",
     .rules = {.evictsRecomputableOrCopiedOnly = true,
               .drop = PolicyRules::Drop::NonConv},
     .candidates = FirstCandidates::SuperNeurons},
    // The solver's offloads replace memfit's early ones; evictions stay
    // memfit's, for what the program leaves out (fragmentation,
    // workspaces). It solves at the order and sub-batch (or chunks) of
    // memfit's search, so it searches as memfit without memfit's polish.
    {.policy = Policy::Optimal,
     .name = "optimal",
     .rules = {.pricesLatePrefetch = true,
               .drop = PolicyRules::Drop::WhenCheaper},
     .candidates = FirstCandidates::Joint,
     .phases = {.chenAndChain = true, .chunks = true, .optimal = true},
     .searchesAs = Policy::Memfit,
     .looksPastIdle = true},
};

/// Entry i is the policy whose enum value is i: policyDef() indexes.
constexpr bool inEnumOrder() {
  for (size_t i = 0; i < std::size(kPolicies); ++i)
    if (static_cast<size_t>(kPolicies[i].policy) != i)
      return false;
  return true;
}
static_assert(inEnumOrder() && std::size(kPolicies) ==
                                   static_cast<size_t>(Policy::Optimal) + 1,
              "kPolicies lists every Policy once, in the enum's order");

} // namespace

llvm::ArrayRef<PolicyDef> policies() { return kPolicies; }

const PolicyDef &policyDef(Policy p) {
  const PolicyDef &def = kPolicies[static_cast<size_t>(p)];
  assert(def.policy == p && "kPolicies is in the order of Policy");
  return def;
}

} // namespace memfit
