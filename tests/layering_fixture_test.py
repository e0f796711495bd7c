#!/usr/bin/python3
"""tests/layering.py on a tree broken on purpose (tests/layering_fixtures):
it must report exactly the second copy of the runtime's activation kinds and
the include of runtime/ from compiler/ops, and nothing that is generated
from the kind list or merely shares names with it."""
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layering  # noqa: E402

root = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "layering_fixtures", "kind_copy")
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = layering.main(root)
lines = sorted(out.getvalue().splitlines())
want = sorted([
    "compiler/ops/Activation.cpp:3: compiler/ops may not include "
    "runtime/Kernels.h",
    "compiler/ops/Activation.cpp:6: enum RuntimeAct declares 3 kinds of "
    "runtime/kernels/Activations.def outside it (generate it: #include the "
    "list)",
    "layering: 2 violations",
])
if status != 1 or lines != want:
    print("layering.py on the fixture reported:")
    print("\n".join(lines))
    print(f"(exit {status}); expected:")
    print("\n".join(want))
    sys.exit(1)
print("layering_fixture_test: the fixture's copy and include are caught")
