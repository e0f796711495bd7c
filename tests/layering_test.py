#!/usr/bin/python3
"""Tests of tests/layering.py's own checks: the function-length scanner and
the solver-include rule, on sources written here and on a fixture tree
(so that a scanner that finds nothing cannot pass)."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layering  # noqa: E402


def body(name, lines, head="int {}(int x) {{"):
    """A function whose body spans `lines` lines, braces included."""
    inner = ["  x += 1;"] * (lines - 2)
    return "\n".join([head.format(name)] + inner + ["}"]) + "\n"


class FunctionLengths(unittest.TestCase):
    def lengths(self, text):
        return {n: c for n, _, c in layering.function_lengths(text)}

    def test_counts_from_opening_to_closing_brace(self):
        text = "#include <x>\n\n" + body("a", 120) + "\n" + body("b", 121)
        found = layering.function_lengths(text)
        self.assertEqual(found, [("a", 3, 120), ("b", 124, 121)])

    def test_namespaces_and_classes_are_not_functions(self):
        text = ("namespace memfit {\nnamespace {\nstruct S {\n"
                "  int f() const {\n    return 1;\n  }\n  int v = 0;\n};\n"
                "enum class K { A, B };\n} // namespace\n"
                + body("g", 5) + "} // namespace memfit\n")
        self.assertEqual(self.lengths(text), {"f": 3, "g": 5})

    def test_lambdas_and_blocks_count_as_their_function(self):
        text = ("void f() {\n  auto l = [&](int y) {\n    return y;\n  };\n"
                "  for (;;) {\n    if (l(1)) {\n      break;\n    }\n  }\n"
                "  std::vector<int> v{1, 2};\n}\n")
        self.assertEqual(self.lengths(text), {"f": 11})

    def test_braces_in_comments_strings_and_characters_are_ignored(self):
        text = ('void f() {\n  // }\n  const char *s = "}}\\"}";\n'
                "  char c = '}';\n  /* { */\n  auto r = R\"x(})x\";\n"
                "  int n = 1'000;\n}\n" + body("g", 3))
        self.assertEqual(self.lengths(text), {"f": 8, "g": 3})

    def test_constructor_brace_initializers_continue_the_head(self):
        text = ("S::S(int a)\n    : x(a), y{a}, z{} {\n  run();\n}\n"
                + body("after", 4))
        self.assertEqual(self.lengths(text), {"S::S": 3, "after": 4})

    def test_qualified_and_trailing_return_names(self):
        text = ("auto Arena::slide(int a) const -> int {\n  return a;\n}\n"
                "bool operator<(const A &a, const A &b) {\n  return 1;\n}\n")
        self.assertEqual(self.lengths(text),
                         {"Arena::slide": 3, "operator<": 3})


class FixtureTree(unittest.TestCase):
    def run_main(self, files):
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = layering.main(root)
            return rc, out.getvalue()

    def test_a_long_function_in_passes_fails(self):
        rc, out = self.run_main({
            "passes/solve/Long.cpp": body("tooLong", 121),
            "passes/analysis/Short.cpp": body("fits", 120)})
        self.assertEqual(rc, 1)
        self.assertIn("passes/solve/Long.cpp:1: tooLong is 121 lines", out)
        self.assertNotIn("fits", out)

    def test_every_checked_folder_is_scanned(self):
        for d in layering.FUNCTION_LIMIT_DIRS:
            rc, out = self.run_main({d + "/X.cpp": body("longOne", 200)})
            self.assertEqual(rc, 1, d)
            self.assertIn(d + "/X.cpp:1: longOne is 200 lines", out)

    def test_folders_outside_the_list_are_not_held_to_it(self):
        rc, out = self.run_main({"codegen/Long.cpp": body("big", 300)})
        self.assertEqual((rc, out.strip()), (0, "layering: 0 violations"))

    def test_cbc_only_in_the_backend(self):
        rc, out = self.run_main({
            layering.CBC_BACKEND: "#include <coin/Cbc_C_Interface.h>\n",
            "passes/solve/Other.h": "#include <coin/Cbc_C_Interface.h>\n"})
        self.assertEqual(rc, 1)
        self.assertIn("passes/solve/Other.h: includes CBC", out)
        self.assertNotIn(layering.CBC_BACKEND + ":", out)


if __name__ == "__main__":
    unittest.main()
