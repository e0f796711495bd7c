//===- IterationGraph.cpp - The dependency graph an iteration issues ------===//
#include "runtime/IterationGraph.h"

#include <cassert>
#include <cstdio>

namespace memfit::rt {

const char *graphKindName(IterationGraph::Kind k) {
  switch (k) {
  case IterationGraph::Kind::Task:
    return "task";
  case IterationGraph::Kind::CopyOut:
    return "copy_out";
  case IterationGraph::Kind::CopyIn:
    return "copy_in";
  case IterationGraph::Kind::LoadInput:
    return "load_input";
  case IterationGraph::Kind::LoadLabels:
    return "load_labels";
  case IterationGraph::Kind::Record:
    return "record";
  case IterationGraph::Kind::End:
    return "end";
  }
  return "?";
}

void IterationGraph::beginPart(int64_t subBatch, int64_t n) {
  assert(!open && "a part is already open");
  cur = Part{};
  cur.subBatch = subBatch;
  cur.n = n;
  open = true;
  for (int s = 0; s < 3; ++s) {
    last[s] = -1;
    waited[s].clear();
  }
  recordOf.clear();
}

int32_t IterationGraph::add(Node node) {
  assert(open && "an operation outside a part");
  const int s = node.stream;
  const auto id = static_cast<int32_t>(cur.nodes.size());
  cur.nodes.push_back(std::move(node));
  if (last[s] >= 0)
    cur.edges.push_back({last[s], id, -1});
  for (auto [event, from] : waited[s])
    cur.edges.push_back({from, id, event});
  waited[s].clear();
  last[s] = id;
  return id;
}

void IterationGraph::endPart() {
  if (!open)
    return;
  add({Kind::End, 0, "", -1, -1, -1, 0});
  // A copy stream may end the part waiting for the compute stream (the
  // plan ordering its last release): with no operation after the wait it
  // orders nothing, and the capture's join covers the stream anyway.
  done.push_back(std::move(cur));
  open = false;
}

void IterationGraph::task(const char *name) {
  if (open && name && *name)
    add({Kind::Task, 0, name, -1, -1, -1, 0});
}

void IterationGraph::copy(Kind kind, int stream, int32_t slot, int64_t offset,
                          int64_t bytes) {
  if (open)
    add({kind, stream, "", -1, slot, offset, bytes});
}

void IterationGraph::record(int stream, int32_t event) {
  if (!open)
    return;
  int32_t id = add({Kind::Record, stream, "", event, -1, -1, 0});
  if (event >= static_cast<int32_t>(recordOf.size()))
    recordOf.resize(event + 1, -1);
  recordOf[event] = id;
}

void IterationGraph::wait(int stream, int32_t event) {
  if (!open)
    return;
  if (event < 0 || event >= static_cast<int32_t>(recordOf.size()) ||
      recordOf[event] < 0) {
    cur.problems.push_back("stream " + std::to_string(stream) +
                           " waits for event " + std::to_string(event) +
                           ", not recorded earlier in this part");
    return;
  }
  waited[stream].push_back({event, recordOf[event]});
}

namespace {

void quoted(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

const char *streamName(int s) {
  return s == 0 ? "compute" : s == 1 ? "copy-out" : "copy-in";
}

} // namespace

std::string IterationGraph::json() const {
  std::string out = "{\"parts\": [";
  for (size_t p = 0; p < done.size(); ++p) {
    const Part &part = done[p];
    out += p ? ",\n" : "\n";
    out += "{\"section\": ";
    out += part.subBatch < 0 ? "\"update\"" : "\"round\"";
    out += ", \"sub_batch\": " + std::to_string(part.subBatch) +
           ", \"n\": " + std::to_string(part.n) + ",\n \"nodes\": [";
    for (size_t i = 0; i < part.nodes.size(); ++i) {
      const Node &nd = part.nodes[i];
      out += i ? ",\n  " : "\n  ";
      out += "{\"id\": " + std::to_string(i) + ", \"kind\": \"" +
             graphKindName(nd.kind) + "\", \"stream\": \"" +
             streamName(nd.stream) + "\"";
      if (nd.kind == Kind::Task) {
        out += ", \"task\": ";
        quoted(out, nd.name);
      }
      if (nd.kind == Kind::Record)
        out += ", \"event\": " + std::to_string(nd.event);
      if (nd.slot >= 0)
        out += ", \"slot\": " + std::to_string(nd.slot);
      if (nd.offset >= 0)
        out += ", \"offset\": " + std::to_string(nd.offset) +
               ", \"bytes\": " + std::to_string(nd.bytes);
      out += "}";
    }
    out += "],\n \"edges\": [";
    for (size_t i = 0; i < part.edges.size(); ++i) {
      const Edge &e = part.edges[i];
      out += i ? ", " : "";
      out += "[" + std::to_string(e.from) + ", " + std::to_string(e.to) + ", " +
             (e.event < 0 ? "null" : std::to_string(e.event)) + "]";
    }
    out += "],\n \"problems\": [";
    for (size_t i = 0; i < part.problems.size(); ++i) {
      out += i ? ", " : "";
      quoted(out, part.problems[i]);
    }
    out += "]}";
  }
  out += "\n]}\n";
  return out;
}

} // namespace memfit::rt
