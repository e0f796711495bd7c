#!/usr/bin/python3
"""The one-way data flow of docs/architecture.md, checked on the sources.

Each library may include the project headers of the libraries it links and
no others; the build links them the same way (CMakeLists.txt), so a header
included across the flow would at best compile by accident. Passes read the
TaskGraph's `layers`, never the forward Graph behind `tg.graph`.

An operator is defined in one place (compiler/ops): outside it at most
MAX_KIND_SWITCHES non-test files may switch over OpKind.

Usage: layering.py SOURCE_DIR   (exit 1 and one line per violation)
"""
import os
import re
import sys

# What every pass may read: the IR and the cost model.
PASS_DEPS = ["compiler/ir", "compiler/ops", "compiler/cost", "compiler/support"]

# directory -> project directories its files may include from
ALLOWED = {
    "compiler/support": ["compiler/support"],
    "compiler/ir": ["compiler/ir", "compiler/support"],
    "compiler/ops": ["compiler/ops", "compiler/ir", "compiler/support"],
    "compiler/onnx": ["compiler/onnx", "compiler/ops", "compiler/ir",
                      "compiler/support"],
    "compiler/autodiff": ["compiler/autodiff", "compiler/ops", "compiler/ir",
                          "compiler/support"],
    "compiler/cost": ["compiler/cost", "compiler/ops", "compiler/ir",
                      "compiler/support"],
    # passes/ by concern, one way: analysis <- schedule <- search, and
    # analysis <- solve <- search.
    "passes/analysis": ["passes/analysis"] + PASS_DEPS,
    "passes/schedule": ["passes/schedule", "passes/analysis"] + PASS_DEPS,
    "passes/solve": ["passes/solve", "passes/analysis"] + PASS_DEPS,
    "passes/search": ["passes/search", "passes/solve", "passes/schedule",
                      "passes/analysis"] + PASS_DEPS,
    "codegen": ["codegen", "compiler/ops", "compiler/ir", "compiler/support"],
    "models": ["models", "compiler/ir", "compiler/support"],
    "runtime": ["runtime"],
    "tools/profiler": ["tools/profiler", "compiler/ir", "compiler/ops",
                       "compiler/cost", "compiler/support"],
}
PROJECT_DIRS = ("compiler/", "passes/", "codegen/", "runtime/", "models/",
                "tools/", "tests/")
MAX_KIND_SWITCHES = 3
KIND_CASE = re.compile(r"\bcase OpKind::")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GRAPH_REACH = re.compile(r"\.graph\b|\bgraph->")


def owner(rel):
    best = None
    for d in ALLOWED:
        if rel.startswith(d + "/") and (best is None or len(d) > len(best)):
            best = d
    return best


def main(root):
    problems = []
    kind_switches = []
    for base, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            if rel.startswith(("build", ".")):
                continue
            if (not rel.startswith(("tests/", "compiler/ops/")) and
                    KIND_CASE.search(open(path, encoding="utf-8",
                                          errors="replace").read())):
                kind_switches.append(rel)
            lib = owner(rel)
            if lib is None:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        inc = m.group(1)
                        if inc.startswith(PROJECT_DIRS) and not any(
                                inc.startswith(a + "/") for a in ALLOWED[lib]):
                            problems.append(
                                f"{rel}:{no}: {lib} may not include {inc}")
                    if lib.startswith("passes/") and GRAPH_REACH.search(
                            line.split("//")[0]):
                        problems.append(f"{rel}:{no}: a pass reaches into the "
                                        "forward Graph (use tg.layers)")
    if len(kind_switches) > MAX_KIND_SWITCHES:
        problems.append("files outside compiler/ops switching over OpKind: " +
                        ", ".join(sorted(kind_switches)) +
                        f" (at most {MAX_KIND_SWITCHES}; ask the OpDef)")
    for p in problems:
        print(p)
    print(f"layering: {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
