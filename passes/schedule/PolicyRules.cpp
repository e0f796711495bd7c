//===- PolicyRules.cpp - The policy table ---------------------------------===//
#include "passes/schedule/PolicyRules.h"

#include <cassert>
#include <iterator>
#include <string>
#include <vector>

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
     .comparedByDefault = true,
     .rules = {.algo = PolicyRules::AlgoChoice::FastestThatFits,
               .layerOffload = PolicyRules::LayerOffload::AllLayers,
               .evicts = false,
               .prefetchesAhead = false},
     .candidates = FirstCandidates::WholeBatch},
    {.policy = Policy::VdnnConv,
     .name = "vdnn-conv",
     .comparedByDefault = true,
     .rules = {.algo = PolicyRules::AlgoChoice::FastestThatFits,
               .layerOffload = PolicyRules::LayerOffload::ConvLayers,
               .evicts = false,
               .prefetchesAhead = false},
     .candidates = FirstCandidates::WholeBatch},
    {.policy = Policy::Modnn,
     .name = "modnn",
     .comparedByDefault = true,
     .rules = {.keepsNextTaskBlocks = true},
     .candidates = FirstCandidates::Eq3},
    {.policy = Policy::ChenSqrt,
     .name = "chen-sqrt",
     .comparedByDefault = true,
     .rules = {.evictsRecomputableOrCopiedOnly = true,
               .drop = PolicyRules::Drop::Always},
     .candidates = FirstCandidates::ChenSegments},
    {.policy = Policy::SuperNeurons,
     .name = "superneurons",
     .comparedByDefault = true,
     .rules = {.evictsRecomputableOrCopiedOnly = true,
               .drop = PolicyRules::Drop::NonConv},
     .candidates = FirstCandidates::SuperNeurons},
    {.policy = Policy::Memfit,
     .name = "memfit",
     .comparedByDefault = true,
     .rules = {.pricesLatePrefetch = true,
               .drop = PolicyRules::Drop::WhenCheaper,
               .offloadsEarly = true},
     .candidates = FirstCandidates::Joint,
     .phases = {.chenAndChain = true, .polish = true, .chunks = true},
     .looksPastIdle = true},
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

std::string policyNamesText(bool withIdeal) {
  std::vector<std::string_view> names;
  for (const PolicyDef &def : kPolicies)
    if (withIdeal || def.policy != Policy::Ideal)
      names.push_back(def.name);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

std::vector<std::string> policiesComparedByDefault() {
  std::vector<std::string> names;
  for (const PolicyDef &def : kPolicies)
    if (def.comparedByDefault)
      names.emplace_back(def.name);
  return names;
}

const PolicyDef &policyDef(Policy p) {
  const PolicyDef &def = kPolicies[static_cast<size_t>(p)];
  assert(def.policy == p && "kPolicies is in the order of Policy");
  return def;
}

} // namespace memfit
