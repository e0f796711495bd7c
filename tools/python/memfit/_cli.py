"""Keyword arguments to memfit's command line, run in this process."""
import os

from . import _core
from ._errors import Error, Infeasible, InternalError, UserError

_PREFIXES = ("memfit: error: ", "memfit: internal error: ")


def flag_args(options, joined=True):
    """The command line flags for keyword `options`, in the order given:
    `host_budget="8GiB"` is `--host-budget=8GiB` (with `joined` False, as
    the generated trainer reads them, `--host-budget 8GiB`), True is the
    bare flag, False is `--flag=false` (memfit's flags that default to on:
    `refine=False`, `bound=False`; the trainer's flags all default to off,
    so there False leaves the flag out), None leaves it out, a list or
    tuple repeats it, and a dict (`--freeze-rows`' NAME:ROW pairs) gives one
    per item."""
    args = []

    def put(flag, value):
        args.extend([f"{flag}={value}"] if joined else [flag, value])
    for key, value in options.items():
        if not key.isidentifier():
            raise UserError(f"option name {key!r} is not an identifier")
        flag = "--" + key.replace("_", "-")
        if value is None or (value is False and not joined):
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, dict):
            for k, v in value.items():
                put(flag, f"{k}:{v}")
        elif isinstance(value, (list, tuple)):
            for v in value:
                put(flag, _text(v))
        else:
            put(flag, _text(value))
    return args


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _message(stderr):
    """The error lines of a command's output, without memfit's prefix."""
    lines = [l for l in stderr.splitlines() if l.strip()]
    for i, line in enumerate(lines):
        for prefix in _PREFIXES:
            if line.startswith(prefix):
                return "\n".join([line[len(prefix):]] + lines[i + 1:])
    return "\n".join(lines) or "memfit failed without a message"


def run(args):
    """Runs `memfit ARGS...` in this process. Returns its standard output;
    raises the Error its failure is (UserError, Infeasible, InternalError)."""
    status, kind, out, err = _core.run([str(a) for a in args])
    if status == 0:
        return out
    message = _message(err)
    if kind == "internal":
        raise InternalError(message, status)
    if kind == "infeasible":
        raise Infeasible(message, status)
    if kind in ("user", "usage", ""):
        raise UserError(message, status)
    raise Error(message, status)
