#!/usr/bin/env bash
# Names in an ONNX file are untrusted: a model whose node, value and
# initializer names are code, comment terminators, newlines and paths must
# compile into a trainer that builds, trains, and writes only inside OUTDIR.
set -u
source "$(dirname "$0")/lib/preamble.bash"
fresh_work
"$MEMFIT" zoo tiny-cnn -o clean.onnx >/dev/null || fail zoo
$PY - <<'PY' || fail "cannot rewrite names"
import onnx
m = onnx.load("clean.onnx")
evil = ['*/ system("touch PWNED"); /*', '../../escape', 'a\n#include <x>\\', '$(touch PWNED)', '`touch PWNED`',
        '"); abort(); ("', '??/', '\u00e9\u00df\u4e2d']
names = {}
def rename(n):
    if n in ("input", "output") or n == "":
        return n
    if n not in names:
        names[n] = evil[len(names) % len(evil)] + str(len(names))
    return names[n]
for node in m.graph.node:
    node.name = rename("node:" + node.name)
    node.input[:] = [rename(i) for i in node.input]
    node.output[:] = [rename(o) for o in node.output]
for t in m.graph.initializer:
    t.name = rename(t.name)
for vi in list(m.graph.input) + list(m.graph.value_info):
    vi.name = rename(vi.name)
m.graph.name = '*/ evil model /*'
onnx.checker.check_model(m)
onnx.save(m, "evil.onnx")
PY
"$MEMFIT" compile evil.onnx --batch 4 --budget 60% --device k40m -o out --quiet ||
  fail "compile"
[ -e PWNED ] && fail "a name ran code"
find . -path ./out -prune -o -newer evil.onnx -type f -print | grep -v '^./evil.onnx$' |
  grep -q . && fail "files written outside OUTDIR"
[ -e ../escape ] && fail "a name escaped the directory"
cmake -S out -B out/build -DMEMFIT_BACKEND=cpu >cmake.log 2>&1 || { cat cmake.log; fail configure; }
cmake --build out/build -j 2 >build.log 2>&1 || { tail -30 build.log; fail "the generated program does not build"; }
out/build/trainer --synthetic --iterations 2 >run.log 2>&1 || { cat run.log; fail train; }
[ -e PWNED ] && fail "a name ran code"
echo "hostile names: compiled, built and trained safely"
