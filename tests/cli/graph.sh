#!/usr/bin/env bash
# The iteration graph a trainer issues (trainer --dump-graph, the CPU
# emulation; the CUDA backend captures the same calls into its CUDA graphs)
# checked against the plan in plan.json: in every round and in the update,
# each planned task, copy and event record is a node in the plan's order on
# its stream, each planned wait an edge from its event's record, and no
# edge exists that the streams' order and the plan's waits do not make;
# every node is joined into the end of its part. Plans under tight budgets,
# so that blocks are offloaded and prefetched, and the batch split into
# sub-batches (one round part each). The checker is shown to catch a
# dropped wait and a copy on the wrong stream.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work

$PY - <<'PY' || fail "cannot write data"
import numpy as np
r = np.random.default_rng(5)
np.save("img.npy", r.standard_normal((16, 3, 8, 8)).astype(np.float32))
np.save("lab.npy", r.integers(0, 10, 16).astype(np.int64))
PY

cat >check.py <<'PY'
import json, sys

plan = json.load(open(sys.argv[1]))
dump = json.load(open(sys.argv[2]))
need_offload = len(sys.argv) > 3 and sys.argv[3] == "offload"
errors = []
def err(msg):
    errors.append(msg)

def expected(section):
    """Nodes and edges a capture of the plan's section holds, derived from
    the plan's instructions alone."""
    nodes, edges = [], set()
    last = {"compute": None, "copy-out": None, "copy-in": None}
    waited = {s: [] for s in last}
    record_of = {}
    def add(node):
        i = len(nodes)
        nodes.append(node)
        s = node["stream"]
        if last[s] is not None:
            edges.add((last[s], i, None))
        for ev, src in waited[s]:
            edges.add((src, i, ev))
        waited[s] = []
        last[s] = i
        return i
    # Consecutive update tasks on the compute stream are one multi-tensor
    # launch (Exec::sgdGroup/adamGroup) in the update, named as the
    # generated code names it.
    xs = [x for x in plan["schedule"] if x["section"] == section]
    def is_update(x):
        return (x["op"] == "run" and x["stream"] == "compute"
                and x["task"].startswith("update("))
    i = 0
    while i < len(xs):
        x = xs[i]
        op, s = x["op"], x["stream"]
        j = i
        while j < len(xs) and is_update(xs[j]):
            j += 1
        if j - i > 1 and section == "update":
            name = f"{xs[i]['task']} .. {xs[j - 1]['task']} ({j - i} updates)"
            add({"kind": "task", "stream": s, "task": name})
            i = j
            continue
        i += 1
        if op == "run":
            add({"kind": "task", "stream": s, "task": x["task"]})
        elif op in ("copy_out", "copy_in"):
            kind = op
            if op == "copy_in" and x["block_kind"] == "input":
                kind = "load_input"
            elif op == "copy_in" and x["block_kind"] == "label":
                kind = "load_labels"
            add({"kind": kind, "stream": s, "offset": x["offset"],
                 "bytes": x["bytes"]})
        elif op == "record":
            record_of[x["event"]] = add({"kind": "record", "stream": s,
                                         "event": x["event"]})
        elif op == "wait":
            if x["event"] not in record_of:
                err(f"{section}: the plan waits for event {x['event']} before recording it")
                continue
            waited[s].append((x["event"], record_of[x["event"]]))
    add({"kind": "end", "stream": "compute"})
    return nodes, edges

parts = dump["parts"]
rounds = [p for p in parts if p["section"] == "round"]
updates = [p for p in parts if p["section"] == "update"]
if len(rounds) != plan["sub_batches"]:
    err(f"{len(rounds)} round parts, the plan has {plan['sub_batches']} sub-batches")
if len(updates) != 1:
    err(f"{len(updates)} update parts, expected 1")
copies = 0
for p in parts:
    where = f"{p['section']} {p['sub_batch']}"
    for prob in p["problems"]:
        err(f"{where}: {prob}")
    want, want_edges = expected(p["section"])
    got = p["nodes"]
    if len(got) != len(want):
        err(f"{where}: {len(got)} nodes, the plan makes {len(want)}")
    full = p["section"] == "update" or p["n"] == plan["sub_batch"]
    for i, (g, w) in enumerate(zip(got, want)):
        if g["id"] != i:
            err(f"{where}: node {i} has id {g['id']}")
        for k in w:
            if k == "bytes" and not full:
                continue  # the last sub-batch is smaller
            if g.get(k) != w[k]:
                err(f"{where}: node {i} has {k} {g.get(k)!r}, the plan {w[k]!r}")
                break
    got_edges = {(a, b, e) for a, b, e in p["edges"]}
    for e in sorted(want_edges - got_edges, key=str):
        err(f"{where}: missing edge {e} ({'event %d' % e[2] if e[2] is not None else 'stream order'})")
    for e in sorted(got_edges - want_edges, key=str):
        err(f"{where}: edge {e} the plan lacks")
    # Every node reaches the end of the part (the capture's join).
    preds = {}
    for a, b, _ in p["edges"]:
        preds.setdefault(b, []).append(a)
    end = len(got) - 1
    seen, stack = {end}, [end]
    while stack:
        for a in preds.get(stack.pop(), []):
            if a not in seen:
                seen.add(a)
                stack.append(a)
    if got and got[-1]["kind"] != "end":
        err(f"{where}: the last node is not the end")
    for i in range(len(got)):
        if i not in seen:
            err(f"{where}: node {i} ({got[i]['kind']} on {got[i]['stream']}) is not joined into the end")
    copies += sum(1 for g in got if g["kind"] in ("copy_out", "copy_in"))
waits = sum(1 for x in plan["schedule"] if x["op"] == "wait")
event_edges = sum(1 for p in parts for e in p["edges"] if e[2] is not None)
if need_offload and copies == 0:
    err("the plan under test moves no block between device and host")
for e in errors[:20]:
    print("graph:", e)
if errors:
    sys.exit(1)
print(f"graph: {len(parts)} parts, {sum(len(p['nodes']) for p in parts)} nodes, "
      f"{copies} offload/prefetch copies, {event_edges} event edges "
      f"({waits} planned waits), as planned")
PY

"$MEMFIT" zoo tiny-residual -o m.onnx >/dev/null || fail zoo
build() { # dir
  cmake -S "$1" -B "$1/build" -DMEMFIT_BACKEND=cpu >"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log"; fail "configure $1"; }
  cmake --build "$1/build" -j 2 >"$1/build.log" 2>&1 ||
    { tail -30 "$1/build.log"; fail "build $1"; }
}
dumpgraph() { # dir
  "$1/build/trainer" --data img.npy --labels lab.npy --iterations 3 \
    --lr 0.05 --log-every 1 --dump-graph "$1/graph.json" >"$1/train.log" 2>&1 ||
    { cat "$1/train.log"; fail "train $1"; }
  [ -s "$1/graph.json" ] || fail "$1: no graph written"
}

# MoDNN's policy on the whole batch at the tightest budget it meets: it
# must offload and prefetch.
off=
for pct in 60 65 70 75 80 85 90; do
  if "$MEMFIT" compile m.onnx --batch 8 --budget "$pct%" --device k40m \
    --policy modnn --sub-batch 8 -o offload --quiet 2>/dev/null; then
    off=$pct
    break
  fi
done
[ -n "$off" ] || fail "modnn meets none of the budgets"
build offload
dumpgraph offload
$PY check.py offload/plan.json offload/graph.json offload ||
  fail "offload plan ($off%): the trainer's graph is not the plan's"

# memfit's own plan at a tight budget: sub-batches, each a round part.
"$MEMFIT" compile m.onnx --batch 8 --budget 45% --device k40m -o tight \
  --quiet || fail "compile tight"
build tight
dumpgraph tight
[ "$($PY -c "import json; print(json.load(open('tight/plan.json'))['sub_batches'])")" -gt 1 ] ||
  fail "the tight plan keeps the whole batch; the test needs sub-batches"
$PY check.py tight/plan.json tight/graph.json ||
  fail "tight plan: the trainer's graph is not the plan's"

# Dumping the graph changes nothing the trainer computes.
"tight/build/trainer" --data img.npy --labels lab.npy --iterations 3 \
  --lr 0.05 --log-every 1 >tight/plain.log 2>&1 || fail "train without dump"
diff <(grep '^iteration' tight/train.log | cut -d' ' -f1-4) \
  <(grep '^iteration' tight/plain.log | cut -d' ' -f1-4) >/dev/null ||
  fail "--dump-graph changed the losses"

# The checker fails a graph that drops a planned wait, and one with a copy
# on another stream than the plan's.
$PY - <<'PY' || fail "cannot tamper"
import json
g = json.load(open("offload/graph.json"))
p = g["parts"][0]
i = next(i for i, e in enumerate(p["edges"]) if e[2] is not None)
del p["edges"][i]
json.dump(g, open("no-wait.json", "w"))
g = json.load(open("offload/graph.json"))
p = g["parts"][0]
n = next(n for n in p["nodes"] if n["kind"] == "copy_out")
n["stream"] = "copy-in"
json.dump(g, open("wrong-stream.json", "w"))
PY
for bad in no-wait wrong-stream; do
  if $PY check.py offload/plan.json $bad.json >$bad.log 2>&1; then
    fail "the checker accepts a graph with $bad"
  fi
  echo "tampered ($bad): $(head -1 $bad.log)"
done
echo "graph: ok"
