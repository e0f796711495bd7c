#!/usr/bin/env bash
# report.html and compare.html render in headless Chromium (Debian's
# chromium package; tools/test installs it): the inline script ran, drew the
# memory chart, the stream timeline and the compare curve (painted pixels),
# put one slice per task and transfer on the timeline and one row per layer
# in the table -- the counts are checked against plan.json and
# `memfit report --json`, which are written independently of the page.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work

CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
  fail "chromium is not installed: tools/test installs it (Debian package" \
       "'chromium'), or run: apt-get install chromium"

"$MEMFIT" zoo tiny-cnn -o tiny.onnx >/dev/null || fail "zoo tiny-cnn"
"$MEMFIT" plan tiny.onnx --batch 8 --budget 40% --device k40m -o out \
  --quiet || fail "plan -o exited $?"
"$MEMFIT" report out/plan.json --json >report.json || fail "report --json"
"$MEMFIT" compare tiny.onnx --batch 8 --device k40m --budgets 100%,60%,30%,1% \
  -o cmp --quiet || fail "compare -o exited $?"

dump() { # page -> the DOM after its scripts ran
  mkdir -p home
  HOME=$PWD/home timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d -p "$PWD")" \
    --virtual-time-budget=5000 --dump-dom "file://$PWD/$1" 2>>chromium.log
}
dump out/report.html >report.dom || fail "chromium failed on report.html: $(tail -5 chromium.log)"
dump cmp/compare.html >compare.dom || fail "chromium failed on compare.html: $(tail -5 chromium.log)"

$PY - report.dom out/plan.json report.json <<'PY' || fail "report.html did not draw"
import json, re, sys
dom = open(sys.argv[1]).read()
plan = json.load(open(sys.argv[2]))
report = json.load(open(sys.argv[3]))
m = re.search(r"<body([^>]*)>", dom)
assert m, "no <body> in the dumped DOM"
attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))
assert attrs.get("drawn") == "yes", attrs
slices = sum(1 for t in plan["tasks"] if t["section"] == "round") + len(plan["transfers"])
assert int(attrs["timeline-slices"]) == slices, (attrs, slices)
assert int(attrs["layer-rows"]) == len(report["layers"]), attrs
assert int(attrs["memory-points"]) > 2, attrs
# Painted pixels: a blank canvas has none.
assert int(attrs["memory-ink"]) > 5000, attrs
assert int(attrs["timeline-ink"]) > 2000, attrs
# The table rows are in the DOM, with the layer names.
rows = re.findall(r"<tr><td>([^<]*)</td>", dom)
assert rows[:2] == ["conv1", "relu1"], rows[:4]
PY

$PY - compare.dom cmp/compare.json <<'PY' || fail "compare.html did not draw"
import json, re, sys
dom = open(sys.argv[1]).read()
c = json.load(open(sys.argv[2]))
attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', re.search(r"<body([^>]*)>", dom).group(1)))
assert attrs.get("drawn") == "yes", attrs
assert int(attrs["series"]) == len(c["policies"]), attrs
feasible = sum(1 for x in c["cells"] if x["feasible"])
assert feasible > 0
assert int(attrs["points"]) == feasible, (attrs, feasible)
assert int(attrs["infeasible"]) == len(c["cells"]) - feasible, attrs
assert int(attrs["chart-ink"]) > 2000, attrs
PY
# A trainer's --log beside the plan: the page plots its loss (and the
# clipped runs' gradient norm) over the steps.
$PY - <<'PY' || fail "cannot write a run log"
import json
with open("run.jsonl", "w") as f:
    for s in range(1, 13):
        f.write(json.dumps({"step": s, "loss": 2.3 / s ** 0.3, "lr": 0.01,
                            "grad_norm": 1.0 / s, "samples_per_s": 900.0,
                            "elapsed_s": 0.1 * s}) + "\n")
        if s % 4 == 0:  # a validation every 4 steps, as --val-every 4 logs
            f.write(json.dumps({"step": s, "val_loss": 2.4 / s ** 0.3,
                                "val_accuracy": 0.1 * s / 4,
                                "val_samples": 100, "val_s": 0.5}) + "\n")
PY
"$MEMFIT" report out/plan.json --run run.jsonl --html run.html >run.txt ||
  fail "report --run --html exited $?"
grep -q "^run        12 steps logged in run.jsonl: loss 2.3000 at step 1" run.txt ||
  { cat run.txt; fail "report --run does not summarize the run"; }
grep -q "3 validations, the last at step 12: loss 1.1388, accuracy 30.00%" run.txt ||
  { cat run.txt; fail "report --run does not summarize the validations"; }
dump run.html >run.dom || fail "chromium failed on run.html: $(tail -5 chromium.log)"
$PY - run.dom <<'PY' || fail "run.html did not draw the run"
import re, sys
dom = open(sys.argv[1]).read()
attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', re.search(r"<body([^>]*)>", dom).group(1)))
assert attrs.get("drawn") == "yes", attrs
assert int(attrs["run-points"]) == 12, attrs
assert int(attrs["val-points"]) == 3, attrs
assert "validation loss" in dom
assert int(attrs["run-ink"]) > 1000, attrs
assert "gradient norm before clipping" in dom
PY
echo "ok"
