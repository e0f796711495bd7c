// The iteration graph recorder (runtime/IterationGraph.h): the nodes and
// edges a CUDA stream capture of the same calls holds.
#include "runtime/IterationGraph.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>
#include <vector>

using memfit::rt::IterationGraph;
using Kind = IterationGraph::Kind;

namespace {

std::vector<std::tuple<int, int, int>> edges(const IterationGraph::Part &p) {
  std::vector<std::tuple<int, int, int>> out;
  for (const auto &e : p.edges)
    out.emplace_back(e.from, e.to, e.event);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("iteration graph: stream order and event waits are the edges",
          "[graph]") {
  IterationGraph g;
  g.beginPart(0, 8);
  g.copy(Kind::LoadInput, 2, -1, 0, 64); // 0 on copy-in
  g.record(2, 0);                        // 1 on copy-in
  g.wait(0, 0);
  g.task("FP(a)");                     // 2 on compute
  g.record(0, 1);                      // 3
  g.wait(1, 1);                        //
  g.copy(Kind::CopyOut, 1, 0, 64, 32); // 4 on copy-out
  g.task("FP(b)");                     // 5 on compute
  g.record(1, 2);                      // 6 on copy-out
  g.wait(0, 2);
  g.endPart(); // 7: end on compute
  REQUIRE(g.parts().size() == 1);
  const auto &p = g.parts()[0];
  REQUIRE(p.nodes.size() == 8);
  CHECK(p.nodes[2].name == "FP(a)");
  CHECK(p.nodes[7].kind == Kind::End);
  CHECK(p.problems.empty());
  std::vector<std::tuple<int, int, int>> want = {
      {0, 1, -1},            // copy-in's order
      {1, 2, 0},             // compute waits for the input
      {2, 3, -1}, {3, 4, 1}, // copy-out waits for FP(a)
      {3, 5, -1}, {4, 6, -1},
      {5, 7, -1}, {6, 7, 2}, // the end joins the copy-out stream
  };
  std::sort(want.begin(), want.end());
  CHECK(edges(p) == want);
  std::string j = g.json();
  CHECK(j.find("\"task\": \"FP(a)\"") != std::string::npos);
  CHECK(j.find("[1, 2, 0]") != std::string::npos);
}

TEST_CASE("iteration graph: a wait for an event of another part is a problem",
          "[graph]") {
  IterationGraph g;
  g.beginPart(0, 4);
  g.record(0, 3);
  g.endPart();
  g.beginPart(-1, 0);
  // Event 3 was recorded in the round, not in the update: a capture of
  // the update cannot depend on it.
  g.wait(0, 3);
  g.task("update(w)");
  g.endPart();
  REQUIRE(g.parts().size() == 2);
  CHECK(g.parts()[1].problems.size() == 1);
  CHECK(g.parts()[1].edges.size() == 1); // update(w) -> end only
  // A task name with quotes stays valid JSON.
  IterationGraph h;
  h.beginPart(0, 1);
  h.task("FP(\"x\")");
  h.endPart();
  CHECK(h.json().find("FP(\\\"x\\\")") != std::string::npos);
}
