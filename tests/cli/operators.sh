#!/usr/bin/env bash
# memfit operators prints docs/operators.md byte for byte (regenerate the
# page when an operator's definition changes), covers every op type the
# importer accepts, and the message for an unsupported operator points at
# it.
set -u
MEMFIT=$1
WORK=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

fail() { echo "FAIL: $*" >&2; exit 1; }

"$MEMFIT" operators >ops.md 2>err.txt || fail "memfit operators exited $?: $(cat err.txt)"
diff -u "$ROOT/docs/operators.md" ops.md >page.diff ||
  { head -40 page.diff >&2; fail "docs/operators.md is out of date: memfit operators > docs/operators.md"; }

# One row per op type, in the forms the importer runs it.
row() { grep "^| \`$1\` |" ops.md; }
row Conv | grep -q 'operator `Conv`' || fail "Conv is not an operator row"
row Shape | grep -q '| folded at import |' || fail "Shape does not fold"
row CumSum | grep -q 'integer program' || fail "CumSum is not an integer-program step"
row Identity | grep -q 'the importer' || fail "Identity is not the importer's"
grep -q '^| `TopK` | torch.topk' ops.md || fail "TopK is not among the refused"
# Every cell filled: a definition without documentation prints '-'.
if grep -E '^\| `[A-Za-z]+` \| [^|]+ \| [^|]+ \| - \|$' ops.md; then
  fail "an op type has no forms"
fi

# The op types the importer names as supported are exactly the rows.
/usr/bin/python3 - <<'PY' || fail "could not write the test model"
import onnx
from onnx import helper, TensorProto
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
g = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"], name="hm")],
                      "g", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
          "hardmax.onnx")
PY
"$MEMFIT" inspect hardmax.onnx --batch 2 >out.txt 2>err.txt && fail "an unsupported operator imported"
grep -q "docs/operators.md, or \`memfit operators\`" err.txt || fail "the error does not point at the table: $(cat err.txt)"
sed -n 's/.*memfit supports \(.*\) (the forms.*/\1/p' err.txt | tr ',' '\n' | sed 's/^ *//' | sort >named.txt
awk '/^\| ONNX op \| how memfit runs it/ {on = 1; next} on && /^$/ {exit}
  on && /^\| `/ {split($0, c, "`"); print c[2]}' ops.md | sort >rows.txt
[ -s named.txt ] || fail "no supported list in the error"
diff -u named.txt rows.txt >rows.diff || { cat rows.diff >&2; fail "the table's rows differ from the importer's list"; }
echo ok
