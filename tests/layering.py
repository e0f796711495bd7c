#!/usr/bin/python3
"""The one-way data flow of docs/architecture.md, checked on the sources.

Each library may include the project headers of the libraries it links and
no others; the build links them the same way (CMakeLists.txt), so a header
included across the flow would at best compile by accident. Passes read the
TaskGraph's `layers`, never the forward Graph behind `tg.graph`.

An operator is defined in one place (compiler/ops): outside it at most
MAX_KIND_SWITCHES non-test files may switch over OpKind. The kinds the
runtime executes (activations, binary operations) are declared once, in the
X-macro lists runtime/kernels/*.def: an enum listing their kinds anywhere
else, rather than generating them by including the list, is a second copy.
compiler/ops may include those lists, and nothing else of runtime/, since the
compiler spells the runtime's kinds in the code it writes.

Usage: layering.py SOURCE_DIR   (exit 1 and one line per violation)
"""
import os
import re
import sys

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
    "passes": ["passes", "compiler/ir", "compiler/ops", "compiler/cost",
               "compiler/support"],
    "codegen": ["codegen", "compiler/ops", "compiler/ir", "compiler/support"],
    "models": ["models", "compiler/ir", "compiler/support"],
    "runtime": ["runtime"],
    "tools/profiler": ["tools/profiler", "compiler/ir", "compiler/ops",
                       "compiler/cost", "compiler/support"],
}
# directory -> the shared kind lists (X-macros, no code) it may include
# beyond ALLOWED.
KIND_LISTS = re.compile(r"^runtime/kernels/\w+\.def$")
KIND_LIST_USERS = ("compiler/ops",)
# Fixture trees of tests/layering_test.py: broken on purpose.
SKIPPED = ("tests/layering_fixtures/",)
KIND_ENTRY = re.compile(r"^\s*MEMFIT_\w+\(\s*(\w+)", re.M)
ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?(\w+)[^;{]*\{([^}]*)\}")
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


def kind_lists(root):
    """list path -> the kinds its X-macro entries declare."""
    lists = {}
    d = os.path.join(root, "runtime", "kernels")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith(".def"):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                lists["runtime/kernels/" + name] = set(
                    KIND_ENTRY.findall(f.read()))
    return lists


def kind_copies(rel, text, lists):
    """Enums in `text` that list a .def's kinds without including it."""
    found = []
    for m in ENUM.finditer(text):
        body = m.group(2)
        if "#include" in body:
            continue  # generated from a list
        names = [e.split("=")[0].strip() for e in
                 re.sub(r"//[^\n]*", "", body).split(",")]
        names = [n for n in names if n]
        for lst, kinds in lists.items():
            shared = [n for n in names if n in kinds]
            # Two names or more, and most of the enum: a copy of the list
            # (OpKind, the graph's operators, shares some names with it).
            if len(shared) >= 2 and 2 * len(shared) > len(names):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{rel}:{line}: enum {m.group(1)} declares "
                             f"{len(shared)} kinds of {lst} outside it "
                             "(generate it: #include the list)")
    return found


def main(root):
    problems = []
    kind_switches = []
    lists = kind_lists(root)
    for base, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            if rel.startswith(("build", ".") + SKIPPED):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                problems.extend(kind_copies(rel, f.read(), lists))
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
                                inc.startswith(a + "/") for a in ALLOWED[lib]
                        ) and not (lib in KIND_LIST_USERS and
                                   KIND_LISTS.match(inc)):
                            problems.append(
                                f"{rel}:{no}: {lib} may not include {inc}")
                    if lib == "passes" and GRAPH_REACH.search(
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
