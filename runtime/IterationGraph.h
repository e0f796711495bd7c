//===- IterationGraph.h - The dependency graph an iteration issues -*- C++
//-*-===//
//
// What the executor issues for one round or the update, as the graph a CUDA
// stream capture of it holds: nodes are the operations (a task's kernels
// and library calls, a copy, an event record), edges are the order of one
// stream and the plan's event waits. Both backends feed the same calls into
// it from their Exec members, so the CPU emulation produces the node and
// edge list the CUDA capture sees, and a test checks it against the plan
// (tests/cli/graph.sh, `trainer --dump-graph FILE`).
//
// The capture's rules, mirrored: a node on a stream depends on the node
// before it on that stream and on the record of every event that stream
// waited for since then; a wait for an event not recorded in the same part
// cannot be captured (it would reach outside the graph), and is kept as a
// problem rather than an edge.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_ITERATIONGRAPH_H
#define MEMFIT_RUNTIME_ITERATIONGRAPH_H

#include <cstdint>
#include <string>
#include <vector>

namespace memfit::rt {

class IterationGraph {
public:
  enum class Kind : uint8_t {
    Task,
    CopyOut,
    CopyIn,
    LoadInput,
    LoadLabels,
    Record,
    End
  };
  struct Node {
    Kind kind;
    int stream;                     // StreamId
    std::string name;               // Task: its name
    int32_t event = -1;             // Record
    int32_t slot = -1;              // CopyOut, CopyIn: the host slot
    int64_t offset = -1, bytes = 0; // copies: the arena range
  };
  struct Edge {
    int32_t from, to;
    int32_t event; // -1: the order of one stream
  };
  /// One round (sub-batch `subBatch` of `n` samples) or the update
  /// (subBatch -1).
  struct Part {
    int64_t subBatch = -1, n = 0;
    std::vector<Node> nodes;
    std::vector<Edge> edges;
    std::vector<std::string> problems;
  };

  void beginPart(int64_t subBatch, int64_t n);
  /// The part's last node, on the compute stream, where the capture ends:
  /// every node the plan joins into the compute stream reaches it.
  void endPart();

  void task(const char *name);
  void copy(Kind kind, int stream, int32_t slot, int64_t offset, int64_t bytes);
  void record(int stream, int32_t event);
  void wait(int stream, int32_t event);

  const std::vector<Part> &parts() const { return done; }
  /// {"parts": [{"sub_batch", "n", "nodes", "edges", "problems"}...]}.
  std::string json() const;

private:
  int32_t add(Node node);

  std::vector<Part> done;
  Part cur;
  bool open = false;
  /// Per stream: its last node (-1: none yet) and the records it waited
  /// for since (event, record node).
  int32_t last[3] = {-1, -1, -1};
  std::vector<std::pair<int32_t, int32_t>> waited[3];
  /// Per event: its latest record node in this part (-1: none).
  std::vector<int32_t> recordOf;
};

const char *graphKindName(IterationGraph::Kind k);

} // namespace memfit::rt

#endif
