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

No function body in the .cpp files of FUNCTION_LIMIT_DIRS runs past
MAX_FUNCTION_LINES lines (from the line of its opening brace to the line of
its closing one): a longer one is split by topic. Only the solver backend
(CBC_BACKEND) includes CBC's headers.

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
# Where functions are held to MAX_FUNCTION_LINES: every folder of passes/.
FUNCTION_LIMIT_DIRS = ("passes/analysis", "passes/schedule", "passes/solve",
                       "passes/search")
MAX_FUNCTION_LINES = 120
# The one file that talks to the solver (docs/passes/bound.md).
CBC_BACKEND = "passes/solve/CbcSolver.cpp"
CBC_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]coin/', re.M)
KIND_CASE = re.compile(r"\bcase OpKind::")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GRAPH_REACH = re.compile(r"\.graph\b|\bgraph->")


def _code_only(text):
    """`text` with comments, string and character literals blanked (newlines
    kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (
                i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.compile(r'R"([^(\s]*)\(').match(text, i)
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and \
                    i + 1 < n and text[i + 1].isalnum() and \
                    re.match(r"[0-9a-fA-FxX]", text[i - 1]):
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # A preprocessor line (continued lines too) holds no body.
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


_TYPE_HEAD = re.compile(r"\b(namespace|class|struct|union|enum)\b")
_NAME = re.compile(r"(~?[A-Za-z_][A-Za-z0-9_:<>~]*|operator\s*\S+)\s*\($")


def function_lengths(text):
    """(name, first line, lines) of every function body at namespace or class
    scope of C++ source `text`, lambdas and local classes inside it counted
    as part of it. A brace opens a function when what stands before it since
    the last ';', '{' or '}' has a parameter list and is no type, namespace
    or initializer."""
    code = _code_only(text)
    found = []
    # Per open brace: True where it opens a function body, None where it is
    # a member's brace initializer (the head goes on after it).
    stack = []
    head_start = 0
    line = 1
    open_line = 0
    in_function = 0
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[head_start:i]
            flat = " ".join(head.split())
            is_fn = False
            if not in_function and "(" in flat and not _TYPE_HEAD.search(
                    flat.split("(")[0]) and not re.search(r"=\s*$", flat):
                # A member's brace initializer in a constructor's list
                # (`: a(x), b{y} {`) continues the head, not a body.
                if re.search(r"\)\s*:[^:]", flat) and re.search(
                        r"[:,]\s*[A-Za-z_][A-Za-z0-9_]*\s*$", flat):
                    stack.append(None)
                    continue
                is_fn = True
            stack.append(is_fn)
            if is_fn:
                in_function += 1
                open_line = line
                sig = flat.split(")")[0] + "("
                sig = sig[:sig.index("(") + 1]
                m = _NAME.search(sig)
                name = m.group(1) if m else flat[:40]
            head_start = i + 1
        elif c == "}":
            is_fn = stack.pop() if stack else False
            if is_fn is None:
                continue
            if is_fn:
                in_function -= 1
                found.append((name, open_line, line - open_line + 1))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return found


def long_functions(root, limit=MAX_FUNCTION_LINES, dirs=FUNCTION_LIMIT_DIRS):
    """One line per function body longer than `limit` in the .cpp files
    under `dirs` of `root`."""
    problems = []
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            for name in sorted(files):
                if not name.endswith(".cpp"):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for fn, no, lines in function_lengths(text):
                    if lines > limit:
                        problems.append(
                            f"{rel}:{no}: {fn} is {lines} lines (at most "
                            f"{limit}: split it by topic)")
    return problems


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
                text = f.read()
            problems.extend(kind_copies(rel, text, lists))
            if (not rel.startswith(("tests/", "compiler/ops/")) and
                    KIND_CASE.search(text)):
                kind_switches.append(rel)
            if rel != CBC_BACKEND and CBC_INCLUDE.search(text):
                problems.append(f"{rel}: includes CBC; only {CBC_BACKEND} "
                                "talks to the solver (passes/solve/Solver.h)")
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
                    if lib.startswith("passes/") and GRAPH_REACH.search(
                            line.split("//")[0]):
                        problems.append(f"{rel}:{no}: a pass reaches into the "
                                        "forward Graph (use tg.layers)")
    problems += long_functions(root)
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
