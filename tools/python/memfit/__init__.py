"""memfit from Python: plan, compare and compile a model's training under a
GPU memory budget, from a torch.nn.Module or an ONNX file.

    import memfit, torchvision, torch
    model = torchvision.models.resnet18(num_classes=10)
    plan = memfit.plan(model, torch.randn(2, 3, 64, 64), batch=64,
                       budget="50%", device="h100-sxm")
    print(plan)              # the summary memfit prints
    plan.summary.planned_seconds, plan.decisions()

Each function runs the command line's own code in this process (the
`memfit` executable's commands): the keyword arguments are its flags with
`_` for `-` (`host_budget="64GiB"` is `--host-budget=64GiB`; True gives a
bare flag), and a plan made here is byte for byte the CLI's. Errors raise
memfit.UserError (Infeasible when no plan fits) with the CLI's message.
docs/python.md is the tutorial.
"""
import os
import shutil
import tempfile
import json as _json

from . import _cli
from ._errors import Error, Infeasible, InternalError, UserError
from ._export import export
from ._results import Comparison, Compiled, Inspection, Plan, Record
from ._trainer import Trainer

__all__ = ["inspect", "plan", "compare", "compile", "export", "cli", "Trainer", "Plan",
           "Inspection", "Comparison", "Compiled", "Record", "Error",
           "UserError", "Infeasible", "InternalError"]


def cli(*args):
    """Runs `memfit ARGS...` (any command: zoo, device, report, ...) and
    returns what it printed; raises on failure."""
    return _cli.run(list(args))


class _Model:
    """The ONNX path of `model`: the file given, or `model` exported into a
    temporary directory that lives as long as this object."""

    def __init__(self, model, example_inputs, exporter, options):
        self._tmp = None
        self.batch = None
        if isinstance(model, (str, os.PathLike)):
            if example_inputs is not None:
                raise UserError("example_inputs are for a torch.nn.Module; "
                                "an ONNX file has its own input shapes")
            self.path = os.fspath(model)
            return
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not isinstance(model, torch.nn.Module):
            raise UserError("model must be an ONNX file's path or a "
                            f"torch.nn.Module, got {type(model).__name__}")
        self._tmp = tempfile.TemporaryDirectory(prefix="memfit-")
        name = type(model).__name__
        if not name.isidentifier():
            name = "model"
        self.path = os.path.join(self._tmp.name, name + ".onnx")
        self.batch = export(model, example_inputs, self.path, exporter=exporter)
        # The example's batch unless the caller named one.
        options.setdefault("batch", self.batch)

    def close(self):
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _with_model(model, example_inputs, exporter, options, body):
    m = _Model(model, example_inputs, exporter, options)
    try:
        return body(m.path)
    except Error as e:
        # The export's temporary file means nothing to the caller: name the
        # module instead.
        if m._tmp is not None and m.path in e.message:
            e.message = e.message.replace(
                m.path, f"{type(model).__name__} (exported to ONNX)")
            e.args = (e.message,)
        raise
    finally:
        m.close()


def inspect(model, example_inputs=None, *, exporter=None, **options):
    """`memfit inspect`: sizes, the memory lower bound and the op table."""
    def body(path):
        out = _cli.run(["inspect", path, "--json"] + _cli.flag_args(options))
        return Inspection(_json.loads(out))
    return _with_model(model, example_inputs, exporter, options, body)


def plan(model, example_inputs=None, *, out_dir=None, force=False,
         exporter=None, **options):
    """`memfit plan`: the plan under `budget` (bytes, "8GiB", "50%" or
    "lb"). With `out_dir` the directory keeps plan.json, trace.json and
    report.html, as `memfit plan -o`."""
    def body(path):
        tmp = None
        target = out_dir
        if target is None:
            tmp = tempfile.mkdtemp(prefix="memfit-plan-")
            target = os.path.join(tmp, "plan")
        try:
            text = _cli.run(["plan", path, "-o", os.fspath(target)]
                            + (["--force"] if force else [])
                            + _cli.flag_args(options))
            return _read_plan(target, text)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
    return _with_model(model, example_inputs, exporter, options, body)


def compare(model, example_inputs=None, *, exporter=None, **options):
    """`memfit compare`: policies side by side at several `budgets`."""
    def body(path):
        out = _cli.run(["compare", path, "--json"] + _cli.flag_args(options))
        return Comparison(_json.loads(out))
    return _with_model(model, example_inputs, exporter, options, body)


def compile(model, example_inputs=None, out_dir=None, *, force=False,
            exporter=None, **options):
    """`memfit compile -o OUT_DIR`: the trainer's sources, its plan and
    reports, written whole or not at all."""
    # compile("model.onnx", "out"): an ONNX file has no example inputs.
    if (out_dir is None and isinstance(model, (str, os.PathLike))
            and isinstance(example_inputs, (str, os.PathLike))):
        example_inputs, out_dir = None, example_inputs
    if out_dir is None:
        raise UserError("compile needs out_dir, the directory to write the "
                        "trainer into")

    def body(path):
        text = _cli.run(["compile", path, "-o", os.fspath(out_dir)]
                        + (["--force"] if force else [])
                        + _cli.flag_args(options))
        return Compiled(os.fspath(out_dir), _read_plan(out_dir, text))
    return _with_model(model, example_inputs, exporter, options, body)


def _read_plan(directory, text):
    def read(name):
        p = os.path.join(directory, name)
        if not os.path.exists(p):
            return None
        with open(p, encoding="utf-8") as f:
            return f.read()

    return Plan(_json.loads(read("plan.json")), text=text,
                report_html=read("report.html") or "",
                trace_text=read("trace.json"), path=os.fspath(directory))
